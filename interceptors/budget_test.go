package interceptors

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/tidwall/sjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// withSession returns c re-addressed to agent a, session s, at timestamp ts.
func withSession(t testing.TB, c *points.Context, a, s, ts string) *points.Context {
	t.Helper()
	raw := c.Raw()
	var err error
	for k, v := range map[string]string{"agent.id": a, "session.id": s, "timestamp": ts} {
		if v == "" {
			continue
		}
		if raw, err = sjson.SetBytes(raw, k, v); err != nil {
			t.Fatal(err)
		}
	}
	out, err := points.ParseContext(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBudgetLimits(t *testing.T) {
	ic := build(t, KindBudget, `{"max_model_calls":2,"max_tool_calls":1,"max_total_tokens":100}`)
	pm := preModel(t, "m", `[]`)
	step := func(c *points.Context) string { return verdictSummary(run(t, ic, c)) }
	if got := step(pm); got != "allow" {
		t.Fatalf("1st model call: %s", got)
	}
	if got := step(postModel(t, `"a"`, `[]`, `"usage":{"prompt_tokens":40,"completion_tokens":10}`)); got != "allow" {
		t.Fatalf("post: %s", got)
	}
	if got := step(preTool(t, "x", `{}`)); got != "allow" {
		t.Fatalf("1st tool call: %s", got)
	}
	v := run(t, ic, preTool(t, "x", `{}`))
	if verdictSummary(v) != "deny budget_exceeded" || !strings.Contains(v.Message, "max_tool_calls (1)") || !strings.Contains(v.Message, "session") {
		t.Fatalf("2nd tool call: %+v", v)
	}
	if got := step(pm); got != "allow" {
		t.Fatalf("2nd model call (50 tokens used): %s", got)
	}
	step(postModel(t, `"a"`, `[]`, `"usage":{"prompt_tokens":45,"completion_tokens":5}`))
	v = run(t, ic, pm)
	if verdictSummary(v) != "deny budget_exceeded" || !strings.Contains(v.Message, "max_model_calls (2)") {
		t.Fatalf("3rd model call: %+v", v)
	}
	// A different session has its own budget.
	if got := step(withSession(t, pm, "", "sess-2", "")); got != "allow" {
		t.Fatalf("other session: %s", got)
	}
}

func TestBudgetTokens(t *testing.T) {
	ic := build(t, KindBudget, `{"max_prompt_tokens":50,"reason":"too_much","message":"stop"}`)
	pm := preModel(t, "m", `[]`)
	run(t, ic, pm)
	run(t, ic, postModel(t, `"a"`, `[]`, `"usage":{"prompt_tokens":50,"completion_tokens":1}`))
	if v := run(t, ic, pm); v.Reason != "too_much" || v.Message != "stop" {
		t.Fatalf("over prompt tokens: %+v", v)
	}
	// Other points are not gated by token limits.
	if got := verdictSummary(run(t, ic, outputCtx(t, `"x"`))); got != "allow" {
		t.Fatalf("output: %s", got)
	}
}

func TestBudgetScopes(t *testing.T) {
	agent := build(t, KindBudget, `{"max_model_calls":1,"scope":"agent"}`)
	both := build(t, KindBudget, `{"max_model_calls":1,"scope":"both"}`)
	pm := preModel(t, "m", `[]`)
	s2 := withSession(t, pm, "", "sess-2", "")
	if got := verdictSummary(run(t, agent, pm)); got != "allow" {
		t.Fatal(got)
	}
	v := run(t, agent, s2)
	if verdictSummary(v) != "deny budget_exceeded" || !strings.Contains(v.Message, "agent budget") {
		t.Fatalf("agent scope across sessions: %+v", v)
	}
	if got := verdictSummary(run(t, agent, withSession(t, s2, "agent-2", "", ""))); got != "allow" {
		t.Fatalf("other agent: %s", got)
	}
	run(t, both, pm)
	if v := run(t, both, pm); !strings.Contains(v.Message, "session budget") {
		t.Fatalf("both, same session: %+v", v)
	}
	if v := run(t, both, s2); !strings.Contains(v.Message, "agent budget") {
		t.Fatalf("both, other session: %+v", v)
	}
}

func TestBudgetElapsed(t *testing.T) {
	ic := build(t, KindBudget, `{"max_elapsed":"10m"}`)
	at := func(c *points.Context, ts string) string {
		return verdictSummary(run(t, ic, withSession(t, c, "", "", ts)))
	}
	in := inputCtx(t, `"hi"`)
	if got := at(in, "2026-07-01T10:00:00.000Z"); got != "allow" {
		t.Fatal(got)
	}
	if got := at(preModel(t, "m", `[]`), "2026-07-01T10:10:00.000Z"); got != "allow" {
		t.Fatal("at exactly the limit:", got)
	}
	if got := at(preTool(t, "x", `{}`), "2026-07-01T10:10:00.001Z"); got != "deny budget_exceeded" {
		t.Fatal("past the limit:", got)
	}
	if got := at(outputCtx(t, `"x"`), "2026-07-01T11:00:00.000Z"); got != "allow" {
		t.Fatal("output is not gated:", got)
	}
	// agent_shutdown forgets the session; a new one starts a new clock.
	run(t, ic, shutdownCtx(t))
	if got := at(in, "2026-07-01T12:00:00.000Z"); got != "allow" {
		t.Fatal("after shutdown:", got)
	}
}

// TestBudgetConcurrent: under -race, concurrent calls on one session get
// exactly max allowances; the counters are consistent.
func TestBudgetConcurrent(t *testing.T) {
	ic := build(t, KindBudget, `{"max_model_calls":25,"max_tool_calls":1000,"scope":"both"}`)
	pm := preModel(t, "m", `[]`)
	pt := preTool(t, "x", `{}`)
	usage := postModel(t, `"a"`, `[]`, `"usage":{"prompt_tokens":1,"completion_tokens":1}`)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				v, err := ic.Intercept(context.Background(), pm)
				if err != nil {
					t.Error(err)
					return
				}
				if v.Decision == points.DecisionAllow {
					allowed.Add(1)
				}
				_, _ = ic.Intercept(context.Background(), pt)
				_, _ = ic.Intercept(context.Background(), usage)
			}
		}()
	}
	wg.Wait()
	if got := allowed.Load(); got != 25 {
		t.Fatalf("allowed %d model calls, want exactly 25", got)
	}
}

// TestBudgetEviction: memory is bounded by max_sessions (LRU) and by
// agent_shutdown.
func TestBudgetEviction(t *testing.T) {
	ic := build(t, KindBudget, `{"max_model_calls":1,"max_sessions":3,"scope":"both"}`).(*Budget)
	pm := preModel(t, "m", `[]`)
	for i := 0; i < 10; i++ {
		run(t, ic, withSession(t, pm, fmt.Sprintf("agent-%d", i), fmt.Sprintf("s-%d", i), ""))
	}
	if s, a := ic.tracked(); s != 3 || a != 3 {
		t.Fatalf("tracked %d sessions, %d agents; want 3, 3", s, a)
	}
	// s-9 is recent: still counted. s-0 was evicted: fresh budget.
	if got := verdictSummary(run(t, ic, withSession(t, pm, "agent-9", "s-9", ""))); got != "deny budget_exceeded" {
		t.Fatalf("recent session: %s", got)
	}
	if got := verdictSummary(run(t, ic, withSession(t, pm, "agent-0", "s-0", ""))); got != "allow" {
		t.Fatalf("evicted session: %s", got)
	}
	run(t, ic, withSession(t, shutdownCtx(t), "agent-0", "s-0", ""))
	if s, _ := ic.tracked(); s != 2 {
		t.Fatalf("after shutdown tracked %d sessions, want 2", s)
	}
}

// TestBudgetKeysDoNotPinContexts: the LRU keys are read from the context
// through views, so an uncloned key would keep the whole context (up to a
// long message history) alive for as long as its agent or session entry.
func TestBudgetKeysDoNotPinContexts(t *testing.T) {
	ic := build(t, KindBudget, `{"max_model_calls":100,"scope":"both"}`)
	pm := preModel(t, "m", `[{"role":"user","content":"`+strings.Repeat("x", 4096)+`"}]`)
	run(t, ic, pm)
	raw := pm.Raw()
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(raw)))
	hi := lo + uintptr(len(raw))
	b := ic.(*Budget)
	n := 0
	for _, l := range []*lru{b.agents, b.sessions} {
		for e := l.l.Front(); e != nil; e = e.Next() {
			n++
			p := uintptr(unsafe.Pointer(unsafe.StringData(e.Value.(*lruEntry).key)))
			if p >= lo && p < hi {
				t.Errorf("LRU key %q points into the context", e.Value.(*lruEntry).key)
			}
		}
	}
	if n != 2 {
		t.Fatalf("%d LRU entries, want an agent and a session", n)
	}
}

// TestBudgetSkipsPointsItCannotGate: without max_elapsed, agent_startup,
// input, output and post_tool_call can neither change a counter nor be
// denied, so the budget answers allow without reading them (and keeps no
// entry for them); with max_elapsed the session's clock starts at its
// first point, so every point is read.
func TestBudgetSkipsPointsItCannotGate(t *testing.T) {
	others := []*points.Context{startupCtx(t, `[]`), inputCtx(t, `"hi"`), outputCtx(t, `"x"`), postTool(t, "f", `{}`, `"ok"`)}
	calls := build(t, KindBudget, `{"max_model_calls":1}`).(*Budget)
	for _, c := range others {
		if got := verdictSummary(run(t, calls, c)); got != "allow" {
			t.Fatalf("%s: %s", c.Point(), got)
		}
	}
	if n := calls.sessions.len(); n != 0 {
		t.Fatalf("%d session entries after points the budget cannot gate, want 0", n)
	}
	pm := preModel(t, "m", `[]`)
	if got := verdictSummary(run(t, calls, pm)); got != "allow" {
		t.Fatalf("1st model call: %s", got)
	}
	run(t, calls, outputCtx(t, `"x"`))
	if got := verdictSummary(run(t, calls, pm)); got != "deny budget_exceeded" {
		t.Fatalf("2nd model call: %s", got)
	}

	elapsed := build(t, KindBudget, `{"max_elapsed":"1h"}`).(*Budget)
	run(t, elapsed, startupCtx(t, `[]`))
	if n := elapsed.sessions.len(); n != 1 {
		t.Fatalf("with max_elapsed, %d session entries after agent_startup, want 1 (the clock starts there)", n)
	}
}

// BenchmarkBudgetOutput is the budget at a point it cannot gate.
func BenchmarkBudgetOutput(b *testing.B) {
	ic := build(b, KindBudget, `{"max_model_calls":1000000000,"scope":"both"}`)
	c := outputCtx(b, `"`+strings.Repeat("lorem ipsum ", 80)+`"`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ic.Intercept(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
}

// require_usage: a token budget refuses an answer that carries no usage
// (an upstream that ignores stream_options) rather than let it through
// uncounted; without it such an answer counts nothing, as before.
func TestBudgetRequireUsage(t *testing.T) {
	strict := build(t, KindBudget, `{"max_total_tokens": 100, "require_usage": true}`)
	lax := build(t, KindBudget, `{"max_total_tokens": 100}`)
	noUsage := postModel(t, `"hi"`, `[]`, "")
	if got := verdictSummary(run(t, strict, noUsage)); got != "deny budget_exceeded" {
		t.Errorf("strict, no usage: %s", got)
	}
	if got := verdictSummary(run(t, lax, noUsage)); got != "allow" {
		t.Errorf("lax, no usage: %s", got)
	}
	if _, err := newBudget("b", []byte(`{"max_model_calls": 3, "require_usage": true}`), Env{}); err == nil {
		t.Error("require_usage without a token limit accepted")
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/approvals"
	"github.com/hooksproxy/hooksproxy/points"
)

func testWiring(t *testing.T) *wiring {
	t.Helper()
	w, err := newWiring(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	return w
}

func mustConsole(t *testing.T, w *wiring, name, cfg string) *consoleResolver {
	t.Helper()
	r, err := newConsoleResolver(w, name, json.RawMessage(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var approvalReq = points.ApprovalRequest{Point: points.Input, Verdict: points.Verdict{Decision: points.DecisionDeny, Reason: "needs_ok"}, Context: json.RawMessage(`{}`)}

// waitPending waits until the shared queue holds n approvals.
func waitPending(t *testing.T, q *approvals.Console, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for q.Len() != n {
		if time.Now().After(deadline) {
			t.Fatalf("queue holds %d approvals, want %d", q.Len(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Two console resolvers share one queue, but each applies its own timeout
// (rv3 #2: the first one built used to configure both).
func TestConsoleResolversKeepTheirOwnConfig(t *testing.T) {
	w := testWiring(t)
	short := mustConsole(t, w, "a-unused", `{"timeout":"50ms"}`)
	long := mustConsole(t, w, "approvers", `{"timeout":"10s"}`)
	if short.q != long.q || short.q != w.queue() {
		t.Fatal("console resolvers do not share the process queue")
	}
	if short.ResolverTimeout() != 50*time.Millisecond || long.ResolverTimeout() != 10*time.Second {
		t.Fatalf("timeouts %s %s", short.ResolverTimeout(), long.ResolverTimeout())
	}
	start := time.Now()
	_, err := short.Resolve(context.Background(), approvalReq)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `"a-unused"`) {
		t.Fatalf("short: %v", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 8*time.Second {
		t.Fatalf("short waited %s", d)
	}
	type answer struct {
		res points.ApprovalResolution
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := long.Resolve(context.Background(), approvalReq)
		done <- answer{res, err}
	}()
	waitPending(t, w.queue(), 1)
	time.Sleep(100 * time.Millisecond) // past the other resolver's timeout
	if err := w.queue().DecideByID(w.queue().List()[0].ID, points.OutcomeApprove, nil, ""); err != nil {
		t.Fatal(err)
	}
	if a := <-done; a.err != nil || a.res.Outcome != points.OutcomeApprove {
		t.Fatalf("long: %+v %v", a.res, a.err)
	}
}

// max_pending is per resolver name and counts approvals queued before a
// reload: a reload applies the new bound to new approvals, and approvals
// already waiting stay decidable with the deadline they had.
func TestConsoleMaxPendingAndReload(t *testing.T) {
	w := testWiring(t)
	old := mustConsole(t, w, "approvers", `{"max_pending":1,"timeout":"10s"}`)
	other := mustConsole(t, w, "second", `{"max_pending":1}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan error, 1)
	go func() { _, err := old.Resolve(ctx, approvalReq); first <- err }()
	waitPending(t, w.queue(), 1)
	if _, err := old.Resolve(ctx, approvalReq); !errors.Is(err, approvals.ErrQueueFull) {
		t.Fatalf("over max_pending: %v", err)
	}
	// Another resolver's bound is its own.
	second := make(chan error, 1)
	go func() { _, err := other.Resolve(ctx, approvalReq); second <- err }()
	waitPending(t, w.queue(), 2)

	// The reload: same name, new settings.
	reloaded := mustConsole(t, w, "approvers", `{"max_pending":2,"timeout":"50ms"}`)
	start := time.Now()
	if _, err := reloaded.Resolve(ctx, approvalReq); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after reload: %v", err)
	}
	// Far below the old 10s, with room for a loaded machine's stalls.
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("the new timeout was not applied: waited %s", d)
	}
	// The approval queued before the reload is still pending and decidable.
	var oldID string
	for _, a := range w.queue().List() {
		oldID = a.ID // both remaining are decidable; decide them all
		if err := w.queue().DecideByID(oldID, points.OutcomeReject, nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-first; err != nil {
		t.Fatalf("pre-reload approval: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("second resolver: %v", err)
	}
	if n := w.pendingFor("approvers").Load(); n != 0 {
		t.Fatalf("pending count %d after every wait ended", n)
	}
}

// A reload of the config file changes the running console's timeout
// (rv3 #1): the held request fails after the new timeout, not the old one.
func TestServeReloadAppliesConsoleTimeout(t *testing.T) {
	t.Setenv("HOOKSPROXY_ADMIN_TOKEN", "tok")
	cfg := func(timeout string) string {
		return `upstream: {base_url: "http://127.0.0.1:1"}
agent: {id: a}
resolvers:
  approvers: {kind: hooksproxy.console, config: {timeout: ` + timeout + `}}
hooks:
  declaration: agent-hooks-declaration/1.0
  configuration:
    approval: {resolver: approvers}
    timeouts: {approval_resolver_ms: 30000}
  bindings:
    - id: esc
      kind: hooksproxy.rules
      at: [input]
      config: {rules: [{return: {decision: deny, reason: needs_ok, approval: {}}}]}
    - {id: allow, kind: hooksproxy.allow_all}
`
	}
	path := writeConfig(t, cfg("20s"))
	ctx, cancel := context.WithCancel(context.Background())
	rt, err := startRuntime(ctx, path, "127.0.0.1:0", slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); rt.wait(ctx) }()
	if err := os.WriteFile(path, []byte(cfg("200ms")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rt.app.Reload(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := http.Post("http://"+rt.addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "host_error:approval_resolver_failed") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if took < 200*time.Millisecond || took > 5*time.Second {
		t.Fatalf("the held request took %s; the reloaded timeout is 200ms", took)
	}
}

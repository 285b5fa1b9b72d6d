package interceptors

import (
	"context"
	"strings"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

func TestModels(t *testing.T) {
	ic := build(t, KindModels, `{"allow":["gpt-4o*","openai/*"],"deny":["gpt-4o-realtime*"]}`)
	tests := []struct {
		model, want string
	}{
		{"gpt-4o", "allow"},
		{"gpt-4o-mini", "allow"},
		{"openai/gpt-5", "allow"},
		{"gpt-4o-realtime-preview", "deny model_denied"},
		{"claude-3", "deny model_not_allowed"},
		{"", "deny model_not_allowed"},
	}
	for _, tt := range tests {
		v := run(t, ic, preModel(t, tt.model, `[]`))
		if got := verdictSummary(v); got != tt.want {
			t.Errorf("%q: %s, want %s", tt.model, got, tt.want)
		}
	}
	if got := verdictSummary(run(t, ic, postModel(t, `"x"`, `[]`, ""))); got != "allow" {
		t.Errorf("post_model_call: %s", got)
	}
	deny := build(t, KindModels, `{"deny":["*-preview"],"reason":"no_previews","message":"pick a GA model"}`)
	if v := run(t, deny, preModel(t, "o1-preview", `[]`)); v.Reason != "no_previews" || v.Message != "pick a GA model" {
		t.Errorf("configured: %+v", v)
	}
	if got := verdictSummary(run(t, deny, preModel(t, "anything", `[]`))); got != "allow" {
		t.Errorf("deny-only: %s", got)
	}
}

func TestCEL(t *testing.T) {
	const cfg = `{
	  "rules": [
	    {"when": "ctx.interception_point == \"pre_tool_call\" && ctx.tool_call.name == \"shell\"", "verdict": {"decision": "deny", "reason": "no_shell"}},
	    {"when": "ctx.interception_point == \"pre_tool_call\" && has(ctx.tool_call.args.to) && ctx.tool_call.args.to.endsWith(\"@example.com\")", "verdict": {"decision": "deny", "reason": "external_mail", "approval": {}}},
	    {"when": "ctx.interception_point == \"pre_tool_call\" && has(ctx.tool_call.args.n) && ctx.tool_call.args.n > 10", "verdict": {"decision": "transform", "transform": {"path": "$target.n", "value": 10}}},
	    {"when": "ctx.sequence == 1 && ctx.interception_point == \"output\" && ctx.target.content.matches(\"(?i)secret\")", "verdict": {"decision": "allow", "warnings": [{"reason": "mentions_secret"}]}}
	  ],
	  "default": {"decision": "allow", "reason": "cel_default"}
	}`
	ic := build(t, KindCEL, cfg)
	tests := []struct {
		name string
		ctx  *points.Context
		want string
	}{
		{"deny", preTool(t, "shell", `{}`), "deny no_shell"},
		{"escalate", preTool(t, "mail", `{"to":"bob@example.com"}`), "escalate external_mail"},
		{"transform with int compare", preTool(t, "calc", `{"n":11}`), "transform"},
		{"float compare", preTool(t, "calc", `{"n":10.5}`), "transform"},
		{"no match", preTool(t, "calc", `{"n":3}`), "allow cel_default"},
		{"warn via target and sequence", outputCtx(t, `"a SECRET plan"`), "warn mentions_secret"},
		{"short-circuit skips missing keys", inputCtx(t, `"hi"`), "allow cel_default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := verdictSummary(run(t, ic, tt.ctx)); got != tt.want {
				t.Errorf("verdict = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCELRuntimeErrors(t *testing.T) {
	tests := []struct{ name, cfg string }{
		{"missing key", `{"rules":[{"when":"ctx.tool_call.name == \"x\"","verdict":{"decision":"deny"}}]}`},
		{"non-bool dyn", `{"rules":[{"when":"ctx.sequence","verdict":{"decision":"deny"}}]}`},
		{"cost limit", `{"rules":[{"when":"ctx.messages.all(m, ctx.messages.all(n, ctx.messages.all(o, true)))","verdict":{"decision":"deny"}}],"cost_limit":10}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ic := build(t, KindCEL, tt.cfg)
			c := preModel(t, "m", `[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"}]`)
			_, err := ic.Intercept(context.Background(), c)
			if err == nil || !strings.Contains(err.Error(), "rules[0]") {
				t.Fatalf("err = %v", err)
			}
		})
	}
	ic := build(t, KindCEL, `{"rules":[{"when":"true","verdict":{"decision":"allow"}}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ic.Intercept(ctx, inputCtx(t, `"x"`)); err == nil {
		t.Fatal("cancelled call answered")
	}
}

// TestCELDecodesOnce: the context is decoded lazily, once per call, for
// all rules.
func TestCELDecodesOnce(t *testing.T) {
	a := &lazyActivation{raw: []byte(`{"a":1}`)}
	v1, _ := a.ResolveName("ctx")
	v2, _ := a.ResolveName("ctx")
	m1, m2 := v1.(map[string]any), v2.(map[string]any)
	m1["probe"] = true
	if _, ok := m2["probe"]; !ok {
		t.Fatal("decoded twice")
	}
	if _, ok := a.ResolveName("other"); ok {
		t.Fatal("resolved an unknown name")
	}
	// Rules that never read ctx never decode it.
	b := &lazyActivation{raw: []byte(`not json`)}
	ic := build(t, KindCEL, `{"rules":[{"when":"1 == 2","verdict":{"decision":"deny"}}]}`).(*CEL)
	if _, _, err := ic.rules[0].prg.ContextEval(context.Background(), b); err != nil || b.decoded {
		t.Fatalf("err=%v decoded=%v", err, b.decoded)
	}
}

package ctk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

func script(t *testing.T, rules string) Script {
	t.Helper()
	var s Script
	if err := json.Unmarshal([]byte(rules), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func parseCtx(t *testing.T, raw []byte) *points.Context {
	t.Helper()
	c, err := points.ParseContext(raw)
	if err != nil {
		t.Fatalf("ParseContext: %v\n%s", err, raw)
	}
	return c
}

func TestScriptedInterceptor(t *testing.T) {
	s := script(t, `[
		{"at":"pre_tool_call","match":{"tool_call.name":"x","tool_call.args.n":1.0},"return":{"decision":"deny","reason":"ctk:x"}},
		{"at":"pre_tool_call","return":{"decision":"allow","warnings":[{"reason":"ctk:advisory"}]}},
		{"at":"input","fault":"raise"},
		{"at":"output","fault":"malformed_verdict"},
		{"at":"post_model_call","return":{"decision":"allow","evidence":{"nope":1}}}
	]`)
	x := ctxAt("pre_tool_call", 0, "")
	x = bytes.Replace(x, []byte(`"tool_call":{"id":"1","name":"n","args":{}},"target":{}`), []byte(`"tool_call":{"id":"1","name":"x","args":{"n":1}},"target":{"n":1}`), 1)
	cases := []struct {
		name     string
		ctx      []byte
		decision points.Decision
		reason   string
		err      func(error) bool
	}{
		{"first match wins, numbers by value", x, points.DecisionDeny, "ctk:x", nil},
		{"falls through to the next rule", ctxAt("pre_tool_call", 1, ""), points.DecisionAllow, "", nil},
		{"no rule allows", ctxAt("agent_startup", 2, ""), points.DecisionAllow, "", nil},
		{"raise", ctxAt("input", 3, ""), "", "", func(err error) bool { return errors.Is(err, ErrScriptedFault) }},
		{"malformed verdict", ctxAt("output", 4, ""), "", "", isVerdictError},
		{"invalid scripted verdict", ctxAt("post_model_call", 5, ""), "", "", isVerdictError},
	}
	si := ScriptedInterceptor(s)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := si.Intercept(context.Background(), parseCtx(t, c.ctx))
			if c.err != nil {
				if !c.err(err) {
					t.Fatalf("error %v", err)
				}
				return
			}
			if err != nil || v.Decision != c.decision || v.Reason != c.reason {
				t.Fatalf("got %v %v", v, err)
			}
		})
	}
	if got := si.Recorded(); len(got) != len(cases) {
		t.Fatalf("recorded %d contexts, want %d", len(got), len(cases))
	}
	si.Reset()
	if len(si.Recorded()) != 0 {
		t.Fatal("Reset kept contexts")
	}
}

func isVerdictError(err error) bool {
	var ve *points.VerdictError
	return errors.As(err, &ve) && ve.Reason == points.ReasonVerdictInvalid
}

func TestScriptedInterceptorMutate(t *testing.T) {
	si := ScriptedInterceptor(script(t, `[{"at":"pre_tool_call","fault":"mutate"}]`))
	raw := bytes.Replace(ctxAt("pre_tool_call", 0, ""), []byte(`"args":{}},"target":{}`), []byte(`"args":{"url":"https://x"}},"target":{"url":"https://x"}`), 1)
	c := parseCtx(t, bytes.Clone(raw))
	v, err := si.Intercept(context.Background(), c)
	if err != nil || v.Decision != points.DecisionAllow || v.Reason != "ctk:mutated" {
		t.Fatalf("got %v %v", v, err)
	}
	if bytes.Equal(c.Raw(), raw) || !bytes.Contains(c.Raw(), []byte("TAMPERED")) {
		t.Fatalf("context not tampered in place: %s", c.Raw())
	}
	if rec := si.Recorded(); !bytes.Equal(rec[0], raw) {
		t.Fatalf("recorded the tampered copy: %s", rec[0])
	}
}

func TestScriptedResolver(t *testing.T) {
	id := "sha256:abc"
	ctx := ctxAt("pre_tool_call", 0, "")
	redacted := bytes.Replace(ctx, []byte(`"target":{}`), []byte(`"target":{"amount":"[redacted]"}`), 1)
	redacted = bytes.Replace(redacted, []byte(`"args":{}`), []byte(`"args":{"amount":"[redacted]"}`), 1)
	recomputed, err := points.JCSSHA256().Identity(redacted)
	if err != nil {
		t.Fatal(err)
	}
	override := "sha256:0000"
	var rules []ApprovalRule
	if err := json.Unmarshal([]byte(`[
		{"match":{"target.amount":"[redacted]"},"resolve":{"outcome":"approve","verdict":{"decision":"allow"},"echo_recomputed":true,"identity_override":"sha256:ignored"}},
		{"match":{"sequence":7},"resolve":{"fault":"raise"}},
		{"match":{"sequence":8},"resolve":{"outcome":"approve","verdict":{"decision":"allow"},"identity_override":"sha256:0000"}},
		{"match":{"sequence":0},"resolve":{"outcome":"reject","verdict":{"decision":"deny","reason":"ctk:no"}}}
	]`), &rules); err != nil {
		t.Fatal(err)
	}
	r := ScriptedResolver(rules)
	cases := []struct {
		name    string
		ctx     []byte
		ident   *string
		outcome string
		echo    *string
		fault   bool
	}{
		{"echo_recomputed wins", redacted, &id, points.OutcomeApprove, &recomputed, false},
		{"raise", ctxAt("input", 7, ""), &id, "", nil, true},
		{"identity_override", ctxAt("input", 8, ""), &id, points.OutcomeApprove, &override, false},
		{"echoes the request identity", ctx, &id, points.OutcomeReject, &id, false},
		{"null identity echoes null", ctx, nil, points.OutcomeReject, nil, false},
		{"no rule is unresolved", ctxAt("input", 9, ""), &id, points.OutcomeUnresolved, &id, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := r.Resolve(context.Background(), points.ApprovalRequest{ContextIdentity: c.ident, Context: c.ctx})
			if c.fault {
				if !errors.Is(err, ErrScriptedFault) {
					t.Fatalf("err %v", err)
				}
				return
			}
			if err != nil || res.Outcome != c.outcome || !sameIdentity(res.ContextIdentity, c.echo) {
				t.Fatalf("got %+v %v", res, err)
			}
		})
	}
	if len(r.Requests()) != len(cases) {
		t.Fatalf("%d requests recorded", len(r.Requests()))
	}
}

func TestRedactor(t *testing.T) {
	v := Vector{RedactForApproval: []string{"$target.amount", "$target.missing.deep"}}
	raw := bytes.Replace(ctxAt("pre_tool_call", 0, ""), []byte(`"args":{}},"target":{}`), []byte(`"args":{"amount":100,"to":"x"}},"target":{"amount":100,"to":"x"}`), 1)
	out, err := v.Redactor().Redact(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"target.amount", "tool_call.args.amount"} {
		if got, _ := Lookup(out, p); got.Str != "[redacted]" {
			t.Errorf("%s = %s", p, got.Raw)
		}
	}
	if got, _ := Lookup(out, "target.to"); got.Str != "x" {
		t.Errorf("target.to = %s", got.Raw)
	}
	if err := points.ValidateEnvelope(out); err != nil {
		t.Errorf("redacted context invalid: %v", err)
	}
	if (&Vector{}).Redactor() != nil {
		t.Error("a vector without paths has a redactor")
	}
}

func TestVectorIdentityAndComposition(t *testing.T) {
	if (&Vector{IdentityProvider: ""}).Identity() != nil {
		t.Error("null provider is not nil")
	}
	if p := (&Vector{IdentityProvider: ProviderJCS}).Identity(); p == nil || p.Name() != points.JCSSHA256Name {
		t.Error("jcs provider")
	}
	p := (&Vector{IdentityProvider: ProviderCTKFault}).Identity()
	if _, err := p.Identity(ctxAt("input", 0, "")); err == nil || p.Name() != "ctk-fault" {
		t.Error("ctk-fault provider does not fail")
	}
	if c := (&Vector{}).CompositionConfig(); c.Profile != points.ProfileFirstDeny || c.OnApproval != points.OnApprovalStop {
		t.Errorf("default composition %+v", c)
	}
}

package interceptors

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

// A call the budget allowed but a later binding denied was never made, so
// it is not counted: two denied calls, then an allowed one, with a limit
// of two.
func TestBudgetDoesNotCountCallsDeniedLater(t *testing.T) {
	budget := build(t, KindBudget, `{"max_model_calls": 2, "scope": "both"}`)
	deny := true
	em, err := points.NewEmitter(points.Config{Bindings: []points.Binding{
		{Name: "budget", Interceptor: budget},
		{Name: "guard", Interceptor: points.InterceptorFunc(func(context.Context, *points.Context) (points.Verdict, error) {
			if deny {
				return points.Deny("blocked_by_rule", ""), nil
			}
			return points.Allow(), nil
		})},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := points.NewSession(points.Agent{ID: "a", Framework: "f"}, "s1")
	call := func() points.Result {
		return em.Emit(context.Background(), s, points.PreModelCallEvent("m", json.RawMessage(`[{"role":"user","content":"x"}]`)))
	}
	for range 2 {
		if r := call(); r.Proceed || r.Verdict.Reason != "blocked_by_rule" {
			t.Fatalf("guard: %+v", r.Verdict)
		}
	}
	deny = false
	for i := range 3 {
		r := call()
		if want := i < 2; r.Proceed != want {
			t.Fatalf("allowed call %d: proceed %v (%s %s), want %v", i+1, r.Proceed, r.Verdict.Reason, r.Verdict.Message, want)
		}
	}
}

// A budget bound where its limits cannot be counted or enforced is refused
// at load instead of silently allowing everything.
func TestBudgetCheckPoints(t *testing.T) {
	for _, tc := range []struct {
		cfg string
		at  []points.Point
		ok  bool
	}{
		{`{"max_total_tokens": 10}`, []points.Point{points.PreModelCall}, false},
		{`{"max_total_tokens": 10}`, []points.Point{points.PreModelCall, points.PostModelCall}, true},
		{`{"max_model_calls": 1}`, []points.Point{points.Output}, false},
		{`{"max_tool_calls": 1}`, []points.Point{points.PreToolCall}, true},
		{`{"max_elapsed": "1m"}`, []points.Point{points.Output}, false},
		{`{"max_elapsed": "1m"}`, []points.Point{points.Input}, true},
		{`{"max_model_calls": 1}`, nil, true}, // every point
	} {
		b := build(t, KindBudget, tc.cfg).(*Budget)
		if err := b.CheckPoints(tc.at); (err == nil) != tc.ok {
			t.Errorf("%s at %v: %v, want ok=%v", tc.cfg, tc.at, err, tc.ok)
		}
	}
}

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

package interceptors

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
)

// README: max_elapsed is "the time since the session's first context (by
// context timestamps)". A binding at pre_model_call alone would start the
// clock at the first model call, not at the session's first context
// (agent_startup/input), and allow a session that began 20 minutes ago
// under max_elapsed: 15m; such a binding is refused at load.
func TestBudgetElapsedFromSessionStart(t *testing.T) {
	budget := build(t, KindBudget, `{"max_elapsed":"15m"}`)
	if err := budget.(*Budget).CheckPoints([]points.Point{points.PreModelCall}); err != nil {
		return // refused at load: no binding can start the clock late
	}
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	now := t0
	em, err := points.NewEmitter(points.Config{Now: func() time.Time { return now }, Bindings: []points.Binding{
		{Name: "budget", Interceptor: budget, At: []points.Point{points.PreModelCall}},
		{Name: "allow", Interceptor: build(t, KindAllowAll, "")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := points.NewSession(points.Agent{ID: "a", Framework: "f"}, "s1")
	if r := em.Emit(context.Background(), s, points.StartupEvent(nil)); !r.Proceed {
		t.Fatal("startup")
	}
	if r := em.Emit(context.Background(), s, points.InputEvent(json.RawMessage(`"hi"`), "user")); !r.Proceed {
		t.Fatal("input")
	}
	pm := points.PreModelCallEvent("m", json.RawMessage(`[{"role":"user","content":"x"}]`))
	now = t0.Add(10 * time.Minute)
	if r := em.Emit(context.Background(), s, pm); !r.Proceed {
		t.Fatalf("model call 10m in: %+v", r.Verdict)
	}
	now = t0.Add(20 * time.Minute)
	if r := em.Emit(context.Background(), s, pm); r.Proceed {
		t.Fatalf("model call 20m after the session's first context proceeded under max_elapsed 15m")
	}
}

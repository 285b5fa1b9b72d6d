package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hooksproxy/hooksproxy/points"
)

// host_errors_total counts host errors that blocked their action: in
// evaluate_only an interceptor's failure is shadowed (the request goes on,
// denials_total{mode="evaluate_only"} counts it), so it pages nobody; a
// host deny of an answer the host cannot judge blocks in either mode and is
// counted in both.
func TestShadowedHostErrorIsNotFailClosed(t *testing.T) {
	for _, mode := range []points.Mode{points.Enforce, points.EvaluateOnly} {
		m, err := New(prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		failing := points.InterceptorFunc(func(context.Context, *points.Context) (points.Verdict, error) {
			return points.Verdict{}, errors.New("boom")
		})
		em, err := points.NewEmitter(points.Config{Mode: mode, Identity: points.JCSSHA256(), Observer: m,
			Bindings: []points.Binding{{Name: "hook", Interceptor: failing}}})
		if err != nil {
			t.Fatal(err)
		}
		s := points.NewSession(points.Agent{ID: "a", Framework: "f"}, "s")
		res := em.Emit(context.Background(), s, points.OutputEvent(json.RawMessage(`"x"`)))
		failed := testutil.ToFloat64(m.hostErrors.WithLabelValues("output", string(points.ReasonInterceptorFailed)))
		shadowed := testutil.ToFloat64(m.denials.WithLabelValues("output", "evaluate_only", string(points.ReasonInterceptorFailed), "hook"))
		switch {
		case mode == points.Enforce && (res.Proceed || failed != 1):
			t.Errorf("enforce: proceed %v, host_errors_total %v, want blocked and 1", res.Proceed, failed)
		case mode == points.EvaluateOnly && (!res.Proceed || failed != 0 || shadowed != 1):
			t.Errorf("evaluate_only: proceed %v, host_errors_total %v, shadowed denials %v, want it through, 0 and 1", res.Proceed, failed, shadowed)
		}
		hd := em.EmitHostDeny(context.Background(), s, points.OutputEvent(json.RawMessage(`"x"`)), points.ReasonAdapterUnsupported, "n>1")
		if got := testutil.ToFloat64(m.hostErrors.WithLabelValues("output", string(points.ReasonAdapterUnsupported))); hd.Proceed || got != 1 {
			t.Errorf("%s: host deny proceed %v, host_errors_total %v, want blocked and 1", mode, hd.Proceed, got)
		}
	}
}

package proxy

import (
	"net/http/httptest"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// A deny's body names the verdict's reason as the record does: a deny
// without one answers code and agent_hooks.reason null, not a reason of
// the proxy's own that no record carries.
func TestBlockedBodyReason(t *testing.T) {
	for _, tt := range []struct{ reason, want string }{
		{"", "null"},
		{"secret_in_output", `"secret_in_output"`},
		{string(points.ReasonInterceptorTimeout), `"` + string(points.ReasonInterceptorTimeout) + `"`},
	} {
		rec := &points.Record{InterceptionPoint: points.Output, SessionID: "s", Sequence: 3}
		rec.Verdict.Decision = points.DecisionDeny
		rec.Verdict.Reason = tt.reason
		w := httptest.NewRecorder()
		writeBlocked(w, points.Result{Record: rec})
		body := w.Body.String()
		if got := gjson.Get(body, "error.code").Raw; got != tt.want {
			t.Errorf("reason %q: code %s, want %s", tt.reason, got, tt.want)
		}
		if got := gjson.Get(body, "error.agent_hooks.reason").Raw; got != tt.want {
			t.Errorf("reason %q: agent_hooks.reason %s, want %s", tt.reason, got, tt.want)
		}
	}
}

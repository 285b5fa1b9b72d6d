package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Passthrough requests are counted by the upstream's status, apart from
// the model-call series; no answer at all is "error".
func TestPassthroughRequests(t *testing.T) {
	m, reg := newMetrics(t)
	m.PassthroughRequest(200)
	m.PassthroughRequest(200)
	m.PassthroughRequest(404)
	m.PassthroughRequest(0)
	m.PassthroughRequest(1000)
	want := `# HELP hooksproxy_passthrough_requests_total Requests forwarded unmediated to a configured passthrough path, by the upstream's HTTP status code (error when none arrived).
# TYPE hooksproxy_passthrough_requests_total counter
hooksproxy_passthrough_requests_total{code="200"} 2
hooksproxy_passthrough_requests_total{code="404"} 1
hooksproxy_passthrough_requests_total{code="error"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hooksproxy_passthrough_requests_total"); err != nil {
		t.Fatal(err)
	}
	// The model-call series stay at their zero start.
	for _, st := range []string{"false", "true"} {
		if n := testutil.ToFloat64(m.upstreamRequests.WithLabelValues("error", st)); n != 0 {
			t.Fatalf("passthrough counted in the upstream model-call series: %v", n)
		}
	}
	if n := testutil.CollectAndCount(m.upstreamRequests); n != 2 {
		t.Fatalf("%d upstream model-call series, want the two error series started at 0", n)
	}
}

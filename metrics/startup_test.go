package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hooksproxy/hooksproxy/points"
)

// Series whose labels are all known before any traffic exist at zero from
// the start, so that rate() and increase() see their first events; those
// whose labels come from policy (a deny's reason, its binding) do not
// appear as guesses.
func TestSeriesAtStart(t *testing.T) {
	m, _ := newMetrics(t)
	nPoints := len(points.AllPoints())
	before := []struct {
		name string
		c    prometheus.Collector
		want int
	}{
		{"fold_truncated_total", m.foldTruncated, nPoints},
		{"emission_duration_seconds", m.emissionDuration, nPoints},
		{"decisions_total (allows, by point and mode)", m.decisions, 2 * nPoints},
		{"denials_total (reason and binding from policy)", m.denials, 0},
		{"interceptor_verdicts_total (no bindings yet)", m.interceptorVerdicts, 0},
		{"interceptor_duration_seconds (no bindings yet)", m.interceptorDuration, 0},
	}
	for _, tc := range before {
		if n := testutil.CollectAndCount(tc.c); n != tc.want {
			t.Errorf("%s: %d series at start, want %d", tc.name, n, tc.want)
		}
	}
	for _, p := range points.AllPoints() {
		if v := testutil.ToFloat64(m.foldTruncated.WithLabelValues(string(p))); v != 0 {
			t.Errorf("fold_truncated_total{point=%q} = %v at start", p, v)
		}
	}

	m.BindingsLoaded([]points.Binding{
		{Name: "egress", At: []points.Point{points.PreToolCall, points.Output}},
		{Name: "everywhere"},
	})
	at := 2 + nPoints // the points the two bindings apply to
	after := []struct {
		name string
		c    prometheus.Collector
		want int
	}{
		{"interceptor_verdicts_total", m.interceptorVerdicts, 3 * at},
		{"interceptor_duration_seconds", m.interceptorDuration, at},
	}
	for _, tc := range after {
		if n := testutil.CollectAndCount(tc.c); n != tc.want {
			t.Errorf("%s: %d series once bindings loaded, want %d", tc.name, n, tc.want)
		}
	}
	// A verdict then counts on the series that exists, and adds none.
	m.Interceptor("egress", points.Output, points.Verdict{Decision: points.DecisionTransform}, time.Millisecond)
	if v := testutil.ToFloat64(m.interceptorVerdicts.WithLabelValues("egress", "output", "transform")); v != 1 {
		t.Errorf("transform verdicts = %v after one", v)
	}
	m.Emission(&points.Record{InterceptionPoint: points.Output, Mode: points.Enforce, FoldTruncated: ptr(true),
		Verdict: points.RecordVerdict{Decision: points.DecisionAllow}}, time.Millisecond)
	for _, tc := range []struct {
		c    prometheus.Collector
		want int
	}{{m.interceptorVerdicts, 3 * at}, {m.decisions, 2 * nPoints}, {m.foldTruncated, nPoints}} {
		if n := testutil.CollectAndCount(tc.c); n != tc.want {
			t.Errorf("%d series after traffic on initialised ones, want %d", n, tc.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// gatheredNames returns the metric families reg exposes now.
func gatheredNames(t *testing.T, reg prometheus.Gatherer) map[string]int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, mf := range mfs {
		out[mf.GetName()] = len(mf.GetMetric())
	}
	return out
}

// Every metric an alert reads exists before any traffic, once a config's
// bindings and the record sink are loaded as at start-up: an alert on
// rate() or increase() misses the first events of a series that appears
// with them.
func TestAlertedSeriesExistBeforeTraffic(t *testing.T) {
	m, reg := newMetrics(t)
	m.BindingsLoaded([]points.Binding{{Name: "policy"}})
	m.SinkOpened("file")
	have := gatheredNames(t, reg)
	name := regexp.MustCompile(`hooksproxy_[a-z_]+`)
	for id, e := range alertExprs(t) {
		for _, n := range name.FindAllString(e, -1) {
			base := strings.TrimSuffix(n, "_bucket")
			if have[base] == 0 {
				t.Errorf("%s reads %s, which has no series before traffic", id, n)
			}
		}
	}
}

// The dashboard's job picker lists a process that has served nothing yet:
// its query reads a metric New starts with one series, whatever the
// config, the sinks and the traffic.
func TestDashboardJobVariableExistsAtStart(t *testing.T) {
	_, reg := newMetrics(t)
	have := gatheredNames(t, reg)
	b, err := os.ReadFile(filepath.Join(deployDir, "grafana", "hooksproxy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Templating struct {
			List []struct {
				Name       string          `json:"name"`
				Query      json.RawMessage `json:"query"` // a string for a data source variable
				Definition string          `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	lv := regexp.MustCompile(`^label_values\((hooksproxy_[a-z_]+), *job\)$`)
	found := false
	for _, v := range doc.Templating.List {
		if v.Name != "job" {
			continue
		}
		found = true
		var query struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &query); err != nil {
			t.Fatalf("job variable query: %v", err)
		}
		for _, q := range []string{query.Query, v.Definition} {
			mm := lv.FindStringSubmatch(q)
			if mm == nil {
				t.Fatalf("job variable query %q, want label_values(hooksproxy_..., job)", q)
			}
			if have[mm[1]] != 1 {
				t.Errorf("job variable reads %s, which has %d series in a fresh process, want 1", mm[1], have[mm[1]])
			}
		}
	}
	if !found {
		t.Fatal("the dashboard has no job variable")
	}
}

package metrics

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/hooksproxy/hooksproxy/audit"
	"github.com/hooksproxy/hooksproxy/points"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Compile-time checks of the interfaces *Metrics serves.
var (
	_ points.Observer  = (*Metrics)(nil)
	_ audit.Reporter   = (*Metrics)(nil)
	_ audit.SinkOpener = (*Metrics)(nil)
	_ ProxyObserver    = (*Metrics)(nil)
)

func newMetrics(t testing.TB, opts ...Option) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	m.now = func() time.Time { return time.Unix(1767225600, 0) }
	return m, reg
}

// deterministic lists the metrics whose values a scripted run fixes; the
// histograms of measured durations are checked by count in
// TestLatencyHistogramsCount.
var deterministic = []string{
	"hooksproxy_decisions_total", "hooksproxy_denials_total", "hooksproxy_host_errors_total",
	"hooksproxy_fold_truncated_total", "hooksproxy_approvals_total", "hooksproxy_interceptor_verdicts_total",
	"hooksproxy_interceptor_failures_total", "hooksproxy_records_dropped_total", "hooksproxy_record_sink_errors_total",
	"hooksproxy_config_reloads_total", "hooksproxy_config_last_reload_successful",
	"hooksproxy_config_last_reload_success_timestamp_seconds", "hooksproxy_upstream_requests_total",
	"hooksproxy_buffered_response_bytes", "hooksproxy_held_streams", "hooksproxy_buffered_bytes_in_flight", "hooksproxy_active_sessions", "hooksproxy_tokens_total",
	"hooksproxy_requests_refused_total",
}

// scriptedRun drives every metric: the emitter scenarios plus a scripted
// proxy and sink history.
func scriptedRun(t testing.TB, m *Metrics) {
	t.Helper()
	ring := audit.NewRing(100)
	runScenarios(t, m, ring)
	m.SinkOpened("file")
	m.RecordsDropped("file", 3)
	m.SinkError("file", "write")
	m.SinkError("file", "sync")
	m.ConfigReload(true)
	m.ConfigReload(false)
	m.ConfigReload(true)
	m.UpstreamRequest(200, false, 120*time.Millisecond)
	m.UpstreamRequest(200, true, 2*time.Second)
	m.UpstreamRequest(429, false, 10*time.Millisecond)
	m.UpstreamRequest(0, true, time.Second)
	m.BufferedResponseBytes(2048)
	m.BufferedResponseBytes(5 << 20)
	m.HeldStreams(1)
	m.HeldStreams(1)
	m.HeldStreams(-1)
	m.BufferedInFlight(4096)
	m.BufferedInFlight(-1024)
	m.SinkError("file", "stall")
	m.ActiveSessions(3)
	m.Tokens(120, 30)
	m.Tokens(-1, 5)
}

func TestGoldenExposition(t *testing.T) {
	m, reg := newMetrics(t)
	scriptedRun(t, m)
	golden := filepath.Join("testdata", "scripted_run.prom")
	if *update {
		b, err := testutil.GatherAndFormat(reg, expfmt.TypeTextPlain, deterministic...)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(golden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := testutil.GatherAndCompare(reg, f, deterministic...); err != nil {
		t.Fatal(err)
	}
}

func TestLatencyHistogramsCount(t *testing.T) {
	m, reg := newMetrics(t)
	scriptedRun(t, m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			if h := mt.GetHistogram(); h != nil {
				key := mf.GetName()
				for _, l := range mt.GetLabel() {
					key += "," + l.GetName() + "=" + l.GetValue()
				}
				counts[key] = h.GetSampleCount()
			}
		}
	}
	want := map[string]uint64{
		// One emission per scenario, by point.
		"hooksproxy_emission_duration_seconds,point=agent_startup":   1,
		"hooksproxy_emission_duration_seconds,point=input":           6,
		"hooksproxy_emission_duration_seconds,point=output":          5,
		"hooksproxy_emission_duration_seconds,point=post_model_call": 1,
		"hooksproxy_emission_duration_seconds,point=pre_model_call":  2,
		"hooksproxy_emission_duration_seconds,point=pre_tool_call":   9,
		// One observation per interceptor call.
		"hooksproxy_interceptor_duration_seconds,binding=allow-all,point=input":               1, // context_invalid calls nobody
		"hooksproxy_interceptor_duration_seconds,binding=tool-governance,point=pre_tool_call": 6,
		"hooksproxy_interceptor_duration_seconds,binding=slow,point=input":                    1,
		"hooksproxy_upstream_request_duration_seconds,class=2xx,stream=false":                 1,
		"hooksproxy_upstream_request_duration_seconds,class=2xx,stream=true":                  1,
		"hooksproxy_upstream_request_duration_seconds,class=4xx,stream=false":                 1,
		"hooksproxy_upstream_request_duration_seconds,class=error,stream=true":                1,
		"hooksproxy_buffered_response_bytes":                                                  2,
	}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%s: %d samples, want %d", k, counts[k], v)
		}
	}
}

func TestLint(t *testing.T) {
	m, reg := newMetrics(t)
	scriptedRun(t, m)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), Namespace+"_") {
			t.Errorf("%s lacks the %s_ prefix", mf.GetName(), Namespace)
		}
	}
}

func TestNilMetricsIsNoop(t *testing.T) {
	var m *Metrics
	m.Emission(&points.Record{}, time.Second)
	m.Interceptor("x", points.Input, points.Allow(), time.Second)
	m.RecordsDropped("file", 1)
	m.SinkError("file", "write")
	m.SinkOpened("file")
	m.UpstreamRequest(200, true, time.Second)
	m.BufferedResponseBytes(1)
	m.HeldStreams(1)
	m.ActiveSessions(1)
	m.Tokens(1, 1)
	m.RequestRefused("request_too_large")
	m.RequestRefused("not_a_code")
	m.ConfigReload(true)
	m.BindingsLoaded([]points.Binding{{Name: "x"}})
}

func TestBindingsLoadedStartsFailuresAtZero(t *testing.T) {
	m, reg := newMetrics(t)
	m.BindingsLoaded([]points.Binding{
		{Name: "egress", At: []points.Point{points.PreToolCall}},
		{Name: "everywhere"},
	})
	// Only the loaded bindings' points: 1 + 8 points, three reasons each.
	if n := testutil.CollectAndCount(m.interceptorFailures); n != 27 {
		t.Errorf("%d failure series, want 27", n)
	}
	for _, r := range []string{"host_error:interceptor_failed", "host_error:interceptor_timeout", "host_error:verdict_invalid"} {
		c := m.interceptorFailures.WithLabelValues("egress", "pre_tool_call", r)
		if v := testutil.ToFloat64(c); v != 0 {
			t.Errorf("%s = %v before any failure", r, v)
		}
	}
	// The first failure then counts on the series that already exists.
	m.Interceptor("egress", points.PreToolCall, points.Verdict{Decision: points.DecisionDeny, Reason: "host_error:interceptor_timeout"}, time.Millisecond)
	if v := testutil.ToFloat64(m.interceptorFailures.WithLabelValues("egress", "pre_tool_call", "host_error:interceptor_timeout")); v != 1 {
		t.Errorf("after one timeout the counter is %v", v)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

func TestRegisterTwiceFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg); err == nil {
		t.Fatal("registering twice on one registry should fail")
	}
}

func TestSinkOpsMatchAudit(t *testing.T) {
	if strings.Join(sinkOps(), ",") != strings.Join(audit.SinkOps(), ",") {
		t.Fatalf("metrics sink ops %v, audit %v", sinkOps(), audit.SinkOps())
	}
}

func TestLabelCaps(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"secret_in_output", "secret_in_output"},
		{"vendor.policy/rule-1:v2", "vendor.policy/rule-1:v2"},
		{"", None},
		{"has space", Other},
		{"naïve", Other},
		{"\xff\xfe", Other},
		{strings.Repeat("a", 65), Other},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
	}
	for _, tt := range tests {
		if got := identLabel(tt.in); got != tt.want {
			t.Errorf("identLabel(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	c := newCapSet(2)
	for _, s := range []string{"a", "b", "a"} {
		if c.label(s) != s {
			t.Errorf("%s should be kept", s)
		}
	}
	if c.label("c") != Other {
		t.Error("the third distinct value should be other")
	}
}

func TestReasonCardinalityCapped(t *testing.T) {
	m, reg := newMetrics(t, WithMaxReasons(3))
	for i := 0; i < 10; i++ {
		r := &points.Record{InterceptionPoint: points.Output, Mode: points.Enforce,
			Verdict: points.RecordVerdict{Decision: points.DecisionDeny, Reason: "policy_" + string(rune('a'+i))}}
		m.Emission(r, time.Millisecond)
	}
	// Reserved reasons never use the budget.
	m.Emission(&points.Record{InterceptionPoint: points.Output, Mode: points.Enforce,
		Verdict: points.RecordVerdict{Decision: points.DecisionDeny, Reason: points.ReasonInterceptorTimeout}}, time.Millisecond)
	n, err := testutil.GatherAndCount(reg, "hooksproxy_denials_total")
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 { // a, b, c, other, host_error:interceptor_timeout
		t.Fatalf("%d denial series, want 5", n)
	}
	if v := testutil.ToFloat64(m.denials.WithLabelValues("output", "enforce", Other, None)); v != 7 {
		t.Fatalf("other = %v, want 7", v)
	}
	// decisions_total shares the cap: the same reasons, the same "other",
	// beside the allows every point and mode start with.
	if n, want := testutil.CollectAndCount(m.decisions), 5+2*len(points.AllPoints()); n != want {
		t.Fatalf("%d decision series, want %d", n, want)
	}
	if v := testutil.ToFloat64(m.decisions.WithLabelValues("output", "deny", "enforce", "false", Other)); v != 7 {
		t.Fatalf("decisions other = %v, want 7", v)
	}
	// An allow is counted under reason none, whatever it carries; a
	// transform under its reason.
	m.Emission(&points.Record{InterceptionPoint: points.Output, Mode: points.Enforce,
		Verdict: points.RecordVerdict{Decision: points.DecisionAllow, Reason: "policy_a"}}, time.Millisecond)
	m.Emission(&points.Record{InterceptionPoint: points.Output, Mode: points.Enforce,
		Verdict: points.RecordVerdict{Decision: points.DecisionTransform, Reason: "policy_b"}}, time.Millisecond)
	if v := testutil.ToFloat64(m.decisions.WithLabelValues("output", "allow", "enforce", "false", None)); v != 1 {
		t.Fatalf("allow none = %v", v)
	}
	if v := testutil.ToFloat64(m.decisions.WithLabelValues("output", "transform", "enforce", "false", "policy_b")); v != 1 {
		t.Fatalf("transform policy_b = %v", v)
	}
}

// TestApprovalResolution: the outcome label tells a person's reject from
// a timeout or a failed resolver; resolved_by is the record's.
func TestApprovalResolution(t *testing.T) {
	tests := []struct {
		resolvedBy string
		decision   points.Decision
		reason     string
		want       string
		message    string
	}{
		{"rejection", points.DecisionDeny, points.ReasonApprovalResolverFailed, "cancelled", "cancelled"},
		{"approval", points.DecisionAllow, "", "approve", ""},
		{"approval", points.DecisionTransform, "redacted", "approve", ""},
		{"approval", points.DecisionDeny, points.ReasonTransformInvalid, "failed", ""},
		{"rejection", points.DecisionDeny, "needs_approval", "reject", ""},
		{"rejection", points.DecisionDeny, "approver_said_no", "reject", ""},
		{"rejection", points.DecisionDeny, points.ReasonApprovalUnresolved, "unresolved", ""},
		{"rejection", points.DecisionDeny, points.ReasonApprovalResolverFailed, "failed", ""},
		{"rejection", points.DecisionDeny, points.ReasonApprovalIdentityMismatch, "failed", ""},
		{"rejection", points.DecisionDeny, points.ReasonVerdictInvalid, "failed", ""},
	}
	for _, tt := range tests {
		t.Run(tt.resolvedBy+" "+tt.reason+" "+tt.message, func(t *testing.T) {
			m, _ := newMetrics(t)
			m.Emission(&points.Record{InterceptionPoint: points.PreToolCall, Mode: points.Enforce, ResolvedBy: tt.resolvedBy,
				Verdict: points.RecordVerdict{Decision: tt.decision, Reason: tt.reason, Message: tt.message}}, time.Millisecond)
			if v := testutil.ToFloat64(m.approvals.WithLabelValues("pre_tool_call", tt.want, tt.resolvedBy)); v != 1 {
				t.Fatalf("approvals{outcome=%s,resolved_by=%s} = %v", tt.want, tt.resolvedBy, v)
			}
		})
	}
}

// TestUpstreamStatusOutOfRangeIsError checks that every status outside
// 100–599 (0 is a failed call) counts in the one "error" series, cached or
// not.
func TestUpstreamStatusOutOfRangeIsError(t *testing.T) {
	m, reg := newMetrics(t)
	for _, st := range []int{0, -1, 99, 600, 0} {
		m.UpstreamRequest(st, false, time.Millisecond)
	}
	m.UpstreamRequest(503, false, time.Millisecond)
	want := `
# HELP hooksproxy_upstream_requests_total Upstream model API calls by HTTP status code (error when none arrived or its stream was cut short) and streaming.
# TYPE hooksproxy_upstream_requests_total counter
hooksproxy_upstream_requests_total{code="503",stream="false"} 1
hooksproxy_upstream_requests_total{code="error",stream="false"} 5
hooksproxy_upstream_requests_total{code="error",stream="true"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hooksproxy_upstream_requests_total"); err != nil {
		t.Fatal(err)
	}
}

// TestCapSetKeepsClones: a label is kept for the process's life, so the
// set stores a copy, never the caller's memory (which may be a view of a
// request that is reused later).
func TestCapSetKeepsClones(t *testing.T) {
	c := newCapSet(4)
	buf := []byte("reason_a")
	got := c.label(unsafe.String(unsafe.SliceData(buf), len(buf)))
	copy(buf, "reason_b")
	if got != "reason_a" {
		t.Errorf("label = %q after the caller's memory changed", got)
	}
	for k := range c.seen {
		if k != "reason_a" {
			t.Errorf("set holds %q", k)
		}
	}
}

// A host error the caller caused by leaving (message "cancelled") is a
// decision and an approval outcome, but not a host error: the fail-closed
// alerts watch host_errors_total.
func TestCancelledIsNoHostError(t *testing.T) {
	m, _ := newMetrics(t)
	for _, msg := range []string{"cancelled", ""} {
		m.Emission(&points.Record{InterceptionPoint: points.PreToolCall, Mode: points.Enforce, ResolvedBy: "rejection",
			Verdict: points.RecordVerdict{Decision: points.DecisionDeny, Reason: points.ReasonApprovalResolverFailed, Message: msg}}, time.Millisecond)
	}
	if v := testutil.ToFloat64(m.hostErrors.WithLabelValues("pre_tool_call", points.ReasonApprovalResolverFailed)); v != 1 {
		t.Fatalf("host_errors_total = %v, want 1 (the resolver's own failure only)", v)
	}
	if v := testutil.ToFloat64(m.approvals.WithLabelValues("pre_tool_call", "cancelled", "rejection")); v != 1 {
		t.Fatalf("approvals_total{cancelled} = %v", v)
	}
}

// Package metrics exports hooksproxy's Prometheus metrics: the spec's
// operations signals (AGENT-HOOKS-0.1 runbook §3: fail-closed rate by
// reason, fold_truncated, approvals, records dropped, sink failures) and
// the proxy's own (upstream calls, buffering, sessions, tokens, reloads).
//
// [Metrics] registers on the prometheus.Registerer it is given (never the
// global one) and implements points.Observer, audit.Reporter and
// [ProxyObserver]. A nil *Metrics is a valid no-op, so callers need no
// checks. Create one per process and keep it across config reloads:
// registering twice on one registry fails.
//
// Labels never carry payload. They are interception points, decisions,
// modes, binding names, reasons and small closed sets; reasons and binding
// names come from policy configuration, are checked against a conservative
// identifier syntax and capped in number (see [WithMaxReasons]): anything
// else is counted under "other".
//
// # Metrics
//
//	hooksproxy_decisions_total{point,decision,mode,liftable,reason} counter (reason "none" for allow; allows start at 0 for every point and mode)
//	hooksproxy_denials_total{point,mode,reason,binding}           counter
//	hooksproxy_host_errors_total{point,reason}                    counter (fail-closed: a host error that blocked its action, so not one evaluate_only let through; starts at 0 for every reserved reason)
//	hooksproxy_fold_truncated_total{point}                        counter (starts at 0 for every point)
//	hooksproxy_approvals_total{point,outcome,resolved_by}         counter (outcome approve|reject|unresolved|cancelled|failed; resolved_by approval|rejection)
//	hooksproxy_emission_duration_seconds{point}                   histogram (starts empty for every point)
//	hooksproxy_interceptor_duration_seconds{binding,point}        histogram (starts empty for each loaded binding and point)
//	hooksproxy_interceptor_verdicts_total{binding,point,decision} counter (starts at 0 for each loaded binding, point and decision)
//	hooksproxy_interceptor_failures_total{binding,point,reason}   counter (starts at 0 for each loaded binding, point and failure reason)
//	hooksproxy_records_dropped_total{sink}                        counter
//	hooksproxy_record_sink_errors_total{sink,op}                  counter
//	hooksproxy_config_reloads_total{result}                       counter (success|failure)
//	hooksproxy_config_last_reload_successful                      gauge
//	hooksproxy_config_last_reload_success_timestamp_seconds       gauge
//	hooksproxy_upstream_requests_total{code,stream}               counter (code "error": no response, or a stream cut short)
//	hooksproxy_upstream_request_duration_seconds{class,stream}    histogram (class 2xx..5xx|error)
//	hooksproxy_buffered_response_bytes                            histogram
//	hooksproxy_held_streams                                       gauge
//	hooksproxy_active_sessions                                    gauge
//	hooksproxy_tokens_total{direction}                            counter (prompt|completion)
//	hooksproxy_requests_refused_total{code}                       counter (refused before any emission: 400, 413, 415)
//	hooksproxy_passthrough_requests_total{code}                   counter (configured passthrough paths, forwarded unmediated)
//
// deploy/prometheus/alerts.yml and deploy/grafana/hooksproxy.json are built
// on these; a test fails when they query a metric that is not here.
package metrics

import (
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hooksproxy/hooksproxy/points"
)

// Namespace prefixes every metric name.
const Namespace = "hooksproxy"

// Defaults for the label caps.
const (
	DefaultMaxReasons  = 200
	DefaultMaxBindings = 200
)

// Other is the label value for a reason or binding name that is not a
// plain identifier or arrived after the cap was reached; Unknown stands
// for an empty or invalid point, mode or decision; None for "no reason" and
// "no deciding binding".
const (
	Other   = "other"
	Unknown = "unknown"
	None    = "none"
)

// sinkOps are the sink operations whose error counters start at zero for
// each sink (audit.SinkOps; a test keeps the two in step).
func sinkOps() []string {
	return []string{"encode", "open", "write", "sync", "rotate", "close", "stall"}
}

// Latency buckets, in seconds. Interceptors and emissions run against a 5 s
// default timeout; upstream calls may stream for minutes.
func decisionBuckets() []float64 {
	return []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
}

// emissionBuckets go on to ten minutes: an emission includes its approval
// wait, which approval_resolver_ms bounds (600 000 ms in the examples).
func emissionBuckets() []float64 { return append(decisionBuckets(), 30, 60, 120, 300, 600) }

func upstreamBuckets() []float64 {
	return []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
}

// bytesBuckets runs from 1 KiB to 256 MiB in powers of four; the default
// buffer limit is 32 MiB.
func bytesBuckets() []float64 { return prometheus.ExponentialBuckets(1024, 4, 10) }

// ProxyObserver is what the HTTP layer reports. *Metrics implements it; a
// consumer may declare a narrower interface of its own.
type ProxyObserver interface {
	// UpstreamRequest counts one upstream call: its HTTP status (0 when
	// no response arrived), whether it streamed, and its duration.
	UpstreamRequest(status int, stream bool, d time.Duration)
	// BufferedResponseBytes observes the size of one held response.
	BufferedResponseBytes(n int)
	// HeldStreams adds delta (+1 when a stream is held, -1 when released
	// or discarded) to the held-streams gauge.
	HeldStreams(delta int)
	// BufferedInFlight adds delta to the answer bytes held across all
	// requests now.
	BufferedInFlight(delta int64)
	// ActiveSessions sets the number of open sessions.
	ActiveSessions(n int)
	// Tokens adds a response's usage.
	Tokens(prompt, completion int64)
	// RequestRefused counts a request refused before any emission.
	RequestRefused(code string)
	// PassthroughRequest counts one request forwarded unmediated to a
	// configured passthrough path, by the upstream's status (0: none).
	PassthroughRequest(status int)
	// ConfigReload counts one reload attempt.
	ConfigReload(ok bool)
}

// Option configures [New].
type Option func(*Metrics)

// WithMaxReasons caps the distinct policy reasons kept as label values
// (default [DefaultMaxReasons]); later ones count as "other". Reserved
// host_error:* reasons are always kept and do not use the budget.
func WithMaxReasons(n int) Option { return func(m *Metrics) { m.reasons = newCapSet(n) } }

// WithMaxBindings caps the distinct binding names kept as label values
// (default [DefaultMaxBindings]).
func WithMaxBindings(n int) Option { return func(m *Metrics) { m.bindings = newCapSet(n) } }

// Metrics holds hooksproxy's collectors.
type Metrics struct {
	reasons, bindings *capSet

	decisions           *prometheus.CounterVec
	denials             *prometheus.CounterVec
	hostErrors          *prometheus.CounterVec
	foldTruncated       *prometheus.CounterVec
	approvals           *prometheus.CounterVec
	emissionDuration    *prometheus.HistogramVec
	interceptorDuration *prometheus.HistogramVec
	interceptorVerdicts *prometheus.CounterVec
	interceptorFailures *prometheus.CounterVec
	recordsDropped      *prometheus.CounterVec
	sinkErrors          *prometheus.CounterVec
	configReloads       *prometheus.CounterVec
	configLastOK        prometheus.Gauge
	configLastOKTime    prometheus.Gauge
	upstreamRequests    *prometheus.CounterVec
	upstreamDuration    *prometheus.HistogramVec
	bufferedBytes       prometheus.Histogram
	heldStreams         prometheus.Gauge
	bufferedInFlight    prometheus.Gauge
	activeSessions      prometheus.Gauge
	tokens              *prometheus.CounterVec
	promptTokens        prometheus.Counter // tokens' two series, resolved once
	completionTokens    prometheus.Counter
	refused             *prometheus.CounterVec
	passthrough         *prometheus.CounterVec

	emissions    seriesCache[emissionKey, *emissionSeries]
	interceptors seriesCache[interceptorKey, *interceptorSeries]
	upstream     seriesCache[upstreamKey, *upstreamSeries]

	now func() time.Time
}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer, opts ...Option) (*Metrics, error) {
	m := &Metrics{reasons: newCapSet(DefaultMaxReasons), bindings: newCapSet(DefaultMaxBindings), now: time.Now}
	for _, o := range opts {
		o(m)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}, labels)
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help})
	}
	m.decisions = counter("decisions_total", "Emissions by interception point, combined decision, mode, whether the deny was liftable, and reason (none for an allow).", "point", "decision", "mode", "liftable", "reason")
	m.denials = counter("denials_total", "Deny decisions by point, mode, reason and the deciding binding (none when host-synthesized).", "point", "mode", "reason", "binding")
	m.hostErrors = counter("host_errors_total", "Fail-closed host_error:* denies (the action blocked; evaluate_only's shadowed ones are not counted) by point and reserved reason.", "point", "reason")
	m.foldTruncated = counter("fold_truncated_total", "Emissions where a registered interceptor was never invoked (fold_truncated: true).", "point")
	m.approvals = counter("approvals_total", "Approval seam consultations by point, outcome (approve, reject, unresolved, cancelled or failed) and the record's resolved_by (approval or rejection).", "point", "outcome", "resolved_by")
	m.emissionDuration = histogram("emission_duration_seconds", "Time to run one emission, dispatch and approval included.", emissionBuckets(), "point")
	m.interceptorDuration = histogram("interceptor_duration_seconds", "Time one interceptor took, by binding and point.", decisionBuckets(), "binding", "point")
	m.interceptorVerdicts = counter("interceptor_verdicts_total", "Verdicts by binding, point and decision (after host substitution).", "binding", "point", "decision")
	m.interceptorFailures = counter("interceptor_failures_total", "Interceptor calls replaced by a host_error:* deny, by binding, point and reason.", "binding", "point", "reason")
	m.recordsDropped = counter("records_dropped_total", "InterceptionRecords a sink will never write (queue full, closed, or failed write).", "sink")
	m.sinkErrors = counter("record_sink_errors_total", "Failed record sink operations by sink and operation.", "sink", "op")
	m.configReloads = counter("config_reloads_total", "Configuration reload attempts by result.", "result")
	m.configLastOK = gauge("config_last_reload_successful", "Whether the last configuration reload succeeded (1) or not (0).")
	m.configLastOKTime = gauge("config_last_reload_success_timestamp_seconds", "Unix time of the last successful configuration load.")
	m.upstreamRequests = counter("upstream_requests_total", "Upstream model API calls by HTTP status code (error when none arrived or its stream was cut short) and streaming.", "code", "stream")
	m.upstreamDuration = histogram("upstream_request_duration_seconds", "Upstream model API call duration by status class and streaming.", upstreamBuckets(), "class", "stream")
	m.bufferedBytes = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "buffered_response_bytes", Help: "Size of each response held until its verdicts passed.", Buckets: bytesBuckets()})
	m.heldStreams = gauge("held_streams", "Streams currently held back until their verdicts pass.")
	m.bufferedInFlight = gauge("buffered_bytes_in_flight", "Upstream answer bytes held across all requests now (limits.max_total_buffered_bytes bounds it).")
	m.activeSessions = gauge("active_sessions", "Sessions currently open.")
	m.tokens = counter("tokens_total", "Model tokens from upstream usage, by direction (prompt or completion).", "direction")
	m.refused = counter("requests_refused_total", "Requests refused before any emission (bad JSON or fields, wrong content type, too large, unreadable), by error code.", "code")
	m.passthrough = counter("passthrough_requests_total", "Requests forwarded unmediated to a configured passthrough path, by the upstream's HTTP status code (error when none arrived).", "code")

	for _, c := range []prometheus.Collector{
		m.decisions, m.denials, m.hostErrors, m.foldTruncated, m.approvals, m.emissionDuration,
		m.interceptorDuration, m.interceptorVerdicts, m.interceptorFailures, m.recordsDropped, m.sinkErrors,
		m.configReloads, m.configLastOK, m.configLastOKTime, m.upstreamRequests, m.upstreamDuration,
		m.bufferedBytes, m.heldStreams, m.bufferedInFlight, m.activeSessions, m.tokens, m.refused, m.passthrough,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}

	// Start the series that alerts watch with increase() at zero, so that
	// the first event is seen as an increase.
	for _, p := range points.AllPoints() {
		for _, r := range points.ReservedReasons {
			m.hostErrors.WithLabelValues(string(p), r)
		}
	}
	// The per-point series whose labels are all known before any traffic:
	// fold truncations (HooksproxyFoldTruncatedRateHigh takes their rate),
	// emission latency and allows, whose reason is always none. A deny's
	// or a transform's reason comes from policy, so those series start
	// with their first decision rather than as guesses.
	for _, p := range points.AllPoints() {
		m.foldTruncated.WithLabelValues(string(p))
		m.emissionDuration.WithLabelValues(string(p))
		for _, mode := range []points.Mode{points.Enforce, points.EvaluateOnly} {
			m.decisions.WithLabelValues(string(p), string(points.DecisionAllow), string(mode), "false", None)
		}
	}
	for _, r := range []string{"success", "failure"} {
		m.configReloads.WithLabelValues(r)
	}
	for _, p := range points.AllPoints() {
		for _, or := range [][2]string{{"approval", "approve"}, {"approval", "failed"}, {"rejection", "reject"}, {"rejection", "unresolved"}, {"rejection", "cancelled"}, {"rejection", "failed"}} {
			m.approvals.WithLabelValues(string(p), or[1], or[0])
		}
	}
	m.promptTokens, m.completionTokens = m.tokens.WithLabelValues("prompt"), m.tokens.WithLabelValues("completion")
	for _, c := range refusalCodes() {
		m.refused.WithLabelValues(c)
	}
	// The upstream's failures, which HooksproxyUpstreamErrors watches.
	for _, st := range []string{"false", "true"} {
		m.upstreamRequests.WithLabelValues("error", st)
	}
	m.passthrough.WithLabelValues("error")
	// A running process has a configuration that loaded.
	m.configLastOK.Set(1)
	return m, nil
}

// Emission implements points.Observer: it counts one finished emission from
// its payload-free record.
func (m *Metrics) Emission(r *points.Record, elapsed time.Duration) {
	if m == nil || r == nil {
		return
	}
	// An allow is counted under reason "none" whatever it carries, so
	// permits do not multiply the series; a deny's or a transform's reason
	// is capped as everywhere (reasonLabel).
	reason := None
	if r.Verdict.Decision != points.DecisionAllow {
		reason = m.reasonLabel(r.Verdict.Reason)
	}
	es, ok := m.emissions.get(emissionKey{r.InterceptionPoint, r.Mode, r.Verdict.Decision, r.Liftable(), reason}, m.resolveEmission)
	point := pointLabel(r.InterceptionPoint)
	if ok {
		point = es.point
		es.decisions.Inc()
	}
	if r.Verdict.Decision == points.DecisionDeny {
		inc(m.denials, point, modeLabel(r.Mode), reason, m.decidingBinding(r))
		// Fail-closed: a host error that blocked the action. One that
		// evaluate_only let through is a shadowed deny (denials_total
		// {mode="evaluate_only"}), no outage to page on.
		if points.IsHostError(r.Verdict.Reason) && !callerCancelled(r.Verdict.Message) && !r.Proceeds() {
			inc(m.hostErrors, point, reason)
		}
	}
	if r.FoldTruncated != nil && *r.FoldTruncated {
		inc(m.foldTruncated, point)
	}
	switch r.ResolvedBy {
	case "approval", "rejection":
		inc(m.approvals, point, resolutionLabel(r), r.ResolvedBy)
	case "":
	default:
		inc(m.approvals, point, Other, Other)
	}
	if ok {
		es.duration.Observe(elapsed.Seconds())
	}
}

// Interceptor implements points.Observer: it times one interceptor call and
// counts its verdict.
func (m *Metrics) Interceptor(name string, p points.Point, v points.Verdict, elapsed time.Duration) {
	if m == nil {
		return
	}
	s, ok := m.interceptors.get(interceptorKey{name, p, v.Decision}, m.resolveInterceptor)
	if !ok {
		return
	}
	s.duration.Observe(elapsed.Seconds())
	s.verdicts.Inc()
	if v.Decision == points.DecisionDeny && points.IsHostError(v.Reason) && !callerCancelled(v.Message) {
		inc(m.interceptorFailures, s.binding, s.point, m.reasonLabel(v.Reason))
	}
}

// callerCancelled reports a host-error verdict for a call the caller walked
// away from (client gone, shutdown): recorded as its reserved reason with
// the message "cancelled", it is no failure of the host or the binding, so
// the fail-closed and interceptor-failing alerts do not count it.
func callerCancelled(message string) bool { return message == "cancelled" }

// failureReasons are the reasons the emitter gives an interceptor call it
// replaces with a fail-closed deny (a panic or error, a timeout, a verdict
// outside the contract).
var failureReasons = []points.Reason{points.ReasonInterceptorFailed, points.ReasonInterceptorTimeout, points.ReasonVerdictInvalid}

// reasonLister is implemented by interceptors whose config fixes the
// reasons their verdicts carry (the built-in kinds).
type reasonLister interface{ Reasons() []string }

// BindingsLoaded starts the failure and verdict counters and the latency
// histogram of the bindings a loaded configuration dispatches at zero, at
// each point they apply to, so that an alert on increase() sees a
// binding's first failure: a series that appears with the value 1 has no
// increase to show.
func (m *Metrics) BindingsLoaded(bs []points.Binding) {
	if m == nil {
		return
	}
	for _, b := range bs {
		name := m.bindings.reserve(b.Name)
		if rl, ok := b.Interceptor.(reasonLister); ok {
			// The reasons the config fixed keep their own label values,
			// whatever filled the cap first.
			for _, r := range rl.Reasons() {
				m.reasons.reserve(r)
			}
		}
		at := b.At
		if len(at) == 0 {
			at = points.AllPoints()
		}
		for _, p := range at {
			pl := pointLabel(p)
			for _, r := range failureReasons {
				m.interceptorFailures.WithLabelValues(name, pl, m.reasonLabel(string(r)))
			}
			m.interceptorDuration.WithLabelValues(name, pl)
			for _, d := range []points.Decision{points.DecisionAllow, points.DecisionDeny, points.DecisionTransform} {
				m.interceptorVerdicts.WithLabelValues(name, pl, string(d))
			}
		}
	}
}

// RecordsDropped implements audit.Reporter.
func (m *Metrics) RecordsDropped(sink string, n uint64) {
	if m == nil {
		return
	}
	if c, err := m.recordsDropped.GetMetricWithLabelValues(identLabel(sink)); err == nil {
		c.Add(float64(n))
	}
}

// SinkError implements audit.Reporter.
func (m *Metrics) SinkError(sink, op string) {
	if m == nil {
		return
	}
	inc(m.sinkErrors, identLabel(sink), identLabel(op))
}

// SinkOpened implements audit.SinkOpener: the sink's drop and error
// counters start at zero.
func (m *Metrics) SinkOpened(sink string) {
	if m == nil {
		return
	}
	s := identLabel(sink)
	m.recordsDropped.WithLabelValues(s)
	for _, op := range sinkOps() {
		m.sinkErrors.WithLabelValues(s, op)
	}
}

// MemorySinkOpened starts the drop and write-error counters of an
// in-memory sink (the records ring) at zero. It never drops or fails a
// write, so they stay there; they exist so that a process without a record
// file still shows the series that dashboards and alerts query.
func (m *Metrics) MemorySinkOpened(sink string) {
	if m == nil {
		return
	}
	s := identLabel(sink)
	m.recordsDropped.WithLabelValues(s)
	m.sinkErrors.WithLabelValues(s, "write")
}

// UpstreamRequest implements [ProxyObserver].
func (m *Metrics) UpstreamRequest(status int, stream bool, d time.Duration) {
	if m == nil {
		return
	}
	if status < 100 || status > 599 {
		status = 0 // one "error" series, whatever the bad value
	}
	if s, ok := m.upstream.get(upstreamKey{status, stream}, m.resolveUpstream); ok {
		s.requests.Inc()
		s.duration.Observe(d.Seconds())
	}
}

// BufferedResponseBytes implements [ProxyObserver].
func (m *Metrics) BufferedResponseBytes(n int) {
	if m == nil || n < 0 {
		return
	}
	m.bufferedBytes.Observe(float64(n))
}

// BufferedInFlight implements [ProxyObserver].
func (m *Metrics) BufferedInFlight(delta int64) {
	if m == nil {
		return
	}
	m.bufferedInFlight.Add(float64(delta))
}

// HeldStreams implements [ProxyObserver].
func (m *Metrics) HeldStreams(delta int) {
	if m == nil {
		return
	}
	m.heldStreams.Add(float64(delta))
}

// ActiveSessions implements [ProxyObserver].
func (m *Metrics) ActiveSessions(n int) {
	if m == nil {
		return
	}
	m.activeSessions.Set(float64(n))
}

// Tokens implements [ProxyObserver]; negative counts are ignored.
func (m *Metrics) Tokens(prompt, completion int64) {
	if m == nil {
		return
	}
	if prompt > 0 {
		m.promptTokens.Add(float64(prompt))
	}
	if completion > 0 {
		m.completionTokens.Add(float64(completion))
	}
}

// refusalCodes are the codes a refused request is counted under; their
// series start at zero.
func refusalCodes() []string {
	return []string{"invalid_request", "invalid_content_type", "unsupported_content_encoding", "unsupported_charset", "request_too_large", "unreadable_body", "not_found", "method_not_allowed", "session_not_found", "session_ending", "tool_call_state", "tool_call_conflict"}
}

// RequestRefused implements [ProxyObserver]: a request refused before any
// emission, by its error code (an unknown code counts as "other").
func (m *Metrics) RequestRefused(code string) {
	if m == nil {
		return
	}
	if !slices.Contains(refusalCodes(), code) {
		code = Other
	}
	m.refused.WithLabelValues(code).Inc()
}

// PassthroughRequest implements [ProxyObserver].
func (m *Metrics) PassthroughRequest(status int) {
	if m == nil {
		return
	}
	code := "error"
	if status >= 100 && status <= 599 {
		code = strconv.Itoa(status)
	}
	m.passthrough.WithLabelValues(code).Inc()
}

// ConfigLoaded marks the configuration the process started with as loaded:
// the last-reload gauges read success at that time, and the reload counter
// stays at zero, as no reload was attempted.
func (m *Metrics) ConfigLoaded() {
	if m == nil {
		return
	}
	m.configLastOK.Set(1)
	m.configLastOKTime.Set(float64(m.now().UnixNano()) / 1e9)
}

// ConfigReload implements [ProxyObserver]: one reload attempt (SIGHUP or a
// changed file) and its result.
func (m *Metrics) ConfigReload(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.configReloads.WithLabelValues("success").Inc()
		m.ConfigLoaded()
		return
	}
	m.configReloads.WithLabelValues("failure").Inc()
	m.configLastOK.Set(0)
}

// inc increments a counter, ignoring label errors: an observer must never
// panic inside an emission.
func inc(c *prometheus.CounterVec, labels ...string) {
	if x, err := c.GetMetricWithLabelValues(labels...); err == nil {
		x.Inc()
	}
}

// decidingBinding names the interceptor a record's decided_by points at.
func (m *Metrics) decidingBinding(r *points.Record) string {
	if r.DecidedBy == nil {
		return None
	}
	for _, v := range r.Verdicts {
		if v.Index == *r.DecidedBy {
			return m.bindings.label(v.Name)
		}
	}
	return Unknown
}

// resolutionLabel is the outcome label: what became of a consultation, which resolved_by
// alone does not: "approve" (a permit came of it), "reject" (a resolver or
// a person refused: the deny stands with a policy reason), "unresolved"
// (nobody decided: host_error:approval_unresolved), "cancelled" (the
// caller went away while it waited) or "failed" (the resolver failed,
// timed out, broke the echo rule or answered an invalid or inapplicable
// verdict: any other host_error:*).
func resolutionLabel(r *points.Record) string {
	reason := r.Verdict.Reason
	host := points.IsHostError(reason)
	if host && reason == string(points.ReasonApprovalResolverFailed) && r.Verdict.Message == "cancelled" {
		return "cancelled"
	}
	switch r.ResolvedBy {
	case "approval":
		if r.Verdict.Decision == points.DecisionDeny && host {
			return "failed"
		}
		return "approve"
	case "rejection":
		switch {
		case reason == string(points.ReasonApprovalUnresolved):
			return "unresolved"
		case host:
			return "failed"
		}
		return "reject"
	}
	return Other
}

func (m *Metrics) reasonLabel(r string) string {
	if r == "" {
		return None
	}
	if points.IsHostError(r) {
		for _, known := range points.ReservedReasons {
			if r == known {
				return r
			}
		}
		return Other
	}
	return m.reasons.label(r)
}

func pointLabel(p points.Point) string {
	if p.Valid() {
		return string(p)
	}
	return Unknown
}

func modeLabel(m points.Mode) string {
	switch m {
	case points.Enforce, points.EvaluateOnly:
		return string(m)
	}
	return Unknown
}

func decisionLabel(d points.Decision) string {
	switch d {
	case points.DecisionAllow, points.DecisionDeny, points.DecisionTransform:
		return string(d)
	}
	return Unknown
}

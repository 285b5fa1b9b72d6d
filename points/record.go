package points

import (
	"context"
	"encoding/json"
	"github.com/tidwall/gjson"
	"sync"
	"sync/atomic"
)

// The composition profiles of §7.
const (
	ProfileFirstDeny = "sequential/first_deny"
	ProfileRunAll    = "sequential/run_all"
	ProfileStrictest = "parallel/strictest"
	ProfileUnanimous = "parallel/unanimous"
)

// Knob values.
const (
	OnApprovalStop   = "stop"
	OnApprovalResume = "resume"
	SynthDeny        = "deny"
	SynthApproval    = "approval"
)

// Composition is the host-configured profile and its knobs (§7.2). Knobs a
// profile does not consult must be empty; WithDefaults fills the ones it does.
type Composition struct {
	Profile             string `json:"profile"`
	OnApproval          string `json:"on_approval,omitempty"`
	OnDisagreement      string `json:"on_disagreement,omitempty"`
	OnTransformConflict string `json:"on_transform_conflict,omitempty"`
}

// WithDefaults resolves the knobs the profile consults to their normative
// defaults and clears the others, as records carry them (§10.3).
func (c Composition) WithDefaults() Composition {
	if c.Profile == "" {
		c.Profile = ProfileFirstDeny
	}
	orDefault := func(v, d string) string {
		if v == "" {
			return d
		}
		return v
	}
	switch c.Profile {
	case ProfileFirstDeny:
		return Composition{Profile: c.Profile, OnApproval: orDefault(c.OnApproval, OnApprovalStop)}
	case ProfileStrictest:
		return Composition{Profile: c.Profile, OnTransformConflict: orDefault(c.OnTransformConflict, SynthDeny)}
	case ProfileUnanimous:
		return Composition{Profile: c.Profile, OnDisagreement: orDefault(c.OnDisagreement, SynthDeny)}
	}
	return Composition{Profile: c.Profile}
}

// Validate checks the profile and knob values and refuses knobs the profile
// does not consult.
func (c Composition) Validate() error {
	bad := func(what string) error { return &ConfigError{What: "composition: " + what} }
	switch c.Profile {
	case ProfileFirstDeny, ProfileRunAll, ProfileStrictest, ProfileUnanimous:
	default:
		return bad("unknown profile " + c.Profile)
	}
	if c.OnApproval != "" && (c.Profile != ProfileFirstDeny || (c.OnApproval != OnApprovalStop && c.OnApproval != OnApprovalResume)) {
		return bad("on_approval is consulted only by sequential/first_deny (stop|resume)")
	}
	if c.OnDisagreement != "" && (c.Profile != ProfileUnanimous || (c.OnDisagreement != SynthDeny && c.OnDisagreement != SynthApproval)) {
		return bad("on_disagreement is consulted only by parallel/unanimous (deny|approval)")
	}
	if c.OnTransformConflict != "" && (c.Profile != ProfileStrictest || (c.OnTransformConflict != SynthDeny && c.OnTransformConflict != SynthApproval)) {
		return bad("on_transform_conflict is consulted only by parallel/strictest (deny|approval)")
	}
	return nil
}

// ConfigError reports an emitter configuration the contract does not allow.
type ConfigError struct{ What string }

func (e *ConfigError) Error() string { return "points: invalid configuration: " + e.What }

// RecordVerdict is the payload-free projection of a verdict (§10.3):
// messages cut to 256 bytes, approval reduced to presence, transform.value
// dropped.
type RecordVerdict struct {
	Decision     Decision         `json:"decision"`
	Reason       string           `json:"reason,omitempty"`
	Message      string           `json:"message,omitempty"`
	Warnings     []Warning        `json:"warnings,omitempty"`
	Approval     *struct{}        `json:"approval,omitempty"`
	Transform    *RecordTransform `json:"transform,omitempty"`
	Evidence     json.RawMessage  `json:"evidence,omitempty"`
	ResultLabels []string         `json:"result_labels,omitempty"`
}

// RecordTransform keeps only the path of a transform.
type RecordTransform struct {
	Path string `json:"path"`
}

// Project returns the payload-free projection of v.
func Project(v Verdict) RecordVerdict {
	r := RecordVerdict{Decision: v.Decision, Reason: v.Reason, Message: truncateMessage(v.Message), Evidence: v.Evidence, ResultLabels: v.ResultLabels}
	for _, w := range v.Warnings {
		r.Warnings = append(r.Warnings, Warning{Reason: w.Reason, Message: truncateMessage(w.Message), reasonSet: w.reasonSet, messageSet: w.messageSet})
	}
	if v.Approval != nil {
		r.Approval = &struct{}{}
	}
	if v.Transform != nil {
		r.Transform = &RecordTransform{Path: v.Transform.Path}
	}
	return r
}

// VerdictSummary is one interceptor's verdict in a record's verdicts list.
type VerdictSummary struct {
	Index    int      `json:"index"`
	Decision Decision `json:"decision"`
	Reason   string   `json:"reason,omitempty"`
	Name     string   `json:"name,omitempty"`
}

// Trace is the W3C trace context echoed from the context.
type Trace struct {
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
}

// Record is the payload-free InterceptionRecord of §10.3, one per emission.
type Record struct {
	InterceptionPoint      Point            `json:"interception_point"`
	Mode                   Mode             `json:"mode"`
	Verdict                RecordVerdict    `json:"verdict"`
	InputIdentity          *string          `json:"input_identity"`
	EnforcedIdentity       *string          `json:"enforced_identity"`
	IdentityProvider       *string          `json:"identity_provider"`
	SessionID              string           `json:"session_id"`
	Sequence               int64            `json:"sequence"`
	Timestamp              string           `json:"timestamp,omitempty"`
	Trace                  *Trace           `json:"trace,omitempty"`
	DecidedBy              *int             `json:"decided_by"`
	Composition            Composition      `json:"composition"`
	Declaration            string           `json:"declaration,omitempty"`
	Verdicts               []VerdictSummary `json:"verdicts,omitzero"` // [] (not nil) where the profile requires it
	FoldTruncated          *bool            `json:"fold_truncated,omitempty"`
	ResolvedBy             string           `json:"resolved_by,omitempty"`
	InterceptorsRegistered int              `json:"interceptors_registered"`
	// RequestID is the context's request_id at pre_model_call and
	// post_model_call, the id that pairs the two records of one model call
	// (a host member beside the spec's, set with Config.HostMembers);
	// empty elsewhere.
	RequestID string `json:"request_id,omitempty"`
	// HTTPRequestID is the host's id of the HTTP request that caused the
	// emission (a host member, for joining records with access logs, set
	// with Config.HostMembers); empty when the host set none.
	HTTPRequestID string `json:"http_request_id,omitempty"`
	// hostBlocked: a host deny that blocks in either mode (EmitHostDeny:
	// an answer the host cannot judge has no verdict to shadow).
	hostBlocked bool
}

// modelCallID is the request_id member of a model-call event, or "".
func modelCallID(ev Event) string {
	if ev.Point != PreModelCall && ev.Point != PostModelCall {
		return ""
	}
	for _, m := range ev.Members {
		if m.Key == "request_id" {
			return gjson.ParseBytes(m.Value).Str
		}
	}
	return ""
}

type requestIDKey struct{}

// WithRequestID returns a context whose emissions carry id in their records.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the request id set by WithRequestID, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// Proceeds reports whether the guarded action may go on: always in
// evaluate_only (but for a host deny of an action the host cannot judge,
// EmitHostDeny), otherwise when the combined verdict permits.
func (r *Record) Proceeds() bool {
	return !r.hostBlocked && (r.Mode == EvaluateOnly || r.Verdict.Decision.Permits())
}

// Liftable reports whether the combined verdict was a liftable deny.
func (r *Record) Liftable() bool {
	// A deny a resolver already rejected lifts no more, whatever the
	// rejecting verdict carries.
	return r.Verdict.Approval != nil && r.Verdict.Decision == DecisionDeny && r.ResolvedBy != "rejection"
}

// RecordSink receives every record. Write must not block the decision: an
// implementation that writes somewhere slow buffers and drops (and counts)
// rather than waiting. A panicking sink is contained by the emitter.
type RecordSink interface {
	Write(r *Record)
}

// RecordSinkFunc adapts a function to RecordSink.
type RecordSinkFunc func(r *Record)

// Write calls f.
func (f RecordSinkFunc) Write(r *Record) { f(r) }

// MemorySink keeps the newest records up to a bound and counts the ones it
// pushed out, like the reference SDK's bounded buffer.
type MemorySink struct {
	mu      sync.Mutex
	max     int
	records []*Record
	dropped atomic.Uint64
}

// NewMemorySink keeps at most max records (max <= 0: unbounded).
func NewMemorySink(max int) *MemorySink { return &MemorySink{max: max} }

// Write appends r, dropping the oldest record when full.
func (m *MemorySink) Write(r *Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.max > 0 && len(m.records) >= m.max {
		m.records = m.records[1:]
		m.dropped.Add(1)
	}
	m.records = append(m.records, r)
}

// Records returns a copy of the kept records, oldest first.
func (m *MemorySink) Records() []*Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*Record(nil), m.records...)
}

// Dropped counts records pushed out by the bound.
func (m *MemorySink) Dropped() uint64 { return m.dropped.Load() }

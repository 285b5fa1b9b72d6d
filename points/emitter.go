package points

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// DefaultInterceptorTimeout is the RECOMMENDED per-interceptor timeout (§7).
const DefaultInterceptorTimeout = 5 * time.Second

// Config configures an Emitter. The zero value of each knob is the spec's
// fail-closed default: enforce, sequential/first_deny with on_approval
// stop, 5 s timeouts, no resolver, 5 MiB and depth 128 bounds.
type Config struct {
	Mode        Mode
	Composition Composition
	// Identity computes context identities; nil is the null provider.
	Identity IdentityProvider
	// Bindings in dispatch order; each applies at its At points.
	Bindings []Binding
	// Resolver is the approval seam; nil means liftable denies stand.
	Resolver Resolver
	// Redactor shapes the context an approver sees; nil shows it whole.
	Redactor Redactor
	// InterceptorTimeout applies where a binding sets none; negative disables.
	InterceptorTimeout time.Duration
	// ResolverTimeout bounds one resolver consultation; zero means 5 s,
	// negative means unbounded.
	ResolverTimeout time.Duration
	// MaxContextBytes and MaxDepth bound contexts (§12.3).
	MaxContextBytes int
	MaxDepth        int
	// Sink receives every record; nil keeps none.
	Sink RecordSink
	// Declaration is the host declaration version the emitter was built
	// from; it is copied onto records when set.
	Declaration string
	// HostMembers adds request_id and http_request_id to records: host
	// members beside the spec's, which the record schema (closed,
	// additionalProperties false) does not list, so they are opt-in.
	HostMembers bool
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Observer, when set, is told of every finished emission (metrics).
	Observer Observer
	// Targets, when set, says whether a transformed target can be applied
	// to the action the host mediates (§4.3's write-back). It is asked
	// inside the fold, so a transform the host could not apply is that
	// emission's host_error:transform_invalid, short-circuiting like any
	// transform that fails (§7.4), rather than a permitted record the host
	// then cannot honour.
	Targets TargetChecker
	// Logger, when set, gets a warning for every interceptor call that
	// failed closed (error, panic, timeout, invalid verdict), with the
	// binding, point, reason and the failure's payload-free class, so an
	// operator can find why a policy denies.
	Logger *slog.Logger
}

// TargetChecker checks a transformed target against what the host can
// write back at a point. original is the target the emission's context
// carried, transformed the target after the transform; an error (whose
// text is a payload-free detail for the record) refuses the transform.
type TargetChecker interface {
	CheckTarget(p Point, original, transformed []byte) error
}

// Observer is told about emissions and interceptor calls; it must be cheap.
type Observer interface {
	Emission(r *Record, elapsed time.Duration)
	Interceptor(name string, p Point, v Verdict, elapsed time.Duration)
}

// Emitter runs emissions: it builds and checks the context, dispatches the
// bound interceptors under the configured profile, applies transforms,
// consults the approval seam and writes one record per emission. One
// Emitter serves many sessions and concurrent emissions.
type Emitter struct {
	cfg     Config
	byPoint map[Point][]Binding
	// realClock: cfg.Now is time.Now, so an emission's timestamp reading
	// also starts its latency measurement.
	realClock bool
	// lends says, per point, whether a context may be built in a buffer
	// the caller lends (EmitIn): true when no binding there reads the
	// shared bytes from another goroutine, which could outlive the
	// emission after a timeout.
	lends map[Point]bool
	// observed says, per point, whether a binding there is a
	// DenialObserver.
	observed map[Point]bool
	// workers runs calls that do not run inline (goPool).
	workers *goPool
	// providerName is shared by every record (read-only), not allocated
	// per emission.
	providerName *string
	// verdictBufs recycles firstDeny's verdict buffers (*[]Verdict): a
	// verdict is 152 bytes of pointers, and every emission needs two per
	// binding only until its record is made.
	verdictBufs sync.Pool
	// contexts recycles the *Context of inline calls to sharers
	// (callInner): such a call is over when Intercept returns, and a
	// sharer keeps nothing of its context past that.
	contexts sync.Pool
}

// NewEmitter validates cfg and returns an Emitter.
func NewEmitter(cfg Config) (*Emitter, error) {
	if cfg.Mode == "" {
		cfg.Mode = Enforce
	}
	if cfg.Mode != Enforce && cfg.Mode != EvaluateOnly {
		return nil, &ConfigError{What: "mode must be enforce or evaluate_only"}
	}
	if cfg.Composition.Profile == "" {
		cfg.Composition.Profile = ProfileFirstDeny
	}
	if err := cfg.Composition.Validate(); err != nil {
		return nil, err
	}
	cfg.Composition = cfg.Composition.WithDefaults()
	if cfg.InterceptorTimeout == 0 {
		cfg.InterceptorTimeout = DefaultInterceptorTimeout
	}
	if cfg.ResolverTimeout == 0 {
		cfg.ResolverTimeout = DefaultInterceptorTimeout
	}
	if cfg.MaxContextBytes <= 0 {
		cfg.MaxContextBytes = DefaultMaxContextBytes
	}
	if cfg.MaxDepth <= 0 {
		cfg.MaxDepth = DefaultMaxDepth
	}
	realClock := cfg.Now == nil
	if realClock {
		cfg.Now = time.Now
	}
	e := &Emitter{cfg: cfg, realClock: realClock, byPoint: make(map[Point][]Binding), workers: newGoPool(max(4, 2*runtime.GOMAXPROCS(0)), 10*time.Second)}
	if cfg.Identity != nil {
		n := cfg.Identity.Name()
		if _, builtin := cfg.Identity.(jcsSHA256); !builtin {
			// §10.1: a host-defined name must match the pattern and
			// may not claim the jcs prefix.
			if err := CheckProviderName(n); err != nil {
				return nil, &ConfigError{What: fmt.Sprintf("identity provider %q: %v", n, err)}
			}
		}
		e.providerName = &n
	}
	for i, b := range cfg.Bindings {
		if b.Interceptor == nil {
			return nil, &ConfigError{What: fmt.Sprintf("binding %d (%s) has no interceptor", i, b.Name)}
		}
		for _, p := range b.At {
			if !p.Valid() {
				return nil, &ConfigError{What: fmt.Sprintf("binding %s: unknown point %q", b.Name, p)}
			}
		}
	}
	e.lends = make(map[Point]bool)
	e.observed = make(map[Point]bool)
	for _, p := range AllPoints() {
		lends := true
		for _, b := range cfg.Bindings {
			if b.boundAt(p) {
				e.byPoint[p] = append(e.byPoint[p], b)
				lends = lends && !sharedOffThread(b.Interceptor)
				if _, ok := b.Interceptor.(DenialObserver); ok {
					e.observed[p] = true
				}
			}
		}
		e.lends[p] = lends
	}
	return e, nil
}

// sharesContext reports whether i reads the shared context bytes rather
// than a private copy (ContextSharer).
func sharesContext(i Interceptor) bool {
	cs, ok := i.(ContextSharer)
	return ok && cs.SharesContext()
}

// runsInline reports whether i runs on the emitting goroutine (InlineRunner).
func runsInline(i Interceptor) bool {
	ir, ok := i.(InlineRunner)
	return ok && ir.RunsInline()
}

// honorsDeadline reports whether an inline call to i gets the binding's
// timeout as its context's deadline (DeadlineHonorer).
func honorsDeadline(i Interceptor) bool {
	dh, ok := i.(DeadlineHonorer)
	return ok && dh.HonorsDeadline()
}

// sharedOffThread reports whether the emitter would hand i the shared
// context bytes on a goroutine of its own (callInner): such a call may
// still be reading them after a timeout ended the emission.
func sharedOffThread(i Interceptor) bool { return sharesContext(i) && !runsInline(i) }

// Mode returns the enforcement mode.
func (e *Emitter) Mode() Mode { return e.cfg.Mode }

// Composition returns the resolved composition.
func (e *Emitter) Composition() Composition { return e.cfg.Composition }

// Bound returns the bindings that apply at p, in dispatch order.
func (e *Emitter) Bound(p Point) []Binding { return e.byPoint[p] }

// IdentityProviderName returns the provider name records carry, or nil.
func (e *Emitter) IdentityProviderName() *string {
	if e.cfg.Identity == nil {
		return nil
	}
	n := e.cfg.Identity.Name()
	return &n
}

// Result is the outcome of one emission.
type Result struct {
	// Record is the payload-free record, already handed to the sink.
	Record *Record
	// Verdict is the full combined verdict (with message and transform value).
	Verdict Verdict
	// Context is the enforced context: after folded transforms in enforce
	// mode, the input context otherwise. Nil when it could not be built.
	Context []byte
	// Proceed says whether the guarded action may go on.
	Proceed bool
	// Transformed is true when the enforced target differs from the input.
	Transformed bool
}

// Target returns the enforced target, for writing back into the action.
func (r Result) Target() gjson.Result { return gjson.GetBytes(r.Context, "target") }

// HostError reports whether the combined verdict is a host_error:* deny.
func (r Result) HostError() bool {
	return r.Verdict.Decision == DecisionDeny && IsHostError(r.Verdict.Reason)
}

// outcome is the internal result of a profile dispatch.
type outcome struct {
	combined  Verdict
	decidedBy *int
	verdicts  []Verdict
	// buf, when set, is the pooled buffer verdicts lives in, returned
	// once the record is made (release).
	buf           *[]Verdict
	foldTruncated optBool
	resolvedBy    string
	transformed   bool
}

// optBool is a record's optional flag (fold_truncated) without a pointer of
// its own: the record points into its own block (newRecord).
type optBool struct{ set, v bool }

func some(b bool) optBool { return optBool{set: true, v: b} }

func idx(i int) *int       { return &i }
func str(s string) *string { return &s }

func synthesized(reason Reason, msg string) outcome {
	return outcome{combined: hostError(reason, msg)}
}

// Emit runs one emission of ev in session s.
func (e *Emitter) Emit(ctx context.Context, s *Session, ev Event) Result {
	return e.EmitIn(ctx, s, ev, nil)
}

// EmitIn is Emit with the context built in a buffer the caller lends:
// lend(n) returns an empty slice with room for n bytes. The caller may
// reuse that memory once it is done with the Result, whose Context may
// alias it; nothing else keeps it: interceptors that share the bytes
// (ContextSharer) run to completion within the emission and keep nothing
// of them, their verdicts are copied out, and the approval seam gets a
// copy of the context. Where a binding would read the shared bytes
// on another goroutine, which a timeout can leave running, lend is not
// called and the context is allocated as by Emit. A nil lend is Emit.
func (e *Emitter) EmitIn(ctx context.Context, s *Session, ev Event, lend func(n int) []byte) Result {
	seq := s.nextSequence()
	now := e.cfg.Now()
	start := now // one clock read where the context's clock is the real one
	if !e.realClock {
		start = time.Now()
	}
	if !e.lends[ev.Point] {
		lend = nil
	}
	ev = withTrace(ctx, ev, s)
	raw, err := s.build(ev, seq, now, lend)
	if err != nil {
		return e.hostFailure(ctx, ev.Point, s.ID(), seq, now, ReasonContextInvalid, "context could not be built", start)
	}
	facts := &envelopeFacts{sessionID: s.ID(), sequence: seq, trace: traceOf(ev, s), built: s, ev: ev, now: now}
	// The timestamp is kept in facts and copied into the record's block
	// (emitRaw), not allocated as a string of its own.
	if ts := appendTimestamp(facts.tsBuf[:0], now); len(ts) > len(facts.tsBuf) {
		facts.timestamp = string(ts) // a year beyond 9999 (AppendFormat)
	} else {
		facts.tsLen = len(ts)
	}
	return e.emitRaw(ctx, ev.Point, raw, start, facts)
}

// EmitContext runs one emission over a complete wire context built by the
// caller (for hosts that build contexts themselves, and for tests).
func (e *Emitter) EmitContext(ctx context.Context, raw []byte) Result {
	p, _ := ParsePoint(gjson.GetBytes(raw, "interception_point").Str)
	return e.emitRaw(ctx, p, raw, time.Now(), nil)
}

// RecordHostFailure writes the record of an emission whose context the host
// could not construct at all (§10.3 host projection failure): a deny
// host_error:context_invalid with null identities. detail must be
// payload-free (a type name or a path).
func (e *Emitter) RecordHostFailure(ctx context.Context, p Point, s *Session, detail string) Result {
	seq := int64(-1)
	sid := ""
	if s != nil {
		seq, sid = s.nextSequence(), s.ID()
	}
	return e.hostFailure(ctx, p, sid, seq, e.cfg.Now(), ReasonContextInvalid, detail, time.Now())
}

func (e *Emitter) hostFailure(ctx context.Context, p Point, sid string, seq int64, now time.Time, reason Reason, detail string, start time.Time) Result {
	v := hostError(reason, detail)
	rec := &Record{
		InterceptionPoint: p, Mode: e.cfg.Mode, Verdict: Project(v),
		IdentityProvider: e.providerName, SessionID: sid, Sequence: seq,
		Timestamp: now.UTC().Format(TimestampLayout), Composition: e.cfg.Composition,
		Declaration: e.cfg.Declaration, InterceptorsRegistered: len(e.byPoint[p]),
		Verdicts: e.noVerdicts(),
	}
	rec.Trace = traceRecord(ctx)
	if e.cfg.HostMembers {
		rec.HTTPRequestID = RequestIDFrom(ctx)
	}
	e.deliver(rec, start)
	return Result{Record: rec, Verdict: v, Proceed: e.cfg.Mode == EvaluateOnly}
}

// envelopeFacts are the record's envelope members when the emitter built
// the context itself, so the record needs no scan of a large context.
type envelopeFacts struct {
	sessionID string
	sequence  int64
	timestamp string
	// tsBuf[:tsLen], when tsLen > 0, is the timestamp instead.
	tsBuf [len(TimestampLayout)]byte
	tsLen int
	trace gjson.Result
	// built is set when s.build made the context from ev at now, so the
	// envelope check can skip what build guarantees (validateBuilt).
	built *Session
	ev    Event
	now   time.Time
}

// traceOf finds the trace member among an event's or session's members.
func traceOf(ev Event, s *Session) gjson.Result {
	for _, ms := range [][]Member{ev.Members, s.extra} {
		for _, m := range ms {
			if m.Key == "trace" {
				return gjson.ParseBytes(m.Value)
			}
		}
	}
	return gjson.Result{}
}

func (e *Emitter) emitRaw(ctx context.Context, p Point, raw []byte, start time.Time, facts *envelopeFacts) Result {
	bindings := e.byPoint[p]
	var (
		out      outcome
		inputID  []byte // with hasInput: the input identity, in idBuf
		idBuf    [maxIdentityLen]byte
		hasInput bool
		rejected bool
		built    Point // the point, when the emitter built raw and validateBuilt accepted it
	)
	switch {
	case len(raw) > e.cfg.MaxContextBytes:
		out, rejected = synthesized(ReasonContextInvalid, fmt.Sprintf("context exceeds %d bytes", e.cfg.MaxContextBytes)), true
	default:
		// The jcs-sha256 provider validates the whole context by the same
		// rules while it canonicalizes, so a second pass would only repeat
		// it; any other provider (or none) gets the explicit check.
		if !e.identityChecksEncoding() {
			if err := CheckEncoding(raw, e.cfg.MaxDepth); err != nil {
				out, rejected = synthesized(ReasonContextInvalid, err.Error()), true
			}
		}
		if !rejected {
			var err error
			if facts != nil && facts.built != nil {
				if err = validateBuilt(facts.built, facts.ev, facts.now); err == nil {
					built = p
				}
			} else {
				err = validateEnvelope(raw)
			}
			if err != nil {
				out, rejected = synthesized(ReasonContextInvalid, err.Error()), true
			}
		}
	}
	if !rejected && e.cfg.Identity != nil {
		id, err := e.inputIdentity(idBuf[:0], raw, built)
		if err != nil {
			out, rejected = synthesized(ReasonContextInvalid, "identity provider rejected the context: "+errorClass(err)), true
		} else {
			inputID, hasInput = id, true
		}
	}
	work := raw
	if !rejected {
		if len(bindings) == 0 {
			// §7: zero interceptors fails closed whatever the profile.
			out = synthesized(ReasonNoInterceptor, "")
		} else {
			work = raw
			switch e.cfg.Composition.Profile {
			case ProfileFirstDeny:
				out = e.firstDeny(ctx, p, bindings, raw, &work)
			case ProfileRunAll:
				out = e.runAll(ctx, p, bindings, raw, &work)
			default:
				out = e.parallel(ctx, p, bindings, raw, &work)
			}
		}
	}

	// Enforced identity and the post-fold domain check (§10.3).
	var (
		enforcedID  string // with hasEnforced: the enforced identity
		hasEnforced bool
	)
	changed := !rejected && e.cfg.Mode == Enforce && !bytes.Equal(work, raw)
	if !rejected {
		if changed {
			var encErr error
			if !e.identityChecksEncoding() {
				encErr = CheckEncoding(work, e.cfg.MaxDepth)
			}
			if err := encErr; err != nil {
				if out.combined.Decision.Permits() {
					out.combined = hostError(ReasonContextInvalid, "post-fold context left the value domain: "+err.Error())
					out.decidedBy = nil
				}
			} else if len(work) > e.cfg.MaxContextBytes {
				if out.combined.Decision.Permits() {
					out.combined = hostError(ReasonContextInvalid, "post-fold context exceeds the size bound")
					out.decidedBy = nil
				}
			} else if err := validateEnvelope(work); err != nil {
				// §4: a folded context is held to the envelope the input
				// was (a transform may not drop a required member or
				// change its type), whatever the identity provider.
				if out.combined.Decision.Permits() {
					out.combined = hostError(ReasonContextInvalid, "post-fold context: "+err.Error())
					out.decidedBy = nil
				}
			} else if e.cfg.Identity != nil {
				if id, err := e.identity(work); err == nil {
					enforcedID, hasEnforced = id, true
				} else if out.combined.Decision.Permits() {
					out.combined = hostError(ReasonContextInvalid, "identity provider rejected the enforced context")
					out.decidedBy = nil
				}
			}
		}
	}

	rec, ext, summaries := newRecord(len(out.verdicts))
	*rec = Record{
		InterceptionPoint: p, Mode: e.cfg.Mode, Verdict: Project(out.combined),
		IdentityProvider: e.providerName, Sequence: -1, DecidedBy: out.decidedBy,
		Composition: e.cfg.Composition, Declaration: e.cfg.Declaration,
		ResolvedBy:             out.resolvedBy,
		InterceptorsRegistered: len(bindings),
	}
	if out.foldTruncated.set {
		ext.trunc = out.foldTruncated.v
		rec.FoldTruncated = &ext.trunc
	}
	if hasInput {
		ext.ids[0] = inBlock(ext.idBuf[:], inputID)
		rec.InputIdentity = &ext.ids[0]
		if !rejected && !changed {
			rec.EnforcedIdentity = rec.InputIdentity // the input is what is enforced
		}
	}
	if hasEnforced {
		ext.ids[1] = enforcedID
		rec.EnforcedIdentity = &ext.ids[1]
	}
	if e.cfg.HostMembers {
		rec.HTTPRequestID = RequestIDFrom(ctx)
		if facts != nil {
			rec.RequestID = modelCallID(facts.ev)
		} else if p == PreModelCall || p == PostModelCall {
			rec.RequestID = gjson.GetBytes(raw, "request_id").Str
		}
	}
	if facts == nil {
		facts = &envelopeFacts{sessionID: gjson.GetBytes(raw, "session.id").Str, sequence: -1,
			timestamp: gjson.GetBytes(raw, "timestamp").Str, trace: gjson.GetBytes(raw, "trace")}
		if sq := gjson.GetBytes(raw, "sequence"); sq.Type == gjson.Number {
			facts.sequence = sq.Int()
		}
	}
	rec.SessionID, rec.Sequence, rec.Timestamp = facts.sessionID, facts.sequence, facts.timestamp
	if facts.tsLen > 0 {
		rec.Timestamp = inBlock(ext.tsBuf[:], facts.tsBuf[:facts.tsLen])
	}
	if tr := facts.trace; tr.IsObject() {
		t := Trace{TraceID: tr.Get("trace_id").Str, SpanID: tr.Get("span_id").Str}
		if t.TraceID != "" || t.SpanID != "" {
			rec.Trace = &t
		}
	}
	rec.Verdicts = e.noVerdicts()
	if len(out.verdicts) > 0 {
		rec.Verdicts = summaries
		for i, v := range out.verdicts {
			rec.Verdicts[i] = VerdictSummary{Index: i, Decision: v.Decision, Reason: v.Reason, Name: bindings[i].Name}
		}
	}
	if e.observed[p] && len(out.verdicts) > 0 && !rec.Proceeds() {
		e.tellDenied(p, bindings, raw, out.verdicts)
	}
	e.release(&out)
	e.deliver(rec, start)

	res := Result{Record: rec, Verdict: out.combined}
	if rejected {
		res.Proceed = e.cfg.Mode == EvaluateOnly
		if res.Proceed {
			res.Context = raw
		}
		return res
	}
	res.Proceed = rec.Proceeds()
	if e.cfg.Mode == Enforce {
		res.Context = work
		res.Transformed = changed
	} else {
		res.Context = raw
	}
	return res
}

// recordWith1, 2 and 4 are a record allocated together with the
// identities and flag it points at and the summaries of up to 1, 2 or 4 verdicts:
// one allocation per emission instead of three, for the binding counts
// real policy sets have at a point, each sized so that a record takes
// little more memory than its three allocations did.
type (
	recordWith1 struct {
		rec      Record
		ext      recordExtras
		verdicts [1]VerdictSummary
	}
	recordWith2 struct {
		rec      Record
		ext      recordExtras
		verdicts [2]VerdictSummary
	}
	recordWith4 struct {
		rec      Record
		ext      recordExtras
		verdicts [4]VerdictSummary
	}
	recordWithIDs struct {
		rec Record
		ext recordExtras
	}
)

// recordExtras is what a record points at: its input and enforced
// identities and its fold_truncated flag. idBuf and tsBuf hold the bytes
// of the input identity and of the timestamp (inBlock), so that neither is
// an allocation of its own; nothing writes them again once the record is
// made.
type recordExtras struct {
	ids   [2]string
	trunc bool
	idBuf [maxIdentityLen]byte
	tsBuf [len(TimestampLayout)]byte
}

// inBlock returns b as a string whose bytes are copied into buf, part of a
// record's block, when they fit; otherwise as a string of its own.
func inBlock(buf, b []byte) string {
	if len(b) == 0 || len(b) > len(buf) {
		return string(b)
	}
	n := copy(buf, b)
	return unsafe.String(&buf[0], n)
}

// newRecord returns a zero record, storage for what it points at (its
// identities and flag), and a slice of n verdict summaries, allocated at once where
// n is small. The summaries are capped at n, so an append to the record's
// verdicts copies rather than writes into the rest of the block.
func newRecord(n int) (*Record, *recordExtras, []VerdictSummary) {
	switch {
	case n <= 1:
		b := new(recordWith1)
		return &b.rec, &b.ext, b.verdicts[:n:n]
	case n <= 2:
		b := new(recordWith2)
		return &b.rec, &b.ext, b.verdicts[:n:n]
	case n <= 4:
		b := new(recordWith4)
		return &b.rec, &b.ext, b.verdicts[:n:n]
	}
	b := new(recordWithIDs)
	return &b.rec, &b.ext, make([]VerdictSummary, n)
}

// inputIdentity is identity appended to dst. The providers of this package
// are called directly (so dst stays on the caller's stack) and told the
// point of a context the emitter built and validateBuilt accepted (built,
// "" otherwise), whose envelope they then need not check again.
func (e *Emitter) inputIdentity(dst, raw []byte, built Point) (id []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			id, err = nil, fmt.Errorf("identity provider panicked")
		}
	}()
	switch p := e.cfg.Identity.(type) {
	case jcsSHA256:
		return p.appendIdentity(dst, raw, built)
	case *hmacSHA256:
		return p.appendIdentity(dst, raw, built)
	}
	s, err := e.cfg.Identity.Identity(raw)
	return append(dst, s...), err
}

// identity runs the provider with panic containment.
func (e *Emitter) identity(raw []byte) (id string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("identity provider panicked")
		}
	}()
	return e.cfg.Identity.Identity(raw)
}

func errorClass(err error) string {
	var de *DomainError
	if errors.As(err, &de) {
		return de.Error()
	}
	return fmt.Sprintf("%T", err)
}

// tellDenied tells the invoked bindings that observe denials and permitted
// the action that it does not proceed. A panic there is the interceptor's
// own and changes nothing: the decision is made.
func (e *Emitter) tellDenied(p Point, bindings []Binding, raw []byte, verdicts []Verdict) {
	c := &Context{raw: raw, point: p}
	for i, v := range verdicts {
		if o, ok := bindings[i].Interceptor.(DenialObserver); ok && v.Decision.Permits() {
			func() {
				defer func() { _ = recover() }()
				o.Denied(c, v)
			}()
		}
	}
}

// noVerdicts is a record's verdicts when no interceptor gave one: the
// record schema requires the member under the multi-verdict profiles
// (sequential/run_all, parallel/*), so there it is empty, not absent.
func (e *Emitter) noVerdicts() []VerdictSummary {
	if e.cfg.Composition.Profile == ProfileFirstDeny {
		return nil
	}
	return []VerdictSummary{}
}

func (e *Emitter) deliver(r *Record, start time.Time) {
	if e.cfg.Sink != nil {
		func() {
			defer func() { _ = recover() }() // audit delivery must not take down enforcement
			e.cfg.Sink.Write(r)
		}()
	}
	if e.cfg.Observer != nil {
		e.cfg.Observer.Emission(r, time.Since(start))
	}
}

// call invokes one binding on its own copy of the context, containing
// panics and enforcing the timeout (§6.3, §7).
func (e *Emitter) call(ctx context.Context, p Point, b Binding, raw []byte) Verdict {
	start := time.Now()
	var cause error // an interceptor's own error, for the log line only
	v, elapsed := e.callInner(ctx, p, b, raw, start, &cause)
	if e.cfg.Observer != nil {
		e.cfg.Observer.Interceptor(b.Name, p, v, elapsed)
	}
	if e.cfg.Logger != nil && IsHostError(v.Reason) {
		if ctx.Err() != nil {
			// The caller went away: the call was cut, not the policy.
			e.cfg.Logger.Debug("interceptor call cancelled", "binding", b.Name, "point", string(p),
				"request_id", RequestIDFrom(ctx))
		} else {
			attrs := []any{"session", gjson.GetBytes(raw, "session.id").Str, "binding", b.Name, "point", string(p), "reason", v.Reason, "detail", v.Message, "request_id", RequestIDFrom(ctx)}
			var fc FailureCauser
			if errors.As(cause, &fc) {
				// What the class leaves out (a refused connection, a TLS
				// or DNS failure); other errors may quote the context.
				attrs = append(attrs, "error", fc.FailureCause())
			}
			e.cfg.Logger.Warn("interceptor failed closed", attrs...)
		}
	}
	return v
}

// callInner returns the verdict and the time since start, so that a call
// reads the clock twice, not four times (metrics and the inline timeout
// share the reading).
func (e *Emitter) callInner(ctx context.Context, p Point, b Binding, raw []byte, start time.Time, cause *error) (Verdict, time.Duration) {
	timeout := b.Timeout
	if timeout == 0 {
		timeout = e.cfg.InterceptorTimeout
	}
	shares, inline := sharesContext(b.Interceptor), runsInline(b.Interceptor)
	if shares && inline {
		c := e.getContext(raw, p)
		v, elapsed := e.callInline(ctx, b, c, timeout, start, cause)
		e.putContext(c)
		return v, elapsed
	}
	c := &Context{raw: raw, point: p}
	if !shares {
		c.raw = bytes.Clone(raw)
	}
	if inline {
		return e.callInline(ctx, b, c, timeout, start, cause)
	}
	v := e.callGoroutine(ctx, b, c, timeout, cause)
	return v, time.Since(start)
}

// getContext returns a pooled Context over the shared bytes raw, for an
// inline call to a sharer.
func (e *Emitter) getContext(raw []byte, p Point) *Context {
	c, _ := e.contexts.Get().(*Context)
	if c == nil {
		c = new(Context)
	}
	c.raw, c.point = raw, p
	return c
}

// putContext returns c once its call is over. It is cleared first, its
// index too: the pool must not pin the bytes of a context (a lent buffer,
// megabytes of messages) past its emission. callInline recovers a
// panicking Intercept, so c is not put back while the call runs.
func (e *Emitter) putContext(c *Context) {
	*c = Context{}
	e.contexts.Put(c)
}

// callGoroutine runs an interceptor on a pooled goroutine under its
// timeout, so that a blocked call cannot hold the emission past it.
func (e *Emitter) callGoroutine(ctx context.Context, b Binding, c *Context, timeout time.Duration, cause *error) Verdict {
	type answer struct {
		v   Verdict
		err error
		pan bool
	}
	var (
		cctx   context.Context
		cancel context.CancelFunc
	)
	if timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, timeout)
	} else {
		cctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	done := make(chan answer, 1)
	e.workers.run(func() {
		defer func() {
			if r := recover(); r != nil {
				done <- answer{pan: true}
			}
		}()
		v, err := b.Interceptor.Intercept(cctx, c)
		done <- answer{v: v, err: err}
	})
	select {
	case a := <-done:
		if a.pan {
			return hostError(ReasonInterceptorFailed, "interceptor panicked")
		}
		if a.err != nil && errors.Is(a.err, context.DeadlineExceeded) {
			if ctx.Err() != nil {
				// The caller's deadline (client gone, shutdown).
				return hostError(ReasonInterceptorFailed, "cancelled")
			}
			// Ours, or a deadline of the interceptor's own (a webhook's
			// timeout): either way it took too long (§6.3).
			return hostError(ReasonInterceptorTimeout, "")
		}
		return e.mapAnswer(a.v, a.err, cause)
	case <-cctx.Done():
		if ctx.Err() != nil {
			// The caller went away (client disconnect, shutdown).
			return hostError(ReasonInterceptorFailed, "cancelled")
		}
		return hostError(ReasonInterceptorTimeout, "")
	}
}

// callInline runs a bounded, non-blocking interceptor on this goroutine
// (InlineRunner), with the same failure mapping as a goroutine call.
func (e *Emitter) callInline(ctx context.Context, b Binding, c *Context, timeout time.Duration, start time.Time, cause *error) (v Verdict, elapsed time.Duration) {
	if ctx.Err() != nil {
		return hostError(ReasonInterceptorFailed, "cancelled"), time.Since(start)
	}
	defer func() {
		elapsed = time.Since(start)
		if r := recover(); r != nil {
			v = hostError(ReasonInterceptorFailed, "interceptor panicked")
			return
		}
		if timeout > 0 && elapsed > timeout {
			v = hostError(ReasonInterceptorTimeout, "")
			if ctx.Err() != nil { // the caller went away meanwhile
				v = hostError(ReasonInterceptorFailed, "cancelled")
			}
		}
	}()
	ictx := ctx
	if timeout > 0 && honorsDeadline(b.Interceptor) {
		var cancel context.CancelFunc
		ictx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	got, err := b.Interceptor.Intercept(ictx, c)
	if err != nil && ctx.Err() != nil {
		// The caller went away during the call (client gone, shutdown):
		// cut, not failed, as on a goroutine (callGoroutine).
		return hostError(ReasonInterceptorFailed, "cancelled"), 0
	}
	if sharesContext(b.Interceptor) {
		// A sharer's verdict may hold views of the shared bytes (a reason
		// read from the context), and the bytes may be lent (EmitIn):
		// records, metrics labels and the approval seam keep the verdict
		// past the emission, so it gets memory of its own.
		got = ownVerdict(got)
	}
	return e.mapAnswer(got, err, cause), 0 // elapsed is set by the deferred func
}

// mapAnswer maps an interceptor's return to its verdict or the substituted
// host error (§6.3).
func (e *Emitter) mapAnswer(v Verdict, err error, cause *error) Verdict {
	if err != nil {
		*cause = err
		var ve *VerdictError
		if errors.As(err, &ve) {
			return hostError(ve.Reason, "")
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return hostError(ReasonInterceptorTimeout, "")
		}
		return hostError(ReasonInterceptorFailed, failureMessage(err))
	}
	if err := v.Validate(); err != nil {
		var ve *VerdictError
		if errors.As(err, &ve) {
			return hostError(ve.Reason, "")
		}
		return hostError(ReasonVerdictInvalid, "")
	}
	return v
}

// failureMessage describes an interceptor's error without payload: its
// FailureClass when it has one, its type otherwise.
func failureMessage(err error) string {
	var fc FailureClasser
	if errors.As(err, &fc) {
		return fc.FailureClass()
	}
	return fmt.Sprintf("interceptor returned %T", err)
}

func isSynthesized(v Verdict) bool { return IsHostError(v.Reason) }

func severity(v Verdict) int {
	switch {
	case v.Decision == DecisionDeny && !v.Liftable():
		return 3
	case v.Decision == DecisionDeny:
		return 2
	case v.Decision == DecisionTransform:
		return 1
	}
	return 0
}

// withUnions adds the §7.3 unions: warnings over every verdict, labels over
// permit verdicts.
func withUnions(combined Verdict, pool []Verdict) Verdict {
	var ws []Warning
	for _, v := range pool {
		for _, w := range v.Warnings {
			dup := false
			for _, x := range ws {
				if x == w {
					dup = true
					break
				}
			}
			if !dup {
				ws = append(ws, w)
			}
		}
	}
	if len(ws) > 0 {
		combined.Warnings = ws
	}
	if !combined.Decision.Permits() {
		// §5.4/§7.3: no labels persist for an action that did not proceed.
		combined.ResultLabels = nil
	}
	if combined.Decision.Permits() {
		var ls []string
		for _, v := range pool {
			if !v.Decision.Permits() {
				continue
			}
			for _, l := range v.ResultLabels {
				dup := false
				for _, x := range ls {
					if x == l {
						dup = true
						break
					}
				}
				if !dup {
					ls = append(ls, l)
				}
			}
		}
		if len(ls) > 0 {
			combined.ResultLabels = ls
		}
	}
	return combined
}

// fold applies (enforce) or validates (evaluate_only) one transform.
// On failure it returns the substituted host-error deny.
func (e *Emitter) fold(p Point, raw []byte, work *[]byte, v Verdict) (Verdict, bool) {
	if v.Transform == nil {
		return hostError(ReasonTransformInvalid, ""), false
	}
	// The messages are the host's own: the path is the interceptor's text
	// (possibly built from the target, and unbounded), and the combined
	// verdict's message reaches the model in a control error. The record
	// keeps the path in its verdicts summary.
	if !p.Transformable() {
		return hostError(ReasonTransformTargetForbidden, "no transform is permitted at this point"), false
	}
	target := gjson.GetBytes(*work, "target")
	applied, err := ApplyTransform([]byte(target.Raw), v.Transform.Path, v.Transform.Value)
	if err != nil {
		reason, msg := ReasonTransformInvalid, "transform path does not resolve in the target or is outside the §5.2 grammar"
		var te *TransformError
		if errors.As(err, &te) {
			reason = te.Reason
		}
		if reason == ReasonTransformTargetForbidden {
			msg = "transform path is not rooted at $target"
		}
		return hostError(reason, msg), false
	}
	if e.cfg.Targets != nil {
		// Checked in evaluate_only too: the record says whether the
		// transform would have applied.
		original := []byte(gjson.GetBytes(raw, "target").Raw)
		if err := e.cfg.Targets.CheckTarget(p, original, applied); err != nil {
			return hostError(ReasonTransformInvalid, err.Error()), false
		}
	}
	if e.cfg.Mode != Enforce {
		return v, true
	}
	next, err := writeBack(*work, p, applied)
	if err != nil {
		return hostError(ReasonTransformInvalid, "transformed target could not be written back"), false
	}
	*work = next
	return v, true
}

// writeBack stores a new target and mirrors it into the aliased member.
func writeBack(raw []byte, p Point, target []byte) ([]byte, error) {
	out, err := sjson.SetRawBytes(raw, "target", target)
	if err != nil {
		return nil, err
	}
	return sjson.SetRawBytesOptions(out, p.Field(), target, &sjson.Options{ReplaceInPlace: false})
}

// verdictBuf returns a buffer of at least n verdicts, pooled.
func (e *Emitter) verdictBuf(n int) *[]Verdict {
	if p, _ := e.verdictBufs.Get().(*[]Verdict); p != nil {
		if cap(*p) >= n {
			return p
		}
	}
	b := make([]Verdict, 0, max(n, 8))
	return &b
}

// release returns out's pooled verdict buffer, cleared so that the pool
// keeps no interceptor's strings or evidence alive. Nothing may use
// out.verdicts afterwards; out.combined is a copy and stays valid.
func (e *Emitter) release(out *outcome) {
	if out.buf == nil {
		return
	}
	b := (*out.buf)[:cap(*out.buf)]
	clear(b)
	*out.buf = b[:0]
	e.verdictBufs.Put(out.buf)
	out.buf, out.verdicts = nil, nil
}

func (e *Emitter) firstDeny(ctx context.Context, p Point, bs []Binding, raw []byte, work *[]byte) (o outcome) {
	n := len(bs)
	resume := e.cfg.Composition.OnApproval == OnApprovalResume
	// One buffer for both: per holds a verdict per binding, pool those
	// plus any approval's (which grows it past its share, rarely).
	vb := e.verdictBuf(2 * n)
	defer func() { o.buf = vb }()
	buf := (*vb)[:0]
	per, pool := buf[:0:n], buf[n:n]
	var last *Verdict
	var lastIdx int
	resolvedBy, consultedIdx := "", -1
	trunc := func(i int) optBool { return some(i+1 < n) }
	for i, b := range bs {
		v := e.call(ctx, p, b, *work)
		per = append(per, v)
		pool = append(pool, v)
		if isSynthesized(v) {
			return outcome{combined: withUnions(v, pool), decidedBy: idx(i), verdicts: per, foldTruncated: trunc(i), resolvedBy: resolvedBy}
		}
		switch v.Decision {
		case DecisionDeny:
			sub, permitted, consulted := e.consult(ctx, p, *work, v)
			if !consulted {
				// resolvedBy: an earlier approval (resume) was consulted.
				return outcome{combined: withUnions(v, pool), decidedBy: idx(i), verdicts: per, foldTruncated: trunc(i), resolvedBy: resolvedBy}
			}
			if !permitted {
				// §7.6: decided_by stays the consulted deny's index, also
				// when the seam failed (§10.3 keeps null for verdicts no
				// interceptor returned; this deny was returned).
				return outcome{combined: withUnions(sub, pool), decidedBy: idx(i), verdicts: per, foldTruncated: trunc(i), resolvedBy: "rejection"}
			}
			resolvedBy, consultedIdx = "approval", i
			if sub.Decision == DecisionTransform {
				folded, ok := e.fold(p, raw, work, sub)
				if !ok {
					// §7.3: the warnings of every verdict returned, the
					// resolution's included, stay on the record.
					return outcome{combined: withUnions(folded, append(pool, sub)), verdicts: per, foldTruncated: trunc(i), resolvedBy: resolvedBy}
				}
				sub = folded
			}
			pool = append(pool, sub)
			if !resume {
				return outcome{combined: withUnions(sub, pool), decidedBy: idx(i), verdicts: per, foldTruncated: trunc(i), resolvedBy: resolvedBy}
			}
			if sub.Decision == DecisionTransform {
				s := sub
				last, lastIdx = &s, i
			}
		case DecisionTransform:
			folded, ok := e.fold(p, raw, work, v)
			if !ok {
				return outcome{combined: withUnions(folded, pool), verdicts: per, foldTruncated: trunc(i), resolvedBy: resolvedBy}
			}
			last, lastIdx = &folded, i
		}
	}
	o = outcome{combined: Allow(), verdicts: per, foldTruncated: some(false), resolvedBy: resolvedBy}
	if last != nil {
		o.combined, o.decidedBy = *last, idx(lastIdx)
	} else if consultedIdx >= 0 {
		// §7.6: an approval substituted; decided_by stays the index of
		// the (last) consulted deny, not the null of a pure allow.
		o.decidedBy = idx(consultedIdx)
	}
	o.combined = withUnions(o.combined, pool)
	return o
}

func (e *Emitter) runAll(ctx context.Context, p Point, bs []Binding, raw []byte, work *[]byte) outcome {
	all := make([]Verdict, 0, len(bs))
	for i, b := range bs {
		v := e.call(ctx, p, b, *work)
		if v.Decision == DecisionTransform {
			folded, ok := e.fold(p, raw, work, v)
			if !ok {
				// §7.4: a transform that fails to apply becomes a deny and
				// short-circuits, and the record says when it left bindings
				// uninvoked; §7.3: the warnings returned so far, the failed
				// transform's included, stay on it. The combined verdict is
				// still the severity-max aggregate: a plain deny returned
				// earlier ties with the failure and, at a lower index, wins.
				pool := append(all[:i:i], v)
				for j, u := range all {
					if u.Decision == DecisionDeny && u.Approval == nil {
						return outcome{combined: withUnions(u, pool), decidedBy: idx(j), verdicts: append(all, folded), foldTruncated: some(i+1 < len(bs))}
					}
				}
				return outcome{combined: withUnions(folded, pool), verdicts: append(all, folded), foldTruncated: some(i+1 < len(bs))}
			}
			all = append(all, folded)
			continue
		}
		all = append(all, v)
	}
	// §10.3: fold_truncated is defined for both sequential profiles; here
	// every binding ran.
	o := e.aggregate(ctx, p, all, true, raw, work)
	o.foldTruncated = some(false)
	return o
}

func (e *Emitter) parallel(ctx context.Context, p Point, bs []Binding, raw []byte, work *[]byte) outcome {
	snapshot := *work
	all := make([]Verdict, 0, len(bs))
	for _, b := range bs {
		all = append(all, e.call(ctx, p, b, snapshot))
	}
	if e.cfg.Composition.Profile == ProfileUnanimous {
		unanimous := true
		for _, v := range all {
			if v.Decision != DecisionAllow {
				unanimous = false
				break
			}
		}
		if unanimous {
			return outcome{combined: withUnions(Allow(), all), verdicts: all}
		}
		combined, rb := e.synthesize(ctx, p, raw, work, ReasonCompositionDisagreement, "non-unanimous outcome under parallel/unanimous", e.cfg.Composition.OnDisagreement, all)
		return outcome{combined: combined, verdicts: all, resolvedBy: rb}
	}
	return e.aggregate(ctx, p, all, false, raw, work)
}

// aggregate is the severity-max aggregation shared by run_all and strictest.
func (e *Emitter) aggregate(ctx context.Context, p Point, all []Verdict, sequential bool, raw []byte, work *[]byte) outcome {
	max := 0
	for _, v := range all {
		if s := severity(v); s > max {
			max = s
		}
	}
	var top []int
	for i, v := range all {
		if severity(v) == max {
			top = append(top, i)
		}
	}
	if max == 1 && len(top) >= 2 && !sequential {
		combined, rb := e.synthesize(ctx, p, raw, work, ReasonTransformConflict, "conflicting transforms", e.cfg.Composition.OnTransformConflict, all)
		return outcome{combined: combined, verdicts: all, resolvedBy: rb}
	}
	w := top[0]
	if max == 1 && sequential {
		w = top[len(top)-1]
	}
	winner := all[w]
	switch winner.Decision {
	case DecisionDeny:
		// §7.4 run_all: consult only when every deny is liftable, which a
		// liftable winner implies.
		sub, permitted, consulted := e.consult(ctx, p, *work, winner)
		if !consulted {
			return outcome{combined: withUnions(winner, all), decidedBy: idx(w), verdicts: all}
		}
		if !permitted {
			return outcome{combined: withUnions(sub, all), decidedBy: idx(w), verdicts: all, resolvedBy: "rejection"}
		}
		if sub.Decision == DecisionTransform {
			folded, ok := e.fold(p, raw, work, sub)
			if !ok {
				// §10.3: a transform that failed to apply has no index.
				return outcome{combined: withUnions(folded, append(append([]Verdict(nil), all...), sub)), verdicts: all, resolvedBy: "approval"}
			}
			sub = folded
		}
		return outcome{combined: withUnions(sub, append(append([]Verdict(nil), all...), sub)), decidedBy: idx(w), verdicts: all, resolvedBy: "approval"}
	case DecisionTransform:
		if !sequential {
			folded, ok := e.fold(p, raw, work, winner)
			if !ok {
				return outcome{combined: withUnions(folded, all), verdicts: all}
			}
			winner = folded
		}
		return outcome{combined: withUnions(winner, all), decidedBy: idx(w), verdicts: all}
	}
	return outcome{combined: withUnions(Allow(), all), verdicts: all}
}

// synthesize handles the §7.5 "deny" | "approval" knobs.
func (e *Emitter) synthesize(ctx context.Context, p Point, raw []byte, work *[]byte, reason Reason, detail, policy string, pool []Verdict) (Verdict, string) {
	if policy != SynthApproval {
		return withUnions(hostError(reason, detail), pool), ""
	}
	liftable := hostError(reason, detail)
	liftable.Approval = []byte(`{}`)
	sub, permitted, consulted := e.consult(ctx, p, *work, liftable)
	if !consulted {
		return withUnions(liftable, pool), ""
	}
	if !permitted {
		return withUnions(sub, pool), "rejection"
	}
	if sub.Decision == DecisionTransform {
		folded, ok := e.fold(p, raw, work, sub)
		if !ok {
			return withUnions(folded, append(append([]Verdict(nil), pool...), sub)), "approval"
		}
		sub = folded
	}
	return withUnions(sub, append(append([]Verdict(nil), pool...), sub)), "approval"
}

// resolverGrace bounds the wait for a resolver to return after its context
// ended (see consult); one that ignores its context delays the host error
// by at most this much.
const resolverGrace = 100 * time.Millisecond

// consult runs the approval seam for a liftable deny (§9). It reports
// whether the seam was consulted at all and whether the substitute permits.
func (e *Emitter) consult(ctx context.Context, p Point, work []byte, v Verdict) (Verdict, bool, bool) {
	if !v.Liftable() || e.cfg.Mode != Enforce || p == AgentShutdown || e.cfg.Resolver == nil {
		return Verdict{}, false, false
	}
	// Each failure carries a payload-free message saying which check
	// failed; a resolver's or redactor's own error goes to the log only
	// (it may name a URL or a status, which records do not carry).
	logged := false
	fail := func(r Reason, msg string) (Verdict, bool, bool) {
		if e.cfg.Logger != nil && !logged {
			// A failed consultation fails closed: operators see it here
			// as well as on the record (its message is payload-free).
			e.cfg.Logger.Warn("approval failed closed", "session", gjson.GetBytes(work, "session.id").Str, "point", string(p), "reason", string(r), "detail", msg,
				"deny_reason", v.Reason, "request_id", RequestIDFrom(ctx))
		}
		return hostError(r, msg), false, true
	}
	logErr := func(what string, err error) {
		if e.cfg.Logger == nil {
			return
		}
		logged = true // the line below says it, with the cause
		// An error's text may quote the context unless it says otherwise.
		detail := fmt.Sprintf("%T", err)
		var fc FailureCauser
		if errors.As(err, &fc) {
			detail = fc.FailureCause()
		}
		e.cfg.Logger.Warn(what, "session", gjson.GetBytes(work, "session.id").Str, "point", string(p), "reason", v.Reason, "error", detail, "request_id", RequestIDFrom(ctx))
	}
	cctx, cancel := context.WithCancel(ctx)
	if e.cfg.ResolverTimeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, e.cfg.ResolverTimeout)
	}
	defer cancel()

	presented := bytes.Clone(work)
	if e.cfg.Redactor != nil {
		red, err := safeRedact(cctx, e.cfg.Redactor, presented)
		if err != nil {
			logErr("approval redactor failed", err)
			return fail(ReasonApprovalResolverFailed, "approval redactor failed")
		}
		presented = red
	}
	var ident *string
	if e.cfg.Identity != nil {
		id, err := e.identity(presented)
		if err != nil {
			return fail(ReasonContextInvalid, "the context presented for approval has no identity")
		}
		ident = &id
	}
	req := ApprovalRequest{ContextIdentity: ident, Point: p, Verdict: v, Context: presented}
	type answer struct {
		res ApprovalResolution
		err error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- answer{err: fmt.Errorf("resolver panicked")}
			}
		}()
		res, err := e.cfg.Resolver.Resolve(cctx, req)
		done <- answer{res, err}
	}()
	var res ApprovalResolution
	select {
	case a := <-done:
		if a.err != nil {
			if ctx.Err() != nil {
				return hostError(ReasonApprovalResolverFailed, "cancelled"), false, true
			}
			logErr("approval resolver failed", a.err)
			// A resolver's failure class (timed out, queue full, the
			// webhook's status) is payload-free by contract and tells
			// the failures apart on the record and the answer.
			msg := "approval resolver failed"
			var fc FailureClasser
			switch {
			case cctx.Err() != nil:
				// The emitter's own bound ran out (the resolver saw its
				// context end): said as the branch below says it, whichever
				// of the two select picked.
				msg = "approval resolver timed out"
			case errors.As(a.err, &fc) && fc.FailureClass() != "":
				msg = fc.FailureClass()
			}
			return fail(ReasonApprovalResolverFailed, msg)
		}
		res = a.res
	case <-cctx.Done():
		// The answer is a host error whatever the resolver does now, but a
		// resolver that honours its context returns at once: waiting for it
		// (boundedly) lets it finish its own clean-up first, so the console
		// has dropped the expired approval by the time the client is told.
		cancel()
		grace := time.NewTimer(resolverGrace)
		select {
		case <-done:
		case <-grace.C:
		}
		grace.Stop()
		if ctx.Err() != nil {
			// The caller went away (client disconnect, shutdown), not the
			// resolver: the record and metrics say so.
			return hostError(ReasonApprovalResolverFailed, "cancelled"), false, true
		}
		return fail(ReasonApprovalResolverFailed, "approval resolver timed out")
	}
	// §9 normative validation order.
	if !sameIdentity(res.ContextIdentity, ident) {
		return fail(ReasonApprovalIdentityMismatch, "the resolution's context_identity does not echo the request's")
	}
	hasVerdict := len(bytes.TrimSpace(res.Verdict)) > 0 && string(bytes.TrimSpace(res.Verdict)) != "null"
	switch res.Outcome {
	case OutcomeUnresolved:
		if hasVerdict {
			return fail(ReasonApprovalResolverFailed, "an unresolved resolution carries a verdict")
		}
		return fail(ReasonApprovalUnresolved, "")
	case OutcomeApprove, OutcomeReject:
		if !hasVerdict {
			return fail(ReasonApprovalResolverFailed, "the resolution carries no verdict")
		}
	default:
		return fail(ReasonApprovalResolverFailed, "the resolution's outcome is not approve, reject or unresolved")
	}
	rv, err := ParseVerdict(res.Verdict)
	if err != nil {
		// §9 step 3. (A transform path rooted elsewhere passes it and fails
		// where the transform is applied, §5.2, as an interceptor's does.)
		return fail(ReasonVerdictInvalid, "the resolution's verdict is not a valid verdict")
	}
	if res.Outcome == OutcomeApprove {
		if !rv.Decision.Permits() {
			return fail(ReasonVerdictInvalid, "an approve resolution carries a verdict that does not permit")
		}
		return rv, true, true
	}
	if rv.Decision != DecisionDeny {
		return fail(ReasonVerdictInvalid, "a reject resolution carries a verdict that is not a deny")
	}
	return rv, false, true
}

func safeRedact(ctx context.Context, r Redactor, raw []byte) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("redactor panicked")
		}
	}()
	out, err = r.Redact(ctx, raw)
	if err == nil && !ValidJSON(out) {
		err = fmt.Errorf("redactor returned invalid JSON")
	}
	return out, err
}

func sameIdentity(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// EmitHostDeny records a host-synthesized deny for ev without dispatching
// any interceptor: the §12.1 shape for a response the host could not
// assemble (post_model_call with finish_reason "stream_incomplete" and
// host_error:streaming_unsupported). The action never proceeds.
func (e *Emitter) EmitHostDeny(ctx context.Context, s *Session, ev Event, reason Reason, detail string) Result {
	start := time.Now()
	ev = withTrace(ctx, ev, s)
	seq := s.nextSequence()
	now := e.cfg.Now()
	raw, err := s.build(ev, seq, now, nil)
	if err != nil {
		return e.hostFailure(ctx, ev.Point, s.ID(), seq, now, ReasonContextInvalid, "context could not be built", start)
	}
	v := hostError(reason, detail)
	rec := &Record{
		InterceptionPoint: ev.Point, Mode: e.cfg.Mode, Verdict: Project(v),
		IdentityProvider: e.providerName, SessionID: s.ID(), Sequence: seq,
		Timestamp: now.UTC().Format(TimestampLayout), Composition: e.cfg.Composition,
		Declaration: e.cfg.Declaration, InterceptorsRegistered: len(e.byPoint[ev.Point]),
		Verdicts: e.noVerdicts(), hostBlocked: true,
	}
	if tr := traceOf(ev, s); tr.IsObject() {
		// As on Emit: §10.3's trace is absent when the context carried
		// neither member.
		if t := (Trace{TraceID: tr.Get("trace_id").Str, SpanID: tr.Get("span_id").Str}); t.TraceID != "" || t.SpanID != "" {
			rec.Trace = &t
		}
	}
	if e.cfg.HostMembers {
		rec.RequestID, rec.HTTPRequestID = modelCallID(ev), RequestIDFrom(ctx)
	}
	if e.cfg.Identity != nil && ValidateEnvelope(raw) == nil && CheckEncoding(raw, e.cfg.MaxDepth) == nil {
		if id, err := e.identity(raw); err == nil {
			rec.InputIdentity, rec.EnforcedIdentity = &id, &id
		}
	}
	e.deliver(rec, start)
	return Result{Record: rec, Verdict: v}
}

// identityChecksEncoding reports whether the identity provider already
// applies CheckEncoding's rules to the whole context at the emitter's depth.
func (e *Emitter) identityChecksEncoding() bool {
	_, ok := e.cfg.Identity.(jcsSHA256)
	return ok && e.cfg.MaxDepth == DefaultMaxDepth
}

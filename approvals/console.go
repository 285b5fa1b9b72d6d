package approvals

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/internal/urlcheck"
	"github.com/hooksproxy/hooksproxy/points"
)

// DefaultMaxPending bounds the console queue unless configured.
const DefaultMaxPending = 1000

// DefaultMaxPendingBytes bounds the contexts the queue holds together
// unless configured: the count alone let a thousand 8 MiB contexts sit in
// memory, and the list an approver's page polls carry them all.
const DefaultMaxPendingBytes = 256 << 20

// RejectedReason is the reason a rejection carries when the lifted deny had
// none, or had a reserved host_error:* reason that §5 forbids a resolver's
// verdict to carry.
const RejectedReason = "approval_rejected"

// OutcomeExpired is what Metrics.Decided is told when an approval left the
// queue without a decision (the wait ended or the console closed).
const OutcomeExpired = "expired"

// Errors returned by Console.Resolve and Console.Decide. The HTTP handler
// maps them to statuses; callers match them with errors.Is.
var (
	// ErrQueueFull: the console already holds MaxPending approvals.
	ErrQueueFull = errors.New("approvals: queue full")
	// ErrClosed: the console was closed.
	ErrClosed = errors.New("approvals: console closed")
	// ErrBadRequest: the approval request cannot be presented (its context
	// is not JSON).
	ErrBadRequest = errors.New("approvals: unpresentable approval request")
	// ErrNotFound: no approval with that id is or was recently queued.
	ErrNotFound = errors.New("approvals: no such approval")
	// ErrAlreadyDecided: the approval was decided before (a replay).
	ErrAlreadyDecided = errors.New("approvals: approval already decided")
	// ErrExpired: the approval left the queue undecided (its wait ended).
	ErrExpired = errors.New("approvals: approval expired")
	// ErrIdentityMismatch: the decision names a context_identity other than
	// the one presented with the approval (echo rule, §9).
	ErrIdentityMismatch = errors.New("approvals: context_identity does not match the approval")
	// ErrInvalidOutcome: a decision's outcome is neither approve nor reject.
	ErrInvalidOutcome = errors.New("approvals: outcome must be approve or reject")
)

// Metrics is told about the console queue; it must be cheap and safe for
// concurrent use. Pending receives the queue length after every change;
// Decided receives approve, reject or OutcomeExpired.
type Metrics interface {
	Pending(n int)
	Decided(outcome string)
}

// ConsoleOptions configures a Console. The zero value is usable.
type ConsoleOptions struct {
	// MaxPending bounds the queue; zero or less is DefaultMaxPending. A
	// Resolve over the bound fails at once (the emitter then fails closed
	// with host_error:approval_resolver_failed).
	MaxPending int
	// MaxPendingBytes bounds the bytes of the contexts pending together;
	// zero or less is DefaultMaxPendingBytes. Past it a Resolve fails at
	// once, as past MaxPending.
	MaxPendingBytes int64
	// Timeout, when positive, caps how long one approval waits for a
	// person. The emitter's own bound, timeouts.approval_resolver_ms,
	// applies as well; whichever ends first, the wait fails as a resolver
	// timeout (host_error:approval_resolver_failed, §9) and the entry
	// leaves the queue.
	Timeout time.Duration
	// Metrics, when set, is told about the queue.
	Metrics Metrics
	// OnDecision, when set, is called after each approve or reject (for an
	// audit log). It runs outside the console's lock.
	OnDecision func(Decision)
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Approval is one pending approval as an approver sees it. Context is the
// context as presented to the resolver (already redacted by the emitter);
// it is shared, read-only.
type Approval struct {
	ID                string          `json:"id"`
	Created           time.Time       `json:"created"`
	InterceptionPoint points.Point    `json:"interception_point"`
	Reason            string          `json:"reason"`
	Message           string          `json:"message"`
	ContextIdentity   *string         `json:"context_identity"`
	Context           json.RawMessage `json:"context"`
}

// Decision is what OnDecision is told: a person's approve or reject.
type Decision struct {
	ID                string
	Outcome           string
	InterceptionPoint points.Point
	Reason            string
	ContextIdentity   *string
	Note              string
	At                time.Time
	// SessionID is the session.id of the context presented for approval
	// ("" when it has none).
	SessionID string
}

// Failure classes of the console resolver: what its errors' FailureClass
// says (points.FailureClasser), payload-free, so that operators and
// clients can tell a timeout from a full queue.
const (
	ClassTimedOut      = "approval timed out"
	ClassCancelled     = "approval cancelled"
	ClassQueueFull     = "approval queue full"
	ClassClosed        = "approval console closed"
	ClassUnpresentable = "approval request unpresentable"
)

// resolverError is a console or webhook resolver failure; its text (a
// bound, a timeout, a status, a transport error) holds no payload, so the
// host logs it as the cause, without any URL (points.FailureCauser), and
// its class may go to records and clients (points.FailureClasser).
type resolverError struct {
	class string
	err   error
}

func (e *resolverError) Error() string        { return e.err.Error() }
func (e *resolverError) Unwrap() error        { return e.err }
func (e *resolverError) FailureCause() string { return urlcheck.ErrorWithoutURL(e.err) }

// FailureClass implements points.FailureClasser.
func (e *resolverError) FailureClass() string { return e.class }

func resolverFail(class, format string, args ...any) error {
	return &resolverError{class: class, err: fmt.Errorf(format, args...)}
}

// ResolverFailure marks err as a resolver failure of class (one of the
// Class constants, or another payload-free phrase) for a resolver built on
// a Console: the host logs err's text as the cause and may show class to
// the client. err's text must hold no payload (no context, no verdict).
// errors.Is and errors.As see err through it.
func ResolverFailure(class string, err error) error {
	return &resolverError{class: class, err: err}
}

// ctxClass is the class of a wait ended by ctx.
func ctxClass(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return ClassTimedOut
	}
	return ClassCancelled
}

// tombstone remembers how a recent approval left the queue, so that a
// replay is told "already decided" rather than "not found".
type tombstone uint8

const (
	tombDecided tombstone = iota + 1
	tombExpired
)

type waitResult struct {
	res points.ApprovalResolution
	err error
}

type entry struct {
	Approval
	// session is the context's session.id, for the decision's log line
	// (an identifier, not payload).
	session string
	seq     uint64
	done    chan waitResult // buffered 1; written once, under the lock
}

// Console is the hooksproxy.console resolver: each Resolve queues a pending
// approval and blocks until a person decides it (Decide, the HTTP API or
// the web page), its wait ends, or the console closes. It is safe for
// concurrent use.
type Console struct {
	max        int
	maxBytes   int64
	timeout    time.Duration
	metrics    Metrics
	onDecision func(Decision)
	now        func() time.Time

	mu       sync.Mutex
	pending  map[string]*entry
	bytes    int64 // len of the pending contexts together
	seq      uint64
	closed   bool
	tombs    map[string]tombstone
	tombRing []string // insertion order of tombs, bounded
	tombNext int
}

var _ points.Resolver = (*Console)(nil)

// NewConsole returns an empty console.
func NewConsole(opts ConsoleOptions) *Console {
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.MaxPendingBytes <= 0 {
		opts.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	// Remember at least as many recent outcomes as the queue can hold, so a
	// replay of anything that was on screen is recognised.
	ring := max(opts.MaxPending, 1024)
	return &Console{
		max: opts.MaxPending, maxBytes: opts.MaxPendingBytes, timeout: opts.Timeout, metrics: opts.Metrics,
		onDecision: opts.OnDecision, now: opts.Now,
		pending: make(map[string]*entry), tombs: make(map[string]tombstone, ring),
		tombRing: make([]string, ring),
	}
}

// Resolve implements points.Resolver. It queues req and waits. On ctx end
// the approval is removed from the queue and the error wraps ctx.Err().
func (c *Console) Resolve(ctx context.Context, req points.ApprovalRequest) (points.ApprovalResolution, error) {
	if err := ctx.Err(); err != nil {
		return points.ApprovalResolution{}, resolverFail(ctxClass(err), "approvals: before queueing: %w", err)
	}
	if !points.ValidJSON(req.Context) {
		return points.ApprovalResolution{}, resolverFail(ClassUnpresentable, "%w: context is not JSON", ErrBadRequest)
	}
	e := &entry{
		Approval: Approval{
			// rand.Text is 128 bits from crypto/rand: ids are unguessable,
			// so knowing one proves the caller saw the list.
			ID:                rand.Text(),
			Created:           c.now().UTC(),
			InterceptionPoint: req.Point,
			// The payload-free projection: reason and bounded message.
			Reason:          req.Verdict.Reason,
			Message:         points.Project(req.Verdict).Message,
			ContextIdentity: cloneStr(req.ContextIdentity),
			Context:         append(json.RawMessage(nil), req.Context...),
		},
		session: gjson.GetBytes(req.Context, "session.id").String(),
		done:    make(chan waitResult, 1),
	}
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return points.ApprovalResolution{}, resolverFail(ClassClosed, "%w", ErrClosed)
	case len(c.pending) >= c.max:
		c.mu.Unlock()
		return points.ApprovalResolution{}, resolverFail(ClassQueueFull, "%w (%d pending)", ErrQueueFull, c.max)
	case c.bytes+int64(len(e.Context)) > c.maxBytes:
		c.mu.Unlock()
		return points.ApprovalResolution{}, resolverFail(ClassQueueFull, "%w (pending contexts at %d bytes)", ErrQueueFull, c.maxBytes)
	}
	c.seq++
	e.seq = c.seq
	c.pending[e.ID] = e
	c.bytes += int64(len(e.Context))
	c.notePending()
	c.mu.Unlock()

	wctx, cancel := ctx, context.CancelFunc(func() {})
	if c.timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	defer cancel()
	select {
	case r := <-e.done:
		return r.res, r.err
	case <-wctx.Done():
	}
	if !c.expire(e.ID) {
		// A decision won the race with the deadline; it is already in
		// e.done, and the approver was told it was taken.
		r := <-e.done
		return r.res, r.err
	}
	// Nobody decided in time. §9: a resolver that times out yields
	// host_error:approval_resolver_failed, so the wait ends as an error
	// whichever bound (ours or the emitter's) ran out first.
	if ctx.Err() != nil {
		// The caller's bound (the emitter's approval_resolver_ms, or the
		// request ending): payload-free too, so it is logged as its cause.
		return points.ApprovalResolution{}, resolverFail(ctxClass(ctx.Err()), "approvals: no decision before the caller's bound: %w", ctx.Err())
	}
	return points.ApprovalResolution{}, resolverFail(ClassTimedOut, "approvals: no decision within %s: %w", c.timeout, context.DeadlineExceeded)
}

// expire removes a still-pending approval; it reports whether it did.
func (c *Console) expire(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.pending[id]
	if !ok {
		return false
	}
	c.bytes -= int64(len(e.Context))
	delete(c.pending, id)
	c.bury(id, tombExpired)
	c.notePending()
	if c.metrics != nil {
		c.metrics.Decided(OutcomeExpired)
	}
	return true
}

// Decide records a person's decision on approval id. identity must be the
// context_identity shown with the approval (nil when it was null): a
// decision is bound to the bytes the approver saw. An unknown id is
// ErrNotFound; an id decided or expired before is ErrAlreadyDecided or
// ErrExpired; a different identity is ErrIdentityMismatch and leaves the
// approval pending. note is handed to OnDecision only.
func (c *Console) Decide(id, outcome string, identity *string, note string) error {
	return c.decide(id, outcome, identity, true, note)
}

// DecideByID is Decide bound by the approval id alone, for a decision that
// echoes no context_identity: the id names exactly one approval, and the
// resolution echoes that approval's identity (§7.6). identity is ignored.
func (c *Console) DecideByID(id, outcome string, _ *string, note string) error {
	return c.decide(id, outcome, nil, false, note)
}

func (c *Console) decide(id, outcome string, identity *string, check bool, note string) error {
	if outcome != points.OutcomeApprove && outcome != points.OutcomeReject {
		return ErrInvalidOutcome
	}
	c.mu.Lock()
	e, ok := c.pending[id]
	if !ok {
		t := c.tombs[id]
		c.mu.Unlock()
		switch t {
		case tombDecided:
			return ErrAlreadyDecided
		case tombExpired:
			return ErrExpired
		}
		return ErrNotFound
	}
	if check && !sameIdentity(identity, e.ContextIdentity) {
		c.mu.Unlock()
		return ErrIdentityMismatch
	}
	c.bytes -= int64(len(e.Context))
	delete(c.pending, id)
	c.bury(id, tombDecided)
	c.notePending()
	if c.metrics != nil {
		c.metrics.Decided(outcome)
	}
	e.done <- waitResult{res: resolution(outcome, e.ContextIdentity, e.Reason)}
	c.mu.Unlock()
	if c.onDecision != nil {
		c.onDecision(Decision{
			ID: id, Outcome: outcome, InterceptionPoint: e.InterceptionPoint, Reason: e.Reason,
			ContextIdentity: cloneStr(e.ContextIdentity), Note: note, At: c.now().UTC(), SessionID: e.session,
		})
	}
	return nil
}

// resolution builds the §9 answer for a person's decision: approve lifts
// the deny with a plain allow; reject keeps it as a deny with the original
// reason.
func resolution(outcome string, identity *string, reason string) points.ApprovalResolution {
	res := points.ApprovalResolution{Outcome: outcome, ContextIdentity: cloneStr(identity)}
	if outcome == points.OutcomeApprove {
		res.Verdict = json.RawMessage(`{"decision":"allow"}`)
		return res
	}
	if reason == "" || points.IsHostError(reason) {
		// A synthesized §7.5 deny carries host_error:*; §5 forbids that
		// reason in a resolver's verdict (verdict_invalid), so say why.
		reason = RejectedReason
	}
	r, _ := json.Marshal(reason)
	res.Verdict = json.RawMessage(`{"decision":"deny","reason":` + string(r) + `}`)
	return res
}

// List returns the pending approvals, newest first.
func (c *Console) List() []Approval {
	c.mu.Lock()
	es := make([]*entry, 0, len(c.pending))
	for _, e := range c.pending {
		es = append(es, e)
	}
	c.mu.Unlock()
	sort.Slice(es, func(i, j int) bool { return es[i].seq > es[j].seq })
	out := make([]Approval, len(es))
	for i, e := range es {
		out[i] = e.Approval
		out[i].ContextIdentity = cloneStr(e.ContextIdentity)
	}
	return out
}

// Len returns the number of pending approvals.
func (c *Console) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Close refuses further approvals and ends every pending wait with
// ErrClosed (for a config reload or shutdown that replaces the console).
func (c *Console) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	for id, e := range c.pending {
		c.bytes -= int64(len(e.Context))
		delete(c.pending, id)
		c.bury(id, tombExpired)
		if c.metrics != nil {
			c.metrics.Decided(OutcomeExpired)
		}
		e.done <- waitResult{err: resolverFail(ClassClosed, "%w", ErrClosed)}
	}
	c.notePending()
	return nil
}

// bury remembers how id left the queue, evicting the oldest memory when
// the ring is full. Called with mu held.
func (c *Console) bury(id string, t tombstone) {
	if old := c.tombRing[c.tombNext]; old != "" {
		delete(c.tombs, old)
	}
	c.tombRing[c.tombNext] = id
	c.tombNext = (c.tombNext + 1) % len(c.tombRing)
	c.tombs[id] = t
}

// notePending reports the queue length. Called with mu held so that the
// gauge sees changes in order.
func (c *Console) notePending() {
	if c.metrics != nil {
		c.metrics.Pending(len(c.pending))
	}
}

func sameIdentity(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func cloneStr(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

package points

import (
	"context"
	"encoding/json"
	"time"
)

// Interceptor decides on one context. It must treat c as read-only input; it
// receives its own copy (§7), so mutating it affects nobody else. A returned
// error that wraps *VerdictError substitutes host_error:verdict_invalid (or
// the path reason it carries); any other error, or a panic, substitutes
// host_error:interceptor_failed. ctx is cancelled when the binding's timeout
// expires.
type Interceptor interface {
	Intercept(ctx context.Context, c *Context) (Verdict, error)
}

// DenialObserver is implemented by interceptors that keep state across
// emissions, such as a budget that counts calls: when an emission in which
// it permitted the action ends with the action not proceeding (a later
// binding denied it, an approver rejected it), the emitter tells it, so
// that it can take back what it counted for a call that was never made.
// c is the emission's context as dispatched, valid only during the call,
// which must be quick; it changes no decision.
type DenialObserver interface {
	Denied(c *Context, own Verdict)
}

// ContextSharer is implemented by interceptors that only ever read their
// context. The emitter then hands them the shared, never-written bytes
// instead of a private copy: isolation (§7) holds because nobody writes
// them, as the reference core's read-only borrow does, and a megabyte of
// messages is not copied once per interceptor. A sharer keeps no part of
// the bytes (a Context.Get result or Raw itself), nor the *Context, once
// Intercept returns: the host may build another emission's context in the
// same memory (Emitter.EmitIn), and the emitter reuses an inline sharer's
// Context for a later call. Clone what must outlive the call; the emitter
// copies the verdict it returns.
type ContextSharer interface {
	SharesContext() bool
}

// InlineRunner is implemented by interceptors whose work is bounded CPU
// work that never blocks (no I/O, no waiting). The emitter calls them on
// the emitting goroutine instead of a fresh one, which saves a goroutine
// hand-off per call; a synchronous interceptor cannot be preempted anyway,
// so the timeout is enforced after the fact: an overrun is still
// host_error:interceptor_timeout.
type InlineRunner interface {
	RunsInline() bool
}

// DeadlineHonorer is implemented by inline interceptors whose work checks
// its context as it goes (an evaluation that polls ctx.Done): the emitter
// runs their inline call with the binding's timeout as the context's
// deadline, so that an overrun stops there instead of being judged after
// the fact.
type DeadlineHonorer interface {
	HonorsDeadline() bool
}

// InterceptorFunc adapts a function to Interceptor.
type InterceptorFunc func(ctx context.Context, c *Context) (Verdict, error)

// Intercept calls f.
func (f InterceptorFunc) Intercept(ctx context.Context, c *Context) (Verdict, error) {
	return f(ctx, c)
}

// Binding is one registered interceptor: its registration name (payload-free,
// it appears in records as verdicts[].name), the points it is bound at
// (empty: all eight) and its timeout (zero: the emitter's default).
type Binding struct {
	Name        string
	Interceptor Interceptor
	At          []Point
	Timeout     time.Duration
}

// boundAt reports whether b applies at p.
func (b Binding) boundAt(p Point) bool {
	if len(b.At) == 0 {
		return true
	}
	for _, a := range b.At {
		if a == p {
			return true
		}
	}
	return false
}

// ApprovalRequest is what the approval seam hands a resolver (§9). Context
// is the context as presented, after redaction; ContextIdentity is computed
// over exactly those bytes (nil under the null provider).
type ApprovalRequest struct {
	ContextIdentity *string         `json:"context_identity"`
	Point           Point           `json:"interception_point"`
	Verdict         Verdict         `json:"verdict"`
	Context         json.RawMessage `json:"context"`
}

// The approval outcomes of §9.
const (
	OutcomeApprove    = "approve"
	OutcomeReject     = "reject"
	OutcomeUnresolved = "unresolved"
)

// ApprovalResolution is a resolver's answer. Verdict is wire JSON so that the
// host can run the normative validation order on it (§9); nil when absent.
type ApprovalResolution struct {
	Outcome         string          `json:"outcome"`
	ContextIdentity *string         `json:"context_identity"`
	Verdict         json.RawMessage `json:"verdict,omitempty"`
}

// Resolver is the approval seam: it lifts or keeps a liftable deny. A
// returned error, or a timeout, is host_error:approval_resolver_failed.
type Resolver interface {
	Resolve(ctx context.Context, req ApprovalRequest) (ApprovalResolution, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(ctx context.Context, req ApprovalRequest) (ApprovalResolution, error)

// Resolve calls f.
func (f ResolverFunc) Resolve(ctx context.Context, req ApprovalRequest) (ApprovalResolution, error) {
	return f(ctx, req)
}

// Redactor rewrites the context an approver will see (§9, the approval
// redactor). It returns a whole context; an error is
// host_error:approval_resolver_failed.
type Redactor interface {
	Redact(ctx context.Context, raw []byte) ([]byte, error)
}

// RedactorFunc adapts a function to Redactor.
type RedactorFunc func(ctx context.Context, raw []byte) ([]byte, error)

// Redact calls f.
func (f RedactorFunc) Redact(ctx context.Context, raw []byte) ([]byte, error) { return f(ctx, raw) }

// FailureClasser is an interceptor error that can say what failed without
// any payload: its FailureClass ("webhook answered status 500") becomes
// the message of the interceptor_failed deny, which reaches records and
// the client's error body. Any other error is described by its type only,
// since its text may quote the context.
type FailureClasser interface {
	error
	FailureClass() string
}

// FailureCauser is implemented by an interceptor error whose underlying
// cause (a refused connection, a TLS or DNS failure) is known to hold no
// payload: FailureCause goes to the host's log line beside the class, and
// never to records or the client.
type FailureCauser interface {
	error
	FailureCause() string
}

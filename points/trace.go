package points

import (
	"context"
	"encoding/json"
)

type traceKey struct{}

// WithTrace returns ctx carrying a W3C Trace Context (trace id and span id,
// lowercase hex; the caller validates them). Every emission under ctx whose
// event carries no trace member gets the context's optional trace block
// (§4.5), so its record echoes it (§10.3) and joins the host's distributed
// trace. The identity's projection leaves trace out, so it changes no
// identity.
func WithTrace(ctx context.Context, traceID, spanID string) context.Context {
	b := append([]byte(`{"trace_id":`), appendQuoted(nil, traceID)...)
	b = append(append(append(b, `,"span_id":`...), appendQuoted(nil, spanID)...), '}')
	return context.WithValue(ctx, traceKey{}, json.RawMessage(b))
}

// withTrace adds ctx's trace block to ev unless ev or the session already
// carries one.
func withTrace(ctx context.Context, ev Event, s *Session) Event {
	t, _ := ctx.Value(traceKey{}).(json.RawMessage)
	if t == nil || traceOf(ev, s).Exists() {
		return ev
	}
	return ev.With("trace", t)
}

// traceRecord is ctx's trace as a record member, or nil.
func traceRecord(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(json.RawMessage)
	if t == nil {
		return nil
	}
	var tr Trace
	if json.Unmarshal(t, &tr) != nil {
		return nil
	}
	return &tr
}

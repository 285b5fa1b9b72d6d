package points

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
)

// A transform whose path is rooted elsewhere, breaks the §5.2 grammar or
// does not resolve is one kind of failure, a transform that fails to apply:
// the same reason family, decided_by null (§10.3), a short-circuit with
// fold_truncated in the sequential profiles (§7.4), and in the parallel
// ones a transform like any other until it is applied (§7.5).
func TestTransformFailsWhereApplied(t *testing.T) {
	text := OutputEvent(json.RawMessage(`"text"`))
	type want struct {
		reason    Reason
		decidedBy *int
		truncated *bool
		laterRuns bool
	}
	yes := true
	tests := []struct {
		name    string
		profile string
		first   []Verdict
		want    want
	}{
		{"run_all rooted elsewhere", ProfileRunAll, []Verdict{Replace("$context.x", json.RawMessage(`1`))}, want{ReasonTransformTargetForbidden, nil, &yes, false}},
		{"run_all outside the grammar", ProfileRunAll, []Verdict{Replace("$target..x", json.RawMessage(`1`))}, want{ReasonTransformInvalid, nil, &yes, false}},
		{"run_all does not resolve", ProfileRunAll, []Verdict{Replace("$target.missing", json.RawMessage(`1`))}, want{ReasonTransformInvalid, nil, &yes, false}},
		{"first_deny rooted elsewhere", ProfileFirstDeny, []Verdict{Replace("$context.x", json.RawMessage(`1`))}, want{ReasonTransformTargetForbidden, nil, &yes, false}},
		{"first_deny outside the grammar", ProfileFirstDeny, []Verdict{Replace("$target.", json.RawMessage(`1`))}, want{ReasonTransformInvalid, nil, &yes, false}},
		// §7.4 run_all: the aggregate is severity-max and block ties go to
		// the lowest index, so an earlier plain deny outranks the failure.
		{"run_all earlier deny wins over a failed fold", ProfileRunAll, []Verdict{Deny("pii_blocked", "no"), Replace("$target.missing", json.RawMessage(`1`))}, want{"pii_blocked", idx(0), &yes, false}},
		// A liftable deny is below a plain one: the failure wins.
		{"run_all failed fold outranks a liftable deny", ProfileRunAll, []Verdict{Escalate("ask", ""), Replace("$target.missing", json.RawMessage(`1`))}, want{ReasonTransformInvalid, nil, &yes, false}},
		// §7.5: two transforms conflict before either is applied.
		{"strictest two transforms, one outside the grammar", ProfileStrictest, []Verdict{Replace("$target..x", json.RawMessage(`1`)), Replace("$target", json.RawMessage(`"y"`))}, want{ReasonTransformConflict, nil, nil, true}},
		{"strictest two transforms, one rooted elsewhere", ProfileStrictest, []Verdict{Replace("$context.x", json.RawMessage(`1`)), Replace("$target", json.RawMessage(`"y"`))}, want{ReasonTransformConflict, nil, nil, true}},
		{"strictest one transform rooted elsewhere", ProfileStrictest, []Verdict{Replace("$context.x", json.RawMessage(`1`))}, want{ReasonTransformTargetForbidden, nil, nil, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var later atomic.Int32
			var bs []Binding
			for i, v := range tt.first {
				bs = append(bs, Binding{Name: "b" + string(rune('0'+i)), Interceptor: verdictOf(v)})
			}
			bs = append(bs, Binding{Name: "later", Interceptor: InterceptorFunc(func(context.Context, *Context) (Verdict, error) {
				later.Add(1)
				return Allow(), nil
			})})
			e := newTestEmitter(t, Config{Composition: Composition{Profile: tt.profile}, Bindings: bs})
			res := e.Emit(context.Background(), testSession(), text)
			rec := res.Record
			if res.Proceed || rec.Verdict.Decision != DecisionDeny || rec.Verdict.Reason != string(tt.want.reason) {
				t.Fatalf("verdict %s %q (proceed %v), want deny %q", rec.Verdict.Decision, rec.Verdict.Reason, res.Proceed, tt.want.reason)
			}
			if (rec.DecidedBy == nil) != (tt.want.decidedBy == nil) || rec.DecidedBy != nil && *rec.DecidedBy != *tt.want.decidedBy {
				t.Errorf("decided_by = %v, want %v", ptrText(rec.DecidedBy), ptrText(tt.want.decidedBy))
			}
			if (rec.FoldTruncated == nil) != (tt.want.truncated == nil) || rec.FoldTruncated != nil && *rec.FoldTruncated != *tt.want.truncated {
				t.Errorf("fold_truncated = %v, want %v", ptrText(rec.FoldTruncated), ptrText(tt.want.truncated))
			}
			if ran := later.Load() > 0; ran != tt.want.laterRuns {
				t.Errorf("the binding after ran: %v, want %v", ran, tt.want.laterRuns)
			}
		})
	}
}

func ptrText[T any](p *T) any {
	if p == nil {
		return "null"
	}
	return *p
}

// §10.3: a record's trace is absent when the context carried neither
// trace_id nor span_id, on a host deny as on an emission.
func TestHostDenyEmptyTrace(t *testing.T) {
	sink := NewMemorySink(0)
	e := newTestEmitter(t, Config{Sink: sink, Bindings: []Binding{{Name: "a", Interceptor: allowAll()}}})
	ev := PostModelCallEvent("m", json.RawMessage(`{"content":null,"tool_calls":[],"finish_reason":"stream_incomplete"}`)).With("trace", json.RawMessage(`{}`))
	e.Emit(context.Background(), testSession(), ev)
	e.EmitHostDeny(context.Background(), testSession(), ev, ReasonStreamingUnsupported, "x")
	recs := sink.Records()
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		if r.Trace != nil {
			t.Errorf("%s record (%s) has trace %+v, want none", r.InterceptionPoint, r.Verdict.Reason, *r.Trace)
		}
	}
}

// A transform that fails to apply is denied with the host's own message:
// the interceptor's path (its text, possibly from the target, unbounded)
// is not copied into the combined verdict a control error hands the model.
func TestFailedTransformMessageIsTheHosts(t *testing.T) {
	long := "$context." + strings.Repeat("secret", 20000)
	for _, path := range []string{long, "$target.missing_" + strings.Repeat("x", 5000)} {
		e := newTestEmitter(t, Config{Bindings: []Binding{{Name: "t", Interceptor: verdictOf(Replace(path, json.RawMessage(`1`)))}}})
		res := e.Emit(context.Background(), testSession(), OutputEvent(json.RawMessage(`"text"`)))
		if res.Proceed || len(res.Verdict.Message) > 200 || strings.Contains(res.Verdict.Message, "secret") || strings.Contains(res.Verdict.Message, "missing_") {
			t.Errorf("verdict %s %q (%d bytes)", res.Verdict.Reason, res.Verdict.Message[:min(80, len(res.Verdict.Message))], len(res.Verdict.Message))
		}
	}
}

// A consultation that fails closed on the resolution's own checks (here
// the echo rule) says so in the log, as a resolver's error does: the
// record is not the only place an operator can find it.
func TestFailedConsultationIsLogged(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	other := "not-the-identity"
	res := ResolverFunc(func(_ context.Context, req ApprovalRequest) (ApprovalResolution, error) {
		return ApprovalResolution{Outcome: OutcomeApprove, ContextIdentity: &other, Verdict: json.RawMessage(`{"decision":"allow"}`)}, nil
	})
	e := newTestEmitter(t, Config{Logger: log, Resolver: res, Bindings: []Binding{{Name: "ask", Interceptor: verdictOf(Escalate("needs_approval", ""))}}})
	r := e.Emit(context.Background(), testSession(), OutputEvent(json.RawMessage(`"text"`)))
	if r.Proceed || r.Verdict.Reason != string(ReasonApprovalIdentityMismatch) {
		t.Fatalf("verdict %s %q", r.Verdict.Decision, r.Verdict.Reason)
	}
	if got := buf.String(); !strings.Contains(got, "approval failed closed") || !strings.Contains(got, string(ReasonApprovalIdentityMismatch)) {
		t.Errorf("log %q, want the failed consultation", got)
	}
}

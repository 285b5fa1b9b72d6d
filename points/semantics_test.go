package points

import (
	"context"
	"encoding/json"
	"testing"
)

// Record members of the composition profiles that the conformance vectors
// do not pin, each from the spec's text (§5.4, §7.3, §7.4, §7.6, §10.3).
func TestCompositionRecordMembers(t *testing.T) {
	fixed := func(v Verdict) Interceptor {
		return InterceptorFunc(func(context.Context, *Context) (Verdict, error) { return v, nil })
	}
	approve := ResolverFunc(func(_ context.Context, req ApprovalRequest) (ApprovalResolution, error) {
		return ApprovalResolution{Outcome: OutcomeApprove, ContextIdentity: req.ContextIdentity, Verdict: json.RawMessage(`{"decision":"allow"}`)}, nil
	})
	reject := ResolverFunc(func(_ context.Context, req ApprovalRequest) (ApprovalResolution, error) {
		return ApprovalResolution{Outcome: OutcomeReject, ContextIdentity: req.ContextIdentity, Verdict: json.RawMessage(`{"decision":"deny","reason":"again","approval":{}}`)}, nil
	})
	labelled := func(d Verdict, l string) Verdict { d.ResultLabels = []string{l}; return d }
	elsewhere := ResolverFunc(func(_ context.Context, req ApprovalRequest) (ApprovalResolution, error) {
		return ApprovalResolution{Outcome: OutcomeApprove, ContextIdentity: req.ContextIdentity, Verdict: json.RawMessage(`{"decision":"transform","transform":{"path":"$context.x","value":1}}`)}, nil
	})
	tests := []struct {
		name     string
		comp     Composition
		resolver Resolver
		verdicts []Verdict
		check    func(t *testing.T, r *Record)
	}{
		{"run_all fold failure truncates", Composition{Profile: ProfileRunAll}, nil,
			[]Verdict{Replace("$target.nope.deeper", json.RawMessage(`1`)), Allow()},
			func(t *testing.T, r *Record) {
				if r.FoldTruncated == nil || !*r.FoldTruncated {
					t.Fatalf("fold_truncated %v", r.FoldTruncated)
				}
			}},
		{"resume approval then a plain deny keeps resolved_by", Composition{Profile: ProfileFirstDeny, OnApproval: OnApprovalResume}, approve,
			[]Verdict{Escalate("ask", ""), Deny("hard", "")},
			func(t *testing.T, r *Record) {
				if r.Verdict.Reason != "hard" || r.ResolvedBy != "approval" {
					t.Fatalf("verdict %s resolved_by %q", r.Verdict.Reason, r.ResolvedBy)
				}
			}},
		{"resume approval to allow keeps decided_by", Composition{Profile: ProfileFirstDeny, OnApproval: OnApprovalResume}, approve,
			[]Verdict{Escalate("ask", ""), Allow()},
			func(t *testing.T, r *Record) {
				if r.Verdict.Decision != DecisionAllow || r.DecidedBy == nil || *r.DecidedBy != 0 {
					t.Fatalf("verdict %s decided_by %v", r.Verdict.Decision, r.DecidedBy)
				}
			}},
		{"a deny drops result labels", Composition{Profile: ProfileFirstDeny}, nil,
			[]Verdict{labelled(Allow(), "L0"), labelled(Deny("blk", ""), "L1")},
			func(t *testing.T, r *Record) {
				if len(r.Verdict.ResultLabels) != 0 {
					t.Fatalf("labels %v", r.Verdict.ResultLabels)
				}
			}},
		{"run_all deny drops result labels", Composition{Profile: ProfileRunAll}, nil,
			[]Verdict{labelled(Allow(), "L0"), labelled(Deny("blk", ""), "L1")},
			func(t *testing.T, r *Record) {
				if len(r.Verdict.ResultLabels) != 0 {
					t.Fatalf("labels %v", r.Verdict.ResultLabels)
				}
			}},
		{"a resolver's transform rooted elsewhere is transform_target_forbidden", Composition{Profile: ProfileFirstDeny}, elsewhere,
			[]Verdict{Escalate("ask", "")},
			func(t *testing.T, r *Record) {
				if r.Verdict.Reason != string(ReasonTransformTargetForbidden) {
					t.Fatalf("reason %q", r.Verdict.Reason)
				}
			}},
		{"a rejected deny is not liftable", Composition{Profile: ProfileFirstDeny}, reject,
			[]Verdict{Escalate("ask", "")},
			func(t *testing.T, r *Record) {
				if r.ResolvedBy != "rejection" || r.Liftable() {
					t.Fatalf("resolved_by %q liftable %v", r.ResolvedBy, r.Liftable())
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bs []Binding
			for i, v := range tt.verdicts {
				bs = append(bs, Binding{Name: string(rune('a' + i)), Interceptor: fixed(v)})
			}
			sink := NewMemorySink(0)
			em, err := NewEmitter(Config{Identity: JCSSHA256(), Bindings: bs, Composition: tt.comp, Resolver: tt.resolver, Sink: sink})
			if err != nil {
				t.Fatal(err)
			}
			s := NewSession(Agent{ID: "a", Framework: "f"}, "s1")
			em.Emit(context.Background(), s, OutputEvent(json.RawMessage(`"text"`)))
			recs := sink.Records()
			if len(recs) != 1 {
				t.Fatalf("%d records", len(recs))
			}
			tt.check(t, recs[0])
		})
	}
}

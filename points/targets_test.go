package points

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// refuseNumbers refuses an output whose content is not a string.
type refuseNumbers struct{ calls atomic.Int32 }

func (r *refuseNumbers) CheckTarget(p Point, original, transformed []byte) error {
	r.calls.Add(1)
	if p == Output && string(transformed) != `{"content":"masked"}` {
		return errors.New("content has no wire form")
	}
	return nil
}

// A transform the host cannot write back is refused inside the fold
// (§7.4): one record, host_error:transform_invalid, the next interceptor
// and the approver never asked.
func TestTargetCheckerRefusesInsideTheFold(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value string
		mode  Mode
		want  Decision
	}{
		{"refused", `42`, Enforce, DecisionDeny},
		{"accepted", `"masked"`, Enforce, DecisionAllow}, // the escalation is approved
		{"refused in evaluate_only", `42`, EvaluateOnly, DecisionDeny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var later, asked atomic.Int32
			checker := &refuseNumbers{}
			sink := NewMemorySink(0)
			em, err := NewEmitter(Config{
				Mode: tc.mode, Identity: JCSSHA256(), Sink: sink, Targets: checker,
				Bindings: []Binding{
					{Name: "xf", Interceptor: InterceptorFunc(func(context.Context, *Context) (Verdict, error) {
						return Replace("$target.content", json.RawMessage(tc.value)), nil
					})},
					{Name: "ask", Interceptor: InterceptorFunc(func(context.Context, *Context) (Verdict, error) {
						later.Add(1)
						return Escalate("ask", ""), nil
					})},
				},
				Resolver: ResolverFunc(func(_ context.Context, req ApprovalRequest) (ApprovalResolution, error) {
					asked.Add(1)
					return ApprovalResolution{Outcome: OutcomeApprove, ContextIdentity: req.ContextIdentity, Verdict: json.RawMessage(`{"decision":"allow"}`)}, nil
				}),
				ResolverTimeout: time.Minute,
			})
			if err != nil {
				t.Fatal(err)
			}
			s := NewSession(Agent{ID: "a", Framework: "f"}, "s1")
			res := em.Emit(context.Background(), s, OutputEvent(json.RawMessage(`"secret"`)))
			recs := sink.Records()
			if len(recs) != 1 || checker.calls.Load() != 1 {
				t.Fatalf("%d records, %d checks", len(recs), checker.calls.Load())
			}
			r := recs[0]
			if r.Verdict.Decision != tc.want {
				t.Fatalf("record verdict %+v, want %s", r.Verdict, tc.want)
			}
			if tc.want == DecisionAllow {
				if later.Load() != 1 || asked.Load() != 1 || !res.Proceed {
					t.Fatalf("later %d asked %d proceed %v", later.Load(), asked.Load(), res.Proceed)
				}
				return
			}
			if r.Verdict.Reason != string(ReasonTransformInvalid) || r.Verdict.Message != "content has no wire form" {
				t.Fatalf("record verdict %+v", r.Verdict)
			}
			if later.Load() != 0 || asked.Load() != 0 {
				t.Fatalf("after the refused transform: later interceptor %d, approver %d", later.Load(), asked.Load())
			}
			if r.FoldTruncated == nil || !*r.FoldTruncated {
				t.Fatalf("fold_truncated %v", r.FoldTruncated)
			}
			if tc.mode == Enforce && res.Proceed {
				t.Fatal("a refused transform proceeded")
			}
		})
	}
}

// Records carry request_id and http_request_id only with HostMembers: the
// record schema is closed.
func TestHostMembersOptIn(t *testing.T) {
	for _, on := range []bool{false, true} {
		sink := NewMemorySink(0)
		em, err := NewEmitter(Config{Identity: JCSSHA256(), Sink: sink, HostMembers: on, Bindings: []Binding{{Name: "a",
			Interceptor: InterceptorFunc(func(context.Context, *Context) (Verdict, error) { return Allow(), nil })}}})
		if err != nil {
			t.Fatal(err)
		}
		s := NewSession(Agent{ID: "a", Framework: "f"}, "s1")
		ctx := WithRequestID(context.Background(), "hpr_1")
		em.Emit(ctx, s, PreModelCallEvent("m", json.RawMessage(`[]`)).With("request_id", json.RawMessage(`"req_1"`)))
		em.EmitHostDeny(ctx, s, PostModelCallEvent("m", json.RawMessage(`{"content":null,"tool_calls":[],"finish_reason":"stream_incomplete"}`)).With("request_id", json.RawMessage(`"req_1"`)), ReasonStreamingUnsupported, "")
		for _, r := range sink.Records() {
			if got := r.RequestID != "" && r.HTTPRequestID != ""; got != on {
				t.Fatalf("HostMembers %v: %s record request_id %q http_request_id %q", on, r.InterceptionPoint, r.RequestID, r.HTTPRequestID)
			}
		}
	}
}

// Under the multi-verdict profiles the record schema requires verdicts:
// an emission no interceptor answered records an empty list, not none.
func TestRecordVerdictsRequiredUnderMultiVerdictProfiles(t *testing.T) {
	for _, profile := range []string{ProfileFirstDeny, ProfileRunAll} {
		sink := NewMemorySink(0)
		em, err := NewEmitter(Config{Identity: JCSSHA256(), Sink: sink, Composition: Composition{Profile: profile},
			Bindings: []Binding{{Name: "a", At: []Point{Output}, Interceptor: InterceptorFunc(func(context.Context, *Context) (Verdict, error) { return Allow(), nil })}}})
		if err != nil {
			t.Fatal(err)
		}
		s := NewSession(Agent{ID: "a", Framework: "f"}, "s1")
		em.Emit(context.Background(), s, InputEvent(json.RawMessage(`"hi"`), "user")) // no binding: no_interceptor
		em.EmitHostDeny(context.Background(), s, OutputEvent(json.RawMessage(`"x"`)), ReasonStreamingUnsupported, "")
		for _, r := range sink.Records() {
			b, _ := json.Marshal(r)
			has := strings.Contains(string(b), `"verdicts":[]`)
			if has != (profile != ProfileFirstDeny) {
				t.Fatalf("%s %s record: %s", profile, r.InterceptionPoint, b)
			}
		}
	}
}

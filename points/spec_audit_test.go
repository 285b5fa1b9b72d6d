package points

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
)

// Spec-text checks the conformance vectors do not make: warnings on a
// failed fold, provider names, decided_by after a failed consultation and
// the envelope of a folded context.

func auditBindings(vs ...Interceptor) []Binding {
	var bs []Binding
	for i, v := range vs {
		bs = append(bs, Binding{Name: fmt.Sprint("b", i), Interceptor: v})
	}
	return bs
}

func recordHasWarning(r *Record, reason string) bool {
	for _, w := range r.Verdict.Warnings {
		if w.Reason == reason {
			return true
		}
	}
	return false
}

var auditArgs = json.RawMessage(`{"url":"https://x"}`)

// §5.1 "A host MUST record warnings on the interception record (§10.3)";
// §7.3 "warnings: the first-seen-ordered union of warnings from every
// verdict returned in the emission". When a fold-transform fails to apply,
// the combined verdict is the transform_invalid deny, and it still carries
// the warnings returned before it and the failing transform's own.
func TestWarningsSurviveFoldFailure(t *testing.T) {
	badT := Replace("$target.nope", json.RawMessage(`1`))
	badT.Warnings = []Warning{{Reason: "w-transform"}}
	for _, prof := range []string{ProfileFirstDeny, ProfileRunAll, ProfileStrictest} {
		t.Run(prof, func(t *testing.T) {
			e := newTestEmitter(t, Config{Composition: Composition{Profile: prof},
				Bindings: auditBindings(verdictOf(Warn("w-first", "m")), verdictOf(badT))})
			res := e.Emit(context.Background(), testSession(), PreToolCallEvent("c1", "t", auditArgs))
			if res.Verdict.Reason != ReasonTransformInvalid {
				t.Fatalf("reason = %q", res.Verdict.Reason)
			}
			if !recordHasWarning(res.Record, "w-first") || !recordHasWarning(res.Record, "w-transform") {
				t.Fatalf("record warnings = %+v; want w-first and w-transform (§5.1, §7.3)", res.Record.Verdict.Warnings)
			}
		})
	}
}

// Same, for an approval whose transform fails to apply (first_deny, and
// the parallel/unanimous approval synthesis).
func TestWarningsSurviveApprovalTransformFailure(t *testing.T) {
	resolver := ResolverFunc(func(_ context.Context, req ApprovalRequest) (ApprovalResolution, error) {
		return ApprovalResolution{Outcome: OutcomeApprove, ContextIdentity: req.ContextIdentity,
			Verdict: json.RawMessage(`{"decision":"transform","transform":{"path":"$target.nope","value":1}}`)}, nil
	})
	esc := Escalate("ask", "")
	esc.Warnings = []Warning{{Reason: "w-esc"}}
	for _, comp := range []Composition{{Profile: ProfileFirstDeny}, {Profile: ProfileUnanimous, OnDisagreement: SynthApproval}} {
		t.Run(comp.Profile, func(t *testing.T) {
			e := newTestEmitter(t, Config{Composition: comp, Resolver: resolver,
				Bindings: auditBindings(verdictOf(Warn("w-first", "")), verdictOf(esc))})
			res := e.Emit(context.Background(), testSession(), PreToolCallEvent("c1", "t", auditArgs))
			if res.Verdict.Reason != ReasonTransformInvalid {
				t.Fatalf("reason = %q", res.Verdict.Reason)
			}
			if !recordHasWarning(res.Record, "w-first") || !recordHasWarning(res.Record, "w-esc") {
				t.Fatalf("record warnings = %+v; want w-first and w-esc", res.Record.Verdict.Warnings)
			}
		})
	}
}

type namedProvider string

func (p namedProvider) Name() string                    { return string(p) }
func (p namedProvider) Identity([]byte) (string, error) { return "id", nil }

// §10.1 "A host (and every SDK constructor) MUST reject a host-defined
// provider name that does not match ^[a-z][a-z0-9_-]*$ or that begins with
// jcs".
func TestCustomProviderNameChecked(t *testing.T) {
	for _, name := range []string{"jcs-sha256", "jcs-custom", "Bad Name", ""} {
		_, err := NewEmitter(Config{Identity: namedProvider(name), Bindings: auditBindings(allowAll())})
		if err == nil {
			t.Errorf("NewEmitter accepted identity provider name %q", name)
		}
	}
}

// §10.3 decided_by: "Registration index of the interceptor whose verdict
// won the aggregation (§7.3) or whose liftable deny was consulted (§7.6)
// ... null is reserved for pure-allow combinations, §5.2
// transform-application failures, and profile-synthesized verdicts
// (transform_conflict, composition_disagreement, no_interceptor,
// identity-provider rejection)." A seam failure (unresolved, resolver
// failed, echo mismatch) is none of these, and §7.6 keeps decided_by the
// consulted deny's index. (The Rust reference core nulls it; the spec
// text wins.)
func TestDecidedByOnSeamFailure(t *testing.T) {
	cases := map[string]Resolver{
		"unresolved": ResolverFunc(func(_ context.Context, req ApprovalRequest) (ApprovalResolution, error) {
			return ApprovalResolution{Outcome: OutcomeUnresolved, ContextIdentity: req.ContextIdentity}, nil
		}),
		"mismatch": ResolverFunc(func(_ context.Context, req ApprovalRequest) (ApprovalResolution, error) {
			s := "other"
			return ApprovalResolution{Outcome: OutcomeApprove, ContextIdentity: &s, Verdict: json.RawMessage(`{"decision":"allow"}`)}, nil
		}),
		"raises": ResolverFunc(func(context.Context, ApprovalRequest) (ApprovalResolution, error) {
			return ApprovalResolution{}, fmt.Errorf("down")
		}),
	}
	for name, r := range cases {
		for _, prof := range []string{ProfileFirstDeny, ProfileRunAll, ProfileStrictest} {
			t.Run(name+"/"+prof, func(t *testing.T) {
				e := newTestEmitter(t, Config{Composition: Composition{Profile: prof}, Resolver: r,
					Bindings: auditBindings(allowAll(), verdictOf(Escalate("ask", "")))})
				res := e.Emit(context.Background(), testSession(), PreToolCallEvent("c1", "t", auditArgs))
				if res.Record.ResolvedBy != "rejection" {
					t.Fatalf("resolved_by = %q", res.Record.ResolvedBy)
				}
				if res.Record.DecidedBy == nil || *res.Record.DecidedBy != 1 {
					t.Fatalf("%s: decided_by = %v, want 1 (the consulted liftable deny)", res.Verdict.Reason, res.Record.DecidedBy)
				}
			})
		}
	}
}

// §4.2 "response.tool_calls MUST be present"; the reference core
// re-validates the §4 envelope of the post-composition context for every
// provider (enforce.rs finalize: "an envelope the §4 check rejects MUST NOT
// earn a record with a normal verdict"). The folded context is checked
// whatever the provider, so under the null provider too a transform that
// strips the target's required members is a context_invalid deny.
func TestFoldedEnvelopeCheckedNullProvider(t *testing.T) {
	strip := Replace("$target", json.RawMessage(`{"x":1}`))
	e, err := NewEmitter(Config{Bindings: auditBindings(verdictOf(strip))}) // Identity nil: null provider
	if err != nil {
		t.Fatal(err)
	}
	resp := json.RawMessage(`{"content":"hi","tool_calls":[],"finish_reason":"stop"}`)
	res := e.Emit(context.Background(), testSession(), PostModelCallEvent("m", resp))
	if res.Proceed || res.Verdict.Reason != ReasonContextInvalid || res.Record.DecidedBy != nil {
		t.Fatalf("post-fold context without response.content/tool_calls/finish_reason: proceed %v, %s %q, decided_by %v",
			res.Proceed, res.Verdict.Decision, res.Verdict.Reason, res.Record.DecidedBy)
	}
}

// Same under jcs-sha256, with a type (not presence) violation: the
// transform makes response.finish_reason a number (the reference core
// checks presence only after the fold; the schema holds its type too).
func TestFoldedEnvelopeTypesChecked(t *testing.T) {
	bad := Replace("$target.finish_reason", json.RawMessage(`5`))
	e := newTestEmitter(t, Config{Bindings: auditBindings(verdictOf(bad))})
	resp := json.RawMessage(`{"content":"hi","tool_calls":[],"finish_reason":"stop"}`)
	res := e.Emit(context.Background(), testSession(), PostModelCallEvent("m", resp))
	if res.Proceed || res.Verdict.Reason != ReasonContextInvalid {
		t.Fatalf("post-fold context with a numeric finish_reason: proceed %v, %s %q", res.Proceed, res.Verdict.Decision, res.Verdict.Reason)
	}
	ok := Replace("$target.content", json.RawMessage(`"hello"`))
	e = newTestEmitter(t, Config{Bindings: auditBindings(verdictOf(ok))})
	if res := e.Emit(context.Background(), testSession(), PostModelCallEvent("m", resp)); !res.Proceed || !res.Transformed {
		t.Fatalf("a transform that keeps the envelope: proceed %v, transformed %v, %q", res.Proceed, res.Transformed, res.Verdict.Reason)
	}
}

// §10.3 fold_truncated is "defined for the sequential profiles": run_all's
// record carries it, false when every binding ran, true when a failed fold
// left one uninvoked.
func TestRunAllRecordsFoldTruncated(t *testing.T) {
	bad := Replace("$target.nope", json.RawMessage(`1`))
	for _, tc := range []struct {
		name string
		bs   []Binding
		want bool
	}{
		{"all ran", auditBindings(allowAll(), verdictOf(Deny("no", ""))), false},
		{"fold failed first", auditBindings(verdictOf(bad), allowAll()), true},
		{"fold failed last", auditBindings(allowAll(), verdictOf(bad)), false},
	} {
		e := newTestEmitter(t, Config{Composition: Composition{Profile: ProfileRunAll}, Bindings: tc.bs})
		res := e.Emit(context.Background(), testSession(), PreToolCallEvent("c1", "t", auditArgs))
		if res.Record.FoldTruncated == nil || *res.Record.FoldTruncated != tc.want {
			t.Errorf("%s: fold_truncated %v, want %v", tc.name, res.Record.FoldTruncated, tc.want)
		}
	}
}

// §7.3 "Two warnings are equal iff both their reason and message members
// are equal": {reason: x} and {reason: x, message: ""} are two warnings,
// and the record keeps the empty message as written.
func TestWarningAbsentVsEmptyMessage(t *testing.T) {
	a, err := ParseVerdict([]byte(`{"decision":"allow","warnings":[{"reason":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseVerdict([]byte(`{"decision":"allow","warnings":[{"reason":"x","message":""},{"reason":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEmitter(t, Config{Bindings: auditBindings(verdictOf(a), verdictOf(b))})
	res := e.Emit(context.Background(), testSession(), PreToolCallEvent("c1", "t", auditArgs))
	got, err := json.Marshal(res.Record.Verdict.Warnings)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"reason":"x"},{"reason":"x","message":""}]`; string(got) != want {
		t.Fatalf("record warnings %s, want %s", got, want)
	}
}

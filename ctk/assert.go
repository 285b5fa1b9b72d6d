package ctk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// The run outcomes of a RunRecord.
const (
	OutcomeCompleted = "completed"
	OutcomeBlocked   = "blocked"
	OutcomeError     = "error"
)

// The declarable postures (§13.1) and their values.
const (
	PostureToolSeamHostError = "tool_seam_host_error"
	PostureContinue          = "continue"
	PostureTerminate         = "terminate"
)

// The result statuses.
const (
	StatusPass = "pass"
	StatusFail = "fail"
	StatusSkip = "skip"
)

// ToolInvocation is one call a mock tool received: the args the tool was
// actually invoked with, after any transform.
type ToolInvocation struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// IdentityPair is one emission's (input, enforced) identities; nil is
// JSON null (null provider, or a failed computation).
type IdentityPair struct {
	Input    *string `json:"input_identity"`
	Enforced *string `json:"enforced_identity"`
}

// RunRecord is what a harness reports about one run (HARNESS.md).
type RunRecord struct {
	// Outcome is completed, blocked or error.
	Outcome string `json:"outcome"`
	// FinalOutput is the output the run returned; nil is JSON null.
	FinalOutput     json.RawMessage  `json:"final_output"`
	ToolInvocations []ToolInvocation `json:"tool_invocations"`
	Error           string           `json:"error,omitempty"`
	// Identities has one pair per emission, in order.
	Identities []IdentityPair `json:"identities"`
	// Records are the wire-shaped InterceptionRecords (§10.3), one per
	// emission, in order.
	Records []json.RawMessage `json:"records"`
	// Postures are the harness's declarations, filled in by the runner.
	Postures map[string]string `json:"postures,omitempty"`
	// ReleasedOutput is the caller-visible content egressed (incremental
	// hosts only); nil means not reported.
	ReleasedOutput json.RawMessage `json:"released_output,omitempty"`
	// Persisted serializes every durable incorporation the host made.
	Persisted string `json:"persisted,omitempty"`
}

// Result is the verdict of the kit on one vector.
type Result struct {
	ID         string   `json:"id"`
	Title      string   `json:"title"`
	Part       string   `json:"part,omitempty"`
	Status     string   `json:"status"`
	Failures   []string `json:"failures,omitempty"`
	SkipReason string   `json:"skip_reason,omitempty"`
}

// LoadError is what a harness returns from Setup when its host refused the
// vector's host declaration; Class is the declaration_error:* class.
type LoadError struct {
	Class string
	Err   error
}

func (e *LoadError) Error() string {
	if e.Err == nil {
		return "declaration refused: " + e.Class
	}
	return "declaration refused: " + e.Class + ": " + e.Err.Error()
}

func (e *LoadError) Unwrap() error { return e.Err }

// AssertLoad checks a Setup outcome against expect.load. It returns the
// failures and whether the run should go ahead (an accepted load that was
// expected). Vectors without expect.load accept any successful Setup.
func AssertLoad(v Vector, setupErr error) (failures []string, proceed bool) {
	want := v.Expect.Load
	var le *LoadError
	refused := errors.As(setupErr, &le)
	switch {
	case want == nil || want.Outcome == "accepted":
		if setupErr != nil {
			return []string{fmt.Sprintf("harness.Setup: %v", setupErr)}, false
		}
		return nil, true
	case want.Outcome == "refused":
		switch {
		case setupErr == nil:
			return []string{fmt.Sprintf("declaration loaded, want refused with %s", want.Class)}, false
		case !refused:
			return []string{fmt.Sprintf("harness.Setup: %v (want declaration refused with %s)", setupErr, want.Class)}, false
		case le.Class != want.Class:
			return []string{fmt.Sprintf("declaration refused with %s, want %s (%v)", le.Class, want.Class, le.Err)}, false
		}
		return nil, false
	}
	return []string{fmt.Sprintf("vector error: expect.load.outcome %q is not accepted or refused", want.Outcome)}, false
}

// Assert runs every expect assertion of v over the contexts the first
// interceptor recorded (in order) and the harness's RunRecord, and
// validates the §4 envelope of every recorded context.
func Assert(v Vector, recorded [][]byte, rr RunRecord) Result {
	var f []string
	f = append(f, assertInterceptions(v.Expect, recorded)...)
	f = append(f, assertRun(v.Expect, rr)...)
	f = append(f, assertRecords(v.Expect, rr)...)
	f = append(f, assertSequence(recorded)...)
	f = append(f, assertIdentities(v.Expect, rr)...)
	return newResult(v, f)
}

func newResult(v Vector, failures []string) Result {
	r := Result{ID: v.ID, Title: v.Title, Part: v.Part, Status: StatusPass, Failures: failures}
	if len(failures) > 0 {
		r.Status = StatusFail
	}
	return r
}

func pointOf(ctx []byte) string {
	ip, _ := Lookup(ctx, "interception_point")
	if ip.Type != gjson.String {
		return ""
	}
	return ip.Str
}

func assertInterceptions(e Expect, recorded [][]byte) []string {
	var f []string
	got := make([]string, len(recorded))
	for i, c := range recorded {
		got[i] = pointOf(c)
	}
	strict := e.SequenceStrict == nil || *e.SequenceStrict
	// pairs[i] is the recorded index expectation i is checked against.
	var pairs []int
	if strict {
		want := make([]string, len(e.Interceptions))
		for i, x := range e.Interceptions {
			want[i] = x.Point
		}
		if !equalStrings(want, got) {
			f = append(f, fmt.Sprintf("interception sequence mismatch:\n  expected %s\n  got      %s", listOf(want), listOf(got)))
		} else {
			for i := range want {
				pairs = append(pairs, i)
			}
		}
	} else {
		ri := 0
		for _, x := range e.Interceptions {
			for ri < len(got) && got[ri] != x.Point {
				ri++
			}
			if ri >= len(got) {
				f = append(f, fmt.Sprintf("expected interception point %q not found in sequence", x.Point))
				pairs = nil // as the reference engine: no per-context checks then
				break
			}
			pairs = append(pairs, ri)
			ri++
		}
	}
	exempt := map[int]bool{}
	for i, ri := range pairs {
		x := e.Interceptions[i]
		if x.ContextMustValidate != nil && !*x.ContextMustValidate {
			exempt[ri] = true
		}
		f = append(f, checkContext(x, ri, recorded[ri])...)
	}
	// Every recorded context must be a valid §4 envelope (HARNESS.md), not
	// only the ones an expectation names.
	for i, c := range recorded {
		if exempt[i] {
			continue
		}
		for _, d := range CheckEnvelope(c) {
			f = append(f, fmt.Sprintf("%s[%d]: %s", orMissing(got[i]), i, d))
		}
	}
	for _, name := range e.InterceptionsAbsent {
		for _, g := range got {
			if g == name {
				f = append(f, fmt.Sprintf("interception point %q was emitted but MUST be absent", name))
				break
			}
		}
	}
	return f
}

func checkContext(x ExpectedInterception, idx int, ctx []byte) []string {
	var f []string
	label := fmt.Sprintf("%s[%d]", x.Point, idx)
	for _, p := range x.Context {
		got, ok := Lookup(ctx, p.Path)
		switch {
		case !ok:
			f = append(f, fmt.Sprintf("%s: path %q did not resolve", label, p.Path))
		case !JSONEqual([]byte(got.Raw), p.Want):
			f = append(f, fmt.Sprintf("%s: %s == %s, want %s", label, p.Path, compactJSON([]byte(got.Raw)), compactJSON(p.Want)))
		}
	}
	if len(x.MustContain) > 0 || len(x.MustNotContain) > 0 {
		// Shape-agnostic: the needle may surface in any member, in any
		// escaping the host chose.
		ser := string(normalizeJSON(ctx))
		for _, n := range x.MustContain {
			if !strings.Contains(ser, n) {
				f = append(f, fmt.Sprintf("%s: context does not contain %q in any form", label, n))
			}
		}
		for _, n := range x.MustNotContain {
			if strings.Contains(ser, n) || bytes.Contains(ctx, []byte(n)) {
				f = append(f, fmt.Sprintf("%s: context contains %q, which MUST NOT surface here", label, n))
			}
		}
	}
	return f
}

// expectedOutcome selects run_outcome, or the run_outcome_by_posture
// entry for the posture the harness declared.
func expectedOutcome(e Expect, rr RunRecord) (string, []string) {
	base := e.RunOutcome
	by := e.RunOutcomeByPosture
	if by == nil {
		return base, nil
	}
	var f []string
	if by.Posture != PostureToolSeamHostError {
		return base, []string{fmt.Sprintf("run_outcome_by_posture names unknown posture %q", by.Posture)}
	}
	const def = PostureContinue
	if by.Outcomes[def] != base {
		f = append(f, fmt.Sprintf("vector error: run_outcome_by_posture.outcomes.%s must equal run_outcome %q", def, base))
	}
	declared := def
	if p, ok := rr.Postures[by.Posture]; ok {
		declared = p
	}
	o, ok := by.Outcomes[declared]
	if !ok {
		return base, append(f, fmt.Sprintf("declared posture %s=%q has no outcome in run_outcome_by_posture", by.Posture, declared))
	}
	return o, f
}

func assertRun(e Expect, rr RunRecord) []string {
	want, f := expectedOutcome(e, rr)
	if rr.Outcome != want {
		msg := fmt.Sprintf("run_outcome == %q, want %q", rr.Outcome, want)
		if rr.Error != "" {
			msg += " (run error: " + rr.Error + ")"
		}
		f = append(f, msg)
	}
	if e.FinalOutput != nil {
		got := rr.FinalOutput
		if got == nil {
			got = json.RawMessage("null")
		}
		if !JSONEqual(got, e.FinalOutput) {
			f = append(f, fmt.Sprintf("final_output == %s, want %s", compactJSON(got), compactJSON(e.FinalOutput)))
		}
	}
	if e.ReleasedOutput != nil {
		switch {
		case rr.ReleasedOutput == nil:
			f = append(f, "expect.released_output is set but harness did not report released_output")
		case !JSONEqual(rr.ReleasedOutput, e.ReleasedOutput):
			f = append(f, fmt.Sprintf("released_output == %s, want %s", compactJSON(rr.ReleasedOutput), compactJSON(e.ReleasedOutput)))
		}
	}
	if len(e.PersistedMustNotContain) > 0 {
		norm := rr.Persisted
		if gjson.Valid(norm) {
			norm = string(normalizeJSON([]byte(norm)))
		}
		for _, n := range e.PersistedMustNotContain {
			if strings.Contains(rr.Persisted, n) || strings.Contains(norm, n) {
				f = append(f, fmt.Sprintf("persisted contains %q, which MUST NOT become durable", n))
			}
		}
	}
	if e.ToolInvocations != nil {
		got := invocationsJSON(rr.ToolInvocations)
		if !JSONEqual(got, e.ToolInvocations) {
			f = append(f, fmt.Sprintf("tool_invocations == %s, want %s", compactJSON(got), compactJSON(e.ToolInvocations)))
		}
	}
	for _, name := range e.ToolNotInvoked {
		for _, inv := range rr.ToolInvocations {
			if inv.Name == name {
				f = append(f, fmt.Sprintf("tool %q was invoked but MUST NOT be", name))
				break
			}
		}
	}
	return f
}

// invocationsJSON builds [{"name":…,"args":…}] with the args bytes as the
// tool received them.
func invocationsJSON(invs []ToolInvocation) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, inv := range invs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":`)
		writeString(&b, inv.Name)
		b.WriteString(`,"args":`)
		if inv.Args == nil {
			b.WriteString("null")
		} else {
			b.Write(inv.Args)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.Bytes()
}

func assertIdentities(e Expect, rr RunRecord) []string {
	if e.IdentitiesEqual == nil {
		return nil
	}
	if len(rr.Identities) == 0 {
		return []string{"expect.identities_equal is set but harness did not report identities"}
	}
	var diffs []int
	for i, p := range rr.Identities {
		if !sameIdentity(p.Input, p.Enforced) {
			diffs = append(diffs, i)
		}
	}
	switch {
	case *e.IdentitiesEqual && len(diffs) > 0:
		return []string{fmt.Sprintf("identities_equal: expected input==enforced at every interception, but they differ at indices %v", diffs)}
	case !*e.IdentitiesEqual && len(diffs) == 0:
		return []string{"identities_equal: expected input!=enforced at some interception (a transform was applied), but all pairs are equal"}
	}
	return nil
}

func sameIdentity(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// assertRecords scans the records forward, matching each expectation to
// the next record at its interception point.
func assertRecords(e Expect, rr RunRecord) []string {
	if e.Records == nil {
		return nil
	}
	if len(rr.Records) == 0 {
		return []string{"expect.records is set but harness did not report records"}
	}
	var f []string
	ri := 0
	for _, x := range e.Records {
		for ri < len(rr.Records) && pointOf(rr.Records[ri]) != x.Point {
			ri++
		}
		if ri >= len(rr.Records) {
			return append(f, fmt.Sprintf("expected record for %q not found in order", x.Point))
		}
		rec := rr.Records[ri]
		label := fmt.Sprintf("record[%d] %s", ri, x.Point)
		for _, p := range x.Assert {
			got, ok := Lookup(rec, p.Path)
			switch {
			case !ok:
				f = append(f, fmt.Sprintf("%s: path %q did not resolve", label, p.Path))
			case !JSONEqual([]byte(got.Raw), p.Want):
				f = append(f, fmt.Sprintf("%s: %s == %s, want %s", label, p.Path, compactJSON([]byte(got.Raw)), compactJSON(p.Want)))
			}
		}
		for _, path := range x.Absent {
			if got, ok := Lookup(rec, path); ok {
				f = append(f, fmt.Sprintf("%s: %s present (%s), want absent", label, path, compactJSON([]byte(got.Raw))))
			}
		}
		for _, path := range x.Present {
			if _, ok := Lookup(rec, path); !ok {
				f = append(f, fmt.Sprintf("%s: %s absent, want present", label, path))
			}
		}
		ri++
	}
	return f
}

// assertSequence requires the recorded sequence numbers to be strictly
// increasing integers.
func assertSequence(recorded [][]byte) []string {
	var seq []int64
	for _, c := range recorded {
		s, ok := Lookup(c, "sequence")
		if !ok || s.Type != gjson.Number {
			continue
		}
		n, err := strconv.ParseInt(s.Raw, 10, 64)
		if err != nil {
			continue
		}
		seq = append(seq, n)
	}
	ok := len(seq) == len(recorded)
	for i := 1; ok && i < len(seq); i++ {
		ok = seq[i] > seq[i-1]
	}
	if !ok {
		return []string{fmt.Sprintf("sequence not strictly increasing: %v", seq)}
	}
	return nil
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func listOf(s []string) string {
	if len(s) == 0 {
		return "[]"
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func orMissing(s string) string {
	if s == "" {
		return "<missing>"
	}
	return s
}

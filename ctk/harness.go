package ctk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/hooksproxy/hooksproxy/points"
)

// Harness is the shim that drives one host through a vector (HARNESS.md):
// it wires the scenario's mock model and tools, registers the CTK
// interceptors and resolver, runs one session and reports what happened.
// The runner calls Setup, Run and Teardown once per vector, in that order,
// on one goroutine.
type Harness interface {
	// Capabilities is the declared capability set; a vector needing more is
	// skipped, not failed.
	Capabilities() []string
	// Posture is the declared tool_seam_host_error posture (§6.2):
	// "continue" (the spec default) or "terminate".
	Posture() string
	// Setup wires one vector. A host that refuses the vector's host
	// declaration returns a *LoadError naming the declaration_error class.
	Setup(s Setup) error
	// Run executes one session and reports it. An error fails the vector.
	Run(ctx context.Context) (RunRecord, error)
	// Teardown releases whatever Setup created; it runs even when Setup or
	// Run failed.
	Teardown()
}

// Setup is everything one vector asks a harness to wire.
type Setup struct {
	// Vector is the whole vector, for harnesses that need more than the
	// fields below.
	Vector *Vector
	// Scenario is the mock model and tools.
	Scenario Scenario
	// Bindings are the CTK interceptors in registration order, bound at
	// every point. The first one records the contexts the assertions read.
	Bindings []points.Binding
	// Scripts are the same interceptors, indexed by script number; a host
	// declaration binds them with kind ctk.scripted, config {"script": N}.
	Scripts []*Scripted
	// Resolver is the approval seam, nil when the vector registers none (an
	// empty approval_script registers none).
	Resolver points.Resolver
	// Mode is the enforcement mode (§8).
	Mode points.Mode
	// Composition is the profile and knobs (§7.2).
	Composition points.Composition
	// IdentityProvider names the provider: jcs-sha256, ctk-fault, or "" for
	// the null provider; Identity is a ready implementation of it (nil for
	// the null provider).
	IdentityProvider string
	Identity         points.IdentityProvider
	// RedactForApproval lists the §9 redaction paths; Redactor implements
	// the CTK convention over them (nil when there are none).
	RedactForApproval []string
	Redactor          points.Redactor
	// HostDeclaration, when set, is the declaration document the host must
	// load instead of using Mode, Composition, IdentityProvider and
	// Bindings directly (AH-CTK-120…139). Its ctk.scripted bindings name
	// Scripts by index and its approval resolver "ctk-scripted" is
	// Resolver.
	HostDeclaration json.RawMessage
}

// ScriptBindingName is the registration name of the ith CTK interceptor
// of a vector that does not name its bindings.
func ScriptBindingName(i int) string { return fmt.Sprintf("ctk-script-%d", i) }

// ShouldSkip returns why a harness with caps cannot run v ("" when it can).
func ShouldSkip(v Vector, caps []string) string {
	have := map[string]bool{}
	for _, c := range caps {
		have[c] = true
	}
	var missing []string
	for _, c := range v.Capabilities {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	if len(missing) == 1 {
		return "missing capability: " + missing[0]
	}
	return "missing capabilities: " + strings.Join(missing, ", ")
}

// NewSetup builds the CTK side of a vector: one recording scripted
// interceptor per script, the scripted resolver, and the vector's mode,
// composition, identity provider and redactor.
func NewSetup(v *Vector) Setup {
	s := Setup{
		Vector: v, Scenario: v.Scenario, Mode: v.Mode, Composition: v.CompositionConfig(),
		IdentityProvider: v.IdentityProvider, Identity: v.Identity(),
		RedactForApproval: v.RedactForApproval, Redactor: v.Redactor(),
		HostDeclaration: v.HostDeclaration,
	}
	for i, script := range v.Scripts {
		sc := ScriptedInterceptor(script)
		s.Scripts = append(s.Scripts, sc)
		s.Bindings = append(s.Bindings, points.Binding{Name: ScriptBindingName(i), Interceptor: sc})
	}
	if len(v.ApprovalScript) > 0 {
		s.Resolver = ScriptedResolver(v.ApprovalScript)
	}
	return s
}

// Recorded returns what the first interceptor recorded: expect.interceptions
// describes each emission as the first-registered interceptor saw it.
func (s Setup) Recorded() [][]byte {
	if len(s.Scripts) == 0 {
		return nil
	}
	return s.Scripts[0].Recorded()
}

// Run drives h through every vector in order and returns one Result each.
func Run(h Harness, vectors []Vector) []Result {
	return RunContext(context.Background(), h, vectors)
}

// RunContext is Run with a context for the harness runs.
func RunContext(ctx context.Context, h Harness, vectors []Vector) []Result {
	out := make([]Result, 0, len(vectors))
	for i := range vectors {
		out = append(out, RunVector(ctx, h, &vectors[i]))
	}
	return out
}

// RunVector runs one vector against h (RUNNER.md steps 1–5).
func RunVector(ctx context.Context, h Harness, v *Vector) Result {
	if reason := ShouldSkip(*v, h.Capabilities()); reason != "" {
		return Result{ID: v.ID, Title: v.Title, Part: v.Part, Status: StatusSkip, SkipReason: reason}
	}
	setup := NewSetup(v)
	defer guarded(h.Teardown)
	err := callSetup(h, setup)
	failures, proceed := AssertLoad(*v, err)
	if !proceed {
		return newResult(*v, failures)
	}
	rr, err := callRun(ctx, h)
	if err != nil {
		return newResult(*v, []string{fmt.Sprintf("harness.Run: %v", err)})
	}
	// The posture is the harness's declaration, never inferred (§13.1).
	rr.Postures = map[string]string{PostureToolSeamHostError: orDefault(h.Posture(), PostureContinue)}
	return Assert(*v, setup.Recorded(), rr)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// callSetup and callRun turn a harness panic into a failed vector rather
// than a crashed run.
func callSetup(h Harness, s Setup) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("harness.Setup panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return h.Setup(s)
}

func callRun(ctx context.Context, h Harness) (rr RunRecord, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return h.Run(ctx)
}

func guarded(f func()) {
	defer func() { _ = recover() }()
	f()
}

// Tally counts results by status.
type Tally struct {
	Passed, Failed, Skipped int
}

// Count tallies results.
func Count(results []Result) Tally {
	var t Tally
	for _, r := range results {
		switch r.Status {
		case StatusPass:
			t.Passed++
		case StatusFail:
			t.Failed++
		default:
			t.Skipped++
		}
	}
	return t
}

// String is the summary line: "ctk: N passed, N failed, N skipped".
func (t Tally) String() string {
	return fmt.Sprintf("ctk: %d passed, %d failed, %d skipped", t.Passed, t.Failed, t.Skipped)
}

// PartTally is the conformance report row of one part (§13.1); "" is the
// untagged core.
type PartTally struct {
	Part string
	Tally
}

// ByPart groups results by their part tag, sorted by part.
func ByPart(results []Result) []PartTally {
	m := map[string]*Tally{}
	for _, r := range results {
		t := m[r.Part]
		if t == nil {
			t = &Tally{}
			m[r.Part] = t
		}
		switch r.Status {
		case StatusPass:
			t.Passed++
		case StatusFail:
			t.Failed++
		default:
			t.Skipped++
		}
	}
	out := make([]PartTally, 0, len(m))
	for p, t := range m {
		out = append(out, PartTally{Part: p, Tally: *t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Part < out[j].Part })
	return out
}

// PrintSummary writes one line per vector (failures indented under their
// vector, skips with the missing capability) and then the summary line,
// and returns the tally.
func PrintSummary(w io.Writer, results []Result) Tally {
	for _, r := range results {
		switch r.Status {
		case StatusPass:
			fmt.Fprintf(w, "PASS %s %s\n", r.ID, r.Title)
		case StatusFail:
			fmt.Fprintf(w, "FAIL %s %s\n", r.ID, r.Title)
			for _, f := range r.Failures {
				fmt.Fprintf(w, "    - %s\n", strings.ReplaceAll(f, "\n", "\n      "))
			}
		default:
			fmt.Fprintf(w, "SKIP %s %s (%s)\n", r.ID, r.Title, r.SkipReason)
		}
	}
	t := Count(results)
	fmt.Fprintln(w, t.String())
	return t
}

// Package ctk is the AGENT-HOOKS-0.1 conformance test kit (§13.2) in Go:
// it loads the AH-CTK vectors, replays their interceptor and approval
// scripts, drives a Harness through each scenario and asserts every
// expect member. The in-process harness runs the vectors against the
// points emitter; hooksproxy's conformance command reuses the same runner
// with an HTTP harness.
//
// Vector values stay raw JSON from load to assertion, so integers beyond
// 2^53 and beyond u64 reach the host byte-faithfully (int64_json,
// bigint_json).
package ctk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/hooksproxy/hooksproxy/points"
)

// The capability names of the vector schema, plus host_declaration, which
// gates the declaration vectors (AH-CTK-120…139).
const (
	CapModelCalls        = "model_calls"
	CapToolCalls         = "tool_calls"
	CapParallelToolCalls = "parallel_tool_calls"
	CapStreaming         = "streaming"
	CapMultiTurn         = "multi_turn"
	CapInt64JSON         = "int64_json"
	CapBigintJSON        = "bigint_json"
	CapBufferedOutput    = "buffered_output"
	CapIncrementalOutput = "incremental_output"
	CapHostDeclaration   = "host_declaration"
)

// The identity provider names a vector may select (§10.1). A vector that
// omits identity_provider selects jcs-sha256; an explicit null selects the
// null provider, which Vector.IdentityProvider reports as "".
const (
	ProviderJCS      = "jcs-sha256"
	ProviderCTKFault = "ctk-fault"
)

// Vector is one AH-CTK test case. Every JSON value the host or the
// assertions will see is kept as raw bytes.
type Vector struct {
	ID         string
	Title      string
	SpecClause string
	Part       string
	// File is the name the vector was loaded from ("" when parsed from bytes).
	File string
	// Mode is "enforce" unless the vector says evaluate_only.
	Mode         points.Mode
	Capabilities []string
	Scenario     Scenario
	// Scripts holds one rule list per interceptor, in registration order.
	// The single-interceptor form (interceptor_script) is one list; an empty
	// interceptor_scripts registers zero interceptors.
	Scripts        []Script
	ApprovalScript []ApprovalRule
	// Composition is nil when the vector leaves the profile to the default
	// (sequential/first_deny, on_approval stop).
	Composition *CompositionSpec
	// IdentityProvider is jcs-sha256, ctk-fault, or "" for the null provider.
	IdentityProvider  string
	RedactForApproval []string
	// HostDeclaration is the declaration document of AH-CTK-120…139 (nil
	// for the other vectors); HostDeclarationInvalid marks documents that
	// fail the declaration schema.
	HostDeclaration        json.RawMessage
	HostDeclarationInvalid bool
	Expect                 Expect
	// Raw is the vector file as loaded.
	Raw json.RawMessage
}

// CompositionSpec is the vector's composition member (§7.2). Empty knobs
// are absent from the vector.
type CompositionSpec struct {
	Profile             string `json:"profile"`
	OnApproval          string `json:"on_approval,omitempty"`
	OnDisagreement      string `json:"on_disagreement,omitempty"`
	OnTransformConflict string `json:"on_transform_conflict,omitempty"`
}

// Scenario is the hermetic run a harness wires: one input, mock tools and
// a scripted mock model.
type Scenario struct {
	Input       ScenarioInput `json:"input"`
	Tools       []Tool        `json:"tools"`
	ModelScript []ModelStep   `json:"model_script"`
}

// ScenarioInput is the single input of the run.
type ScenarioInput struct {
	Content json.RawMessage `json:"content"`
	Role    string          `json:"role"`
}

// Tool is a mock tool: behaviours are tried top-down and the first whose
// when_args deep-equals the invocation args (or that has none) answers.
type Tool struct {
	Name     string          `json:"name"`
	Schema   json.RawMessage `json:"schema,omitempty"`
	Behavior []Behavior      `json:"behavior"`
}

// Behavior is one clause of a mock tool.
type Behavior struct {
	WhenArgs json.RawMessage `json:"when_args,omitempty"`
	Return   json.RawMessage `json:"return"`
	IsError  bool            `json:"is_error,omitempty"`
}

// ModelStep is the Nth mock model response.
type ModelStep struct {
	Respond Response `json:"respond"`
}

// Response is one scripted model response. Stream and StreamTruncated
// drive the streaming/incremental part only.
type Response struct {
	Content         json.RawMessage `json:"content"`
	ToolCalls       []ToolCall      `json:"tool_calls"`
	FinishReason    string          `json:"finish_reason"`
	Stream          []string        `json:"stream,omitempty"`
	StreamTruncated bool            `json:"stream_truncated,omitempty"`
	// ToolCallsRaw is the tool_calls array exactly as written.
	ToolCallsRaw json.RawMessage `json:"-"`
}

// ToolCall is one tool call a scripted model response requests.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Predicate is one dotted-path → expected-value pair of a match or an
// assert object.
type Predicate struct {
	Path string
	Want json.RawMessage
}

// Predicates is a match/assert object, sorted by path so failures read in
// a stable order.
type Predicates []Predicate

// UnmarshalJSON reads an object of path → value.
func (p *Predicates) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*p = nil
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("predicates must be an object: %w", err)
	}
	out := make(Predicates, 0, len(m))
	for k, v := range m {
		out = append(out, Predicate{Path: k, Want: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	*p = out
	return nil
}

// The fault injections of an interceptor rule.
const (
	FaultRaise            = "raise"
	FaultMalformedVerdict = "malformed_verdict"
	FaultMutate           = "mutate"
)

// Rule is one interceptor_script rule: at the point At, when every Match
// predicate holds, answer Return or inject Fault.
type Rule struct {
	At     points.Point    `json:"at"`
	Match  Predicates      `json:"match,omitempty"`
	Return json.RawMessage `json:"return,omitempty"`
	Fault  string          `json:"fault,omitempty"`
}

// Script is one interceptor's rule list.
type Script []Rule

// ApprovalRule is one approval_script rule.
type ApprovalRule struct {
	Match   Predicates `json:"match,omitempty"`
	Resolve Resolve    `json:"resolve"`
}

// Resolve is what a matching approval rule answers.
type Resolve struct {
	Outcome          string          `json:"outcome,omitempty"`
	Verdict          json.RawMessage `json:"verdict,omitempty"`
	Fault            string          `json:"fault,omitempty"`
	IdentityOverride *string         `json:"identity_override,omitempty"`
	EchoRecomputed   bool            `json:"echo_recomputed,omitempty"`
}

// Expect is the vector's expect object. Pointer and raw fields are nil
// when the member is absent, so "absent" and "null" stay distinct.
type Expect struct {
	Interceptions           []ExpectedInterception `json:"interceptions"`
	SequenceStrict          *bool                  `json:"sequence_strict,omitempty"`
	InterceptionsAbsent     []string               `json:"interceptions_absent,omitempty"`
	ToolInvocations         json.RawMessage        `json:"tool_invocations,omitempty"`
	ToolNotInvoked          []string               `json:"tool_not_invoked,omitempty"`
	FinalOutput             json.RawMessage        `json:"final_output,omitempty"`
	ReleasedOutput          json.RawMessage        `json:"released_output,omitempty"`
	PersistedMustNotContain []string               `json:"persisted_must_not_contain,omitempty"`
	RunOutcome              string                 `json:"run_outcome"`
	RunOutcomeByPosture     *OutcomeByPosture      `json:"run_outcome_by_posture,omitempty"`
	IdentitiesEqual         *bool                  `json:"identities_equal,omitempty"`
	Records                 []ExpectedRecord       `json:"records,omitempty"`
	// Load is the declaration vectors' load expectation.
	Load *ExpectLoad `json:"load,omitempty"`
}

// ExpectedInterception is one expected interception, matched against the
// contexts the first interceptor recorded.
type ExpectedInterception struct {
	Point               string     `json:"interception_point"`
	Context             Predicates `json:"context,omitempty"`
	ContextMustValidate *bool      `json:"context_must_validate,omitempty"`
	MustContain         []string   `json:"context_must_contain,omitempty"`
	MustNotContain      []string   `json:"context_must_not_contain,omitempty"`
}

// OutcomeByPosture selects the expected run outcome by a declared posture.
type OutcomeByPosture struct {
	Posture  string            `json:"posture"`
	Outcomes map[string]string `json:"outcomes"`
}

// ExpectedRecord is one forward-scan record assertion.
type ExpectedRecord struct {
	Point   string     `json:"interception_point"`
	Assert  Predicates `json:"assert,omitempty"`
	Absent  []string   `json:"absent,omitempty"`
	Present []string   `json:"present,omitempty"`
}

// ExpectLoad is the outcome a declaration load must have: "accepted", or
// "refused" with the declaration_error class.
type ExpectLoad struct {
	Outcome         string `json:"outcome"`
	Class           string `json:"class,omitempty"`
	PathsEquivalent *bool  `json:"paths_equivalent,omitempty"`
}

// HasScript reports whether the vector registers at least one interceptor.
func (v *Vector) HasScript() bool { return len(v.Scripts) > 0 }

// wireVector is the decoding shape; fields that need absent/null
// distinction stay raw.
type wireVector struct {
	ID                     string          `json:"id"`
	Title                  string          `json:"title"`
	SpecClause             string          `json:"spec_clause"`
	Part                   string          `json:"part"`
	Mode                   string          `json:"mode"`
	Capabilities           []string        `json:"capabilities"`
	Scenario               json.RawMessage `json:"scenario"`
	InterceptorScript      json.RawMessage `json:"interceptor_script"`
	InterceptorScripts     json.RawMessage `json:"interceptor_scripts"`
	ApprovalScript         []ApprovalRule  `json:"approval_script"`
	Composition            json.RawMessage `json:"composition"`
	IdentityProvider       json.RawMessage `json:"identity_provider"`
	RedactForApproval      []string        `json:"redact_for_approval"`
	HostDeclaration        json.RawMessage `json:"host_declaration"`
	HostDeclarationInvalid bool            `json:"host_declaration_invalid"`
	Expect                 json.RawMessage `json:"expect"`
}

// ParseVector decodes one vector file. It checks the members every runner
// relies on (id, title, scenario, expect, exactly one of interceptor_script
// and interceptor_scripts, rule shapes) and leaves every value raw.
func ParseVector(raw []byte) (Vector, error) {
	// Compacting drops layout only: every literal keeps its bytes.
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return Vector{}, fmt.Errorf("ctk: vector is not JSON: %w", err)
	}
	var w wireVector
	if err := json.Unmarshal(compact.Bytes(), &w); err != nil {
		return Vector{}, fmt.Errorf("ctk: vector is not a JSON object: %w", err)
	}
	v := Vector{
		ID: w.ID, Title: w.Title, SpecClause: w.SpecClause, Part: w.Part,
		Capabilities: w.Capabilities, ApprovalScript: w.ApprovalScript,
		RedactForApproval: w.RedactForApproval, HostDeclaration: w.HostDeclaration,
		HostDeclarationInvalid: w.HostDeclarationInvalid,
		Raw:                    append(json.RawMessage(nil), raw...),
	}
	if v.ID == "" {
		return Vector{}, errors.New("ctk: vector has no id")
	}
	fail := func(format string, args ...any) (Vector, error) {
		return Vector{}, fmt.Errorf("ctk: %s: "+format, append([]any{v.ID}, args...)...)
	}
	if w.Title == "" {
		return fail("missing title")
	}
	switch w.Mode {
	case "", string(points.Enforce):
		v.Mode = points.Enforce
	case string(points.EvaluateOnly):
		v.Mode = points.EvaluateOnly
	default:
		return fail("unknown mode %q", w.Mode)
	}
	if isAbsent(w.Scenario) {
		return fail("missing scenario")
	}
	sc, err := parseScenario(w.Scenario)
	if err != nil {
		return fail("scenario: %w", err)
	}
	v.Scenario = sc
	if isAbsent(w.Expect) {
		return fail("missing expect")
	}
	if err := json.Unmarshal(w.Expect, &v.Expect); err != nil {
		return fail("expect: %w", err)
	}
	if v.Expect.Load == nil && v.Expect.RunOutcome == "" {
		return fail("expect.run_outcome missing")
	}
	switch {
	case !isAbsent(w.InterceptorScript) && !isAbsent(w.InterceptorScripts):
		return fail("interceptor_script and interceptor_scripts are mutually exclusive")
	case !isAbsent(w.InterceptorScript):
		var s Script
		if err := json.Unmarshal(w.InterceptorScript, &s); err != nil {
			return fail("interceptor_script: %w", err)
		}
		v.Scripts = []Script{s}
	case !isAbsent(w.InterceptorScripts):
		if err := json.Unmarshal(w.InterceptorScripts, &v.Scripts); err != nil {
			return fail("interceptor_scripts: %w", err)
		}
		if v.Scripts == nil {
			v.Scripts = []Script{}
		}
	default:
		return fail("needs interceptor_script or interceptor_scripts")
	}
	for i, s := range v.Scripts {
		for j, r := range s {
			if err := r.check(); err != nil {
				return fail("interceptor script %d rule %d: %w", i, j, err)
			}
		}
	}
	for i, r := range v.ApprovalScript {
		if err := r.Resolve.check(); err != nil {
			return fail("approval_script rule %d: %w", i, err)
		}
	}
	if !isAbsent(w.Composition) {
		var c CompositionSpec
		if err := json.Unmarshal(w.Composition, &c); err != nil {
			return fail("composition: %w", err)
		}
		if c.Profile == "" {
			return fail("composition.profile missing")
		}
		v.Composition = &c
	}
	switch {
	case w.IdentityProvider == nil:
		v.IdentityProvider = ProviderJCS
	case bytes.Equal(bytes.TrimSpace(w.IdentityProvider), []byte("null")):
		v.IdentityProvider = ""
	default:
		var name string
		if err := json.Unmarshal(w.IdentityProvider, &name); err != nil {
			return fail("identity_provider: %w", err)
		}
		if name != ProviderJCS && name != ProviderCTKFault {
			return fail("identity_provider %q is not jcs-sha256, ctk-fault or null", name)
		}
		v.IdentityProvider = name
	}
	return v, nil
}

// isAbsent reports whether a raw member was absent or null; the vector
// schema gives null no meaning for the members it is used on.
func isAbsent(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

func parseScenario(raw json.RawMessage) (Scenario, error) {
	var sc Scenario
	if err := json.Unmarshal(raw, &sc); err != nil {
		return Scenario{}, err
	}
	if sc.Input.Content == nil {
		return Scenario{}, errors.New("input.content missing")
	}
	if sc.Input.Role == "" {
		return Scenario{}, errors.New("input.role missing")
	}
	// Keep each tool_calls array as written, for a byte-faithful
	// post_model_call response.
	var steps []struct {
		Respond struct {
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"respond"`
	}
	var holder struct {
		ModelScript *json.RawMessage `json:"model_script"`
	}
	if err := json.Unmarshal(raw, &holder); err != nil {
		return Scenario{}, err
	}
	if holder.ModelScript != nil {
		if err := json.Unmarshal(*holder.ModelScript, &steps); err != nil {
			return Scenario{}, err
		}
	}
	for i := range sc.ModelScript {
		r := &sc.ModelScript[i].Respond
		if r.Content == nil {
			return Scenario{}, fmt.Errorf("model_script[%d].respond.content missing", i)
		}
		r.ToolCallsRaw = steps[i].Respond.ToolCalls
		if isAbsent(r.ToolCallsRaw) {
			r.ToolCallsRaw = json.RawMessage(`[]`)
		}
		for j, tc := range r.ToolCalls {
			if tc.ID == "" || tc.Name == "" || tc.Args == nil {
				return Scenario{}, fmt.Errorf("model_script[%d].respond.tool_calls[%d] needs id, name and args", i, j)
			}
		}
	}
	for i, t := range sc.Tools {
		if t.Name == "" {
			return Scenario{}, fmt.Errorf("tools[%d].name missing", i)
		}
		for j, b := range t.Behavior {
			if b.Return == nil {
				return Scenario{}, fmt.Errorf("tools[%d].behavior[%d].return missing", i, j)
			}
		}
	}
	return sc, nil
}

func (r Rule) check() error {
	if !r.At.Valid() {
		return fmt.Errorf("at %q is not an interception point", r.At)
	}
	switch {
	case r.Return != nil && r.Fault != "":
		return errors.New("return and fault are mutually exclusive")
	case r.Return == nil && r.Fault == "":
		return errors.New("needs return or fault")
	}
	switch r.Fault {
	case "", FaultRaise, FaultMalformedVerdict, FaultMutate:
	default:
		return fmt.Errorf("unknown fault %q", r.Fault)
	}
	return nil
}

func (r Resolve) check() error {
	switch {
	case r.Fault != "" && r.Outcome != "":
		return errors.New("outcome and fault are mutually exclusive")
	case r.Fault != "" && r.Fault != FaultRaise:
		return fmt.Errorf("unknown fault %q", r.Fault)
	case r.Fault == "":
		switch r.Outcome {
		case points.OutcomeApprove, points.OutcomeReject, points.OutcomeUnresolved:
		default:
			return fmt.Errorf("outcome %q is not approve, reject or unresolved", r.Outcome)
		}
	}
	return nil
}

// LoadFS loads every AH-CTK-*.json file directly under dir in fsys, sorted
// by name. Zero vectors is an error: an empty run would report vacuous
// conformance (§13.2).
func LoadFS(fsys fs.FS, dir string) ([]Vector, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("ctk: reading vectors: %w", err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && strings.HasPrefix(n, "AH-CTK-") && strings.HasSuffix(n, ".json") {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("ctk: no AH-CTK-*.json vectors in %s", dir)
	}
	sort.Strings(names)
	out := make([]Vector, 0, len(names))
	for _, n := range names {
		raw, err := fs.ReadFile(fsys, path.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("ctk: %w", err)
		}
		v, err := ParseVector(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		v.File = n
		out = append(out, v)
	}
	return out, nil
}

// LoadDir loads the vectors of a directory on disk (see LoadFS).
func LoadDir(dir string) ([]Vector, error) {
	return LoadFS(os.DirFS(dir), ".")
}

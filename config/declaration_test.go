package config

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"gopkg.in/yaml.v3"

	"github.com/hooksproxy/hooksproxy/points"
)

const declDir = "../testdata/agent-hooks-0.1/declaration"

// allowAll is a trivial interceptor for registries in tests.
var allowAll = points.InterceptorFunc(func(context.Context, *points.Context) (points.Verdict, error) {
	return points.Allow(), nil
})

type namedProvider string

func (n namedProvider) Name() string                    { return string(n) }
func (n namedProvider) Identity([]byte) (string, error) { return "x:" + string(n), nil }

var noopResolver = points.ResolverFunc(func(context.Context, points.ApprovalRequest) (points.ApprovalResolution, error) {
	return points.ApprovalResolution{Outcome: points.OutcomeUnresolved}, nil
})

var noopRedactor = points.RedactorFunc(func(_ context.Context, raw []byte) ([]byte, error) { return raw, nil })

// ctkRegistry is the registry a CTK harness builds for one vector:
// ctk.scripted resolves {"script": <index>} against the vector's scripts.
func ctkRegistry(t testing.TB, scripts int) *MapRegistry {
	t.Helper()
	reg := NewConformanceRegistry()
	must(t, reg.RegisterKind("ctk.scripted", func(b BindingSpec) (points.Interceptor, error) {
		s := gjson.GetBytes(b.Config, "script")
		if s.Type != gjson.Number || s.Raw != fmt.Sprint(s.Int()) || s.Int() < 0 || int(s.Int()) >= scripts {
			return nil, errors.New("config.script must be the index of an interceptor script")
		}
		return allowAll, nil
	}))
	must(t, reg.RegisterResolver("ctk-scripted", noopResolver))
	return reg
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestDeclarationVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(declDir, "conformance/vectors/AH-CTK-1[23]*.json"))
	must(t, err)
	if len(files) != 20 {
		t.Fatalf("found %d declaration vectors, want 20", len(files))
	}
	passed, failed := 0, 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		must(t, err)
		v := gjson.ParseBytes(raw)
		id := v.Get("id").String()
		ok := t.Run(id, func(t *testing.T) {
			doc := []byte(v.Get("host_declaration").Raw)
			reg := ctkRegistry(t, len(v.Get("interceptor_scripts").Array()))
			d, err := LoadDeclaration(doc, reg)
			outcome := v.Get("expect.load.outcome").String()
			if v.Get("host_declaration_invalid").Bool() && outcome != "refused" {
				t.Fatalf("host_declaration_invalid vector expects %q", outcome)
			}
			switch outcome {
			case "refused":
				want := v.Get("expect.load.class").String()
				var de *DeclarationError
				if !errors.As(err, &de) {
					t.Fatalf("loaded (%v), want refusal %s", err, want)
				}
				if de.Class != want {
					t.Fatalf("class %s (%v), want %s", de.Class, de, want)
				}
			case "accepted":
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				checkLoadedVector(t, v, d)
			default:
				t.Fatalf("unknown expect.load.outcome %q", outcome)
			}
		})
		if ok {
			passed++
		} else {
			failed++
		}
	}
	t.Logf("declaration: %d passed, %d failed", passed, failed)
}

// checkLoadedVector checks what the records of an accepted vector will stamp
// from the declaration (the scenario itself is the CTK harness's job).
func checkLoadedVector(t *testing.T, v gjson.Result, d *Declaration) {
	t.Helper()
	if d.Version() != DeclarationVersion {
		t.Errorf("version %q", d.Version())
	}
	bs := d.Bindings()
	decl := v.Get("host_declaration.bindings").Array()
	if len(bs) != len(decl) {
		t.Fatalf("%d bindings, want %d", len(bs), len(decl))
	}
	for i, b := range bs {
		if b.Name != decl[i].Get("id").String() || b.Interceptor == nil || len(b.At) == 0 {
			t.Errorf("binding %d = %+v", i, b)
		}
	}
	for _, rec := range v.Get("expect.records").Array() {
		rec.Get("assert").ForEach(func(k, want gjson.Result) bool {
			var got any
			c := d.Composition()
			switch k.String() {
			case "declaration":
				got = d.Version()
			case "composition.profile":
				got = c.Profile
			case "composition.on_approval":
				got = c.OnApproval
			case "composition.on_disagreement":
				got = c.OnDisagreement
			case "composition.on_transform_conflict":
				got = c.OnTransformConflict
			case "identity_provider":
				got = d.IdentityProvider()
			case "mode":
				got = string(d.Mode())
			default:
				return true // emission-time facts
			}
			if fmt.Sprint(got) != want.String() {
				t.Errorf("%s: %v, want %s", k, got, want)
			}
			return true
		})
		for _, a := range rec.Get("absent").Array() {
			c := d.Composition()
			if knob, ok := strings.CutPrefix(a.String(), "composition."); ok && knobOf(c, knob) != "" {
				t.Errorf("%s present: %q", a, knobOf(c, knob))
			}
		}
	}
}

// goldenSurface reads the host surface the golden fixtures resolve against.
func goldenSurface(t *testing.T, g gjson.Result) HostSurface {
	t.Helper()
	s := g.Get("surface")
	var hs HostSurface
	for _, p := range s.Get("interception_points").Array() {
		pt, err := points.ParsePoint(p.String())
		must(t, err)
		hs.Points = append(hs.Points, pt)
	}
	for _, c := range s.Get("capabilities").Array() {
		hs.Capabilities = append(hs.Capabilities, c.String())
	}
	hs.Profiles = map[string]map[string][]string{}
	s.Get("profiles").ForEach(func(p, knobs gjson.Result) bool {
		m := map[string][]string{}
		knobs.ForEach(func(k, vs gjson.Result) bool {
			for _, v := range vs.Array() {
				m[k.String()] = append(m[k.String()], v.String())
			}
			return true
		})
		hs.Profiles[p.String()] = m
		return true
	})
	hs.Postures = []string{s.Get("tool_seam_host_error").String()}
	hs.StreamsUnbuffered = s.Get("streams_unbuffered").Bool()
	for _, v := range s.Get("declaration_versions").Array() {
		hs.DeclarationVersions = append(hs.DeclarationVersions, v.String())
	}
	if s.Get("interceptor_timeout").String() != "bounded" {
		t.Fatalf("golden surface is not bounded")
	}
	return hs
}

func goldenRegistry(t *testing.T, g gjson.Result) *MapRegistry {
	t.Helper()
	reg := NewRegistry()
	for _, k := range g.Get("names.kinds").Array() {
		must(t, reg.RegisterKind(k.String(), func(BindingSpec) (points.Interceptor, error) { return allowAll, nil }))
	}
	for _, n := range g.Get("names.identity_providers").Array() {
		must(t, reg.RegisterIdentityProvider(n.String(), namedProvider(n.String())))
	}
	for _, n := range g.Get("names.approval_resolvers").Array() {
		must(t, reg.RegisterResolver(n.String(), noopResolver))
	}
	for _, n := range g.Get("names.approval_redactors").Array() {
		must(t, reg.RegisterRedactor(n.String(), noopRedactor))
	}
	return reg
}

func loadGolden(t *testing.T) gjson.Result {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(declDir, "conformance/golden/declaration.json"))
	must(t, err)
	return gjson.ParseBytes(raw)
}

func TestDeclarationGolden(t *testing.T) {
	g := loadGolden(t)
	host := goldenSurface(t, g)
	reg := goldenRegistry(t, g)
	fixtures := g.Get("fixtures").Array()
	if len(fixtures) != 5 {
		t.Fatalf("%d fixtures, want 5", len(fixtures))
	}
	for _, fx := range fixtures {
		t.Run(fx.Get("id").String(), func(t *testing.T) {
			d, err := LoadDeclarationFor([]byte(fx.Get("document").Raw), reg, host)
			if err != nil {
				t.Fatal(err)
			}
			want := fx.Get("expect.canonical_json").String()
			if got := string(d.Canonical()); got != want {
				t.Fatalf("canonical form\n got %s\nwant %s", got, want)
			}
			// The resolved form is itself a document that resolves to itself.
			d2, err := LoadDeclarationFor(d.Canonical(), reg, host)
			if err != nil {
				t.Fatalf("reload of the canonical form: %v", err)
			}
			if !bytes.Equal(d2.Canonical(), d.Canonical()) {
				t.Fatalf("canonical form is not a fixed point:\n%s", d2.Canonical())
			}
		})
	}
}

// minimal is the smallest loadable document, with room for one edit.
func minimal(extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"allow","kind":"com.example.allow"}]` + extra + `}`
}

func testRegistry(t testing.TB) *MapRegistry {
	t.Helper()
	reg := NewRegistry()
	must(t, reg.RegisterKind("com.example.allow", func(BindingSpec) (points.Interceptor, error) { return allowAll, nil }))
	must(t, reg.RegisterKind("com.example.egress", func(BindingSpec) (points.Interceptor, error) { return allowAll, nil }))
	must(t, reg.RegisterKind("com.example.reject", func(BindingSpec) (points.Interceptor, error) {
		return nil, errors.New("bad config")
	}))
	must(t, reg.RegisterKind("com.example.panic", func(BindingSpec) (points.Interceptor, error) { panic("boom") }))
	must(t, reg.RegisterKind("com.example.nil", func(BindingSpec) (points.Interceptor, error) { return nil, nil }))
	must(t, reg.RegisterKind("com.example.multi", func(BindingSpec) (points.Interceptor, error) {
		return nil, errors.Join(memberErr("config.deny[1]"), memberErr(`config.match["a.b"].regex`), errors.New("no path"), memberErr("not.rooted"))
	}))
	must(t, reg.RegisterIdentityProvider("hmac-sha256-k1", namedProvider("hmac-sha256-k1")))
	must(t, reg.RegisterResolver("operator-queue", noopResolver))
	must(t, reg.RegisterRedactor("strip-secrets", noopRedactor))
	return reg
}

func TestDeclarationRefusals(t *testing.T) {
	allPts := `"agent_startup","input","pre_model_call","post_model_call","pre_tool_call","post_tool_call","output","agent_shutdown"`
	tests := []struct {
		name  string
		doc   string
		class string
		paths []string // every finding's path, when given
	}{
		{"empty", ``, ClassMalformed, []string{""}},
		{"array root", `[]`, ClassMalformed, nil},
		{"trailing", `{} x`, ClassMalformed, nil},
		{"two values", `{}{}`, ClassMalformed, nil},
		{"duplicate key", `{"declaration":1,"declaration":2,"bindings":[]}`, ClassMalformed, nil},
		{"nested duplicate", minimal(`"extensions":{"a":{"x":1,"x":2}}`), ClassMalformed, nil},
		{"too deep", strings.Repeat("[", 40) + strings.Repeat("]", 40), ClassMalformed, nil},
		{"depth 33", minimal(`"extensions":{"a":` + strings.Repeat("[", 31) + strings.Repeat("]", 31) + `}`), ClassMalformed, nil},
		{"non-finite", minimal(`"extensions":{"a":1e999}`), ClassMalformed, nil},
		{"lone surrogate", minimal(`"id":"\ud800x"`), ClassMalformed, nil},
		{"too big", `{"declaration":"x","pad":"` + strings.Repeat("a", maxDocumentBytes) + `"}`, ClassMalformed, nil},
		{"version first", `{"bindings":"nope","policy":1}`, ClassVersionUnsupported, []string{"/declaration"}},
		{"reserved major", `{"declaration":"agent-hooks-declaration/0.1","bindings":[]}`, ClassVersionUnsupported, nil},
		{"future minor", `{"declaration":"agent-hooks-declaration/1.9","bindings":[]}`, ClassVersionUnsupported, nil},
		{"version not string", `{"declaration":1,"bindings":[]}`, ClassVersionUnsupported, nil},
		{"spec major", minimal(`"spec":"agent-hooks/9.0"`), ClassSpecUnsupported, []string{"/spec"}},
		{"spec minor above", minimal(`"spec":"agent-hooks/0.2"`), ClassSpecUnsupported, nil},
		{"spec malformed", minimal(`"spec":"agent-hooks/x"`), ClassSpecUnsupported, nil},
		{"spec not string", minimal(`"spec":1`), ClassSpecUnsupported, nil},
		{"unknown top", minimal(`"policy":{}`), ClassUnknownField, []string{"/policy"}},
		{"unknown nested", minimal(`"configuration":{"composition":{"on_timeout":"deny"}}`), ClassUnknownField, []string{"/configuration/composition/on_timeout"}},
		{"unknown binding member", `{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"com.example.allow","extra":1}]}`, ClassUnknownField, []string{"/bindings/0/extra"}},
		{"unconsulted surface knob", minimal(`"surface":{"profiles":{"sequential/run_all":{"on_approval":["stop"]}}}`), ClassUnknownField, []string{"/surface/profiles/sequential~1run_all/on_approval"}},
		{"unknown profile", minimal(`"surface":{"profiles":{"parallel/quorum":{}}}`), ClassUnknownField, nil},
		{"unknown wins over invalid", minimal(`"policy":{},"configuration":{"mode":"audit"}`), ClassUnknownField, nil},
		{"invalid enum", minimal(`"configuration":{"mode":"audit"}`), ClassInvalidField, []string{"/configuration/mode"}},
		{"jcs prefix", minimal(`"configuration":{"identity_provider":"jcs-fake"}`), ClassInvalidField, nil},
		{"provider type", minimal(`"configuration":{"identity_provider":5}`), ClassInvalidField, nil},
		{"zero timeout", minimal(`"configuration":{"timeouts":{"interceptor_ms":0}}`), ClassInvalidField, nil},
		{"fractional timeout", minimal(`"configuration":{"timeouts":{"interceptor_ms":5000.5}}`), ClassInvalidField, nil},
		{"fractional exponent timeout", minimal(`"configuration":{"timeouts":{"interceptor_ms":5e-1}}`), ClassInvalidField, nil},
		{"huge exponent timeout", minimal(`"configuration":{"timeouts":{"interceptor_ms":1e300}}`), ClassInvalidField, nil},
		{"timeout above an hour", minimal(`"configuration":{"timeouts":{"approval_resolver_ms":3600001}}`), ClassInvalidField, nil},
		{"max_buffered zero", minimal(`"configuration":{"records":{"max_buffered":0}}`), ClassInvalidField, nil},
		{"kind without dot", `{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"nodot"}]}`, ClassInvalidField, []string{"/bindings/0/kind"}},
		{"binding id missing", `{"declaration":"agent-hooks-declaration/1.0","bindings":[{"kind":"com.example.allow"}]}`, ClassInvalidField, []string{"/bindings/0/id"}},
		{"binding not object", `{"declaration":"agent-hooks-declaration/1.0","bindings":[1]}`, ClassInvalidField, []string{"/bindings/0"}},
		{"at empty", `{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"com.example.allow","at":[]}]}`, ClassInvalidField, nil},
		{"at duplicate", `{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"com.example.allow","at":["input","input"]}]}`, ClassInvalidField, nil},
		{"at unknown point", `{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"com.example.allow","at":["pre_everything"]}]}`, ClassInvalidField, nil},
		{"unbuffered without bound", minimal(`"surface":{"buffered_output":false}`), ClassInvalidField, []string{"/surface/exposure_bound"}},
		{"bound while buffered", minimal(`"surface":{"exposure_bound":"none"}`), ClassInvalidField, nil},
		{"bad extension key", minimal(`"extensions":{"Bad":1}`), ClassInvalidField, nil},
		{"duplicate surface point", minimal(`"surface":{"interception_points":["input","input","output","agent_startup","agent_shutdown"]}`), ClassInvalidField, nil},
		{"host without name", minimal(`"host":{"version":"1"}`), ClassInvalidField, []string{"/host/name"}},
		{"bindings missing", `{"declaration":"agent-hooks-declaration/1.0"}`, ClassInvalidField, []string{"/bindings"}},
		{"too many bindings", `{"declaration":"agent-hooks-declaration/1.0","bindings":[` + strings.TrimSuffix(strings.Repeat(`{"id":"a","kind":"com.example.allow"},`, 257), ",") + `]}`, ClassInvalidField, nil},
		{"doc id pattern", minimal(`"id":"Prod"`), ClassInvalidField, []string{"/id"}},
		{"unconsulted knob", minimal(`"configuration":{"composition":{"profile":"sequential/run_all","on_approval":"resume"}}`), ClassInconsistent, []string{"/configuration/composition/on_approval"}},
		{"default profile knob", minimal(`"configuration":{"composition":{"on_disagreement":"deny"}}`), ClassInconsistent, nil},
		{"floor", minimal(`"surface":{"interception_points":["agent_startup","input","output","pre_tool_call","post_tool_call"]}`), ClassInconsistent, []string{"/surface/interception_points"}},
		{"tool pair", minimal(`"surface":{"interception_points":["agent_startup","input","output","agent_shutdown","pre_tool_call"]}`), ClassInconsistent, nil},
		{"capability pair", minimal(`"surface":{"capabilities":["host_declaration","tool_calls"]}`), ClassInconsistent, []string{"/surface/capabilities"}},
		{"knob default only", minimal(`"surface":{"profiles":{"sequential/first_deny":{}}},"configuration":{"composition":{"on_approval":"resume"}}`), ClassInconsistent, []string{"/configuration/composition/on_approval"}},
		{"profile outside surface", minimal(`"surface":{"profiles":{"sequential/run_all":{}}}`), ClassInconsistent, []string{"/configuration/composition/profile"}},
		{"own version missing", minimal(`"surface":{"declaration_versions":["agent-hooks-declaration/2.0"]}`), ClassInconsistent, nil},
		{"incremental buffered", minimal(`"surface":{"capabilities":["incremental_output","host_declaration","model_calls","tool_calls"]}`), ClassInconsistent, nil},
		{"duplicate ids", `{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"com.example.allow"},{"id":"a","kind":"com.example.allow"}]}`, ClassInconsistent, []string{"/bindings/1/id"}},
		{"at outside surface", `{"declaration":"agent-hooks-declaration/1.0","surface":{"interception_points":["agent_startup","input","output","agent_shutdown"],"capabilities":["host_declaration"]},"bindings":[{"id":"a","kind":"com.example.allow","at":["pre_tool_call"]}]}`, ClassInconsistent, []string{"/bindings/0/at"}},
		{"filled capabilities vs stated points", minimal(`"surface":{"interception_points":["agent_startup","input","output","agent_shutdown"]}`), ClassInconsistent, []string{"/surface/capabilities", "/surface/capabilities"}},
		{"unbuffered on a buffering host", minimal(`"surface":{"buffered_output":false,"exposure_bound":"none"}`), ClassSurfaceUnsupported, []string{"/surface/buffered_output"}},
		{"version in surface", minimal(`"surface":{"declaration_versions":["agent-hooks-declaration/0.1","agent-hooks-declaration/1.0"]}`), ClassSurfaceUnsupported, []string{"/surface/declaration_versions"}},
		{"capability the host lacks", minimal(`"surface":{"interception_points":[` + allPts + `],"capabilities":["host_declaration","model_calls","tool_calls","multi_turn"]}`), ClassSurfaceUnsupported, []string{"/surface/capabilities"}},
		{"unregistered provider", minimal(`"configuration":{"identity_provider":"hmac-sha256-k2"}`), ClassReferenceUnresolved, []string{"/configuration/identity_provider"}},
		{"unregistered resolver and redactor", minimal(`"configuration":{"approval":{"resolver":"nobody","redactor":"nobody"}}`), ClassReferenceUnresolved, []string{"/configuration/approval/resolver", "/configuration/approval/redactor"}},
		{"unknown kinds", `{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"com.example.allow"},{"id":"b","kind":"ctk.nonexistent"},{"id":"c","kind":"com.example.none"}]}`, ClassKindUnknown, []string{"/bindings/1/kind", "/bindings/2/kind"}},
		{"kind before rejection", `{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"com.example.reject"},{"id":"b","kind":"com.example.none"}]}`, ClassKindUnknown, nil},
		{"rejected", `{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"com.example.allow"},{"id":"b","kind":"com.example.reject","config":{"secret":"hunter2"}}]}`, ClassBindingRejected, []string{"/bindings/1"}},
		{"panicked", `{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"com.example.panic"}]}`, ClassBindingRejected, nil},
		{"nil interceptor", `{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"com.example.nil"}]}`, ClassBindingRejected, nil},
		{"every binding rejected, every problem", `{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"com.example.reject"},{"id":"b","kind":"com.example.allow"},{"id":"c","kind":"com.example.multi"},{"id":"d","kind":"com.example.panic"}]}`,
			ClassBindingRejected, []string{"/bindings/0", "/bindings/2/config/deny/1", "/bindings/2/config/match/a.b/regex", "/bindings/2", "/bindings/2", "/bindings/3"}},
	}
	reg := testRegistry(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadDeclaration([]byte(tt.doc), reg)
			var de *DeclarationError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want %s", err, tt.class)
			}
			if de.Class != tt.class {
				t.Fatalf("class %s (%v), want %s", de.Class, de, tt.class)
			}
			if tt.paths != nil {
				var got []string
				for _, f := range de.Findings {
					got = append(got, f.Path)
				}
				if !slices.Equal(got, tt.paths) {
					t.Fatalf("paths %q, want %q (%v)", got, tt.paths, de)
				}
			}
			if strings.Contains(de.Error(), "hunter2") {
				t.Fatalf("error echoes binding config: %v", de)
			}
		})
	}
}

func TestDeclarationFilledNote(t *testing.T) {
	_, err := LoadDeclaration([]byte(minimal(`"surface":{"interception_points":["agent_startup","input","output","agent_shutdown"]}`)), testRegistry(t))
	var de *DeclarationError
	if !errors.As(err, &de) || !strings.Contains(de.Detail, "it was filled from the host surface") {
		t.Fatalf("err = %v", err)
	}
}

func TestDeclarationKnobMatrix(t *testing.T) {
	reg := testRegistry(t)
	for _, profile := range profileOrder {
		for _, knob := range knobOrder {
			value := knobValues(knob)[1]
			doc := minimal(fmt.Sprintf(`"configuration":{"composition":{"profile":%q,%q:%q}}`, profile, knob, value))
			d, err := LoadDeclaration([]byte(doc), reg)
			if slices.Contains(consultedKnobs(profile), knob) {
				if err != nil || knobOf(d.Composition(), knob) != value {
					t.Errorf("%s %s: %v", profile, knob, err)
				}
				continue
			}
			var de *DeclarationError
			if !errors.As(err, &de) || de.Class != ClassInconsistent || de.Path != ptr("/configuration/composition", knob) {
				t.Errorf("%s %s: %v", profile, knob, err)
			}
		}
		d, err := LoadDeclaration([]byte(minimal(fmt.Sprintf(`"configuration":{"composition":{"profile":%q}}`, profile))), reg)
		if err != nil {
			t.Fatal(err)
		}
		want := points.Composition{Profile: profile}.WithDefaults()
		if d.Composition() != want {
			t.Errorf("%s defaults: %+v, want %+v", profile, d.Composition(), want)
		}
	}
}

func TestDeclarationNarrowHost(t *testing.T) {
	reg := testRegistry(t)
	narrow := DefaultSurface()
	narrow.Points = floorPoints
	narrow.Capabilities = []string{"host_declaration"}
	narrow.Postures = []string{PostureContinue}
	delete(narrow.Profiles, ProfileUnanimous)
	narrow.Profiles[ProfileFirstDeny] = map[string][]string{KnobOnApproval: {"stop"}}

	d, err := LoadDeclarationFor([]byte(minimal("")), reg, narrow)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(d.Surface().InterceptionPoints); n != 4 {
		t.Fatalf("absent surface takes the host's: %d points", n)
	}
	tests := []struct {
		doc   string
		paths []string
	}{
		{minimal(`"surface":{"interception_points":["agent_startup","input","pre_tool_call","post_tool_call","output","agent_shutdown"],"capabilities":["host_declaration","tool_calls"]}`),
			[]string{"/surface/interception_points", "/surface/interception_points", "/surface/capabilities"}},
		{minimal(`"configuration":{"composition":{"profile":"parallel/unanimous"}}`), []string{"/configuration/composition/profile"}},
		{minimal(`"configuration":{"composition":{"on_approval":"resume"}}`), []string{"/configuration/composition/on_approval"}},
		{minimal(`"configuration":{"posture":{"tool_seam_host_error":"terminate"}}`), []string{"/configuration/posture/tool_seam_host_error"}},
		{minimal(`"surface":{"profiles":{"parallel/unanimous":{}}},"configuration":{"composition":{"profile":"parallel/unanimous"}}`), []string{"/surface/profiles/parallel~1unanimous", "/configuration/composition/profile"}},
	}
	for _, tt := range tests {
		_, err := LoadDeclarationFor([]byte(tt.doc), reg, narrow)
		var de *DeclarationError
		if !errors.As(err, &de) || de.Class != ClassSurfaceUnsupported {
			t.Errorf("%s: %v", tt.doc, err)
			continue
		}
		var got []string
		for _, f := range de.Findings {
			got = append(got, f.Path)
		}
		if !slices.Equal(got, tt.paths) {
			t.Errorf("%s: paths %q, want %q", tt.doc, got, tt.paths)
		}
	}
	bad := narrow
	bad.Points = []points.Point{points.AgentStartup, points.Output, points.AgentShutdown}
	if _, err := LoadDeclarationFor([]byte(minimal("")), reg, bad); err == nil || !strings.Contains(err.Error(), "host surface") {
		t.Fatalf("invalid host surface: %v", err)
	}
}

func TestDeclarationResolved(t *testing.T) {
	reg := testRegistry(t)
	doc := `{
		"declaration": "agent-hooks-declaration/1.0",
		"id": "prod",
		"configuration": {
			"mode": "evaluate_only",
			"composition": {"profile": "parallel/strictest", "on_transform_conflict": "approval"},
			"identity_provider": "hmac-sha256-k1",
			"approval": {"resolver": "operator-queue", "redactor": "strip-secrets"},
			"posture": {"tool_seam_host_error": "terminate"},
			"timeouts": {"interceptor_ms": 2000, "approval_resolver_ms": null},
			"records": {"max_buffered": 10000}
		},
		"bindings": [
			{"id": "egress", "kind": "com.example.egress", "config": {"allow_hosts": ["internal.example"]}, "at": ["output", "pre_tool_call"], "timeout_ms": 1000},
			{"id": "allow", "kind": "com.example.allow", "timeout_ms": null},
			{"id": "rest", "kind": "com.example.allow"}
		]
	}`
	d, err := LoadDeclaration([]byte(doc), reg)
	if err != nil {
		t.Fatal(err)
	}
	if d.Mode() != points.EvaluateOnly || d.ID() != "prod" || d.Posture() != PostureTerminate {
		t.Errorf("mode %s id %s posture %s", d.Mode(), d.ID(), d.Posture())
	}
	if c := d.Composition(); c != (points.Composition{Profile: ProfileStrictest, OnTransformConflict: "approval"}) {
		t.Errorf("composition %+v", c)
	}
	if d.IdentityProvider() != "hmac-sha256-k1" || d.CustomIdentityProvider() == nil || d.IdentityUnbound() {
		t.Errorf("identity %q", d.IdentityProvider())
	}
	if d.ApprovalResolverRef() != "operator-queue" || d.ApprovalResolver() == nil || d.ApprovalRedactorRef() != "strip-secrets" || d.ApprovalRedactor() == nil {
		t.Errorf("approval refs")
	}
	if to := d.Timeouts(); to.Interceptor != 2*time.Second || to.ApprovalResolver != Unbounded {
		t.Errorf("timeouts %+v", to)
	}
	if d.RecordsMaxBuffered() != 10000 {
		t.Errorf("max buffered %d", d.RecordsMaxBuffered())
	}
	bs := d.Bindings()
	if len(bs) != 3 || bs[0].Name != "egress" || !slices.Equal(bs[0].At, []points.Point{points.PreToolCall, points.Output}) || bs[0].Timeout != time.Second {
		t.Fatalf("binding 0: %+v", bs[0])
	}
	if bs[1].Timeout != Unbounded || bs[2].Timeout != 2*time.Second || len(bs[2].At) != 8 {
		t.Errorf("bindings 1,2: %+v %+v", bs[1], bs[2])
	}
	if specs := d.BindingSpecs(); string(specs[0].Config) != `{"allow_hosts":["internal.example"]}` || string(specs[1].Config) != `{}` {
		t.Errorf("configs %s %s", specs[0].Config, specs[1].Config)
	}
	ec := d.EmitterConfig()
	if ec.Mode != points.EvaluateOnly || ec.Identity == nil || ec.Identity.Name() != "hmac-sha256-k1" || len(ec.Bindings) != 3 || ec.Declaration != DeclarationVersion || ec.InterceptorTimeout != 2*time.Second {
		t.Errorf("emitter config %+v", ec)
	}
	if _, err := points.NewEmitter(ec); err != nil {
		t.Errorf("NewEmitter: %v", err)
	}

	d, err = LoadDeclaration([]byte(minimal(`"configuration":{"identity_provider":null}`)), reg)
	if err != nil {
		t.Fatal(err)
	}
	if !d.IdentityUnbound() || d.IdentityProvider() != "" || d.EmitterConfig().Identity != nil {
		t.Errorf("null provider")
	}
	if string(d.Extensions()) != `{}` {
		t.Errorf("extensions %s", d.Extensions())
	}
	d, err = LoadDeclaration([]byte(minimal("")), reg)
	if err != nil {
		t.Fatal(err)
	}
	if d.EmitterConfig().Identity.Name() != IdentityJCSSHA256 || d.Timeouts().Interceptor != 5*time.Second {
		t.Errorf("defaults")
	}
}

func TestDeclarationFile(t *testing.T) {
	reg := testRegistry(t)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, data, 0o600))
		return p
	}
	if _, err := LoadDeclarationFile(write("ok.json", []byte(minimal(""))), reg); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{
		"missing":   filepath.Join(dir, "nope.json"),
		"directory": dir,
		"bom":       write("bom.json", append([]byte{0xEF, 0xBB, 0xBF}, minimal("")...)),
		"utf8":      write("utf8.json", []byte(minimal(`"id":"`+"\xff"+`"`))),
		"too big":   write("big.json", bytes.Repeat([]byte(" "), maxDocumentBytes+1)),
	} {
		_, err := LoadDeclarationFile(path, reg)
		var de *DeclarationError
		if !errors.As(err, &de) || de.Class != ClassUnreadable {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err := LoadDeclarationFile(filepath.Join(dir, "nope.json"), reg)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unreadable does not wrap the I/O error: %v", err)
	}
}

func TestRegistryRules(t *testing.T) {
	f := func(BindingSpec) (points.Interceptor, error) { return allowAll, nil }
	r := NewRegistry()
	for _, kind := range []string{"ctk.scripted", "agent_hooks.x", "nodot", "Com.x"} {
		if r.RegisterKind(kind, f) == nil {
			t.Errorf("kind %q registered", kind)
		}
	}
	must(t, r.RegisterKind("com.x.a", f))
	if r.RegisterKind("com.x.a", f) == nil {
		t.Error("duplicate kind")
	}
	if NewConformanceRegistry().RegisterKind("ctk.scripted", f) != nil {
		t.Error("conformance registry refuses ctk")
	}
	if r.RegisterIdentityProvider("jcs-x", namedProvider("jcs-x")) == nil {
		t.Error("jcs prefix")
	}
	if r.RegisterIdentityProvider("k1", namedProvider("k2")) == nil {
		t.Error("name mismatch")
	}
	if r.RegisterRedactor("Bad", noopRedactor) == nil || r.RegisterResolver("", noopResolver) == nil {
		t.Error("bad reference names")
	}
	if _, err := r.NewResolver("com.x.none", "a", nil); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("NewResolver: %v", err)
	}
	if got := (&DeclarationError{Class: ClassKindUnknown, Path: "/bindings/0/kind", Detail: "no resolver"}).Error(); got != "declaration_error:kind_unknown: /bindings/0/kind: no resolver" {
		t.Errorf("Error() = %q", got)
	}
	if len(DeclarationClasses()) != 11 {
		t.Error("classes")
	}
}

// TestDeclarationErrorsInventory keeps the class constants in step with
// spec/declaration-errors.json.
func TestDeclarationErrorsInventory(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(declDir, "spec/declaration-errors.json"))
	must(t, err)
	var got []string
	for _, c := range gjson.GetBytes(raw, "classes.#.id").Array() {
		got = append(got, c.String())
	}
	if !slices.Equal(got, DeclarationClasses()) {
		t.Fatalf("classes %q, want %q", got, DeclarationClasses())
	}
	schema, err := os.ReadFile(filepath.Join(declDir, "spec/schema/host-declaration-1.0.schema.json"))
	must(t, err)
	var caps []string
	for _, c := range gjson.GetBytes(schema, `$defs.capability.enum`).Array() {
		caps = append(caps, c.String())
	}
	if !slices.Equal(caps, capabilityVocabulary) {
		t.Fatalf("capabilities %q", caps)
	}
}

// anyKind resolves every kind, so fuzzed documents reach every step.
type anyKind struct{ *MapRegistry }

func (anyKind) HasKind(string) bool { return true }
func (anyKind) NewInterceptor(b BindingSpec) (points.Interceptor, error) {
	if !json.Valid(b.Config) {
		panic("config is not JSON")
	}
	return allowAll, nil
}

func FuzzLoadDeclaration(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(declDir, "conformance/vectors/*.json"))
	for _, p := range files {
		raw, _ := os.ReadFile(p)
		f.Add([]byte(gjson.GetBytes(raw, "host_declaration").Raw))
	}
	raw, _ := os.ReadFile(filepath.Join(declDir, "conformance/golden/declaration.json"))
	for _, d := range gjson.GetBytes(raw, "fixtures.#.document").Array() {
		f.Add([]byte(d.Raw))
	}
	f.Add([]byte(minimal(`"extensions":{"a":[1,2.5e3,"\u00e9",null]}`)))
	reg := anyKind{testRegistry(f)}
	f.Fuzz(func(t *testing.T, doc []byte) {
		d, err := LoadDeclaration(doc, reg)
		if err != nil {
			var de *DeclarationError
			if !errors.As(err, &de) || !slices.Contains(DeclarationClasses(), de.Class) {
				t.Fatalf("error %v is not a declaration refusal", err)
			}
			return
		}
		c := d.Canonical()
		d2, err := LoadDeclaration(c, reg)
		if err != nil {
			t.Fatalf("canonical form %s refused: %v", c, err)
		}
		if !bytes.Equal(d2.Canonical(), c) {
			t.Fatalf("canonical form not a fixed point:\n%s\n%s", c, d2.Canonical())
		}
	})
}

// blockStyle clears flow styles so yaml.v3 writes block YAML.
func blockStyle(n *yaml.Node) {
	n.Style &^= yaml.FlowStyle
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// TestDeclarationPathsEquivalent: the JSON, file, YAML-flow and YAML-block
// paths resolve every accepted vector to one canonical form (§7.7.7).
func TestDeclarationPathsEquivalent(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(declDir, "conformance/vectors/AH-CTK-1[23]*.json"))
	must(t, err)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		must(t, err)
		v := gjson.ParseBytes(raw)
		if v.Get("expect.load.outcome").String() != "accepted" {
			continue
		}
		t.Run(v.Get("id").String(), func(t *testing.T) {
			doc := []byte(v.Get("host_declaration").Raw)
			reg := ctkRegistry(t, len(v.Get("interceptor_scripts").Array()))
			d, err := LoadDeclaration(doc, reg)
			must(t, err)
			want := string(d.Canonical())

			path := filepath.Join(t.TempDir(), "decl.json")
			must(t, os.WriteFile(path, doc, 0o600))
			df, err := LoadDeclarationFile(path, reg)
			must(t, err)

			head := "upstream: {base_url: https://x.example}\nagent: {id: a}\n"
			cf, err := Parse([]byte(head+"hooks: "+string(doc)+"\n"), "flow.yaml", reg)
			must(t, err)

			var n yaml.Node
			must(t, yaml.Unmarshal(doc, &n))
			blockStyle(&n)
			block, err := yaml.Marshal(n.Content[0])
			must(t, err)
			indented := "  " + strings.ReplaceAll(strings.TrimSpace(string(block)), "\n", "\n  ")
			cb, err := Parse([]byte(head+"hooks:\n"+indented+"\n"), "block.yaml", reg)
			must(t, err)

			for name, got := range map[string]*Declaration{"file": df, "yaml flow": cf.Hooks, "yaml block": cb.Hooks} {
				if string(got.Canonical()) != want {
					t.Errorf("%s path:\n got %s\nwant %s", name, got.Canonical(), want)
				}
			}
		})
	}
}

func TestSurfaceFromCapabilities(t *testing.T) {
	s := SurfaceFromCapabilities([]string{"model_calls", "int64_json", "host_declaration"}, PostureTerminate, "")
	if len(s.Points) != 6 || slices.Contains(s.Points, points.PreToolCall) || s.Validate() != nil {
		t.Fatalf("%+v %v", s, s.Validate())
	}
	d, err := LoadDeclarationFor([]byte(minimal(`"configuration":{"posture":{"tool_seam_host_error":"terminate"}}`)), testRegistry(t), s)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Surface(); len(got.InterceptionPoints) != 6 || !got.Has("int64_json") || !got.BufferedOutput {
		t.Fatalf("%+v", got)
	}
	inc := SurfaceFromCapabilities([]string{"incremental_output", "host_declaration"}, PostureContinue, "one chunk")
	if inc.Validate() != nil {
		t.Fatal(inc.Validate())
	}
	d, err = LoadDeclarationFor([]byte(minimal("")), testRegistry(t), inc)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Surface(); got.BufferedOutput || got.ExposureBound != "one chunk" || !strings.Contains(string(d.Canonical()), `"exposure_bound":"one chunk"`) {
		t.Fatalf("%+v", got)
	}
	if SurfaceFromCapabilities([]string{"incremental_output"}, PostureContinue, "").Validate() == nil {
		t.Fatal("incremental without bound validated")
	}
}

// memberErr is a kind config error that names its member, as the built-in
// kinds' errors do.
type memberErr string

func (m memberErr) Error() string      { return string(m) + ": bad" }
func (m memberErr) MemberPath() string { return string(m) }

func TestConfigPathPointer(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"config", "/config", true},
		{"config.deny[2]", "/config/deny/2", true},
		{`config.rules[0].match["input..content"]`, "/config/rules/0/match/input..content", true},
		{`config.m["a/b~c"].x`, "/config/m/a~1b~0c/x", true},
		{`config.m["q\"x"]`, `/config/m/q"x`, true},
		{"settings.x", "", false},
		{"config.", "", false},
		{"config[x]", "", false},
		{`config["open`, "", false},
		{"configx", "", false},
	}
	for _, tt := range tests {
		got, ok := configPathPointer(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("configPathPointer(%q) = %q %v, want %q %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// JSON Schema 2020-12 counts any number with a zero fractional part as an
// integer, and the schema types the timeouts and max_buffered "integer".
func TestIntegerForms(t *testing.T) {
	// §7.7.3: integers without a fraction or an exponent; the other forms
	// are refused as invalid_field even where a schema validator takes them.
	for _, lit := range []string{"1000.0", "1e3", "1E3", "5e+3", "0.5e4"} {
		_, err := LoadDeclaration([]byte(minimal(`"configuration":{"timeouts":{"interceptor_ms":`+lit+`}}`)), testRegistry(t))
		var de *DeclarationError
		if !errors.As(err, &de) || de.Class != "declaration_error:invalid_field" || !strings.Contains(err.Error(), "without a fraction or an exponent") {
			t.Errorf("%s: %v", lit, err)
		}
	}
	d, err := LoadDeclaration([]byte(minimal(`"configuration":{"timeouts":{"interceptor_ms":1000,"approval_resolver_ms":600000},"records":{"max_buffered":10000}}`)), testRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	if to := d.Timeouts(); to.Interceptor != time.Second || to.ApprovalResolver != 10*time.Minute || d.RecordsMaxBuffered() != 10000 {
		t.Fatalf("%+v %d", to, d.RecordsMaxBuffered())
	}
}

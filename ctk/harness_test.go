package ctk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hooksproxy/hooksproxy/points"
)

func vectorByID(t *testing.T, vs []Vector, id string) Vector {
	t.Helper()
	for _, v := range vs {
		if v.ID == id {
			return v
		}
	}
	t.Fatalf("vector %s not found", id)
	return Vector{}
}

// TestTerminatePosture runs every vector under the terminate posture: the
// posture-dependent vectors then expect a blocked run, and everything else
// is unchanged.
func TestTerminatePosture(t *testing.T) {
	vs := loadAll(t)
	h := NewInProcess()
	h.ToolSeamHostError = PostureTerminate
	results := Run(h, vs)
	for _, r := range results {
		if r.Status == StatusFail {
			t.Errorf("%s: %q", r.ID, r.Failures)
		}
	}
	if n := Count(results).Passed; n < 60 {
		t.Errorf("only %d passed", n)
	}
}

// sabotaged wraps the in-process harness with one host defect, to prove
// the kit notices it.
type sabotaged struct {
	*InProcess
	setup func(*Setup)
	run   func(*RunRecord)
}

func (s sabotaged) Setup(st Setup) error {
	if s.setup != nil {
		s.setup(&st)
	}
	return s.InProcess.Setup(st)
}

func (s sabotaged) Run(ctx context.Context) (RunRecord, error) {
	rr, err := s.InProcess.Run(ctx)
	if s.run != nil {
		s.run(&rr)
	}
	return rr, err
}

func TestKitCatchesHostDefects(t *testing.T) {
	vs := loadAll(t)
	cases := []struct {
		name   string
		vector string
		h      sabotaged
		want   string
	}{
		{"ignores the approval seam", "AH-CTK-030", sabotaged{setup: func(s *Setup) { s.Resolver = nil }}, "resolved_by"},
		{"runs evaluate_only when told enforce", "AH-CTK-010", sabotaged{setup: func(s *Setup) { s.Mode = points.EvaluateOnly }}, `tool "delete_files" was invoked`},
		{"wrong profile", "AH-CTK-084", sabotaged{setup: func(s *Setup) { s.Composition = points.Composition{Profile: points.ProfileFirstDeny} }}, "composition.profile"},
		{"null provider when jcs is asked", "AH-CTK-030", sabotaged{setup: func(s *Setup) { s.Identity = nil }}, "identity_provider"},
		{"skips the redactor", "AH-CTK-099", sabotaged{setup: func(s *Setup) { s.Redactor = nil }}, "resolved_by"},
		{"registers interceptors in reverse", "AH-CTK-060", sabotaged{setup: func(s *Setup) {
			s.Bindings[0], s.Bindings[1] = s.Bindings[1], s.Bindings[0]
		}}, ""},
		{"tool receives untransformed args", "AH-CTK-020", sabotaged{run: func(rr *RunRecord) {
			rr.ToolInvocations[0].Args = json.RawMessage(`{"url":"https://evil.example"}`)
		}}, "tool_invocations =="},
		{"leaks output after a deny", "AH-CTK-012", sabotaged{run: func(rr *RunRecord) { rr.FinalOutput = json.RawMessage(`"the secret is X"`) }}, "final_output"},
		{"records carry the transform value", "AH-CTK-093", sabotaged{run: func(rr *RunRecord) {
			for i, r := range rr.Records {
				rr.Records[i] = bytes.Replace(r, []byte(`"transform":{"path":"$target.url"}`), []byte(`"transform":{"path":"$target.url","value":"https://safe"}`), 1)
			}
		}}, "want absent"},
		{"reports no records", "AH-CTK-081", sabotaged{run: func(rr *RunRecord) { rr.Records = nil }}, "did not report records"},
		{"misreports identities", "AH-CTK-020", sabotaged{run: func(rr *RunRecord) {
			for i := range rr.Identities {
				rr.Identities[i].Enforced = rr.Identities[i].Input
			}
		}}, "identities_equal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := vectorByID(t, vs, c.vector)
			h := c.h
			h.InProcess = NewInProcess()
			r := RunVector(context.Background(), h, &v)
			if r.Status != StatusFail {
				t.Fatalf("%s passed with the defect", c.vector)
			}
			if c.want != "" && !strings.Contains(strings.Join(r.Failures, "\n"), c.want) {
				t.Fatalf("failures %q do not mention %q", r.Failures, c.want)
			}
		})
	}
}

// panicky is a harness whose Run panics.
type panicky struct{ *InProcess }

func (panicky) Run(context.Context) (RunRecord, error) { panic("boom") }

// failing is a harness whose Run fails.
type failing struct{ *InProcess }

func (failing) Run(context.Context) (RunRecord, error) { return RunRecord{}, errors.New("no upstream") }

func TestRunVectorHarnessErrors(t *testing.T) {
	v := vectorByID(t, loadAll(t), "AH-CTK-002")
	r := RunVector(context.Background(), panicky{NewInProcess()}, &v)
	if r.Status != StatusFail || !strings.Contains(r.Failures[0], "panicked: boom") {
		t.Fatalf("panic not reported: %+v", r)
	}
	r = RunVector(context.Background(), failing{NewInProcess()}, &v)
	if r.Status != StatusFail || !strings.Contains(r.Failures[0], "harness.Run: no upstream") {
		t.Fatalf("error not reported: %+v", r)
	}
}

func TestShouldSkip(t *testing.T) {
	v := Vector{Capabilities: []string{"model_calls", "incremental_output", "streaming"}}
	cases := []struct {
		caps []string
		want string
	}{
		{[]string{"model_calls", "incremental_output", "streaming"}, ""},
		{[]string{"model_calls", "streaming"}, "missing capability: incremental_output"},
		{nil, "missing capabilities: model_calls, incremental_output, streaming"},
	}
	for _, c := range cases {
		if got := ShouldSkip(v, c.caps); got != c.want {
			t.Errorf("ShouldSkip(%v) = %q, want %q", c.caps, got, c.want)
		}
	}
}

func TestPrintSummary(t *testing.T) {
	results := []Result{
		{ID: "AH-CTK-001", Title: "a", Status: StatusPass},
		{ID: "AH-CTK-002", Title: "b", Status: StatusFail, Failures: []string{"one\ntwo"}},
		{ID: "AH-CTK-110", Title: "c", Part: "streaming/incremental", Status: StatusSkip, SkipReason: "missing capability: incremental_output"},
	}
	var buf bytes.Buffer
	tally := PrintSummary(&buf, results)
	want := "PASS AH-CTK-001 a\nFAIL AH-CTK-002 b\n    - one\n      two\nSKIP AH-CTK-110 c (missing capability: incremental_output)\nctk: 1 passed, 1 failed, 1 skipped\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
	if tally != (Tally{1, 1, 1}) {
		t.Fatalf("tally %+v", tally)
	}
	parts := ByPart(results)
	if len(parts) != 2 || parts[0].Part != "" || parts[0].Passed != 1 || parts[0].Failed != 1 || parts[1].Skipped != 1 {
		t.Fatalf("ByPart = %+v", parts)
	}
}

// TestInProcessConformanceSummary is the headline: every applicable vector
// passes and the incremental part is skipped naming its capability.
func TestInProcessSkipsNameCapability(t *testing.T) {
	for _, r := range Run(NewInProcess(), loadAll(t)) {
		if r.Status == StatusSkip && r.SkipReason != "missing capability: incremental_output" {
			t.Errorf("%s skipped for %q", r.ID, r.SkipReason)
		}
		if strings.HasPrefix(r.Part, "streaming/incremental") != (r.Status == StatusSkip) {
			t.Errorf("%s (%s): status %s", r.ID, r.Part, r.Status)
		}
	}
}

func TestLoadFSEmbedded(t *testing.T) {
	raw := []byte(`{"id":"AH-CTK-001","title":"t","spec_clause":"1","scenario":{"input":{"content":"hi","role":"user"}},"interceptor_script":[],"expect":{"interceptions":[],"run_outcome":"completed"}}`)
	fsys := fstest.MapFS{
		"v/AH-CTK-002-b.json": {Data: bytes.Replace(raw, []byte("001"), []byte("002"), 1)},
		"v/AH-CTK-001-a.json": {Data: raw},
		"v/README.md":         {Data: []byte("not a vector")},
		"v/AH-CTK-003.txt":    {Data: []byte("not a vector")},
	}
	vs, err := LoadFS(fsys, "v")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].ID != "AH-CTK-001" || vs[1].ID != "AH-CTK-002" || vs[0].File != "AH-CTK-001-a.json" {
		t.Fatalf("loaded %+v", vs)
	}
	if _, err := LoadFS(fstest.MapFS{"v/README.md": {Data: nil}}, "v"); err == nil {
		t.Fatal("an empty vector set loaded")
	}
	bad := fstest.MapFS{"v/AH-CTK-001.json": {Data: []byte(`{"id":"AH-CTK-001"}`)}}
	if _, err := LoadFS(bad, "v"); err == nil || !strings.Contains(err.Error(), "AH-CTK-001.json") {
		t.Fatalf("bad vector error %v does not name the file", err)
	}
}

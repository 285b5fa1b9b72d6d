package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/hooksproxy/hooksproxy"
	"github.com/hooksproxy/hooksproxy/ctk"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// vectorDir copies the named embedded vectors into a temporary directory,
// each through edit when given.
func vectorDir(t *testing.T, edit func(id string, raw []byte) []byte, ids ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, root := range []string{hooksproxy.CTKVectorsDir, hooksproxy.CTKDeclarationVectorsDir} {
		entries, err := fs.ReadDir(hooksproxy.CTKData, root)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			for _, id := range ids {
				if !strings.HasPrefix(e.Name(), id+"-") {
					continue
				}
				raw, err := fs.ReadFile(hooksproxy.CTKData, path.Join(root, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if edit != nil {
					raw = edit(id, raw)
				}
				if err := os.WriteFile(filepath.Join(dir, e.Name()), raw, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return dir
}

func runConformance(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"conformance"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

// TestConformanceOutputFormat pins the text report: one line per vector,
// the tally, the claim tuple, the declared surface and the per-part rows.
func TestConformanceOutputFormat(t *testing.T) {
	dir := vectorDir(t, nil, "AH-CTK-001", "AH-CTK-110", "AH-CTK-127")
	out, errs, code := runConformance(t, "--vectors", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	// The report names the directory, the build and the Go version; the
	// golden file holds placeholders for the directory and Go, and "dev"
	// for the build.
	got := strings.ReplaceAll(out, dir, "DIR")
	got = strings.ReplaceAll(got, "hooksproxy "+buildVersion()+",", "hooksproxy dev,")
	got = strings.ReplaceAll(got, "go@"+strings.TrimPrefix(goruntime.Version(), "go"), "go@GOVERSION")
	golden := filepath.Join("testdata", "conformance.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("report differs from %s (run with -update to accept):\n%s", golden, got)
	}
}

// TestConformanceEmbedded runs the command as a user would, on the
// embedded vectors through both seams; streamed only, to keep the test
// quick (ctk's own tests run the plain wire too).
func TestConformanceEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every vector twice")
	}
	out, errs, code := runConformance(t, "--wire", "stream")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	line := regexp.MustCompile(`^(PASS AH-CTK-\d{3} .+|SKIP AH-CTK-11[0-3] .+ \(missing capability: incremental_output\))$`)
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "ctk: ") {
			break
		}
		if !line.MatchString(l) {
			t.Errorf("unexpected vector line %q", l)
		}
		n++
	}
	if n != 71 {
		t.Errorf("%d vector lines, want 71", n)
	}
	for _, want := range []string{
		"\nctk: 67 passed, 0 failed, 4 skipped\n",
		"\nclaim: (openai-compatible, hooksproxy " + version + ", agent-hooks/0.1, {bigint_json, host_declaration, int64_json, model_calls, parallel_tool_calls, streaming, tool_calls}, {sequential/first_deny, sequential/run_all, parallel/strictest, parallel/unanimous}, jcs-sha256, go@",
		"  exercised:         71 vectors (embedded agent-hooks-0.1) x seams host-api, transparent x wire stream = 142 runs\n",
		"  declaration/refusal                13 passed, 0 failed, 0 skipped\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestConformanceFailure: a vector the proxy does not satisfy fails with
// its reasons under each variant, and the command exits 1.
func TestConformanceFailure(t *testing.T) {
	dir := vectorDir(t, func(_ string, raw []byte) []byte {
		return bytes.Replace(raw, []byte(`"final_output": "The answer is 4."`), []byte(`"final_output": "The answer is 5."`), 1)
	}, "AH-CTK-001", "AH-CTK-002")
	out, _, code := runConformance(t, "--vectors", dir, "--wire", "plain")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{
		"FAIL AH-CTK-001 All eight interception points fire in spec order with valid L0+L1 context\n",
		`    - [host-api/plain] final_output == "The answer is 4.", want "The answer is 5."` + "\n",
		`    - [transparent/plain] final_output == "The answer is 4.", want "The answer is 5."` + "\n",
		"PASS AH-CTK-002 ",
		"\nctk: 1 passed, 1 failed, 0 skipped\n",
		"x seams host-api, transparent x wire plain = 4 runs\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestConformanceJSON(t *testing.T) {
	dir := vectorDir(t, nil, "AH-CTK-010", "AH-CTK-111", "AH-CTK-133")
	out, errs, code := runConformance(t, "--vectors", dir, "--json", "--seam", "transparent", "--wire", "stream")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	var rep report
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Tally != (partRow{Passed: 2, Skipped: 1}) {
		t.Errorf("tally %+v", rep.Tally)
	}
	if len(rep.Results) != 3 || rep.Results[0].ID != "AH-CTK-010" || rep.Results[1].Status != ctk.StatusSkip ||
		rep.Results[1].SkipReason != "missing capability: incremental_output" || rep.Results[2].Part != "declaration/refusal" {
		t.Errorf("results %+v", rep.Results)
	}
	for _, r := range rep.Results {
		if len(r.Variants) != 1 || r.Variants[0].variant != (variant{Seam: ctk.SeamTransparent, Wire: wireStream}) {
			t.Errorf("%s variants %+v", r.ID, r.Variants)
		}
	}
	c := rep.Claim
	if c.Framework != "openai-compatible" || c.Adapter != "hooksproxy" || c.Version != version || c.Spec != "agent-hooks/0.1" ||
		c.IdentityProvider != "jcs-sha256" || !strings.HasPrefix(c.SDK, "go@") || len(c.Profiles) != 4 {
		t.Errorf("claim %+v", c)
	}
	if !contains(c.Capabilities, ctk.CapStreaming) || contains(c.Capabilities, ctk.CapBufferedOutput) || contains(c.Capabilities, ctk.CapIncrementalOutput) {
		t.Errorf("claim capabilities %v", c.Capabilities)
	}
	s := rep.Surface
	if !s.BufferedOutput || s.Postures["tool_seam_host_error"] != "continue" || len(s.Profiles["sequential/first_deny"]["on_approval"]) != 2 {
		t.Errorf("surface %+v", s)
	}
	if rep.Exercised.Runs != 3 || rep.Exercised.Source != dir {
		t.Errorf("exercised %+v", rep.Exercised)
	}

	// A plain-only run does not claim streaming.
	out, _, _ = runConformance(t, "--vectors", dir, "--json", "--seam", "host-api", "--wire", "plain")
	rep = report{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if contains(rep.Claim.Capabilities, ctk.CapStreaming) {
		t.Errorf("plain run claims %v", rep.Claim.Capabilities)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestConformanceUsageErrors(t *testing.T) {
	empty := t.TempDir()
	// An absolute path no other process can create meanwhile (a fixed
	// /nonexistent could be).
	absent := filepath.Join(t.TempDir(), "no", "such", "dir")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--seam", "sideways"}, 2, "--seam must be"},
		{[]string{"--wire", "carrier-pigeon"}, 2, "--wire must be"},
		{[]string{"extra"}, 2, "unexpected argument"},
		{[]string{"--nope"}, 2, "flag provided but not defined"},
		{[]string{"--vectors", empty}, 1, "hooksproxy conformance: no AH-CTK-*.json vectors under " + empty + "\n"},
		{[]string{"--vectors", filepath.Join(empty, "missing")}, 1, "hooksproxy conformance: --vectors " + filepath.Join(empty, "missing") + ": no such file or directory\n"},
		{[]string{"--vectors", absent}, 1, "--vectors " + absent + ": no such file or directory"},
		{[]string{"--vectors", "testdata"}, 1, "no AH-CTK-*.json vectors under testdata\n"},
		{[]string{"--vectors", "conformance.go"}, 1, "--vectors conformance.go: not a directory"},
	}
	for _, c := range cases {
		out, errs, code := runConformance(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", c.args, code, errs, out)
		}
	}
}

func TestLoadVectors(t *testing.T) {
	vs, err := loadVectors(hooksproxy.CTKData, hooksproxy.CTKRoot, "embedded")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 71 || vs[0].ID != "AH-CTK-001" || vs[len(vs)-1].ID != "AH-CTK-139" {
		t.Fatalf("%d vectors, %s … %s", len(vs), vs[0].ID, vs[len(vs)-1].ID)
	}
	for i := 1; i < len(vs); i++ {
		if vs[i-1].ID >= vs[i].ID {
			t.Errorf("not sorted: %s before %s", vs[i-1].ID, vs[i].ID)
		}
	}
	// The same vector in two directories is refused.
	dir := vectorDir(t, nil, "AH-CTK-001")
	sub := filepath.Join(dir, "copy")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "AH-CTK-001-basic-loop.json"))
	if err := os.WriteFile(filepath.Join(sub, "AH-CTK-001-again.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadVectorDir(dir); err == nil || !strings.Contains(err.Error(), "defined twice: "+filepath.Join(dir, "AH-CTK-001-basic-loop.json")) ||
		!strings.Contains(err.Error(), filepath.Join(dir, "copy", "AH-CTK-001-again.json")) {
		t.Errorf("duplicate id: %v", err)
	}
	// A broken vector is named by the path the user gave.
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "AH-CTK-999-broken.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadVectorDir(bad); err == nil || !strings.HasPrefix(err.Error(), bad+": ") {
		t.Errorf("broken vector: %v", err)
	}
}

func TestMerge(t *testing.T) {
	vs := []variant{{"host-api", "plain"}, {"transparent", "plain"}}
	r := func(status, reason string, failures ...string) ctk.Result {
		return ctk.Result{ID: "X", Title: "t", Status: status, SkipReason: reason, Failures: failures}
	}
	cases := []struct {
		in   []ctk.Result
		want string
	}{
		{[]ctk.Result{r("pass", ""), r("pass", "")}, "pass"},
		{[]ctk.Result{r("pass", ""), r("fail", "", "boom")}, "fail"},
		{[]ctk.Result{r("skip", "missing capability: streaming"), r("pass", "")}, "pass"},
		{[]ctk.Result{r("skip", "missing capability: x"), r("skip", "missing capability: x")}, "skip"},
	}
	for _, c := range cases {
		got := merge(vs, c.in)
		if got.Status != c.want || len(got.Variants) != 2 {
			t.Errorf("%+v: %+v", c.in, got)
		}
		if c.want == "fail" && (len(got.Failures) != 1 || got.Failures[0] != "[transparent/plain] boom") {
			t.Errorf("failures %q", got.Failures)
		}
		if c.want == "skip" && got.SkipReason != "missing capability: x" || c.want != "skip" && got.SkipReason != "" {
			t.Errorf("skip reason %q", got.SkipReason)
		}
	}
}

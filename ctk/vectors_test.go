package ctk

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

const minimal = `{"id":"AH-CTK-999","title":"t","spec_clause":"1","scenario":{"input":{"content":"hi","role":"user"}},"interceptor_script":[],"expect":{"interceptions":[],"run_outcome":"completed"}}`

// with replaces one member of the minimal vector (or deletes it for "").
func with(t *testing.T, key, raw string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(minimal), &m); err != nil {
		t.Fatal(err)
	}
	if raw == "" {
		delete(m, key)
	} else {
		m[key] = json.RawMessage(raw)
	}
	b, _ := json.Marshal(m)
	return b
}

func TestParseVectorErrors(t *testing.T) {
	cases := []struct {
		name string
		doc  []byte
		want string
	}{
		{"not json", []byte(`{`), "not JSON"},
		{"not an object", []byte(`[]`), "not a JSON object"},
		{"no id", with(t, "id", ""), "no id"},
		{"no title", with(t, "title", ""), "missing title"},
		{"bad mode", with(t, "mode", `"audit"`), "unknown mode"},
		{"no scenario", with(t, "scenario", ""), "missing scenario"},
		{"no input role", with(t, "scenario", `{"input":{"content":"x"}}`), "input.role missing"},
		{"tool call without args", with(t, "scenario", `{"input":{"content":"x","role":"user"},"model_script":[{"respond":{"content":null,"tool_calls":[{"id":"1","name":"n"}],"finish_reason":"stop"}}]}`), "needs id, name and args"},
		{"no expect", with(t, "expect", ""), "missing expect"},
		{"no run_outcome", with(t, "expect", `{"interceptions":[]}`), "run_outcome missing"},
		{"no script", with(t, "interceptor_script", ""), "needs interceptor_script"},
		{"both scripts", with(t, "interceptor_scripts", `[]`), "mutually exclusive"},
		{"bad point", with(t, "interceptor_script", `[{"at":"nowhere","return":{"decision":"allow"}}]`), "not an interception point"},
		{"return and fault", with(t, "interceptor_script", `[{"at":"input","return":{"decision":"allow"},"fault":"raise"}]`), "mutually exclusive"},
		{"neither", with(t, "interceptor_script", `[{"at":"input"}]`), "needs return or fault"},
		{"bad fault", with(t, "interceptor_script", `[{"at":"input","fault":"explode"}]`), "unknown fault"},
		{"bad outcome", with(t, "approval_script", `[{"resolve":{"outcome":"maybe"}}]`), "is not approve"},
		{"bad resolver fault", with(t, "approval_script", `[{"resolve":{"fault":"hang"}}]`), "unknown fault"},
		{"bad provider", with(t, "identity_provider", `"hmac"`), "identity_provider"},
		{"composition without profile", with(t, "composition", `{}`), "profile missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseVector(c.doc)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}

func TestParseVectorDefaults(t *testing.T) {
	v, err := ParseVector([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if v.Mode != points.Enforce || v.IdentityProvider != ProviderJCS || v.Composition != nil || len(v.Scripts) != 1 {
		t.Fatalf("defaults %+v", v)
	}
	v, err = ParseVector(with(t, "identity_provider", `null`))
	if err != nil || v.IdentityProvider != "" {
		t.Fatalf("null provider: %q %v", v.IdentityProvider, err)
	}
	b := with(t, "interceptor_script", "")
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	m["interceptor_scripts"] = json.RawMessage(`[]`)
	b, _ = json.Marshal(m)
	v, err = ParseVector(b)
	if err != nil || v.Scripts == nil || len(v.Scripts) != 0 || v.HasScript() {
		t.Fatalf("zero interceptors: %+v %v", v.Scripts, err)
	}
}

// TestBigIntegersSurviveLoading pins int64_json and bigint_json: the
// literals of AH-CTK-090/091 reach the post_model_call response byte for
// byte.
func TestBigIntegersSurviveLoading(t *testing.T) {
	for file, lit := range map[string]string{
		"AH-CTK-090-bigint-rejected.json":            "9007199254740993",
		"AH-CTK-091-bigint-beyond-u64-rejected.json": "18446744073709551616",
	} {
		raw, err := os.ReadFile(filepath.Join(vectorsDir, file))
		if err != nil {
			t.Fatal(err)
		}
		v, err := ParseVector(raw)
		if err != nil {
			t.Fatal(err)
		}
		resp := responseJSON(v.Scenario.ModelScript[0].Respond)
		if !bytes.Contains(resp, []byte(`"id":`+lit)) {
			t.Errorf("%s: response %s lost %s", file, resp, lit)
		}
		if !bytes.Contains(v.Scenario.ModelScript[0].Respond.ToolCalls[0].Args, []byte(lit)) {
			t.Errorf("%s: args lost %s", file, lit)
		}
	}
}

func TestScriptIndex(t *testing.T) {
	cases := []struct {
		cfg  string
		n    int
		fail bool
	}{
		{`{"script":0}`, 0, false},
		{`{"script":3}`, 3, false},
		{`{"script":"0"}`, 0, true},
		{`{"script":-1}`, 0, true},
		{`{"script":1.5}`, 0, true},
		{`{"script":1e1}`, 0, true},
		{`{}`, 0, true},
		{`{"script":0,"x":1}`, 0, true},
		{`[]`, 0, true},
	}
	for _, c := range cases {
		n, err := scriptIndex(json.RawMessage(c.cfg))
		if (err != nil) != c.fail || (!c.fail && n != c.n) {
			t.Errorf("scriptIndex(%s) = %d, %v", c.cfg, n, err)
		}
	}
}

func TestLoadDeclarationRefusalIsLoadError(t *testing.T) {
	s := Setup{HostDeclaration: json.RawMessage(`{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"g","kind":"ctk.nonexistent"}]}`)}
	_, err := LoadDeclaration(s)
	le, ok := err.(*LoadError)
	if !ok || le.Class != "declaration_error:kind_unknown" {
		t.Fatalf("err %v", err)
	}
	if _, err := LoadDeclaration(Setup{}); err == nil {
		t.Fatal("loaded a missing declaration")
	}
	d, err := LoadDeclaration(Setup{HostDeclaration: json.RawMessage(`{"declaration":"agent-hooks-declaration/1.0","bindings":[]}`)})
	if err != nil || d.Version() != "agent-hooks-declaration/1.0" {
		t.Fatalf("%v %v", d, err)
	}
}

func FuzzParseVector(f *testing.F) {
	f.Add([]byte(minimal))
	for _, dir := range []string{vectorsDir, declVectorsDir} {
		names, _ := filepath.Glob(filepath.Join(dir, "AH-CTK-0[0-2]*.json"))
		for _, n := range names {
			if b, err := os.ReadFile(n); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		v, err := ParseVector(doc)
		if err != nil {
			return
		}
		// A parsed vector can always be asserted against an empty run.
		_ = Assert(v, nil, RunRecord{})
		_ = ShouldSkip(v, nil)
	})
}

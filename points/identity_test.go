package points

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

const goldenIdentityPath = "../testdata/agent-hooks-0.1/conformance/golden/identity.json"

type goldenFixture struct {
	ID     string          `json:"id"`
	Note   string          `json:"note"`
	Ctx    json.RawMessage `json:"ctx"`
	Expect struct {
		CanonicalJSON   *string `json:"canonical_json"`
		ContextIdentity *string `json:"context_identity"`
		Error           *string `json:"error"`
	} `json:"expect"`
}

// G-15's known defect (AGENT-HOOKS-NOTES.md §16): its generator parsed the
// literal 9.999999999999997e+22 one ulp low, so the fixture's canonical form
// and identity are of the neighbouring double. These pin both sides.
const (
	g15FixtureNumber   = "9.999999999999996e+22"
	g15CorrectNumber   = "9.999999999999997e+22"
	g15FixtureIdentity = "sha256:0147bdf34ae0be12583b51a42b3d7cf9dff6adf8e1bfc0b9d9fdb8353a14c7cf"
	g15CorrectIdentity = "sha256:31bbcf009cf0bb7edd78eda0e8d38b1978e1b9f0c5bc07350a271136fb5299fe"
)

func loadGolden(t testing.TB) []goldenFixture {
	t.Helper()
	data, err := os.ReadFile(goldenIdentityPath)
	if err != nil {
		t.Fatalf("read golden: %v", err)
	}
	var doc struct {
		Spec     string          `json:"spec"`
		Fixtures []goldenFixture `json:"fixtures"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("parse golden: %v", err)
	}
	if doc.Spec != SpecVersion {
		t.Fatalf("golden spec = %q, want %q", doc.Spec, SpecVersion)
	}
	return doc.Fixtures
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestGoldenIdentity(t *testing.T) {
	t.Parallel()
	fixtures := loadGolden(t)
	if len(fixtures) != 18 {
		t.Fatalf("golden has %d fixtures, want 18", len(fixtures))
	}
	provider := JCSSHA256()
	if provider.Name() != "jcs-sha256" {
		t.Fatalf("Name = %q", provider.Name())
	}
	var negatives int
	for _, fx := range fixtures {
		t.Run(fx.ID, func(t *testing.T) {
			raw := []byte(fx.Ctx)
			if fx.Expect.Error != nil {
				negatives++
				if *fx.Expect.Error != ReasonContextInvalid {
					t.Fatalf("unexpected expected error %q", *fx.Expect.Error)
				}
				id, err := provider.Identity(raw)
				var de *DomainError
				if !errors.As(err, &de) {
					t.Fatalf("Identity = %q, %v; want *DomainError (context_invalid)", id, err)
				}
				return
			}
			wantCanon, wantID := *fx.Expect.CanonicalJSON, *fx.Expect.ContextIdentity
			if fx.ID == "G-15-rfc8785-numbers" {
				// Pin the fixture's divergence so a corrected fixture fails here
				// and this special case can go.
				if strings.Count(wantCanon, g15FixtureNumber) != 2 || wantID != g15FixtureIdentity {
					t.Fatalf("G-15 fixture changed (defect fixed upstream?): drop the special case; canonical=%s identity=%s", wantCanon, wantID)
				}
				if sha256Hex([]byte(wantCanon)) != g15FixtureIdentity {
					t.Fatal("G-15 fixture is no longer self-consistent")
				}
				if !bytes.Contains(raw, []byte(g15CorrectNumber)) {
					t.Fatal("G-15 input no longer carries the literal " + g15CorrectNumber)
				}
				wantCanon = strings.ReplaceAll(wantCanon, g15FixtureNumber, g15CorrectNumber)
				wantID = g15CorrectIdentity
			}
			id, err := provider.Identity(raw)
			if err != nil {
				t.Fatalf("Identity: %v", err)
			}
			if id != wantID {
				t.Errorf("Identity = %s, want %s", id, wantID)
			}
			pre, err := Preimage(raw)
			if err != nil {
				t.Fatalf("Preimage: %v", err)
			}
			if sha256Hex(pre) != id {
				t.Errorf("identity is not sha256(preimage)")
			}
			// G-05's canonical_json is of the unprojected context; for every
			// other fixture the projection is a no-op and both forms agree.
			canon, err := CanonicalJSON(raw)
			if err != nil {
				t.Fatalf("CanonicalJSON: %v", err)
			}
			if string(canon) != wantCanon {
				t.Errorf("CanonicalJSON =\n%s\nwant\n%s", canon, wantCanon)
			}
			if fx.ID != "G-05-l2-l3-stripped" && string(pre) != wantCanon {
				t.Errorf("Preimage =\n%s\nwant\n%s", pre, wantCanon)
			}
		})
	}
	if negatives != 2 {
		t.Errorf("saw %d negative fixtures, want 2", negatives)
	}
}

func TestGoldenG05EqualsBaseline(t *testing.T) {
	t.Parallel()
	var g05, g05b []byte
	for _, fx := range loadGolden(t) {
		switch fx.ID {
		case "G-05-l2-l3-stripped":
			g05 = fx.Ctx
		case "G-05b-l2-l3-baseline":
			g05b = fx.Ctx
		}
	}
	a, errA := Preimage(g05)
	b, errB := Preimage(g05b)
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Fatalf("G-05 preimage %s (%v) != G-05b %s (%v)", a, errA, b, errB)
	}
}

// RFC 8785 Appendix B: IEEE-754 bit patterns and their ECMA-262 forms.
func TestIdentityCanonicalNumbersRFC8785(t *testing.T) {
	t.Parallel()
	for _, tt := range rfc8785Numbers {
		f := rfc8785Float(t, tt.bits)
		// Feed the double as float-syntax text (the integer bound only
		// applies to integer-syntax literals), round-tripping exactly.
		lit := strconv.FormatFloat(f, 'e', -1, 64)
		got, err := CanonicalJSON([]byte(lit))
		if err != nil {
			t.Errorf("%s (%s): %v", tt.bits, lit, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("%s (%s) = %s, want %s", tt.bits, lit, got, tt.want)
		}
	}
}

func TestIdentityCanonicalJSON(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"numbers", `[1.0,-0.0,-0,1e21,1E-7,1e-06,0.000001,56.0,1e+0,100,1e2]`, `[1,0,0,1e+21,1e-7,0.000001,0.000001,56,1,100,100]`},
		{"correct rounding", `9.999999999999997e+22`, `9.999999999999997e+22`},
		{"utf16 key order", `{"\ue000":1,"\ud800\udc00":2,"":0,"z":3,"é":4}`, "{\"\":0,\"z\":3,\"é\":4,\"\U00010000\":2,\"\ue000\":1}"},
		{"escapes minimal", `"\u0041\/\u001f\b\u007f\u2028"`, "\"A/\\u001f\\b\x7f\u2028\""},
		{"whitespace dropped", " { \"b\" : [ 1 , 2 ] , \"a\" : { } } ", `{"a":{},"b":[1,2]}`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"max safe", `[9007199254740991,-9007199254740991]`, `[9007199254740991,-9007199254740991]`},
	}
	for _, tt := range tests {
		got, err := CanonicalJSON([]byte(tt.in))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("%s: CanonicalJSON = %q, want %q", tt.name, got, tt.want)
		}
	}
	for _, bad := range []string{`9007199254740992`, `{"a":1,"a":1}`, `"\udc00"`, `1e999`, `{`} {
		var de *DomainError
		if _, err := CanonicalJSON([]byte(bad)); !errors.As(err, &de) {
			t.Errorf("CanonicalJSON(%s) = %v, want *DomainError", bad, err)
		}
	}
}

// toolCtx is a valid pre_tool_call context with args spliced in as target
// and tool_call.args, plus extra top-level members.
func toolCtx(args, extra string) []byte {
	s := `{"spec":"agent-hooks/0.1","interception_point":"pre_tool_call","timestamp":"t","sequence":0,` +
		`"agent":{"id":"a","framework":"x"},"session":{"id":"s"},"target":` + args +
		`,"tool_call":{"id":"tc","name":"t","args":` + args + `}`
	if extra != "" {
		s += "," + extra
	}
	return []byte(s + "}")
}

func TestIdentityProjection(t *testing.T) {
	t.Parallel()
	base := []byte(`{"spec":"agent-hooks/0.1","interception_point":"post_tool_call","timestamp":"t","sequence":5,` +
		`"agent":{"id":"a","framework":"x"},"session":{"id":"s"},"target":"v",` +
		`"tool_call":{"id":"tc","name":"t","args":{}},"tool_result":{"value":"v","is_error":false}}`)
	withOptional := []byte(`{"extensions":{"host":{"big":18446744073709551616,"deep":` + nested("[", "]", 20, "1") + `}},` +
		`"usage":{"prompt_tokens":9007199254740993},"trace":{"trace_id":"x"},` +
		`"spec":"agent-hooks/0.1","interception_point":"post_tool_call","timestamp":"t","sequence":5,` +
		`"agent":{"id":"a","framework":"x","name":"optional"},"session":{"id":"s","turn":3},"target":"v",` +
		`"tool_call":{"id":"tc","name":"t","args":{},"content_hash":"sha256:00"},` +
		`"tool_result":{"value":"v","is_error":false,"duration_ms":12.5},"messages":[1]}`)
	idBase, err := JCSSHA256().Identity(base)
	if err != nil {
		t.Fatal(err)
	}
	idOpt, err := JCSSHA256().Identity(withOptional)
	if err != nil {
		t.Fatalf("optional big integers must not reject (projection-scoped bound): %v", err)
	}
	if idBase != idOpt {
		t.Errorf("optional fields changed the identity")
	}
	pb, _ := ProjectPreimage(base)
	po, _ := ProjectPreimage(withOptional)
	if !bytes.Equal(pb, po) {
		t.Errorf("projections differ:\n%s\n%s", pb, po)
	}
	// messages is kept whole at pre_model_call but dropped elsewhere.
	if bytes.Contains(po, []byte("messages")) {
		t.Errorf("messages kept at post_tool_call: %s", po)
	}
	// Escaped member names are matched after unescaping, like serde_json.
	esc := bytes.Replace(base, []byte(`"target"`), []byte(`"\u0074arget"`), 1)
	if id, err := JCSSHA256().Identity(esc); err != nil || id != idBase {
		t.Errorf("escaped target name: %s, %v", id, err)
	}
}

func TestIdentityRejections(t *testing.T) {
	t.Parallel()
	good := toolCtx(`{"ok":1}`, "")
	if _, err := JCSSHA256().Identity(good); err != nil {
		t.Fatalf("good context rejected: %v", err)
	}
	repl := func(old, new string) []byte {
		t.Helper()
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("no %q in context", old)
		}
		return bytes.Replace(good, []byte(old), []byte(new), 1)
	}
	tests := []struct {
		name string
		raw  []byte
		path string
	}{
		{"not an object", []byte(`[1]`), "$"},
		{"not JSON", []byte(`{"spec":`), ""},
		{"2^53+1 in target", toolCtx(`{"id":9007199254740993}`, ""), "$.target.id"},
		{"-2^53-1", toolCtx(`{"id":-9007199254740993}`, ""), "$.target.id"},
		{"u64 max", toolCtx(`{"id":18446744073709551615}`, ""), "$.target.id"},
		{"beyond u64", toolCtx(`{"id":18446744073709551616}`, ""), "$.target.id"},
		{"big sequence", repl(`"sequence":0`, `"sequence":9007199254740992`), "$.sequence"},
		{"whitelisted nested", repl(`"name":"t","args"`, `"name":"t","x":1,"args"`), ""}, // fine: dropped (see below)
		{"lone surrogate in extension", toolCtx(`{}`, `"extensions":{"h":{"s":"\udc00"}}`), "$.extensions[*][*]"},
		{"too deep target", toolCtx(nested("[", "]", 132, "1"), ""), ""},
		{"too deep extension", toolCtx(`{}`, `"extensions":`+nested("[", "]", 130, "1")), ""},
		{"duplicate top-level", repl(`"sequence":0`, `"sequence":0,"sequence":1`), "$"},
		{"missing conditional", repl(`,"tool_call":{"id":"tc","name":"t","args":{"ok":1}}`, ``), "$.tool_call"},
		{"conditional not object", repl(`"tool_call":{"id":"tc","name":"t","args":{"ok":1}}`, `"tool_call":"x"`), "$.tool_call"},
		{"missing subfield", repl(`"name":"t",`, ``), "$.tool_call.name"},
		{"unknown point", repl(`"pre_tool_call"`, `"model_call"`), "$.interception_point"},
		{"point not string", repl(`"pre_tool_call"`, `3`), "$.interception_point"},
		{"missing spec", repl(`"spec":"agent-hooks/0.1",`, ``), "$.spec"},
		{"bad spec", repl(`agent-hooks/0.1`, `agent-hooks/x.1`), "$.spec"},
		{"spec three parts", repl(`agent-hooks/0.1`, `agent-hooks/0.1.2`), "$.spec"},
		{"spec no minor", repl(`agent-hooks/0.1`, `agent-hooks/0.`), "$.spec"},
		{"timestamp number", repl(`"timestamp":"t"`, `"timestamp":1`), "$.timestamp"},
		{"negative sequence", repl(`"sequence":0`, `"sequence":-1`), "$.sequence"},
		{"minus zero sequence", repl(`"sequence":0`, `"sequence":-0`), "$.sequence"},
		{"float sequence", repl(`"sequence":0`, `"sequence":1.0`), "$.sequence"},
		{"exp sequence", repl(`"sequence":0`, `"sequence":1e0`), "$.sequence"},
		{"string sequence", repl(`"sequence":0`, `"sequence":"0"`), "$.sequence"},
		{"agent not object", repl(`"agent":{"id":"a","framework":"x"}`, `"agent":"a"`), "$.agent"},
		{"empty agent id", repl(`"id":"a"`, `"id":""`), "$.agent.id"},
		{"bad framework", repl(`"framework":"x"`, `"framework":"Bad Framework"`), "$.agent.framework"},
		{"empty framework", repl(`"framework":"x"`, `"framework":""`), "$.agent.framework"},
		{"missing session", repl(`"session":{"id":"s"},`, ``), "$.session.id"},
		{"empty session id", repl(`"session":{"id":"s"}`, `"session":{"id":""}`), "$.session.id"},
		{"missing target", repl(`"target":{"ok":1},`, ``), "$.target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := JCSSHA256().Identity(tt.raw)
			if tt.name == "whitelisted nested" {
				if err != nil {
					t.Errorf("non-whitelisted subfield should be dropped, got %v", err)
				}
				return
			}
			var de *DomainError
			if !errors.As(err, &de) {
				t.Fatalf("Identity err = %v, want *DomainError", err)
			}
			if tt.path != "" && de.Path != tt.path {
				t.Errorf("path = %q (%s), want %q", de.Path, de.Problem, tt.path)
			}
		})
	}
	// Sequence at the integer bound is fine; null target is present.
	if _, err := JCSSHA256().Identity(repl(`"sequence":0`, `"sequence":9007199254740991`)); err != nil {
		t.Errorf("max safe sequence: %v", err)
	}
	if _, err := JCSSHA256().Identity(repl(`"target":{"ok":1}`, `"target":null`)); err != nil {
		t.Errorf("null target: %v", err)
	}
}

func TestIdentityErrorsValueFree(t *testing.T) {
	t.Parallel()
	raw := toolCtx(`{"k":"SENSITIVE-VALUE"}`, "")
	raw = bytes.Replace(raw, []byte(`"pre_tool_call"`), []byte(`"SENSITIVE-POINT"`), 1)
	_, err := JCSSHA256().Identity(raw)
	if err == nil || strings.Contains(err.Error(), "SENSITIVE") {
		t.Errorf("error %v", err)
	}
}

func TestIdentityEveryPointProjects(t *testing.T) {
	t.Parallel()
	conditional := map[Point]string{
		AgentStartup:  `"agent_init":{"tools_registered":["a"],"x":1}`,
		Input:         `"input":{"content":"c","role":"user","x":1}`,
		PreModelCall:  `"model":{"id":"m","vendor":"v"},"messages":[{"role":"user","content":"c","x":1}]`,
		PostModelCall: `"model":{"id":"m"},"response":{"content":null,"tool_calls":[],"finish_reason":"stop","x":1},"usage":{}`,
		PreToolCall:   `"tool_call":{"id":"i","name":"n","args":{},"content_hash":"h"}`,
		PostToolCall:  `"tool_call":{"id":"i","name":"n","args":{}},"tool_result":{"value":1,"is_error":false,"duration_ms":1}`,
		Output:        `"output":{"content":"c","x":1}`,
		AgentShutdown: `"summary":{"reason":"completed","errors":0}`,
	}
	for _, p := range AllPoints() {
		raw := []byte(`{"spec":"agent-hooks/0.1","interception_point":"` + string(p) + `","timestamp":"t","sequence":1,` +
			`"agent":{"id":"a","framework":"fw"},"session":{"id":"s"},"target":null,` + conditional[p] + `,"tools":[]}`)
		proj, err := ProjectPreimage(raw)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if p != PreModelCall && bytes.Contains(proj, []byte(`"x"`)) || bytes.Contains(proj, []byte(`"tools"`)) ||
			bytes.Contains(proj, []byte("vendor")) || bytes.Contains(proj, []byte("duration_ms")) ||
			bytes.Contains(proj, []byte("usage")) || bytes.Contains(proj, []byte("content_hash")) ||
			bytes.Contains(proj, []byte("errors")) {
			t.Errorf("%s: optional data survived projection: %s", p, proj)
		}
		// messages is kept whole at pre_model_call, inner members included.
		if p == PreModelCall && !bytes.Contains(proj, []byte(`"x":1`)) {
			t.Errorf("pre_model_call: messages not kept whole: %s", proj)
		}
		if _, err := JCSSHA256().Identity(raw); err != nil {
			t.Errorf("%s: Identity: %v", p, err)
		}
		// Without the conditional member the envelope fails.
		bare := []byte(`{"spec":"agent-hooks/0.1","interception_point":"` + string(p) + `","timestamp":"t","sequence":1,` +
			`"agent":{"id":"a","framework":"x"},"session":{"id":"s"},"target":null}`)
		if _, err := JCSSHA256().Identity(bare); err == nil {
			t.Errorf("%s: missing conditional accepted", p)
		}
	}
}

func TestIdentityHMACSHA256(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{7}, 32)
	p, err := HMACSHA256("k1", key)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "hmac-sha256-k1" {
		t.Errorf("Name = %q", p.Name())
	}
	if err := CheckProviderName(p.Name()); err != nil {
		t.Errorf("own name rejected: %v", err)
	}
	raw := toolCtx(`{"a":1}`, "")
	id1, err := p.Identity(raw)
	if err != nil {
		t.Fatal(err)
	}
	key[0] = 8 // the provider holds its own copy
	id2, _ := p.Identity(raw)
	if id1 != id2 || !strings.HasPrefix(id1, "hmac-sha256:") || len(id1) != len("hmac-sha256:")+64 {
		t.Errorf("identity %q / %q", id1, id2)
	}
	jcsID, _ := JCSSHA256().Identity(raw)
	if strings.TrimPrefix(id1, "hmac-sha256:") == strings.TrimPrefix(jcsID, "sha256:") {
		t.Error("hmac identity equals the unkeyed hash")
	}
	other, _ := HMACSHA256("k2", bytes.Repeat([]byte{9}, 32))
	if id3, _ := other.Identity(raw); id3 == id1 {
		t.Error("different keys gave the same identity")
	}
	// Same domain as jcs-sha256: optional data is ignored, big ints rejected.
	if id4, _ := p.Identity(toolCtx(`{"a":1}`, `"trace":{"trace_id":"x"}`)); id4 != id1 {
		t.Error("optional data changed the hmac identity")
	}
	if _, err := p.Identity(toolCtx(`{"a":9007199254740992}`, "")); err == nil {
		t.Error("hmac accepted a beyond-2^53 integer")
	}
	for _, bad := range []struct {
		id  string
		key int
	}{{"", 32}, {"K1", 32}, {"k.1", 32}, {"k 1", 32}, {"ключ", 32}, {"k1", 31}, {"k1", 0}} {
		if _, err := HMACSHA256(bad.id, make([]byte, bad.key)); err == nil {
			t.Errorf("HMACSHA256(%q, %d bytes) accepted", bad.id, bad.key)
		}
	}
}

func TestIdentityProviderName(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"hmac-sha256-k1": true, "custom": true, "a": true, "x_9-": true,
		"": false, "jcs": false, "jcs-sha256": false, "jcsx": false, "Custom": false,
		"9a": false, "-a": false, "a.b": false, "a b": false, "aé": false,
	} {
		if err := CheckProviderName(name); (err == nil) != ok {
			t.Errorf("CheckProviderName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func FuzzIdentity(f *testing.F) {
	for _, fx := range loadGolden(f) {
		f.Add([]byte(fx.Ctx))
	}
	f.Add(toolCtx(`{"a":[1,{"b":"\ud83c\udf0d"}]}`, `"extensions":{"x":1}`))
	f.Add([]byte(`{"\u0074arget":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if canon, err := CanonicalJSON(raw); err == nil {
			// RFC 8785 writes a large double such as 1e19 in integer form,
			// which the I-JSON bound then refuses on a second pass; the
			// fixed point is checked without the bound.
			again, err := canonicalize(canon)
			if err != nil || !bytes.Equal(again, canon) {
				t.Fatalf("canonical form is not a fixed point: %s -> %s (%v)", canon, again, err)
			}
		} else {
			var de *DomainError
			if !errors.As(err, &de) {
				t.Fatalf("CanonicalJSON error %T", err)
			}
		}
		proj, err := ProjectPreimage(raw)
		if err == nil {
			again, err := ProjectPreimage(proj)
			if err != nil || !bytes.Equal(again, proj) {
				t.Fatalf("ProjectPreimage not idempotent: %s -> %s (%v)", proj, again, err)
			}
			if err := CheckEncoding(proj, 0); err != nil {
				t.Fatalf("projection left the encoding domain: %v", err)
			}
		}
		id, err := JCSSHA256().Identity(raw)
		if err != nil {
			var de *DomainError
			if !errors.As(err, &de) {
				t.Fatalf("Identity error %T", err)
			}
			return
		}
		// The identity depends on the projection alone.
		id2, err := JCSSHA256().Identity(proj)
		if err != nil || id2 != id {
			t.Fatalf("identity of projection differs: %s vs %s (%v)", id, id2, err)
		}
	})
}

// preModelCtx builds a pre_model_call context of about size bytes.
func preModelCtx(size int) []byte {
	var msgs strings.Builder
	msgs.WriteByte('[')
	for i := 0; msgs.Len() < size; i++ {
		if i > 0 {
			msgs.WriteByte(',')
		}
		fmt.Fprintf(&msgs, `{"role":"user","content":"message %d: the quick brown fox jumps over the lazy dog \u00e9\u4e2d \ud83c\udf0d, n=%d, x=%g"}`, i, i*7919, float64(i)/3)
	}
	msgs.WriteByte(']')
	m := msgs.String()
	return []byte(`{"spec":"agent-hooks/0.1","interception_point":"pre_model_call","timestamp":"2026-01-01T00:00:00.000Z",` +
		`"sequence":2,"agent":{"id":"agent-1","framework":"hooksproxy"},"session":{"id":"sess-1"},` +
		`"model":{"id":"gpt-x","params":{"temperature":0.2}},"request_id":"req-1","target":` + m + `,"messages":` + m + `}`)
}

func BenchmarkJCSIdentity(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"2KB", 2 << 10 / 2}, {"1MB", 1 << 20 / 2}} {
		raw := preModelCtx(size.n)
		if _, err := JCSSHA256().Identity(raw); err != nil {
			b.Fatal(err)
		}
		b.Run(size.name, func(b *testing.B) {
			p := JCSSHA256()
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Identity(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCheckEncoding(b *testing.B) {
	raw := preModelCtx(1 << 20 / 2)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckEncoding(raw, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIdentitySession is the identity of the six contexts of one 1 KB
// chat completion as the proxy builds them (testdata/session-1kb.jsonl,
// captured from a proxy test): what identity costs a whole request.
func BenchmarkIdentitySession(b *testing.B) {
	data, err := os.ReadFile("testdata/session-1kb.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	ctxs := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	p := JCSSHA256()
	n := 0
	for _, c := range ctxs {
		n += len(c)
		if _, err := p.Identity(c); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range ctxs {
			if _, err := p.Identity(c); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// proseCtx is an output context whose answer is n bytes of escape-free
// ASCII prose, repeated in target as the proxy builds it: the shape of a
// long model answer.
func proseCtx(n int) []byte {
	words := "the quarterly review shows steady progress across every region and team "
	var p strings.Builder
	for p.Len() < n {
		p.WriteString(words)
	}
	s := p.String()[:n]
	return []byte(`{"spec":"agent-hooks/0.1","interception_point":"output","timestamp":"2026-01-01T00:00:00.000Z",` +
		`"sequence":3,"agent":{"id":"agent-1","framework":"hooksproxy"},"session":{"id":"sess-1"},` +
		`"target":{"content":"` + s + `","role":"assistant"},"output":{"content":"` + s + `","role":"assistant"}}`)
}

func BenchmarkProse32KB(b *testing.B) {
	raw := proseCtx(32 << 10)
	b.Run("CheckEncoding", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if err := CheckEncoding(raw, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Identity", func(b *testing.B) {
		p := JCSSHA256()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := p.Identity(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SHA256", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			sha256.Sum256(raw)
		}
	})
}

package points

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// walkMatchesGjson checks ForEachMember / ForEachElement against gjson's
// walk of the same valid value.
func walkMatchesGjson(t *testing.T, raw []byte) {
	t.Helper()
	if CheckEncoding(raw, 0) != nil {
		return
	}
	r := gjson.ParseBytes(raw)
	type kv struct{ k, v string }
	var want, got []kv
	switch {
	case r.IsObject():
		r.ForEach(func(k, v gjson.Result) bool { want = append(want, kv{k.Str, v.Raw}); return true })
		ForEachMember(raw, func(n string, v []byte) bool { got = append(got, kv{n, string(v)}); return true })
	case r.IsArray():
		r.ForEach(func(_, v gjson.Result) bool { want = append(want, kv{"", v.Raw}); return true })
		ForEachElement(raw, func(v []byte) bool { got = append(got, kv{"", string(v)}); return true })
	default:
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%q: got %d members, gjson %d", raw, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%q: member %d: got %q, gjson %q", raw, i, got[i], want[i])
		}
	}
}

var walkSeeds = []string{
	`{}`, `[]`, ` { "a" : 1 , "b":[1,{"c":"}"}] ,"d\"e":"x\\\\","f":null} `,
	`{"content":"a \"quoted\" \\\\ end","n":-1.5e3,"t":true}`,
	`[1, "two", {"three":[3]}, [], {}, "\\\\\""]`,
	`{"k\u0041":"v","esc\\\"":"\\u00e9"}`,
}

func TestWalk(t *testing.T) {
	for _, s := range walkSeeds {
		walkMatchesGjson(t, []byte(s))
	}
	big := []byte(`{"a":"` + string(bytes.Repeat([]byte(`x\"y\\`), 5000)) + `","b":2}`)
	walkMatchesGjson(t, big)
	// Stopping early.
	n := 0
	ForEachMember([]byte(`{"a":1,"b":2}`), func(string, []byte) bool { n++; return false })
	if n != 1 {
		t.Fatalf("walk did not stop: %d", n)
	}
	// Not an object or array: nothing.
	ForEachMember([]byte(`[1]`), func(string, []byte) bool { t.Fatal("called"); return true })
	ForEachElement([]byte(`{}`), func([]byte) bool { t.Fatal("called"); return true })
}

func FuzzWalk(f *testing.F) {
	for _, s := range walkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { walkMatchesGjson(t, raw) })
}

// FuzzWalkGarbage feeds arbitrary bytes: the walkers must neither panic nor
// hang, and every value they yield must lie inside the input.
func FuzzWalkGarbage(f *testing.F) {
	for _, s := range append(walkSeeds, `{"a":`, `{"a"`, `{"a":}`, `[,,]`, `["x`, `{"a":[}`, `[}`, `{:1}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		n := 0
		ForEachMember(raw, func(_ string, v []byte) bool { n++; return len(v) > 0 && n <= len(raw) })
		ForEachElement(raw, func(v []byte) bool { n++; return len(v) > 0 && n <= 2*len(raw) })
		if n > 2*len(raw) {
			t.Fatalf("walked %d values in %d bytes", n, len(raw))
		}
		_ = validateEnvelope(raw)
	})
}

// TestContextGetMatchesGjson: the indexed Get reads what gjson reads.
func TestContextGetMatchesGjson(t *testing.T) {
	raw := []byte(`{"spec":"agent-hooks/0.1","interception_point":"post_model_call","timestamp":"2026-01-01T00:00:00.000Z","sequence":3,` +
		`"agent":{"id":"a\"1","framework":"fw"},"session":{"id":"s"},"model":{"id":"m","params":{"t":0.5}},` +
		`"response":{"content":"long \"text\" \u00e9","tool_calls":[{"id":"c1","name":"n","args":{"k":[1,2]}}],"finish_reason":"stop"},` +
		`"usage":{"prompt_tokens":12,"completion_tokens":7},"a.b":{"c":1},"dup":{"x":1,"x":2,"y":{"z":"\u0041"}},"target":{"content":"x","tool_calls":[],"finish_reason":"stop"}}`)
	// As it is (the member walk) and padded past indexContextsFrom (the index).
	padded := append(raw[:len(raw)-1:len(raw)-1], []byte(`,"pad":"`+strings.Repeat("x", indexContextsFrom)+`"}`)...)
	for _, raw := range [][]byte{raw, padded} {
		testContextGet(t, raw)
	}
}

func testContextGet(t *testing.T, raw []byte) {
	c := &Context{raw: raw, point: PostModelCall}
	for _, p := range []string{"spec", "sequence", "agent.id", "agent", "model.params.t", "response.content", "response.tool_calls.0.args.k.1",
		"response.tool_calls.#", "response.tool_calls.#.id", "usage.prompt_tokens", "missing", "missing.x", "target", `a\.b.c`, "agent.*", "response.tool_calls|@reverse", "",
		"response.tool_calls.0.id", "model.params", "model.params.missing", "agent.id.x", "response.content.x", "model.params.t.x",
		"session.id", "dup.x", "dup.y.z", "dup.y", "dup.y.z.w", "usage.completion_tokens", "model.params|@pretty", "dup.*.z", "dup..x", "dup."} {
		got, want := c.Get(p), gjson.GetBytes(raw, p)
		if got.Raw != want.Raw || got.Type != want.Type || got.Str != want.Str || got.Exists() != want.Exists() {
			t.Errorf("Get(%q) = %q (%v), gjson %q (%v)", p, got.Raw, got.Type, want.Raw, want.Type)
		}
	}
	if c.Target().Raw != gjson.GetBytes(raw, "target").Raw {
		t.Error("Target differs")
	}
}

func TestTargetBytes(t *testing.T) {
	for _, raw := range []string{`{"a":1,"target":{"x":[1,2]}}`, `{"target":"s","pad":"` + strings.Repeat("y", indexContextsFrom) + `"}`, `{"a":1}`} {
		c := &Context{raw: []byte(raw), point: Output}
		want := gjson.Get(raw, "target")
		got := c.TargetBytes()
		if !want.Exists() {
			if got != nil {
				t.Fatalf("%s: got %q, want nil", raw, got)
			}
			continue
		}
		if string(got) != want.Raw {
			t.Fatalf("%s: got %q, want %q", raw, got, want.Raw)
		}
	}
}

// FuzzContextGet: Get reads what gjson reads, on any valid context object,
// whether it walks members or indexes them.
func FuzzContextGet(f *testing.F) {
	f.Add(`{"a":{"b":"x\"y","c":[1,{"d":2}]},"target":{"t":"\u00e9"}}`, "a.b")
	f.Add(`{"dup":{"x":1,"x":2},"target":"s"}`, "dup.x")
	f.Add(`{"a":{"b":{"c":null}}}`, "a.b.c.d")
	f.Add(`{"a b":1,"target":[true]}`, "target")
	f.Fuzz(func(t *testing.T, doc, path string) {
		raw := []byte(doc)
		if CheckEncoding(raw, 0) != nil || !gjson.ParseBytes(raw).IsObject() {
			return
		}
		docs := [][]byte{raw}
		if t := bytes.TrimSpace(raw); t[len(t)-1] == '}' && !bytes.Equal(bytes.Join(bytes.Fields(t), nil), []byte("{}")) {
			// The same members, past the size from which Get indexes them.
			docs = append(docs, append(t[:len(t)-1:len(t)-1], []byte(`,"zz_pad":"`+strings.Repeat("p", indexContextsFrom)+`"}`)...))
		}
		for _, r := range docs {
			c := &Context{raw: r, point: Output}
			got, want := c.Get(path), gjson.GetBytes(r, path)
			if got.Raw != want.Raw || got.Type != want.Type || got.Exists() != want.Exists() {
				t.Fatalf("Get(%q) on %q = %q, gjson %q", path, r, got.Raw, want.Raw)
			}
		}
	})
}

package ctk

import (
	"testing"
	"unicode/utf8"
)

func TestLookup(t *testing.T) {
	doc := []byte(`{"a":{"b":[10,{"c":"x"}],"n":null,"d.e":1},"k":"v","k":"w"}`)
	cases := []struct {
		path string
		want string // raw, "" = unresolved
	}{
		{"a.b[1].c", `"x"`},
		{"a.b[0]", `10`},
		{"a.n", `null`},
		{"a..b[0]", `10`},
		{"", string(doc)},
		{"k", `"w"`}, // the last duplicate wins
		{"a.missing", ""},
		{"a.b.0", ""},   // a key never indexes an array
		{"a[0]", ""},    // an index never reads an object
		{"a.b[2]", ""},  // out of range
		{"a.b[x]", ""},  // not an index
		{"a.b[-1]", ""}, // not an index
		{"a.b[0", ""},   // unterminated
		{"a.d.e", ""},   // dots always separate
		{"k.x", ""},
	}
	for _, c := range cases {
		got, ok := Lookup(doc, c.path)
		switch {
		case c.want == "" && ok:
			t.Errorf("Lookup(%q) resolved to %s, want unresolved", c.path, got.Raw)
		case c.want != "" && (!ok || got.Raw != c.want):
			t.Errorf("Lookup(%q) = %q,%v want %q", c.path, got.Raw, ok, c.want)
		}
	}
	if _, ok := Lookup([]byte(`{`), "a"); ok {
		t.Error("invalid JSON resolved")
	}
}

func TestJSONEqual(t *testing.T) {
	cases := []struct {
		a, b string
		eq   bool
	}{
		{`1`, `1.0`, true},
		{`1e2`, `100`, true},
		{`-0`, `0`, true},
		{`9007199254740993`, `9007199254740992`, false}, // float64 would merge these
		{`18446744073709551616`, `18446744073709551616.0`, true},
		{`18446744073709551616`, `18446744073709551617`, false},
		{`"\u0041"`, `"A"`, true},
		{`"a"`, `"b"`, false},
		{`{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`, true},
		{`{"a":1}`, `{"a":1,"b":2}`, false},
		{`[1,2]`, `[2,1]`, false},
		{`null`, `false`, false},
		{`true`, `true`, true},
		{`"1"`, `1`, false},
		{`{}`, `[]`, false},
		{`1e99999999`, `1e99999999`, true}, // textual only, no huge allocation
		{`1e99999999`, `10e99999998`, false},
		{`{`, `{`, false},
	}
	for _, c := range cases {
		if got := JSONEqual([]byte(c.a), []byte(c.b)); got != c.eq {
			t.Errorf("JSONEqual(%s, %s) = %v", c.a, c.b, got)
		}
		if got := JSONEqual([]byte(c.b), []byte(c.a)); got != c.eq {
			t.Errorf("JSONEqual(%s, %s) = %v (reversed)", c.b, c.a, got)
		}
	}
}

func TestNormalizeJSON(t *testing.T) {
	in := []byte(` { "a" : "\u003cb\u003e \u00e9" , "n": [1, 2.50, true] } `)
	want := `{"a":"<b> é","n":[1,2.50,true]}`
	if got := string(normalizeJSON(in)); got != want {
		t.Fatalf("normalizeJSON = %s, want %s", got, want)
	}
}

func FuzzLookup(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[10,{"c":"x"}]}}`), "a.b[1].c")
	f.Add([]byte(`[1,2]`), "[1]")
	f.Add([]byte(`{"":1}`), ".[0].")
	f.Fuzz(func(t *testing.T, doc []byte, path string) {
		got, ok := Lookup(doc, path)
		if ok && !JSONEqual([]byte(got.Raw), []byte(got.Raw)) {
			t.Fatalf("resolved value %q is not equal to itself", got.Raw)
		}
	})
}

func FuzzJSONEqual(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.0]}`), []byte(`{"a":[1,2]}`))
	f.Add([]byte(`"\u00e9"`), []byte(`"é"`))
	f.Add([]byte(`1e400`), []byte(`1E+400`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ab, ba := JSONEqual(a, b), JSONEqual(b, a)
		if ab != ba {
			t.Fatalf("not symmetric: %q %q", a, b)
		}
		// A valid UTF-8 document equals its normalized form (invalid UTF-8
		// is outside I-JSON and normalizes to U+FFFD).
		if utf8.Valid(a) && JSONEqual(a, a) && !JSONEqual(a, normalizeJSON(a)) {
			t.Fatalf("%q differs from its normalization %q", a, normalizeJSON(a))
		}
	})
}

func FuzzCheckEnvelope(f *testing.F) {
	f.Add(ctxAt("input", 0, ""))
	f.Add(ctxAt("post_tool_call", 7, `"extensions":{}`))
	f.Add([]byte(`{"spec":"agent-hooks/1."}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		_ = CheckEnvelope(doc)
	})
}

package points

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseTargetPath(t *testing.T) {
	t.Parallel()
	m := func(s string) PathSegment { return PathSegment{Member: s} }
	ix := func(i int) PathSegment { return PathSegment{Index: i, IsIndex: true} }
	tests := []struct {
		in         string
		segs       []PathSegment
		canonical  string
		deprecated bool
		reason     Reason // "" = parses
	}{
		{in: "$target", canonical: "$target"},
		{in: "$target.a.b[0].c", segs: []PathSegment{m("a"), m("b"), ix(0), m("c")}, canonical: "$target.a.b[0].c"},
		{in: `$target["weird-key"]`, segs: []PathSegment{m("weird-key")}, canonical: "$target.weird-key"},
		{in: `$target["a"]["b"][2]`, segs: []PathSegment{m("a"), m("b"), ix(2)}, canonical: "$target.a.b[2]"},
		{in: "$target.0", segs: []PathSegment{m("0")}, canonical: "$target.0"},
		{in: `$target["0"]`, segs: []PathSegment{m("0")}, canonical: "$target.0"},
		{in: "$target[007]", segs: []PathSegment{ix(7)}, canonical: "$target[7]"},
		{in: "$target.A_b-9", segs: []PathSegment{m("A_b-9")}, canonical: "$target.A_b-9"},
		{in: "$target[0][1]", segs: []PathSegment{ix(0), ix(1)}, canonical: "$target[0][1]"},
		{in: "$policy_target", canonical: "$policy_target", deprecated: true},
		{in: "$policy_target.x", segs: []PathSegment{m("x")}, canonical: "$policy_target.x", deprecated: true},
		// Rooted elsewhere: forbidden.
		{in: "", reason: ReasonTransformTargetForbidden},
		{in: "$", reason: ReasonTransformTargetForbidden},
		{in: "$snapshot.x", reason: ReasonTransformTargetForbidden},
		{in: "target.x", reason: ReasonTransformTargetForbidden},
		{in: "$Target.x", reason: ReasonTransformTargetForbidden},
		{in: " $target", reason: ReasonTransformTargetForbidden},
		{in: "$.target", reason: ReasonTransformTargetForbidden},
		{in: "$policy", reason: ReasonTransformTargetForbidden},
		{in: "$tar", reason: ReasonTransformTargetForbidden},
		// Rooted at $target but not the grammar: invalid (path.rs).
		{in: "$targets.x", reason: ReasonTransformInvalid},
		{in: "$targetfoo", reason: ReasonTransformInvalid},
		{in: "$target_x", reason: ReasonTransformInvalid},
		{in: "$policy_targetx", reason: ReasonTransformInvalid},
		{in: "$target.", reason: ReasonTransformInvalid},
		{in: "$target..a", reason: ReasonTransformInvalid},
		{in: "$target.a.", reason: ReasonTransformInvalid},
		{in: "$target ", reason: ReasonTransformInvalid},
		{in: "$target.a b", reason: ReasonTransformInvalid},
		{in: "$target.é", reason: ReasonTransformInvalid},
		{in: "$target.a$", reason: ReasonTransformInvalid},
		{in: "$target[", reason: ReasonTransformInvalid},
		{in: "$target[]", reason: ReasonTransformInvalid},
		{in: "$target[-1]", reason: ReasonTransformInvalid},
		{in: "$target[+1]", reason: ReasonTransformInvalid},
		{in: "$target[1", reason: ReasonTransformInvalid},
		{in: "$target[1a]", reason: ReasonTransformInvalid},
		{in: "$target[ 1]", reason: ReasonTransformInvalid},
		{in: "$target[*]", reason: ReasonTransformInvalid},
		{in: "$target[99999999999999999999999]", reason: ReasonTransformInvalid},
		{in: `$target[""]`, reason: ReasonTransformInvalid}, // ABNF: 1*member-char (path.rs accepts it)
		{in: `$target["a`, reason: ReasonTransformInvalid},
		{in: `$target["a"`, reason: ReasonTransformInvalid},
		{in: `$target["a.b"]`, reason: ReasonTransformInvalid},
		{in: `$target["a b"]`, reason: ReasonTransformInvalid},
		{in: `$target["a\"b"]`, reason: ReasonTransformInvalid},
		{in: `$target['a']`, reason: ReasonTransformInvalid},
		{in: "$target.*", reason: ReasonTransformInvalid},
		{in: "$target..", reason: ReasonTransformInvalid},
	}
	for _, tt := range tests {
		p, err := ParseTargetPath(tt.in)
		if tt.reason != "" {
			var te *TransformError
			if !errors.As(err, &te) || te.Reason != tt.reason {
				t.Errorf("ParseTargetPath(%q) = %v, want %s", tt.in, err, tt.reason)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseTargetPath(%q): %v", tt.in, err)
			continue
		}
		if got := p.Segments(); len(got) != len(tt.segs) || (len(got) > 0 && !reflect.DeepEqual(got, tt.segs)) {
			t.Errorf("ParseTargetPath(%q) segments = %+v, want %+v", tt.in, got, tt.segs)
		}
		if p.String() != tt.canonical {
			t.Errorf("ParseTargetPath(%q).String() = %q, want %q", tt.in, p.String(), tt.canonical)
		}
		if p.Deprecated() != tt.deprecated {
			t.Errorf("ParseTargetPath(%q).Deprecated() = %v", tt.in, p.Deprecated())
		}
		if p.IsRoot() != (len(tt.segs) == 0) {
			t.Errorf("ParseTargetPath(%q).IsRoot() = %v", tt.in, p.IsRoot())
		}
	}
}

func TestApplyTransform(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, target, path, value string
		nilValue                  bool
		want                      string
		reason                    Reason
	}{
		{name: "root replaces all", target: `{"x":1}`, path: "$target", value: `"new"`, want: `"new"`},
		{name: "root with alias", target: `[1]`, path: "$policy_target", value: ` {"a" : 1} `, want: `{"a" : 1}`},
		{name: "root nil is null", target: `{"x":1}`, path: "$target", nilValue: true, want: `null`},
		{name: "root of null target", target: `null`, path: "$target", value: `1`, want: `1`},
		{name: "member", target: `{"a":1,"b":2}`, path: "$target.b", value: `{"k":[1]}`, want: `{"a":1,"b":{"k":[1]}}`},
		{name: "bracket member", target: `{"weird-key":1}`, path: `$target["weird-key"]`, value: `2`, want: `{"weird-key":2}`},
		{name: "nested index", target: `{"a":{"b":[10,20]}}`, path: "$target.a.b[1]", value: `99`, want: `{"a":{"b":[10,99]}}`},
		{name: "whitespace kept", target: " { \"a\" : [ 1 , 2 ] , \"b\" : 3 } ", path: "$target.a[0]", value: `"z"`, want: " { \"a\" : [ \"z\" , 2 ] , \"b\" : 3 } "},
		{name: "messages content", target: `[{"role":"user","content":"SECRET"}]`, path: "$target[0].content", value: `"[redacted]"`, want: `[{"role":"user","content":"[redacted]"}]`},
		{name: "nil value is null", target: `{"a":1}`, path: "$target.a", nilValue: true, want: `{"a":null}`},
		{name: "empty value is null", target: `{"a":1}`, path: "$target.a", value: ``, want: `{"a":null}`},
		{name: "null member replaced", target: `{"a":null}`, path: "$target.a", value: `[]`, want: `{"a":[]}`},
		{name: "digit member on object", target: `{"0":"x","1":"y"}`, path: "$target.0", value: `"z"`, want: `{"0":"z","1":"y"}`},
		{name: "quoted digit member", target: `{"0":"x"}`, path: `$target["0"]`, value: `1`, want: `{"0":1}`},
		{name: "escaped key matched", target: `{"\u0061":1}`, path: "$target.a", value: `2`, want: `{"\u0061":2}`},
		{name: "key with sjson specials", target: `{"a.b":1,"a":{"b":2}}`, path: "$target.a.b", value: `3`, want: `{"a.b":1,"a":{"b":3}}`},
		{name: "only that key", target: `{"ab":1,"a":2,"abc":3}`, path: "$target.a", value: `0`, want: `{"ab":1,"a":0,"abc":3}`},
		{name: "strings with brackets skipped", target: `{"s":"]}\"[{","t":[1]}`, path: "$target.t[0]", value: `2`, want: `{"s":"]}\"[{","t":[2]}`},
		{name: "last index", target: `[0,1,2]`, path: "$target[2]", value: `true`, want: `[0,1,true]`},
		{name: "leading zero index", target: `[0,1]`, path: "$target[01]", value: `9`, want: `[0,9]`},
		{name: "big int value allowed here", target: `{"amount":100}`, path: "$target.amount", value: `9007199254740993`, want: `{"amount":9007199254740993}`},
		// Replace only: never add.
		{name: "missing leaf", target: `{"a":1}`, path: "$target.b", value: `0`, reason: ReasonTransformInvalid},
		{name: "missing intermediate", target: `{"a":1}`, path: "$target.missing.deeper", value: `0`, reason: ReasonTransformInvalid},
		{name: "index out of range", target: `[1,2]`, path: "$target[2]", value: `0`, reason: ReasonTransformInvalid},
		{name: "index on empty", target: `[]`, path: "$target[0]", value: `0`, reason: ReasonTransformInvalid},
		{name: "member on empty object", target: `{}`, path: "$target.a", value: `0`, reason: ReasonTransformInvalid},
		// Type mismatches.
		{name: "index on object", target: `{"0":1}`, path: "$target[0]", value: `0`, reason: ReasonTransformInvalid},
		{name: "digit member on array", target: `[1]`, path: "$target.0", value: `0`, reason: ReasonTransformInvalid},
		{name: "member on string", target: `"abc"`, path: "$target.a", value: `0`, reason: ReasonTransformInvalid},
		{name: "index on string", target: `"abc"`, path: "$target[0]", value: `0`, reason: ReasonTransformInvalid},
		{name: "member through scalar", target: `{"a":1}`, path: "$target.a.b", value: `0`, reason: ReasonTransformInvalid},
		{name: "member on null target", target: `null`, path: "$target.a", value: `0`, reason: ReasonTransformInvalid},
		// Bad paths and values.
		{name: "foreign root", target: `{"a":1}`, path: "$snapshot.a", value: `0`, reason: ReasonTransformTargetForbidden},
		{name: "bad grammar", target: `{"a":1}`, path: "$target.", value: `0`, reason: ReasonTransformInvalid},
		{name: "bad value", target: `{"a":1}`, path: "$target.a", value: `{`, reason: ReasonTransformInvalid},
		{name: "two values", target: `{"a":1}`, path: "$target.a", value: `1 2`, reason: ReasonTransformInvalid},
		{name: "whitespace value", target: `{"a":1}`, path: "$target.a", value: `  `, reason: ReasonTransformInvalid},
		{name: "lone surrogate value", target: `{"a":1}`, path: "$target.a", value: `"\ud800"`, reason: ReasonTransformInvalid},
		{name: "duplicate key value", target: `{"a":1}`, path: "$target", value: `{"k":1,"k":2}`, reason: ReasonTransformInvalid},
		{name: "bad target", target: `{"a":`, path: "$target.a", value: `0`, reason: ReasonContextInvalid},
		{name: "duplicate-key target", target: `{"a":1,"a":2}`, path: "$target.a", value: `0`, reason: ReasonContextInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var value []byte
			if !tt.nilValue {
				value = []byte(tt.value)
			}
			target := []byte(tt.target)
			orig := string(target)
			got, err := ApplyTransform(target, tt.path, value)
			if string(target) != orig {
				t.Fatal("target was modified in place")
			}
			if tt.reason != "" {
				var te *TransformError
				if !errors.As(err, &te) || te.Reason != tt.reason {
					t.Fatalf("ApplyTransform = %q, %v; want %s", got, err, tt.reason)
				}
				if strings.Contains(te.Error(), tt.value) && len(tt.value) > 2 {
					t.Errorf("error %q echoes the value", te)
				}
				return
			}
			if err != nil {
				t.Fatalf("ApplyTransform: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("ApplyTransform = %s, want %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("result is not JSON: %s", got)
			}
		})
	}
}

func TestPathResolve(t *testing.T) {
	t.Parallel()
	target := []byte(` {"a":{"b":[10, {"c" : "x"}]}} `)
	for path, want := range map[string]string{
		"$target":          `{"a":{"b":[10, {"c" : "x"}]}}`,
		"$target.a.b[1]":   `{"c" : "x"}`,
		"$target.a.b[1].c": `"x"`,
		"$target.a.b[0]":   `10`,
	} {
		p, err := ParseTargetPath(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Resolve(target)
		if err != nil || string(got) != want {
			t.Errorf("Resolve(%s) = %s, %v; want %s", path, got, err, want)
		}
	}
	p, _ := ParseTargetPath("$target.a.x")
	var te *TransformError
	if _, err := p.Resolve(target); !errors.As(err, &te) || te.Reason != ReasonTransformInvalid {
		t.Errorf("Resolve(missing) = %v", err)
	}
}

func FuzzParseTargetPath(f *testing.F) {
	for _, s := range []string{
		"$target", "$target.a.b[0].c", `$target["weird-key"]`, "$policy_target.x", "$target[007]",
		"$snapshot.x", "$target.", `$target[""]`, "$targetfoo", "$target[99999999999999999999]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseTargetPath(s)
		if err != nil {
			var te *TransformError
			if !errors.As(err, &te) || (te.Reason != ReasonTransformInvalid && te.Reason != ReasonTransformTargetForbidden) {
				t.Fatalf("ParseTargetPath(%q) error %v", s, err)
			}
			rooted := strings.HasPrefix(s, TargetRoot) || strings.HasPrefix(s, PolicyTargetRoot)
			if rooted != (te.Reason == ReasonTransformInvalid) {
				t.Fatalf("ParseTargetPath(%q): reason %s, rooted=%v", s, te.Reason, rooted)
			}
			return
		}
		c := p.String()
		q, err := ParseTargetPath(c)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", c, s, err)
		}
		if !reflect.DeepEqual(p, q) || q.String() != c {
			t.Fatalf("round trip %q -> %q -> %+v differs from %+v", s, c, q, p)
		}
	})
}

func FuzzApplyTransform(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[10,20]}}`), "$target.a.b[1]", []byte(`99`))
	f.Add([]byte(`{"0":1}`), "$target.0", []byte(`null`))
	f.Add([]byte(`[1,[2,{"x":3}]]`), "$target[1][1].x", []byte(`{"y":[]}`))
	f.Add([]byte(` {"a" : "\"]}" } `), `$target["a"]`, []byte(` "v" `))
	f.Add([]byte(`{"a":1}`), "$target", []byte(nil))
	f.Add([]byte(`{"a":1}`), "$snapshot", []byte(`1`))
	f.Fuzz(func(t *testing.T, target []byte, path string, value []byte) {
		got, err := ApplyTransform(target, path, value)
		if err != nil {
			var te *TransformError
			if !errors.As(err, &te) {
				t.Fatalf("error %T %v", err, err)
			}
			switch te.Reason {
			case ReasonTransformInvalid, ReasonTransformTargetForbidden, ReasonContextInvalid:
			default:
				t.Fatalf("unexpected reason %s", te.Reason)
			}
			return
		}
		if err := scanValue(got, 0, false); err != nil {
			t.Fatalf("result %q left the encoding domain: %v", got, err)
		}
		if !json.Valid(got) {
			t.Fatalf("result %q not valid JSON", got)
		}
		// The replaced location now holds the value.
		p, _ := ParseTargetPath(path)
		at, err := p.Resolve(got)
		if err != nil {
			t.Fatalf("cannot resolve %q in result: %v", path, err)
		}
		want := trimWS(value)
		if len(value) == 0 {
			want = []byte("null")
		}
		if string(at) != string(want) {
			t.Fatalf("resolved %q, want %q", at, want)
		}
	})
}

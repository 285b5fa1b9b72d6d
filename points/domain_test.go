package points

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func nested(open, close string, n int, inner string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

func TestCheckDomain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		raw     string
		depth   int
		problem string // "" = accepted
		path    string // checked when set
	}{
		{name: "object", raw: `{"a":[1,2,{"b":null}],"c":"x"}`},
		{name: "scalar top", raw: ` 42 `},
		{name: "string top", raw: `"x"`},
		{name: "whitespace everywhere", raw: " {\n\t\"a\" : [ 1 , true , false , null ] \r\n} "},
		{name: "max safe", raw: `[9007199254740991,-9007199254740991]`},
		{name: "2^53 rejected", raw: `{"id":9007199254740992}`, problem: ProblemInteger, path: "$.id"},
		{name: "-2^53 rejected", raw: `{"id":-9007199254740992}`, problem: ProblemInteger, path: "$.id"},
		{name: "2^53+1 rejected", raw: `[0,9007199254740993]`, problem: ProblemInteger, path: "$[1]"},
		{name: "beyond u64 rejected", raw: `{"tool_call":{"args":[18446744073709551616]}}`, problem: ProblemInteger, path: "$.tool_call.args[0]"},
		{name: "beyond u64 negative", raw: `-18446744073709551617`, problem: ProblemInteger, path: "$"},
		{name: "17 digits", raw: `10000000000000000`, problem: ProblemInteger},
		{name: "float syntax is a double", raw: `[9007199254740993.0,1.8446744073709552e19,1e300,9007199254740992.0]`},
		{name: "negative zero", raw: `[-0,-0.0,0e0]`},
		{name: "tiny underflows to zero", raw: `1e-400`},
		{name: "overflow exponent", raw: `{"value":1e400}`, problem: ProblemNonFinite, path: "$.value"},
		{name: "overflow negative", raw: `[-1.5E+309]`, problem: ProblemNonFinite, path: "$[0]"},
		{name: "max double ok", raw: `1.7976931348623157e308`},
		{name: "NaN literal", raw: `{"x":NaN}`, problem: ProblemSyntax},
		{name: "Infinity literal", raw: `[Infinity]`, problem: ProblemSyntax},
		{name: "lone high surrogate", raw: `{"content":"\ud800"}`, problem: ProblemSurrogate, path: "$.content"},
		{name: "lone low surrogate", raw: `{"x":"a\uDC00b"}`, problem: ProblemSurrogate},
		{name: "high then non-low", raw: `["\ud800\u0041"]`, problem: ProblemSurrogate, path: "$[0]"},
		{name: "high then text", raw: `["\ud800x"]`, problem: ProblemSurrogate},
		{name: "two highs", raw: `["\ud800\ud800"]`, problem: ProblemSurrogate},
		{name: "pair ok", raw: `["\ud83c\udf0d","\uD800\uDC00"]`},
		{name: "surrogate in key", raw: `{"ok":1,"\ud800":1}`, problem: ProblemSurrogate, path: "$"},
		{name: "invalid utf8", raw: "{\"x\":\"\xff\"}", problem: ProblemUTF8, path: "$[*]"},
		{name: "utf8 encoded surrogate", raw: "[\"\xed\xa0\x80\"]", problem: ProblemUTF8},
		{name: "truncated utf8", raw: "[\"\xe2\x82\"]", problem: ProblemUTF8},
		{name: "valid multibyte", raw: "[\"h\xc3\xa9llo \xf0\x9f\x8c\x8d\"]"},
		{name: "escaped nul ok", raw: `"\u0000"`},
		{name: "raw control char", raw: "\"a\x01\"", problem: ProblemSyntax},
		{name: "bad escape", raw: `"\x"`, problem: ProblemSyntax},
		{name: "short u escape", raw: `"\u12"`, problem: ProblemSyntax},
		{name: "duplicate key", raw: `{"a":1,"b":2,"a":3}`, problem: ProblemDuplicateKey, path: "$"},
		{name: "duplicate via escape", raw: `{"a":1,"\u0061":2}`, problem: ProblemDuplicateKey},
		{name: "duplicate nested", raw: `{"messages":[{"k":1,"k":1}]}`, problem: ProblemDuplicateKey, path: "$.messages[0]"},
		{name: "duplicate in big object", raw: bigObject(40, true), problem: ProblemDuplicateKey},
		{name: "big object ok", raw: bigObject(40, false)},
		{name: "same key different objects", raw: `{"a":{"a":1},"b":{"a":2}}`},
		{name: "empty", raw: ``, problem: ProblemSyntax},
		{name: "only spaces", raw: `   `, problem: ProblemSyntax},
		{name: "trailing garbage", raw: `{} x`, problem: ProblemSyntax},
		{name: "two values", raw: `1 2`, problem: ProblemSyntax},
		{name: "trailing comma array", raw: `[1,]`, problem: ProblemSyntax},
		{name: "trailing comma object", raw: `{"a":1,}`, problem: ProblemSyntax},
		{name: "missing colon", raw: `{"a" 1}`, problem: ProblemSyntax},
		{name: "unquoted key", raw: `{a:1}`, problem: ProblemSyntax},
		{name: "unterminated", raw: `{"a":[1`, problem: ProblemSyntax},
		{name: "unterminated string", raw: `"abc`, problem: ProblemSyntax},
		{name: "leading zero", raw: `01`, problem: ProblemSyntax},
		{name: "plus sign", raw: `+1`, problem: ProblemSyntax},
		{name: "bare minus", raw: `-`, problem: ProblemSyntax},
		{name: "dot no digits", raw: `1.`, problem: ProblemSyntax},
		{name: "exp no digits", raw: `1e+`, problem: ProblemSyntax},
		{name: "bad literal", raw: `tru`, problem: ProblemSyntax},
		{name: "literal prefix", raw: `nulls`, problem: ProblemSyntax},
		{name: "BOM", raw: "\xef\xbb\xbf{}", problem: ProblemSyntax},
		{name: "single quotes", raw: `['a']`, problem: ProblemSyntax},
		// Depth counts values, root at 1, scalars included (check_depth).
		{name: "depth 3 at bound", raw: `[[1]]`, depth: 3},
		{name: "depth 3 over bound 2", raw: `[[1]]`, depth: 2, problem: ProblemDepth, path: "$[0][0]"},
		{name: "empty container at bound", raw: `[[]]`, depth: 2},
		{name: "object member depth", raw: `{"a":{"b":1}}`, depth: 2, problem: ProblemDepth, path: "$[*][*]"},
		{name: "default 128 ok", raw: nested("[", "]", 127, "1")},
		{name: "default 128 exceeded", raw: nested("[", "]", 128, "1"), problem: ProblemDepth},
		{name: "deep path is cut", raw: nested("[", "]", 20, "1"), depth: 18, problem: ProblemDepth, path: "$" + strings.Repeat("[0]", 16) + "…"},
		{name: "empty at 128", raw: nested("[", "]", 128, "")},
		{name: "deep garbage", raw: nested("[", "", 100000, ""), problem: ProblemDepth},
		// Only the contract's and the chat wire's own names are shown: any
		// other may be payload, a short identifier too.
		{name: "odd key withheld", raw: `{"secret value":{"content":1e999}}`, problem: ProblemNonFinite, path: "$[*].content"},
		{name: "identifier key withheld", raw: `{"tool_call":{"args":{"acct_secret_4111111111111111":9007199254740993}}}`, problem: ProblemInteger, path: "$.tool_call.args[*]"},
		{name: "digit key withheld", raw: `{"123":1e999}`, problem: ProblemNonFinite, path: "$[*]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckDomain([]byte(tt.raw), tt.depth)
			if tt.problem == "" {
				if err != nil {
					t.Fatalf("CheckDomain = %v, want nil", err)
				}
				if jerr := json.Unmarshal([]byte(tt.raw), new(any)); jerr != nil && !strings.Contains(tt.raw, `\ud`) {
					t.Errorf("accepted text encoding/json rejects: %v", jerr)
				}
				return
			}
			var de *DomainError
			if !errors.As(err, &de) {
				t.Fatalf("CheckDomain = %v, want *DomainError", err)
			}
			if de.Problem != tt.problem {
				t.Errorf("problem = %q, want %q", de.Problem, tt.problem)
			}
			if tt.path != "" && de.Path != tt.path {
				t.Errorf("path = %q, want %q", de.Path, tt.path)
			}
		})
	}
}

func bigObject(n int, dup bool) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k`)
		b.WriteString(strings.Repeat("x", i))
		b.WriteString(`":1`)
	}
	if dup {
		b.WriteString(`,"kxxx":2`)
	}
	b.WriteByte('}')
	return b.String()
}

func TestDomainEncodingSkipsIntegerBound(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`9007199254740992`, `{"id":18446744073709551616}`, `[-99999999999999999999999]`} {
		if err := CheckEncoding([]byte(raw), 0); err != nil {
			t.Errorf("CheckEncoding(%s) = %v, want nil", raw, err)
		}
		if err := CheckDomain([]byte(raw), 0); err == nil {
			t.Errorf("CheckDomain(%s) = nil, want integer error", raw)
		}
	}
	// A 400-digit integer overflows a double: non-finite even without the bound.
	huge := strings.Repeat("9", 400)
	var de *DomainError
	if err := CheckEncoding([]byte(huge), 0); !errors.As(err, &de) || de.Problem != ProblemNonFinite {
		t.Errorf("CheckEncoding(400 digits) = %v, want non-finite", err)
	}
}

func TestDomainErrorIsValueFree(t *testing.T) {
	t.Parallel()
	cases := []string{
		`{"k":"SENSITIVE\ud800"}`,
		`{"SENSITIVE id":18446744073709551616}`,
		`{"a":{"SENSITIVE-KEY with space":9007199254740993}}`,
		`{"SENSITIVE\n":1,"SENSITIVE\n":2}`,
		"{\"k\":\"SENSITIVE\xff\"}",
		`{"k":SENSITIVE}`,
	}
	for _, raw := range cases {
		err := CheckDomain([]byte(raw), 0)
		if err == nil {
			t.Fatalf("CheckDomain(%q) = nil", raw)
		}
		for _, leak := range []string{"SENSITIVE", "18446744073709551616", "9007199254740993"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("error %q leaks %q", err, leak)
			}
		}
	}
}

func TestDomainCheckSize(t *testing.T) {
	t.Parallel()
	if err := CheckSize(make([]byte, 10), 10); err != nil {
		t.Errorf("at bound: %v", err)
	}
	var de *DomainError
	if err := CheckSize(make([]byte, 11), 10); !errors.As(err, &de) || de.Problem != ProblemSize {
		t.Errorf("over bound: %v", err)
	}
	if err := CheckSize(make([]byte, DefaultMaxContextBytes), 0); err != nil {
		t.Errorf("default bound: %v", err)
	}
	if err := CheckSize(make([]byte, DefaultMaxContextBytes+1), 0); err == nil {
		t.Error("default bound + 1 accepted")
	}
}

func TestDomainUnescapeString(t *testing.T) {
	t.Parallel()
	in := `a\"\\\/\b\f\n\r\t\u00e9\ud83c\udf0d\u0000`
	want := "a\"\\/\b\f\n\r\té\U0001F30D\x00"
	if got := string(unescapeString([]byte(in))); got != want {
		t.Errorf("unescapeString = %q, want %q", got, want)
	}
}

func FuzzCheckDomain(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2.5,-0,1e400,"\ud800","\ud83c\udf0d"]}`, `9007199254740992`, `{"a":1,"a":2}`,
		"[\"\xff\"]", `[[[[[]]]]]`, `{"x":{"y":null}}`, `"\u0000"`, `-1.5e-7`,
	} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, raw []byte, depth int) {
		depth %= 200
		errD := CheckDomain(raw, depth)
		errE := CheckEncoding(raw, depth)
		if errE != nil && errD == nil {
			t.Fatalf("CheckDomain accepted what CheckEncoding rejected: %v", errE)
		}
		for _, err := range []error{errD, errE} {
			if err == nil {
				continue
			}
			var de *DomainError
			if !errors.As(err, &de) || !strings.HasPrefix(de.Path, "$") || de.Problem == "" {
				t.Fatalf("error %#v is not a well-formed *DomainError", err)
			}
		}
		if errD == nil {
			// Everything in the domain canonicalizes: the jcs library
			// never refuses what CheckDomain accepted.
			if _, err := canonicalize(raw); err != nil {
				t.Fatalf("jcs refused a value CheckDomain accepted: %v", err)
			}
		}
		if errE == nil {
			// Whatever the encoding check accepts is JSON encoding/json
			// accepts too (it is the stricter of the two).
			if err := json.Unmarshal(raw, new(any)); err != nil {
				t.Fatalf("CheckEncoding accepted text encoding/json rejects: %v", err)
			}
		}
	})
}

// FuzzParseTimestamp: ParseTimestamp answers as time.Parse with
// RFC3339Nano does, the instant and the error alike.
func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"2026-11-29T19:28:05.745Z", "2024-02-29T00:00:00.000Z", "2023-02-29T00:00:00.000Z",
		"2026-13-01T00:00:00.000Z", "2026-11-31T00:00:00.000Z", "0000-01-01T00:00:00.000Z", "2026-11-29T24:00:00.000Z",
		"2026-11-29T19:28:60.000Z", "2026-11-29T19:28:05.74Z", "2026-11-29T19:28:05.745+01:00", "2026-11-29T19:28:05Z",
		"2026-11-29T19:28:05.7a5Z", "+026-11-29T19:28:05.745Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, gotErr := ParseTimestamp(s)
		want, wantErr := time.Parse(time.RFC3339Nano, s)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: error %v, time.Parse %v", s, gotErr, wantErr)
		}
		if gotErr == nil && (!got.Equal(want) || got.Location().String() != want.Location().String()) {
			t.Fatalf("%q: %v, time.Parse %v", s, got, want)
		}
	})
}

var unescapeSeeds = []string{``, `plain`, `a\"b\\c\/d`, `\b\f\n\r\t`, `\u00e9\u4E2D`, `\ud83d\ude00`, `\ud83d`, `\ud83dx`,
	`\ud83d\u0041`, `\udc00`, `\ud800\ud800\udc00`, `tail\\`, `\u12`, `\x`, `\`, `é ok`}

// checkUnescape: on a valid string body AppendUnescaped decodes as
// encoding/json does; on any other bytes it only returns.
func checkUnescape(t *testing.T, body string) {
	t.Helper()
	got := string(AppendUnescaped([]byte("pre"), []byte(body)))
	if !strings.HasPrefix(got, "pre") {
		t.Fatalf("AppendUnescaped(%q) dropped dst: %q", body, got)
	}
	var want string
	if json.Unmarshal([]byte(`"`+body+`"`), &want) != nil || !utf8.ValidString(body) {
		return
	}
	if got[3:] != want {
		t.Fatalf("AppendUnescaped(%q) = %q, encoding/json %q", body, got[3:], want)
	}
}

func TestAppendUnescaped(t *testing.T) {
	for _, s := range unescapeSeeds {
		checkUnescape(t, s)
	}
}

func FuzzAppendUnescaped(f *testing.F) {
	for _, s := range unescapeSeeds {
		f.Add(s)
	}
	f.Fuzz(checkUnescape)
}

func TestDepthWithin(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		max  int
		want bool
	}{
		{`{"a":[1,[2]]}`, 3, true},
		{`{"a":[1,[2]]}`, 2, false},
		{`"[[[[[["`, 1, true},
		{`{"a":"\"[[[[","b":[]}`, 2, true},
		{`{"a":"\\","b":[[[]]]}`, 3, false},
		{strings.Repeat("[", 200) + strings.Repeat("]", 200), DefaultMaxDepth, false},
		{``, 0, true},
	} {
		if got := DepthWithin([]byte(tc.raw), tc.max); got != tc.want {
			t.Errorf("DepthWithin(%q, %d) = %v, want %v", tc.raw, tc.max, got, tc.want)
		}
	}
}

// FuzzDepthWithin: on valid JSON, DepthWithin agrees with the container
// depth encoding/json's tokenizer sees.
func FuzzDepthWithin(f *testing.F) {
	f.Add(`{"a":[1,{"b":"]]"}]}`, 2)
	f.Add(`[[["x\"["]]]`, 3)
	f.Add(`[[]]`, 1)
	f.Fuzz(func(t *testing.T, raw string, max int) {
		if max < 0 || max > 200 || !json.Valid([]byte(raw)) {
			return
		}
		dec := json.NewDecoder(strings.NewReader(raw))
		depth, deepest := 0, 0
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			switch tok {
			case json.Delim('['), json.Delim('{'):
				depth++
				deepest = max2(deepest, depth)
			case json.Delim(']'), json.Delim('}'):
				depth--
			}
		}
		if got, want := DepthWithin([]byte(raw), max), deepest <= max; got != want {
			t.Fatalf("DepthWithin(%q, %d) = %v, depth is %d", raw, max, got, deepest)
		}
	})
}

func max2(a, b int) int {
	if a > b {
		return a
	}
	return b
}

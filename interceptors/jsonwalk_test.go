package interceptors

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// walkStringsRef is the gjson walk walkStrings replaced: the definition the
// scanner is checked against.
func walkStringsRef(doc []byte, fn func(v stringVisit) bool) bool {
	return walkResultRef(gjson.Parse(string(doc)), 0, nil, fn)
}

func walkResultRef(r gjson.Result, base int, path []seg, fn func(v stringVisit) bool) bool {
	switch {
	case r.Type == gjson.String:
		return fn(stringVisit{path: path, value: r.Str, start: base, end: base + len(r.Raw)})
	case r.IsObject() || r.IsArray():
		ok := true
		i := 0
		isArr := r.IsArray()
		r.ForEach(func(k, v gjson.Result) bool {
			s := seg{key: k.Str}
			if isArr {
				s = seg{index: i, isIdx: true}
			}
			i++
			ok = walkResultRef(v, base+(v.Index-r.Index), append(path[:len(path):len(path)], s), fn)
			return ok
		})
		return ok
	}
	return true
}

// visits lists a walk's visits, kept, up to stopAt of them (0: all).
func visits(walk func([]byte, func(stringVisit) bool) bool, doc []byte, stopAt int) ([]stringVisit, bool) {
	var out []stringVisit
	done := walk(doc, func(v stringVisit) bool {
		out = append(out, v.keep())
		return stopAt == 0 || len(out) < stopAt
	})
	return out, done
}

func checkWalk(t *testing.T, doc []byte) {
	t.Helper()
	for _, stopAt := range []int{0, 1, 2} {
		got, gotDone := visits(walkStrings, doc, stopAt)
		want, wantDone := visits(walkStringsRef, doc, stopAt)
		if gotDone != wantDone || !slices.EqualFunc(got, want, func(a, b stringVisit) bool {
			return a.value == b.value && a.start == b.start && a.end == b.end && slices.Equal(a.path, b.path)
		}) {
			t.Fatalf("walk of %q (stop after %d):\n got %v %+v\nwant %v %+v", doc, stopAt, gotDone, got, wantDone, want)
		}
	}
}

var walkSeeds = []string{
	`"plain"`, `"esc\n\"q\" \\ \/ \b\f\r\t"`, `"\u00e9\u4e2d\ud83d\ude00 \ud83d x \udc00 \u0041"`, `"\\\\"`, `"a\\\"b"`,
	`{"a":"x","b":["y",{"c":"z","d":1,"e":null}],"f":true,"g":[[],[[]],{}]}`,
	`{"k\u00e9y":"v","":"empty","k\"q":"w"}`, `[1,-2.5e3,"s",false,null,{"t":"u"}]`,
	`{ "a" : [ "b" , "c" ] , "d" : { } }`, `{"dup":"one","dup":"two"}`, `123`, `null`, `[]`,
	`{"n":4111111111111111,"m":[1234567890123 , 12345678901234567890]}`, `4111111111111111`,
	`{"response":{"content":"` + strings.Repeat("long prose without digits ", 400) + `","tool_calls":[{"id":"c1","name":"f","args":{"q":"x"}}]}}`,
}

func TestWalkStringsMatchesGJSON(t *testing.T) {
	for _, s := range walkSeeds {
		if !json.Valid([]byte(s)) {
			t.Fatalf("seed is not JSON: %s", s)
		}
		checkWalk(t, []byte(s))
	}
}

// TestWalkStringsMalformed: bytes that are not JSON end the walk, never in
// a panic or a read past the document.
func TestWalkStringsMalformed(t *testing.T) {
	for _, s := range []string{`"`, `"abc`, `"a\`, `{`, `{"a"`, `{"a":`, `{"a" "b"}`, `[`, `["a",`, `{1:2}`, `[}`, `{"a":"b",}`, `"\u12`} {
		walkStrings([]byte(s), func(stringVisit) bool { return true })
	}
}

// TestWalkVisitKeep: a kept visit survives the walker's reuse of its path
// stack and of its buffer for escaped strings.
func TestWalkVisitKeep(t *testing.T) {
	var kept []stringVisit
	walkStrings([]byte(`{"a":{"b":"x\ny"},"c":{"d":"z\tw"}}`), func(v stringVisit) bool {
		kept = append(kept, v.keep())
		return true
	})
	got := fmt.Sprint(kept[0].path, kept[0].value, kept[1].path, kept[1].value)
	want := fmt.Sprint([]seg{{key: "a"}, {key: "b"}}, "x\ny", []seg{{key: "c"}, {key: "d"}}, "z\tw")
	if got != want {
		t.Fatalf("kept visits %s, want %s", got, want)
	}
}

func FuzzWalkStrings(f *testing.F) {
	for _, s := range walkSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		doc := []byte(strings.TrimLeft(s, " \t\r\n"))
		if !json.Valid(doc) {
			// Not JSON: the walk must only end, whatever it visited.
			walkStrings(doc, func(stringVisit) bool { return true })
			return
		}
		checkWalk(t, doc)
		// With numbers: the same strings, plus each integer of 13-19 digits.
		var plain, all []stringVisit
		walkStringsAndKeys(doc, func(v stringVisit) bool { plain = append(plain, v.keep()); return true })
		walkMode(doc, true, true, func(v stringVisit) bool {
			if v.isNum {
				if n := v.end - v.start; n < 13 || n > 19 || string(doc[v.start:v.end]) != v.value || strings.Trim(v.value, "0123456789") != "" {
					t.Fatalf("number visit %+v in %s", v, doc)
				}
				return true
			}
			all = append(all, v.keep())
			return true
		})
		if fmt.Sprint(plain) != fmt.Sprint(all) {
			t.Fatalf("string visits differ with numbers on: %v vs %v", plain, all)
		}
	})
}

// TestWalkNumbers: only integers of card length are visited, with their
// spans.
func TestWalkNumbers(t *testing.T) {
	tests := []struct{ doc, want string }{
		{`4111111111111111`, `4111111111111111@[]`},
		{`{"a":[4111111111111111,1,12345678901234567890,-4111111111111111,4111111111111111e2,4111111111111111.0,"4111111111111111"],"b":1234567890123}`,
			`4111111111111111@[{a 0 false} { 0 true}] 1234567890123@[{b 0 false}]`},
	}
	for _, tt := range tests {
		var got []string
		walkMode([]byte(tt.doc), true, true, func(v stringVisit) bool {
			if v.isNum {
				if tt.doc[v.start:v.end] != v.value {
					t.Errorf("span %d:%d is not %q", v.start, v.end, v.value)
				}
				got = append(got, fmt.Sprintf("%s@%v", v.value, v.path))
			}
			return true
		})
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%s: visits %v, want %s", tt.doc, got, tt.want)
		}
	}
}

// BenchmarkWalkStrings walks a post_model_call target of 32 KB of prose,
// in lines (escaped newlines) and in one line.
func BenchmarkWalkStrings(b *testing.B) {
	lines := benchProse(32 << 10)
	for _, w := range []struct {
		name string
		walk func([]byte, func(stringVisit) bool) bool
		text string
	}{{"scanner/lines", walkStrings, lines}, {"gjson/lines", walkStringsRef, lines},
		{"scanner/oneline", walkStrings, strings.ReplaceAll(lines, "\n", " ")}, {"gjson/oneline", walkStringsRef, strings.ReplaceAll(lines, "\n", " ")}} {
		doc := []byte(`{"content":` + quoteJSON(w.text) + `,"tool_calls":[],"finish_reason":"stop"}`)
		b.Run(w.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				w.walk(doc, func(stringVisit) bool { return true })
			}
		})
	}
}

// benchProse is n bytes of prose with no digits, keys or addresses, as the
// benchmark's answers are, in lines.
func benchProse(n int) string {
	words := strings.Fields(`the quarterly review shows steady progress across every region and team while the
roadmap keeps its focus on reliability careful rollout and clear ownership of each service`)
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		sep := " "
		if i%40 == 39 {
			sep = "\n"
		}
		b.WriteString(words[i%len(words)])
		b.WriteString(sep)
	}
	return b.String()[:n]
}

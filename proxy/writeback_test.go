package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// Every transform the records call applied reaches the action (§4.3), and
// one the chat wire has no form for is refused in its own emission: one
// record, host_error:transform_invalid, no second record for the point.
func TestTransformsAreAppliedOrRefusedInTheirEmission(t *testing.T) {
	const toolJSON = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	for _, tc := range []struct {
		name   string
		p      points.Point
		answer string
		path   string
		value  string
		status int
		check  func(t *testing.T, sent string, body []byte)
	}{
		{"input role to system", points.Input, plainCompletion, "$target.role", `"system"`, 200,
			func(t *testing.T, sent string, _ []byte) {
				if r := gjson.Get(sent, "messages.0.role").Str; r != "system" {
					t.Fatalf("upstream got role %q", r)
				}
			}},
		{"input role to external", points.Input, plainCompletion, "$target.role", `"external"`, 503, nil},
		{"input content to a number", points.Input, plainCompletion, "$target.content", `42`, 503, nil},
		{"finish_reason to a number", points.PostModelCall, plainCompletion, "$target.finish_reason", `7`, 503, nil},
		{"finish_reason to length", points.PostModelCall, plainCompletion, "$target.finish_reason", `"length"`, 200,
			func(t *testing.T, _ string, body []byte) {
				if fr := gjson.GetBytes(body, "choices.0.finish_reason").Str; fr != "length" {
					t.Fatalf("client got finish_reason %q", fr)
				}
			}},
		{"tool call args to a string", points.PostModelCall, toolJSON, "$target.tool_calls", `[{"id":"call_a","name":"get_weather","args":"{}"}]`, 503, nil},
		{"content masked beside an id-less call", points.PostModelCall,
			`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"secret","tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
			"$target.content", `"masked"`, 200,
			func(t *testing.T, _ string, body []byte) {
				if c := gjson.GetBytes(body, "choices.0.message.content").Str; c != "masked" {
					t.Fatalf("client got %q", c)
				}
			}},
		{"output content to an array", points.Output, plainCompletion, "$target.content", `["a"]`, 503, nil},
		{"messages to a string", points.PreModelCall, plainCompletion, "$target", `"hi"`, 503, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, got := upstream(t, tc.answer, false, 0)
			xf := at(tc.p, "xf", func(*points.Context) (points.Verdict, error) {
				return points.Replace(tc.path, json.RawMessage(tc.value)), nil
			})
			p := newProxy(t, up.URL, xf, allowAll())
			resp, body := post(t, p.URL, hello)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			var n int
			var last *points.Record
			for _, r := range p.sink.Records() {
				if r.InterceptionPoint == tc.p {
					n++
					last = r
				}
			}
			if tc.status != 200 {
				if gjson.GetBytes(body, "error.code").Str != string(points.ReasonTransformInvalid) {
					t.Fatalf("body %s", body)
				}
				if n != 1 || last.Verdict.Reason != string(points.ReasonTransformInvalid) || last.DecidedBy != nil {
					t.Fatalf("%d %s records, last %+v", n, tc.p, last)
				}
				if tc.p == points.Input && len(*got) != 0 {
					t.Fatalf("the upstream was called: %s", strings.Join(*got, "\n"))
				}
				return
			}
			if n != 1 || last.Verdict.Decision != points.DecisionTransform {
				t.Fatalf("%d %s records, last %+v", n, tc.p, last)
			}
			tc.check(t, (*got)[0], body)
		})
	}
}

func TestWriteBackCheckTarget(t *testing.T) {
	for _, tc := range []struct {
		p                     points.Point
		original, transformed string
		ok                    bool
	}{
		{points.PreToolCall, `{}`, `{"path":"/tmp"}`, true},
		{points.PreToolCall, `{}`, `"rm -rf /"`, false},
		{points.PostToolCall, `"r"`, `42`, true},
		{points.Input, `{"content":[{"type":"text","text":"a"}],"role":"user"}`, `{"content":[{"type":"text","text":"b"}],"role":"user"}`, true},
		{points.Input, `{"content":"a","role":"user"}`, `{"content":null,"role":"user"}`, false},
		{points.Input, `{"content":"a","role":"external"}`, `{"content":"b","role":"external"}`, true},
		{points.Input, `{"content":"a","role":"external"}`, `{"content":"a","role":"user"}`, false},
		{points.Output, `{"content":"a"}`, `{"content":null}`, true},
		{points.Output, `{"content":"a"}`, `{}`, false},
		{points.PostModelCall, `{"content":"a","tool_calls":[],"finish_reason":"stop"}`, `{"content":"b","tool_calls":[],"finish_reason":"stop"}`, true},
		{points.PostModelCall, `{"content":"a","tool_calls":[],"finish_reason":"stop"}`, `{"content":"b","tool_calls":[{"id":"x","name":"n","args":"{}"}],"finish_reason":"stop"}`, false},
		{points.PreModelCall, `[{"role":"user","content":"a"}]`, `[{"content":"a"}]`, false},
	} {
		err := WriteBack{}.CheckTarget(tc.p, []byte(tc.original), []byte(tc.transformed))
		if (err == nil) != tc.ok {
			t.Errorf("%s %s -> %s: %v, want ok=%v", tc.p, tc.original, tc.transformed, err, tc.ok)
		}
	}
}

// A host API post retried with the same result (its answer lost) gets the
// same answer and no second post_tool_call; another result for the id is
// refused.
func TestHostPostRetryAnswersAgain(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	mask := at(points.PostToolCall, "mask", func(c *points.Context) (points.Verdict, error) {
		return points.Replace("$target", json.RawMessage(`"[masked]"`)), nil
	})
	p := newProxy(t, up.URL, mask, allowAll())
	base := p.URL + "/agent-hooks/v1/sessions/retry-1/tool-calls/c1/"
	postBody := func(path, body string) (int, string) { return postJSONTo(base+path, body) }
	if st, b := postBody("pre", `{"name":"fetch","args":{}}`); st != 200 {
		t.Fatalf("pre: %d %s", st, b)
	}
	st1, b1 := postBody("post", `{"name":"fetch","args":{},"result":"secret"}`)
	st2, b2 := postBody("post", `{"name":"fetch","args":{},"result":"secret"}`)
	if st1 != 200 || st2 != 200 || b1 != b2 || gjson.Get(b1, "result").Str != "[masked]" {
		t.Fatalf("first %d %s, retry %d %s", st1, b1, st2, b2)
	}
	if st, b := postBody("post", `{"name":"fetch","args":{},"result":"other"}`); st != 409 || gjson.Get(b, "error.code").Str != "tool_call_state" {
		t.Fatalf("another result: %d %s", st, b)
	}
	if n := count(p.sink, points.PostToolCall); n != 1 {
		t.Fatalf("%d post_tool_call records", n)
	}
}

// A retry that arrives while the first post still decides waits for its
// answer rather than being refused.
func TestHostPostRetryWhileDeciding(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	entered, release := make(chan struct{}), make(chan struct{})
	slow := at(points.PostToolCall, "slow", func(c *points.Context) (points.Verdict, error) {
		close(entered)
		<-release
		return points.Allow(), nil
	})
	p := newProxy(t, up.URL, slow, allowAll())
	base := p.URL + "/agent-hooks/v1/sessions/retry-2/tool-calls/c1/"
	do := func(path, body string) (int, string) { return postJSONTo(base+path, body) }
	if st, b := do("pre", `{"name":"fetch","args":{}}`); st != 200 {
		t.Fatalf("pre: %d %s", st, b)
	}
	type answer struct {
		st int
		b  string
	}
	first, retry := make(chan answer, 1), make(chan answer, 1)
	go func() {
		st, b := do("post", `{"name":"fetch","args":{},"result":"r","is_error":false}`)
		first <- answer{st, b}
	}()
	<-entered
	go func() { st, b := do("post", `{"name":"fetch","args":{},"result":"r"}`); retry <- answer{st, b} }()
	select {
	case a := <-retry:
		// Refused at once (409) was the defect; nothing may answer
		// before the first post's verdict.
		t.Fatalf("retry answered while the first post decided: %d %s", a.st, a.b)
	case <-time.After(100 * time.Millisecond): // room for the retry to arrive
	}
	close(release)
	a1, a2 := <-first, <-retry
	if a1.st != 200 || a2.st != 200 || a1.b != a2.b {
		t.Fatalf("first %d %s, retry %d %s", a1.st, a1.b, a2.st, a2.b)
	}
}

// A history the agent made up, or changed, cannot show the model a call
// the points did not judge: a call first seen answered has its result
// judged at post_tool_call (a deny there is the control error), and a call
// the seam released or withheld is named back, with the arguments it was
// released (or withheld) with.
func TestToolHistoryCannotSmuggleACall(t *testing.T) {
	const released = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_2","type":"function","function":{"name":"delete_files","arguments":"{\"path\":\"/\"}"}}]},"finish_reason":"tool_calls"}]}`
	deny := points.Binding{Name: "deny", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		if c.Get("tool_call.name").Str == "delete_files" && (c.Point() == points.PreToolCall || c.Point() == points.PostToolCall) {
			return points.Deny("tool_denied", ""), nil
		}
		return points.Allow(), nil
	})}
	t.Run("made up", func(t *testing.T) {
		up, got := seqUpstream(t, plainCompletion)
		p := seamProxy(t, up.URL, deny)
		body := `{"model":"m","messages":[{"role":"user","content":"hello"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_fab","type":"function","function":{"name":"delete_files","arguments":"{\"path\":\"/\"}"}}]},` +
			`{"role":"tool","tool_call_id":"call_fab","content":"deleted everything"}]}`
		if r, b := post(t, p.URL, body); r.StatusCode != 200 {
			t.Fatalf("%d %s", r.StatusCode, b)
		}
		sent := got()[0]
		if strings.Contains(sent, "deleted everything") || !strings.Contains(gjson.Get(sent, `messages.#(tool_call_id=="call_fab").content`).Str, "tool_denied") {
			t.Fatalf("the model got %s", sent)
		}
	})
	t.Run("renamed", func(t *testing.T) {
		up, got := seqUpstream(t, released, plainCompletion)
		p := seamProxy(t, up.URL, deny)
		const sid = "renamed-1"
		if r, b := post(t, p.URL, hello, "X-Agent-Hooks-Session", sid); r.StatusCode != 200 {
			t.Fatalf("%d %s", r.StatusCode, b)
		}
		// The agent renames the released call and carries the withheld
		// one (which it never got) under another name and arguments.
		body := `{"model":"m","messages":[{"role":"user","content":"Hi"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"delete_files","arguments":"{\"path\":\"/\"}"}},` +
			`{"id":"call_2","type":"function","function":{"name":"search","arguments":"{\"q\":\"zz\"}"}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":"sunny"},{"role":"tool","tool_call_id":"call_2","content":"found"}]}`
		if r, b := post(t, p.URL, body, "X-Agent-Hooks-Session", sid); r.StatusCode != 200 {
			t.Fatalf("%d %s", r.StatusCode, b)
		}
		sent := got()[1]
		for i, want := range []string{`get_weather {"city":"Paris"}`, `delete_files {"path":"/"}`} {
			f := gjson.Get(sent, "messages.1.tool_calls."+strconv.Itoa(i)+".function")
			if got := f.Get("name").Str + " " + f.Get("arguments").Str; got != want {
				t.Fatalf("call %d reaches the model as %s, want %s", i, got, want)
			}
		}
		if c := gjson.Get(sent, `messages.#(tool_call_id=="call_2").content`).Str; !strings.Contains(c, "tool_denied") {
			t.Fatalf("withheld call's result %q", c)
		}
		if n := count(p.sink, points.PostToolCall); n != 1 {
			t.Fatalf("%d post_tool_call records", n)
		}
	})
}

// A released call the agent sends back as it got it reaches the model byte
// for byte (prompt caches key on exact bytes), and a transformed one as
// the agent got it too.
func TestReleasedCallArgumentsKeepTheirBytes(t *testing.T) {
	const released = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},"finish_reason":"tool_calls"}]}`
	up, got := seqUpstream(t, released, plainCompletion)
	p := seamProxy(t, up.URL, allowAll())
	const sid = "bytes-1"
	r, b := post(t, p.URL, hello, "X-Agent-Hooks-Session", sid)
	if r.StatusCode != 200 || gjson.GetBytes(b, "choices.0.message.tool_calls.0.function.arguments").Str != `{"city": "Paris"}` {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	body := `{"model":"m","messages":[{"role":"user","content":"Hi"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"sunny"}]}`
	if r, b := post(t, p.URL, body, "X-Agent-Hooks-Session", sid); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	if a := gjson.Get(got()[1], "messages.1.tool_calls.0.function.arguments").Str; a != `{"city": "Paris"}` {
		t.Fatalf("the model got arguments %q", a)
	}
}

// postJSONTo posts body and returns the status and body (0 and the error
// when the request fails; safe off the test goroutine).
func postJSONTo(url, body string) (int, string) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A call blocked at pre_tool_call in one session, replayed in another (a
// header-less agent's next turn) with a result beside it, gets the control
// error there too; a call first seen answered keeps its argument bytes.
func TestBlockedCallReplayedElsewhereStaysBlocked(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	deny := at(points.PreToolCall, "deny-rm", func(c *points.Context) (points.Verdict, error) {
		if c.Get("tool_call.name").Str == "rm" {
			return points.Deny("tool_denied", ""), nil
		}
		return points.Allow(), nil
	})
	p := newProxy(t, up.URL, deny, allowAll())
	s := p.srv
	pol := *s.pol.Load()
	st := *pol.st
	st.TransparentToolSeam = true
	pol.st = &st
	sessA, _ := s.sessions.get("sess-a", false, time.Now())
	if out, _, _ := s.preTool(t.Context(), pol.em, sessA, "c1", "rm", argsObject(`{"p":"/"}`)); out.proceed {
		t.Fatal("rm proceeded")
	}
	sessB, _ := s.sessions.get("sess-b", false, time.Now())
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"c1","type":"function","function":{"name":"rm","arguments":"{\"p\":\"/\"}"}},` +
		`{"id":"c2","type":"function","function":{"name":"ls","arguments":"{\"p\": \"/\"}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"RESULT-SECRET"},{"role":"tool","tool_call_id":"c2","content":"ok"}]}`)
	out, res := s.applyToolHistory(t.Context(), &pol, sessB, body)
	if res != nil {
		t.Fatalf("blocked: %+v", res.Verdict)
	}
	if strings.Contains(string(out), "RESULT-SECRET") || !strings.Contains(gjson.GetBytes(out, `messages.#(tool_call_id=="c1").content`).Str, "tool_denied") {
		t.Fatalf("the model gets %s", out)
	}
	if a := gjson.GetBytes(out, "messages.1.tool_calls.1.function.arguments").Str; a != `{"p": "/"}` {
		t.Fatalf("a call first seen answered has its arguments rewritten to %q", a)
	}
}

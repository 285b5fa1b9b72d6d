package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

func twoCalls(a, b string) string {
	return `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_a","type":"function","function":{"name":"` + a + `","arguments":"{\"q\":\"one\"}"}},` +
		`{"id":"call_b","type":"function","function":{"name":"` + b + `","arguments":"{\"q\":\"two\"}"}}]},"finish_reason":"tool_calls"}]}`
}

// seqUpstream answers the given bodies in order and keeps the requests.
func seqUpstream(t *testing.T, answers ...string) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		i := len(got)
		got = append(got, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if i >= len(answers) {
			i = len(answers) - 1
		}
		_, _ = io.WriteString(w, answers[i])
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

func seamProxy(t *testing.T, up string, bindings ...points.Binding) *testProxy {
	sink := points.NewMemorySink(0)
	em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: bindings, Sink: sink, HostMembers: true})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up)
	s := New(Options{Upstream: u, Emitter: em, TransparentToolSeam: true})
	s.Start()
	hs := httptest.NewServer(s)
	t.Cleanup(func() { hs.Close(); s.Close() })
	return &testProxy{Server: hs, sink: sink, srv: s}
}

// denyTool denies pre_tool_call for one tool name and allows everything else.
func denyTool(name string) points.Binding {
	return points.Binding{Name: "tools", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		if c.Point() == points.PreToolCall && c.Get("tool_call.name").Str == name {
			return points.Deny("tool_forbidden", "not allowed"), nil
		}
		return points.Allow(), nil
	})}
}

func count(sink *points.MemorySink, p points.Point) int {
	n := 0
	for _, r := range sink.Records() {
		if r.InterceptionPoint == p {
			n++
		}
	}
	return n
}

func TestTransparentSeamWithholdsAndSplices(t *testing.T) {
	up, got := seqUpstream(t, twoCalls("search", "delete_files"), plainCompletion)
	p := seamProxy(t, up.URL, denyTool("delete_files"))
	sid := "sess-splice"
	r1, b1 := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`, "X-Agent-Hooks-Session", sid)
	calls := gjson.GetBytes(b1, "choices.0.message.tool_calls").Array()
	if r1.StatusCode != 200 || len(calls) != 1 || calls[0].Get("id").Str != "call_a" {
		t.Fatalf("agent should receive only the permitted call: %d %s", r1.StatusCode, b1)
	}
	if strings.Contains(string(b1), "delete_files") {
		t.Fatal("withheld call leaked to the agent")
	}
	// The agent answers the call it saw.
	follow := `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"search","arguments":"{\"q\":\"one\"}"}}]},{"role":"tool","tool_call_id":"call_a","content":"result one"}]}`
	r2, b2 := post(t, p.URL, follow, "X-Agent-Hooks-Session", sid)
	if r2.StatusCode != 200 {
		t.Fatalf("%d %s", r2.StatusCode, b2)
	}
	sent := got()[1]
	msgs := gjson.Get(sent, "messages").Array()
	if len(msgs) != 4 || len(msgs[1].Get("tool_calls").Array()) != 2 {
		t.Fatalf("upstream history not spliced: %s", sent)
	}
	if msgs[2].Get("tool_call_id").Str != "call_a" || msgs[3].Get("tool_call_id").Str != "call_b" {
		t.Fatalf("results not in tool_calls order: %s", sent)
	}
	ctrl := gjson.Get(sent, `messages.#(tool_call_id=="call_b").content`).Str
	if !strings.Contains(ctrl, "Tool call blocked by agent-hooks at pre_tool_call.") || !strings.Contains(ctrl, "tool_forbidden") {
		t.Fatalf("control error missing: %s", sent)
	}
	if count(p.sink, points.PreToolCall) != 2 || count(p.sink, points.PostToolCall) != 1 {
		t.Fatalf("pre=%d post=%d", count(p.sink, points.PreToolCall), count(p.sink, points.PostToolCall))
	}
	// Replaying the same history does not emit post_tool_call again.
	post(t, p.URL, follow, "X-Agent-Hooks-Session", sid)
	if count(p.sink, points.PostToolCall) != 1 {
		t.Fatal("post_tool_call emitted twice for one id")
	}
}

func TestTransparentSeamAllDeniedContinues(t *testing.T) {
	up, got := seqUpstream(t, twoCalls("delete_files", "delete_files"), plainCompletion)
	p := seamProxy(t, up.URL, denyTool("delete_files"))
	r, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`)
	if r.StatusCode != 200 || gjson.GetBytes(b, "choices.0.message.content").Str == "" {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	if len(got()) != 2 || !strings.Contains(got()[1], "Tool call blocked by agent-hooks") {
		t.Fatalf("proxy did not continue with control errors: %v", got())
	}
	if count(p.sink, points.Output) != 1 || count(p.sink, points.AgentShutdown) != 1 {
		t.Fatal("run did not finish")
	}
}

func TestPostToolTransformAndDeny(t *testing.T) {
	up, got := seqUpstream(t, plainCompletion)
	p := seamProxy(t, up.URL, points.Binding{Name: "post", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		if c.Point() != points.PostToolCall {
			return points.Allow(), nil
		}
		switch c.Get("tool_call.id").Str {
		case "call_a":
			return points.Replace("$target", json.RawMessage(`"sanitised"`)), nil
		default:
			return points.Deny("tainted", ""), nil
		}
	})})
	sid := "sess-post"
	// Register both calls through the host API's pre so the proxy knows them.
	for _, id := range []string{"call_a", "call_b"} {
		resp, b := hostCall(t, p.URL+"/agent-hooks/v1/sessions/"+sid+"/tool-calls/"+id+"/pre", `{"name":"search","args":{"q":"x"}}`)
		if resp.StatusCode != 200 || !gjson.GetBytes(b, "proceed").Bool() {
			t.Fatalf("pre %s: %s", id, b)
		}
	}
	body := `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"search","arguments":"{\"q\":\"x\"}"}},{"id":"call_b","type":"function","function":{"name":"search","arguments":"{\"q\":\"x\"}"}}]},{"role":"tool","tool_call_id":"call_a","content":"raw A"},{"role":"tool","tool_call_id":"call_b","content":"SECRET-RESULT"}]}`
	r, b := post(t, p.URL, body, "X-Agent-Hooks-Session", sid)
	if r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	sent := got()[0]
	if gjson.Get(sent, `messages.#(tool_call_id=="call_a").content`).Str != "sanitised" {
		t.Fatalf("transform not applied: %s", sent)
	}
	if strings.Contains(sent, "SECRET-RESULT") || !strings.Contains(gjson.Get(sent, `messages.#(tool_call_id=="call_b").content`).Str, "post_tool_call") {
		t.Fatalf("denied result incorporated: %s", sent)
	}
}

func hostCall(t *testing.T, u, body string) (*http.Response, []byte) {
	resp, err := http.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestHostAPI(t *testing.T) {
	up, _ := seqUpstream(t, plainCompletion)
	p := seamProxy(t, up.URL, points.Binding{Name: "pre", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		if c.Point() == points.PreToolCall {
			switch c.Get("tool_call.name").Str {
			case "shell":
				return points.Deny("dangerous_tool", "shell is not allowed"), nil
			case "fetch":
				return points.Replace("$target.url", json.RawMessage(`"https://safe.example"`)), nil
			}
		}
		return points.Allow(), nil
	})})
	base := p.URL + "/agent-hooks/v1/sessions/s1/tool-calls/"
	r, b := hostCall(t, base+"c1/pre", `{"name":"shell","args":{"cmd":"rm -rf /"}}`)
	if r.StatusCode != 200 || gjson.GetBytes(b, "proceed").Bool() || gjson.GetBytes(b, "control_error.reason").Str != "dangerous_tool" ||
		gjson.GetBytes(b, "control_error.error").Str != "Tool call blocked by agent-hooks at pre_tool_call." || strings.Contains(string(b), "rm -rf") {
		t.Fatalf("deny: %s", b)
	}
	// A name with a control character is no tool's: a host that cuts it
	// at the NUL would run shell where shell\u0000exec was judged.
	for _, name := range []string{`shell\u0000exec`, `shell\nexec`, `shell\u007f`} {
		if r, b := hostCall(t, base+"cx/pre", `{"name":"`+name+`","args":{}}`); r.StatusCode != 400 || gjson.GetBytes(b, "error.code").Str != "invalid_request" {
			t.Fatalf("name %s: %d %s", name, r.StatusCode, b)
		}
	}
	r, b = hostCall(t, base+"c1/post", `{"name":"shell","args":{},"result":"x"}`)
	if r.StatusCode != 409 {
		t.Fatalf("post after denied pre: %d %s", r.StatusCode, b)
	}
	r, b = hostCall(t, base+"c2/pre", `{"name":"fetch","args":{"url":"http://evil"}}`)
	if !gjson.GetBytes(b, "proceed").Bool() || gjson.GetBytes(b, "args.url").Str != "https://safe.example" {
		t.Fatalf("transform: %s", b)
	}
	before := count(p.sink, points.PreToolCall)
	_, b2 := hostCall(t, base+"c2/pre", `{"name":"fetch","args":{"url":"http://evil"}}`)
	if count(p.sink, points.PreToolCall) != before || string(b2) != string(b) {
		t.Fatal("repeated pre emitted again or answered differently")
	}
	r, b = hostCall(t, base+"c2/post", `{"name":"fetch","args":{},"result":{"status":200}}`)
	if r.StatusCode != 200 || gjson.GetBytes(b, "result.status").Int() != 200 {
		t.Fatalf("post: %d %s", r.StatusCode, b)
	}
	if r, _ = hostCall(t, base+"c2/post", `{"name":"fetch","args":{},"result":1}`); r.StatusCode != 409 {
		t.Fatal("second post accepted")
	}
	rec := p.sink.Records()
	last := rec[len(rec)-1]
	if last.InterceptionPoint != points.PostToolCall {
		t.Fatalf("last record %s", last.InterceptionPoint)
	}
	if r, b = hostCall(t, p.URL+"/agent-hooks/v1/sessions/s1/end", `{"reason":"completed"}`); r.StatusCode != 200 {
		t.Fatalf("end: %s", b)
	}
	if count(p.sink, points.AgentShutdown) != 1 {
		t.Fatal("no agent_shutdown")
	}
	// Sequences are unique and ordered.
	for i, r := range p.sink.Records() {
		if r.Sequence != int64(i) {
			t.Fatalf("record %d has sequence %d", i, r.Sequence)
		}
	}
}

func TestTransparentPreTransformRewritesArgs(t *testing.T) {
	up, _ := seqUpstream(t, twoCalls("fetch", "search"))
	p := seamProxy(t, up.URL, points.Binding{Name: "rewrite", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		if c.Point() == points.PreToolCall && c.Get("tool_call.name").Str == "fetch" {
			return points.Replace("$target.q", json.RawMessage(`"rewritten"`)), nil
		}
		return points.Allow(), nil
	})})
	_, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`)
	if a := gjson.GetBytes(b, "choices.0.message.tool_calls.0.function.arguments").Str; a != `{"q":"rewritten"}` {
		t.Fatalf("arguments = %s", a)
	}
	if a := gjson.GetBytes(b, "choices.0.message.tool_calls.1.function.arguments").Str; a != `{"q":"two"}` {
		t.Fatalf("untouched call changed: %s", a)
	}
}

func TestContinuationUsageIsCounted(t *testing.T) {
	denied := strings.Replace(twoCalls("delete_files", "delete_files"), `"finish_reason":"tool_calls"}]}`,
		`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`, 1)
	up, _ := seqUpstream(t, denied, plainCompletion)
	p := seamProxy(t, up.URL, denyTool("delete_files"))
	r, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`)
	if r.StatusCode != 200 || gjson.GetBytes(b, "usage.prompt_tokens").Int() != 8 ||
		gjson.GetBytes(b, "usage.completion_tokens").Int() != 9 || gjson.GetBytes(b, "usage.total_tokens").Int() != 17 {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
}

// A reload while a request runs changes neither its interceptors nor its
// settings: the request started under a transparent seam that denies
// delete_files, and the reload (no seam, allow everything) lands while
// its pre_model_call is deciding. The calls must still be judged by the
// first configuration's seam.
func TestReloadMidRequestKeepsItsPolicy(t *testing.T) {
	up, _ := seqUpstream(t, twoCalls("search", "delete_files"), plainCompletion)
	entered, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	gate := points.Binding{Name: "gate", At: []points.Point{points.PreModelCall}, Interceptor: points.InterceptorFunc(func(context.Context, *points.Context) (points.Verdict, error) {
		once.Do(func() { close(entered); <-proceed })
		return points.Allow(), nil
	})}
	p := seamProxy(t, up.URL, gate, denyTool("delete_files"))
	em2, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: []points.Binding{allowAll()}, Sink: p.sink})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status int
		body   []byte
	}
	done := make(chan answer, 1)
	go func() {
		resp, body := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"clean up"}]}`)
		done <- answer{resp.StatusCode, body}
	}()
	<-entered
	p.srv.Apply(em2, Settings{TransparentToolSeam: false})
	close(proceed)
	a := <-done
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	calls := gjson.GetBytes(a.body, "choices.0.message.tool_calls").Array()
	if len(calls) != 1 || calls[0].Get("function.name").Str != "search" {
		t.Fatalf("released calls %s; want only search, the first configuration's seam having withheld delete_files", gjson.GetBytes(a.body, "choices.0.message.tool_calls").Raw)
	}
	if n := count(p.sink, points.PreToolCall); n != 2 {
		t.Errorf("%d pre_tool_call records, want 2", n)
	}
}

// Arguments sent to the host API as the OpenAI string come back as a
// string: unchanged when nothing transformed them (even when they are not
// a JSON object and were judged as raw_arguments), else the transformed
// object's text.
func TestHostAPIStringArgs(t *testing.T) {
	up, _ := seqUpstream(t, plainCompletion)
	p := seamProxy(t, up.URL, points.Binding{Name: "pre", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		if c.Point() == points.PreToolCall && c.Get("tool_call.name").Str == "fetch" {
			return points.Replace("$target.url", json.RawMessage(`"https://safe.example"`)), nil
		}
		return points.Allow(), nil
	})})
	base := p.URL + "/agent-hooks/v1/sessions/s2/tool-calls/"
	for _, tc := range []struct{ id, body, want string }{
		{"a1", `{"name":"shell","args":"ls -la"}`, `"ls -la"`},
		{"a2", `{"name":"read","args":"{\"path\": \"/x\"}"}`, `"{\"path\": \"/x\"}"`},
		{"a3", `{"name":"fetch","args":"{\"url\":\"http://evil\"}"}`, `"{\"url\":\"https://safe.example\"}"`},
		{"a4", `{"name":"read","args":{"path":"/x"}}`, `{"path":"/x"}`},
	} {
		r, b := hostCall(t, base+tc.id+"/pre", tc.body)
		if r.StatusCode != 200 || !gjson.GetBytes(b, "proceed").Bool() || gjson.GetBytes(b, "args").Raw != tc.want {
			t.Errorf("%s: %d %s, want args %s", tc.body, r.StatusCode, b, tc.want)
		}
	}
}

// A follow-up that already carries a withheld call (the agent learned its
// id some other way) is not spliced a second time: the upstream sees each
// id once in the assistant turn and one result for it, the control error,
// whether the agent sent a result of its own for it (replaced) or none.
func TestWithheldCallCarriedByTheAgent(t *testing.T) {
	for _, tc := range []struct{ name, ownResult string }{
		{"with its own result", `,{"role":"tool","tool_call_id":"call_b","content":"deleted anyway"}`},
		{"without a result", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, got := seqUpstream(t, twoCalls("search", "delete_files"), plainCompletion)
			p := seamProxy(t, up.URL, denyTool("delete_files"))
			sid := "sess-carried"
			post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`, "X-Agent-Hooks-Session", sid)
			follow := `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[` +
				`{"id":"call_a","type":"function","function":{"name":"search","arguments":"{\"q\":\"one\"}"}},` +
				`{"id":"call_b","type":"function","function":{"name":"delete_files","arguments":"{\"q\":\"two\"}"}}]},` +
				`{"role":"tool","tool_call_id":"call_a","content":"result one"}` + tc.ownResult + `]}`
			if r, b := post(t, p.URL, follow, "X-Agent-Hooks-Session", sid); r.StatusCode != 200 {
				t.Fatalf("%d %s", r.StatusCode, b)
			}
			sent := got()[1]
			if n := len(gjson.Get(sent, "messages.1.tool_calls").Array()); n != 2 {
				t.Fatalf("assistant turn has %d calls, want 2: %s", n, sent)
			}
			results := gjson.Get(sent, `messages.#(tool_call_id=="call_b")#`).Array()
			if len(results) != 1 || strings.Contains(results[0].Get("content").Str, "deleted anyway") ||
				!strings.Contains(results[0].Get("content").Str, "Tool call blocked by agent-hooks") {
				t.Fatalf("results for the withheld call: %s", sent)
			}
		})
	}
}

// A tool result refused as context_invalid (an integer past 2^53 under a
// member of its own) is discarded: the control error the model gets in its
// place, and the record, name neither the member nor the value (§6.1,
// §6.3, §10.3). Names are data too, identifier-shaped ones included.
func TestRefusedResultNamesNothingOfIt(t *testing.T) {
	up, got := seqUpstream(t, twoCalls("search", "search"), plainCompletion)
	p := seamProxy(t, up.URL, allowAll())
	sid := "sess-refused-result"
	if r, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`, "X-Agent-Hooks-Session", sid); r.StatusCode != 200 {
		t.Fatalf("first answer %d: %s", r.StatusCode, b)
	}
	const secret = "acct_secret_4111111111111111"
	result := `{\"` + secret + `\": 9007199254740993}`
	follow := `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_a","type":"function","function":{"name":"search","arguments":"{\"q\":\"one\"}"}},` +
		`{"id":"call_b","type":"function","function":{"name":"search","arguments":"{\"q\":\"two\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_a","content":"` + result + `"},{"role":"tool","tool_call_id":"call_b","content":"ok"}]}`
	if r, b := post(t, p.URL, follow, "X-Agent-Hooks-Session", sid); r.StatusCode != 200 {
		t.Fatalf("follow-up %d: %s", r.StatusCode, b)
	}
	sent := got()
	if len(sent) < 2 {
		t.Fatalf("the upstream saw %d calls, want 2", len(sent))
	}
	ctrl := gjson.Get(sent[1], `messages.#(tool_call_id=="call_a").content`).Str
	if !strings.Contains(ctrl, "host_error:context_invalid") {
		t.Fatalf("the model got %q for call_a, want the control error", ctrl)
	}
	if strings.Contains(sent[1], secret) || strings.Contains(sent[1], "9007199254740993") {
		t.Errorf("the refused result reached the model: %s", sent[1])
	}
	found := false
	for _, r := range p.sink.Records() {
		if r.InterceptionPoint != points.PostToolCall || r.Verdict.Reason != string(points.ReasonContextInvalid) {
			continue
		}
		found = true
		if strings.Contains(r.Verdict.Message, secret) {
			t.Errorf("record message names the refused member: %q", r.Verdict.Message)
		}
	}
	if !found {
		t.Error("no post_tool_call record denies as context_invalid")
	}
}

// A host API post for a result the transparent seam already judged (the
// agent sent it as a role:tool message first) answers that verdict, as a
// host pre after the release does: the same result gets the same answer,
// without a second emission; another result is refused (409).
func TestHostPostAfterTheToolMessage(t *testing.T) {
	up, _ := seqUpstream(t, oneCall("call_seen_1234567890", "get_weather"), plainCompletion)
	redact := points.Binding{Name: "redact", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		if c.Point() == points.PostToolCall && strings.Contains(c.Get("target").Str, "secret") {
			return points.Replace("$target", json.RawMessage(`"[masked]"`)), nil
		}
		return points.Allow(), nil
	})}
	p := seamProxy(t, up.URL, redact)
	sid := "s-host-after"
	user := `{"role":"user","content":"weather?"}`
	if r, b := post(t, p.URL, `{"model":"m","messages":[`+user+`]}`, "X-Agent-Hooks-Session", sid); r.StatusCode != 200 {
		t.Fatalf("first answer %d: %s", r.StatusCode, b)
	}
	follow := `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_seen_1234567890","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"call_seen_1234567890","content":"the secret forecast"}]}`
	if r, b := post(t, p.URL, follow, "X-Agent-Hooks-Session", sid); r.StatusCode != 200 {
		t.Fatalf("follow-up %d: %s", r.StatusCode, b)
	}
	base := p.URL + "/agent-hooks/v1/sessions/" + sid + "/tool-calls/call_seen_1234567890/post"
	r, b := hostCall(t, base, `{"name":"get_weather","args":{},"result":"the secret forecast"}`)
	if r.StatusCode != 200 || !gjson.GetBytes(b, "proceed").Bool() || gjson.GetBytes(b, "result").Str != "[masked]" {
		t.Fatalf("host post of the same result: %d %s, want the transparent seam's verdict", r.StatusCode, b)
	}
	if r, b := hostCall(t, base, `{"name":"get_weather","args":{},"result":"another"}`); r.StatusCode != http.StatusConflict {
		t.Fatalf("host post of another result: %d %s, want 409", r.StatusCode, b)
	}
	if n := count(p.sink, points.PostToolCall); n != 1 {
		t.Fatalf("post_tool_call emitted %d times, want 1", n)
	}
}

// seamAnswer builds the host API's answer from what the transparent seam
// kept: the control error of a blocked result, the transformed result, or
// the posted result itself.
func TestSeamAnswer(t *testing.T) {
	ctrl := `{"error":"Tool call blocked by agent-hooks at post_tool_call.","reason":"no"}`
	sent := "fine"
	for _, tc := range []struct {
		name string
		call toolCall
		want string
	}{
		{"deciding", toolCall{seamPost: true}, ""},
		{"blocked", toolCall{seamPost: true, result: &ctrl, postDenied: true}, `{"control_error":` + ctrl + `,"proceed":false}`},
		{"transformed", toolCall{seamPost: true, result: &sent, seamTarget: []byte(`"[masked]"`)}, `{"proceed":true,"result":"[masked]"}`},
		{"as sent", toolCall{seamPost: true, result: &sent}, `{"proceed":true,"result":"fine"}`},
	} {
		if got := string(tc.call.seamAnswer([]byte(`"fine"`))); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// The host API frames bodies as the chat route does: a compressed body or
// another charset than UTF-8 is refused as such (not as "not valid
// JSON"), while a body without application/json (curl -d sends
// form-urlencoded) is read.
func TestHostAPIBodyFraming(t *testing.T) {
	up, _ := seqUpstream(t, plainCompletion)
	p := seamProxy(t, up.URL, allowAll())
	body := `{"name":"search","args":{"q":"x"}}`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(body))
	_ = zw.Close()
	cases := []struct {
		name, ct, ce string
		body         []byte
		status       int
		code         string
	}{
		{"gzip", "application/json", "gzip", gz.Bytes(), 415, "unsupported_content_encoding"},
		{"latin1", "application/json; charset=latin1", "", []byte(body), 415, "unsupported_charset"},
		{"utf-8", "application/json; charset=utf-8", "", []byte(body), 200, ""},
		{"form", "application/x-www-form-urlencoded", "", []byte(body), 200, ""},
		{"none", "", "", []byte(body), 200, ""},
	}
	for i, c := range cases {
		req, _ := http.NewRequest(http.MethodPost, p.URL+"/agent-hooks/v1/sessions/frame/tool-calls/c"+strconv.Itoa(i)+"/pre", bytes.NewReader(c.body))
		if c.ct != "" {
			req.Header.Set("Content-Type", c.ct)
		}
		if c.ce != "" {
			req.Header.Set("Content-Encoding", c.ce)
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || gjson.GetBytes(b, "error.code").Str != c.code {
			t.Errorf("%s: %d %s; want %d %q", c.name, resp.StatusCode, b, c.status, c.code)
		}
	}
}

// The usage details (cached and reasoning tokens, priced apart) of the
// calls the proxy made on its own add up as the totals do; a detail only
// the earlier call reported is added to the answer's usage too.
func TestContinuationUsageDetailsAreCounted(t *testing.T) {
	details := `"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18,` +
		`"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}}`
	denied := strings.Replace(twoCalls("delete_files", "delete_files"), `"finish_reason":"tool_calls"}]}`,
		`"finish_reason":"tool_calls"}],`+details+`}`, 1)
	final := `{"id":"c2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":3}}}`
	up, _ := seqUpstream(t, denied, final)
	p := seamProxy(t, up.URL, denyTool("delete_files"))
	r, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`)
	if r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	for path, want := range map[string]int64{
		"usage.prompt_tokens": 22, "usage.completion_tokens": 14, "usage.total_tokens": 36,
		"usage.prompt_tokens_details.cached_tokens": 6, "usage.prompt_tokens_details.audio_tokens": 0,
		"usage.completion_tokens_details.reasoning_tokens": 2,
	} {
		if got := gjson.GetBytes(b, path); !got.Exists() || got.Int() != want {
			t.Errorf("%s = %s, want %d", path, got.Raw, want)
		}
	}
}

// A post_model_call transform that changes the answer leaves the arguments
// text of every call it did not touch byte for byte as the model wrote it
// (spacing, key order, number forms); a call it changed is written from
// the context, and a call judged as text (not a JSON object) is released
// as judged.
func TestTransformKeepsUntouchedArgumentsText(t *testing.T) {
	answer := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"key sk-1","tool_calls":[` +
		`{"id":"call_a","type":"function","function":{"name":"weather","arguments":"{ \"city\" : \"Z\\u00fcrich\", \"n\": 1.50, \"z\":1,\"a\":2 }"}},` +
		`{"id":"call_b","type":"function","function":{"name":"fetch","arguments":"{\"q\": \"two\"}"}},` +
		`{"id":"call_c","type":"function","function":{"name":"shell","arguments":"ls -la"}}]},"finish_reason":"tool_calls"}]}`
	for _, tt := range []struct {
		name  string
		path  string
		value string
		want  [3]string
	}{
		{"text only", "$target.content", `"key [hidden]"`,
			[3]string{`{ "city" : "Z\u00fcrich", "n": 1.50, "z":1,"a":2 }`, `{"q": "two"}`, `ls -la`}},
		{"one call's argument", "$target.tool_calls[1].args.q", `"changed"`,
			[3]string{`{ "city" : "Z\u00fcrich", "n": 1.50, "z":1,"a":2 }`, `{"q":"changed"}`, `ls -la`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up, _ := seqUpstream(t, answer)
			p := seamProxy(t, up.URL, points.Binding{Name: "edit", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
				if c.Point() == points.PostModelCall {
					return points.Replace(tt.path, json.RawMessage(tt.value)), nil
				}
				return points.Allow(), nil
			})})
			r, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`)
			if r.StatusCode != 200 {
				t.Fatalf("%d %s", r.StatusCode, b)
			}
			for i, want := range tt.want {
				if got := gjson.GetBytes(b, "choices.0.message.tool_calls."+strconv.Itoa(i)+".function.arguments").Str; got != want {
					t.Errorf("call %d arguments %q, want %q", i, got, want)
				}
			}
		})
	}
}

// The sums leave alone what is no count in the answer (a fraction, an
// object where details were objects before), never turn a numeric member
// name into an array, never wrap, and count a call that reported no
// total in the total.
func TestAddUsageEdges(t *testing.T) {
	for _, tt := range []struct{ name, earlier, final, want string }{
		{"no total before", `{"prompt_tokens":1,"completion_tokens":2}`,
			`{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}`, `{"prompt_tokens":2,"completion_tokens":4,"total_tokens":6}`},
		{"a fraction kept", `{"queue_time":0,"prompt_tokens":1}`,
			`{"queue_time":0.25,"prompt_tokens":1}`, `{"queue_time":0.25,"prompt_tokens":2,"total_tokens":1}`},
		{"digit names left out", `{"a":{"1":2},"prompt_tokens":1,"total_tokens":1}`,
			`{"prompt_tokens":1,"total_tokens":1}`, `{"prompt_tokens":2,"total_tokens":2}`},
		{"details not an object here", `{"prompt_tokens_details":{"cached_tokens":3},"total_tokens":0}`,
			`{"prompt_tokens_details":5,"total_tokens":0}`, `{"prompt_tokens_details":5,"total_tokens":0}`},
		{"saturates", `{"total_tokens":9223372036854775000}`,
			`{"total_tokens":9223372036854775000}`, `{"total_tokens":9223372036854775807}`},
	} {
		var sp spent
		sp.add([]byte(tt.earlier))
		out, ok := addUsage([]byte(`{"usage":`+tt.final+`}`), sp.usage)
		if got := gjson.GetBytes(out, "usage").Raw; !ok || got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

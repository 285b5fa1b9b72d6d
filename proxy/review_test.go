package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

func oneCall(id, name string) string {
	return `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"` + id + `","type":"function","function":{"name":"` + name + `","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
}

// R1: a tool-call id the session has seen before skips pre_tool_call.
func TestReviewReusedToolCallIDBypassesPreToolCall(t *testing.T) {
	up, _ := seqUpstream(t, oneCall("call_0", "search"), plainCompletion, oneCall("call_0", "delete_files"))
	p := seamProxy(t, up.URL, denyTool("delete_files"))
	sid := "X-Agent-Hooks-Session"
	_, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"find"}]}`, sid, "s1")
	if !strings.Contains(string(b), "search") {
		t.Fatalf("turn1 %s", b)
	}
	_, b = post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"find"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"search","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_0","content":"r"}]}`, sid, "s1")
	resp, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"now delete"}]}`, sid, "s1")
	if strings.Contains(string(b), "delete_files") {
		t.Fatalf("denied tool released: status %d body %s; pre_tool_call count=%d", resp.StatusCode, b, count(p.sink, points.PreToolCall))
	}
}

// R2: legacy function_call in a response never reaches pre_tool_call.
func TestReviewLegacyFunctionCallBypass(t *testing.T) {
	fc := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"function_call":{"name":"delete_files","arguments":"{\"path\":\"/\"}"}},"finish_reason":"function_call"}]}`
	up, _ := seqUpstream(t, fc)
	p := seamProxy(t, up.URL, denyTool("delete_files"))
	resp, b := post(t, p.URL, `{"model":"m","functions":[{"name":"delete_files","parameters":{"type":"object"}}],"messages":[{"role":"user","content":"rm"}]}`)
	if resp.StatusCode == 200 && strings.Contains(string(b), "delete_files") {
		t.Fatalf("denied tool released via function_call: %s; pre_tool_call=%d", b, count(p.sink, points.PreToolCall))
	}
}

// R3: an output deny on "secret" misses reasoning_content / refusal.
func TestReviewUnjudgedMessageMembers(t *testing.T) {
	for _, member := range []string{`"reasoning_content":"the secret is 42"`, `"refusal":"the secret is 42"`} {
		c := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok",` + member + `},"finish_reason":"stop"}]}`
		up, _ := seqUpstream(t, c)
		deny := points.Binding{Name: "secret", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
			if strings.Contains(strings.ToLower(c.Get("target").Raw), "secret") {
				return points.Deny("secret_in_output", ""), nil
			}
			return points.Allow(), nil
		})}
		p := newProxy(t, up.URL, deny)
		resp, b := post(t, p.URL, hello)
		if strings.Contains(string(b), "secret is 42") {
			t.Errorf("%s: status %d, unjudged secret released: %s", member, resp.StatusCode, b)
		}
	}
}

// R3b: a redacting transform at post_model_call leaves the secret in logprobs.
func TestReviewRedactLeavesLogprobs(t *testing.T) {
	c := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"key sk-ABC"},"logprobs":{"content":[{"token":"key","logprob":0,"bytes":null,"top_logprobs":[]},{"token":" sk-ABC","logprob":0,"bytes":null,"top_logprobs":[]}]},"finish_reason":"stop"}]}`
	up, _ := seqUpstream(t, c)
	red := points.Binding{Name: "redact", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		if c.Point() == points.PostModelCall && strings.Contains(c.Get("target.content").Str, "sk-ABC") {
			return points.Replace("$target.content", []byte(`"key [REDACTED]"`)), nil
		}
		return points.Allow(), nil
	})}
	p := newProxy(t, up.URL, red)
	resp, b := post(t, p.URL, `{"model":"m","logprobs":true,"messages":[{"role":"user","content":"Hi"}]}`)
	t.Logf("%d %s", resp.StatusCode, b)
	if strings.Contains(string(b), "sk-ABC") {
		t.Fatalf("status %d: redacted secret still released in logprobs: %s", resp.StatusCode, b)
	}
}

// slowStartupDeny is a proxy whose agent_startup denies (startup_denied)
// once release is closed, signalling entered as each startup begins.
func slowStartupDeny(t *testing.T, up string) (p *testProxy, entered chan struct{}, release chan struct{}) {
	release, entered = make(chan struct{}), make(chan struct{}, 1)
	startup := at(points.AgentStartup, "slow-deny", func(c *points.Context) (points.Verdict, error) {
		entered <- struct{}{}
		<-release
		return points.Deny("startup_denied", ""), nil
	})
	return newProxy(t, up, startup, allowAll(points.Input, points.PreModelCall, points.PostModelCall, points.Output, points.AgentShutdown)), entered, release
}

// R4: a second request on a new named session runs before agent_startup is decided.
func TestReviewConcurrentStartupDenyRace(t *testing.T) {
	up, got := seqUpstream(t, plainCompletion)
	p, entered, release := slowStartupDeny(t, up.URL)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); post(t, p.URL, hello, "X-Agent-Hooks-Session", "race") }()
	<-entered
	resp, b := post(t, p.URL, hello, "X-Agent-Hooks-Session", "race")
	close(release)
	wg.Wait()
	if resp.StatusCode == 200 || len(got()) > 0 {
		t.Fatalf("second request served before startup verdict: %d %s; upstream calls=%d; points=%v", resp.StatusCode, b, len(got()), points_(p.sink))
	}
	// It is refused with the startup's deny, in the deny's wire shape
	// (agent_hooks facts, X-Should-Retry false), as the first request was.
	var startReason string
	for _, r := range p.sink.Records() {
		if r.InterceptionPoint == points.AgentStartup {
			startReason = r.Verdict.Reason
		}
	}
	if resp.StatusCode/100 != 4 && resp.StatusCode != 503 || resp.Header.Get("X-Should-Retry") != "false" ||
		startReason == "" || gjson.GetBytes(b, "error.code").Str != startReason ||
		gjson.GetBytes(b, "error.agent_hooks.interception_point").Str != "agent_startup" ||
		gjson.GetBytes(b, "error.agent_hooks.session_id").Str != "race" {
		t.Fatalf("second request: %d %q %s, want the startup's 403 deny", resp.StatusCode, resp.Header.Get("X-Should-Retry"), b)
	}
}

// R5: /end during an in-flight request: points follow agent_shutdown.
func TestReviewEndDuringInflight(t *testing.T) {
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-gate
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(plainCompletion))
	}))
	t.Cleanup(up.Close)
	p := newProxy(t, up.URL, allowAll())
	done := make(chan struct{})
	go func() { defer close(done); post(t, p.URL, hello, "X-Agent-Hooks-Session", "e1") }()
	<-entered
	r, _ := http.Post(p.URL+"/agent-hooks/v1/sessions/e1/end", "application/json", strings.NewReader(`{"reason":"completed"}`))
	r.Body.Close()
	close(gate)
	<-done
	pts := points_(p.sink)
	if pts[len(pts)-1] != "agent_shutdown" {
		t.Fatalf("points after agent_shutdown: %v", pts)
	}
}

// TestEndDuringInflightLongAnswers is TestReviewEndDuringInflight with
// answers longer than net/http's buffers, json and streamed: the shutdown
// a session end deferred to the request is recorded by the time the client
// has read the whole answer.
func TestEndDuringInflightLongAnswers(t *testing.T) {
	long := strings.Repeat("word ", 4000)
	streamBody := chunk(`{"role":"assistant","content":""}`, "")
	for i := 0; i < len(long); i += 500 {
		streamBody += chunk(`{"content":"`+long[i:min(i+500, len(long))]+`"}`, "")
	}
	streamBody += chunk(`{}`, "stop") + "data: [DONE]\n\n"
	jsonBody := strings.Replace(plainCompletion, `"content":"Hello there, the secret is safe."`, `"content":"`+long+`"`, 1)
	if jsonBody == plainCompletion {
		t.Fatal("plainCompletion changed shape")
	}
	for _, tc := range []struct {
		name, req, body string
		stream          bool
	}{{"json", hello, jsonBody, false}, {"stream", helloStream, streamBody, true}} {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < 5; i++ {
				gate := make(chan struct{})
				entered := make(chan struct{}, 1)
				up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					entered <- struct{}{}
					<-gate
					if tc.stream {
						w.Header().Set("Content-Type", "text/event-stream")
					} else {
						w.Header().Set("Content-Type", "application/json")
					}
					_, _ = io.WriteString(w, tc.body)
				}))
				p := newProxy(t, up.URL, allowAll())
				sid := fmt.Sprint("long-", tc.name, i)
				type answer struct {
					resp *http.Response
					body []byte
				}
				done := make(chan answer, 1)
				go func() {
					resp, b := post(t, p.URL, tc.req, "X-Agent-Hooks-Session", sid)
					done <- answer{resp, b}
				}()
				<-entered
				r, err := http.Post(p.URL+"/agent-hooks/v1/sessions/"+sid+"/end", "application/json", strings.NewReader(`{"reason":"completed"}`))
				if err != nil {
					t.Fatal(err)
				}
				r.Body.Close()
				close(gate)
				a := <-done
				if pts := points_(p.sink); pts[len(pts)-1] != "agent_shutdown" {
					t.Fatalf("records when the client had its answer: %v", pts)
				}
				if a.resp.StatusCode != 200 || len(a.body) < len(long) {
					t.Fatalf("status %d, body %d bytes", a.resp.StatusCode, len(a.body))
				}
				up.Close()
			}
		})
	}
}

// R6: 403 answers without X-Should-Retry / agent_hooks.
func TestReviewToolCallsDeniedHeader(t *testing.T) {
	var answers []string
	for i := 0; i < 12; i++ { // distinct ids: a reused id fails closed on its own
		answers = append(answers, oneCall(fmt.Sprint("call_x", i), "delete_files"))
	}
	up, _ := seqUpstream(t, answers...)
	p := seamProxy(t, up.URL, denyTool("delete_files"))
	resp, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"rm"}]}`)
	if resp.StatusCode != 403 || resp.Header.Get("X-Should-Retry") != "false" || !gjson.GetBytes(b, "error.agent_hooks").Exists() {
		t.Fatalf("status %d X-Should-Retry=%q body %s", resp.StatusCode, resp.Header.Get("X-Should-Retry"), b)
	}
}

// R7: prefix passthrough forwards dot segments to upstream.
func TestReviewPrefixPassthroughDotSegments(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.RequestURI)
		mu.Unlock()
		w.WriteHeader(200)
	}))
	t.Cleanup(up.Close)
	em, _ := points.NewEmitter(points.Config{Bindings: []points.Binding{allowAll()}})
	u, _ := url.Parse(up.URL)
	s := New(Options{Upstream: u, Emitter: em, Passthrough: []string{"/v1/files*"}})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	for _, p := range []string{"/v1/files/../chat/completions", "/v1/files/%2e%2e/chat/completions", "/v1/filesXYZ"} {
		req, _ := http.NewRequest("POST", hs.URL+p, strings.NewReader(hello))
		req.URL.Opaque = ""
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
	}
	time.Sleep(10 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("upstream saw: %q", paths)
	for _, p := range paths {
		if strings.Contains(p, "..") || strings.Contains(strings.ToLower(p), "%2e%2e") {
			t.Errorf("dot segments forwarded unmediated: %s", p)
		}
	}
}

// R8: two concurrent host-API pre calls for one id: two pre_tool_call emissions (and a data race).
func TestReviewConcurrentHostPreSameID(t *testing.T) {
	up, _ := seqUpstream(t, plainCompletion)
	gate := make(chan struct{})
	entered := make(chan struct{}, 2)
	slow := at(points.PreToolCall, "slow", func(c *points.Context) (points.Verdict, error) {
		entered <- struct{}{}
		<-gate
		return points.Allow(), nil
	})
	p := seamProxy(t, up.URL, slow, allowAll(points.AgentStartup, points.AgentShutdown))
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := http.Post(p.URL+"/agent-hooks/v1/sessions/h1/tool-calls/c1/pre", "application/json", strings.NewReader(`{"name":"search","args":{}}`))
			if err == nil {
				r.Body.Close()
			}
		}()
	}
	// Both calls may reach the interceptor (the defect) or only one; no
	// goroutine is left waiting for a second that never comes.
	timeout := time.After(2 * time.Second)
wait:
	for range 2 {
		select {
		case <-entered:
		case <-timeout:
			break wait
		}
	}
	close(gate)
	wg.Wait()
	if c := count(p.sink, points.PreToolCall); c != 1 {
		t.Fatalf("pre_tool_call emitted %d times for one id", c)
	}
}

// R1b: tool calls without ids in one response: the second shares key "" and skips pre_tool_call.
func TestReviewMissingIDsBypass(t *testing.T) {
	c := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"type":"function","function":{"name":"search","arguments":"{}"}},` +
		`{"type":"function","function":{"name":"delete_files","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	up, _ := seqUpstream(t, c)
	p := seamProxy(t, up.URL, denyTool("delete_files"))
	resp, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	t.Logf("%d %s %v", resp.StatusCode, b, points_(p.sink))
	if strings.Contains(string(b), "delete_files") {
		t.Fatalf("status %d denied tool released: %s (pre_tool_call=%d)", resp.StatusCode, b, count(p.sink, points.PreToolCall))
	}
}

// A request that waited on its session's agent_startup, which then denied,
// is refused with that deny in its wire shape, like the request that ran
// it: a 403 with the agent_hooks facts, the policy's reason as the code.
func TestWaiterGetsTheStartupDeny(t *testing.T) {
	up, got := seqUpstream(t, plainCompletion)
	p, entered, release := slowStartupDeny(t, up.URL)
	type answer struct {
		code  int
		retry string
		body  []byte
	}
	first, second := make(chan answer, 1), make(chan answer, 1)
	go func() {
		r, b := post(t, p.URL, hello, "X-Agent-Hooks-Session", "waiter")
		first <- answer{r.StatusCode, r.Header.Get("X-Should-Retry"), b}
	}()
	<-entered
	go func() {
		r, b := post(t, p.URL, hello, "X-Agent-Hooks-Session", "waiter")
		second <- answer{r.StatusCode, r.Header.Get("X-Should-Retry"), b}
	}()
	waitInFlight(t, p, "waiter", func(n int) bool { return n >= 2 }, "the second request to wait")
	close(release)
	for i, a := range []answer{<-first, <-second} {
		if a.code != 403 || a.retry != "false" || gjson.GetBytes(a.body, "error.code").Str != "startup_denied" ||
			gjson.GetBytes(a.body, "error.agent_hooks.interception_point").Str != "agent_startup" ||
			gjson.GetBytes(a.body, "error.agent_hooks.sequence").Int() != 0 {
			t.Errorf("request %d: %d %q %s, want the startup's 403 deny", i+1, a.code, a.retry, a.body)
		}
	}
	if len(got()) > 0 {
		t.Errorf("the upstream was called %d times", len(got()))
	}
}

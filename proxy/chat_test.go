package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
	"github.com/hooksproxy/hooksproxy/sse"
)

const plainCompletion = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, the secret is safe.","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`

func chunk(delta string, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":2,"model":"gpt-test","system_fingerprint":null,"choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + f + `}]}` + "\n\n"
}

var textStream = chunk(`{"role":"assistant","content":"","refusal":null}`, "") +
	chunk(`{"content":"Hello"}`, "") + chunk(`{"content":" there, the secret"}`, "") +
	chunk(`{"content":" is safe."}`, "") + chunk(`{}`, "stop") + "data: [DONE]\n\n"

// seqToolStream has two calls in the order OpenAI sends them: each call's
// deltas together, the first typed, the rest untyped. Clients that merge
// by index and those that merge by type (langchaingo) read it alike, so it
// is replayed as it came.
var seqToolStream = chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "") +
	chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"loc"}}]}`, "") +
	chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"ation\":\"Paris\"}"}}]}`, "") +
	chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]}`, "") +
	chunk(`{}`, "tool_calls") + "data: [DONE]\n\n"

// toolStream interleaves the two calls' deltas, which langchaingo would
// read as other calls: it is re-derived (TestIrregularToolStreamsReadAlike).
var toolStream = chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "") +
	chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"loc"}}]}`, "") +
	chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]}`, "") +
	chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"ation\":\"Paris\"}"}}]}`, "") +
	chunk(`{}`, "tool_calls") + "data: [DONE]\n\n"

// upstream serves a canned answer; streams are written in pieces of split bytes.
func upstream(t *testing.T, body string, stream bool, split int) (*httptest.Server, *[]string) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		if ae := r.Header.Values("Accept-Encoding"); len(ae) != 1 || ae[0] != "identity" {
			t.Errorf("Accept-Encoding %q, want identity alone (the client's is not forwarded)", ae)
		}
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; i < len(body); i += split {
				end := min(i+split, len(body))
				_, _ = io.WriteString(w, body[i:end])
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

type testProxy struct {
	*httptest.Server
	sink *points.MemorySink
	srv  *Server
}

func newProxy(t testing.TB, up string, bindings ...points.Binding) *testProxy {
	sink := points.NewMemorySink(0)
	em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: bindings, Sink: sink, Targets: WriteBack{}, HostMembers: true})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up)
	s := New(Options{Upstream: u, Emitter: em, Passthrough: []string{"/v1/models"}, Agent: points.Agent{ID: "test-agent", Framework: "openai-compatible"}})
	s.Start()
	hs := httptest.NewServer(s)
	t.Cleanup(func() { hs.Close(); s.Close() })
	return &testProxy{Server: hs, sink: sink, srv: s}
}

func allowAll(at ...points.Point) points.Binding {
	return points.Binding{Name: "allow", At: at, Interceptor: points.InterceptorFunc(func(context.Context, *points.Context) (points.Verdict, error) {
		return points.Allow(), nil
	})}
}

func at(p points.Point, name string, f func(c *points.Context) (points.Verdict, error)) points.Binding {
	return points.Binding{Name: name, At: []points.Point{p}, Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) { return f(c) })}
}

func post(t testing.TB, base, body string, hdr ...string) (*http.Response, []byte) {
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

const hello = `{"model":"gpt-test","messages":[{"role":"user","content":"Hi"}]}`
const helloStream = `{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"Hi"}]}`
const helloStreamUsage = `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi"}]}`

func points_(sink *points.MemorySink) []string {
	var out []string
	for _, r := range sink.Records() {
		out = append(out, string(r.InterceptionPoint))
	}
	return out
}

func TestPlainAllowIsOneWholeSession(t *testing.T) {
	up, got := upstream(t, plainCompletion, false, 0)
	p := newProxy(t, up.URL, allowAll())
	resp, body := post(t, p.URL, hello)
	if resp.StatusCode != 200 || string(body) != plainCompletion {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	want := "agent_startup input pre_model_call post_model_call output agent_shutdown"
	if g := strings.Join(points_(p.sink), " "); g != want {
		t.Fatalf("points = %s", g)
	}
	for i, r := range p.sink.Records() {
		if r.Sequence != int64(i) || r.Verdict.Decision != points.DecisionAllow {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	if len(*got) != 1 || gjson.Get((*got)[0], "messages.0.content").Str != "Hi" {
		t.Fatalf("upstream got %v", *got)
	}
	if p.srv.Sessions() != 0 {
		t.Fatalf("header-less run left %d sessions", p.srv.Sessions())
	}
}

func sseData(t testing.TB, b []byte) []string {
	rd := sse.NewReader(bytes.NewReader(b), 0)
	var out []string
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("client-side SSE parse: %v", err)
		}
		out = append(out, string(ev.Data))
	}
}

func TestStreamReleasedEventForEvent(t *testing.T) {
	for _, stream := range []string{textStream, seqToolStream} {
		for _, split := range []int{1, 7, 64, 1 << 20} {
			t.Run(fmt.Sprint(len(stream), "/", split), func(t *testing.T) {
				up, _ := upstream(t, stream, true, split)
				p := newProxy(t, up.URL, allowAll())
				resp, body := post(t, p.URL, helloStream)
				if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
					t.Fatalf("status %d %s", resp.StatusCode, body)
				}
				want := sseData(t, []byte(stream))
				if g := sseData(t, body); strings.Join(g, "\n") != strings.Join(want, "\n") {
					t.Fatalf("events differ:\n%s\nwant\n%s", g, want)
				}
			})
		}
	}
}

func TestDenyPostModelCallStreamSendsNoByteBefore403(t *testing.T) {
	up, _ := upstream(t, textStream, true, 5)
	p := newProxy(t, up.URL, allowAll(points.AgentStartup, points.Input, points.PreModelCall, points.Output, points.AgentShutdown),
		at(points.PostModelCall, "no-secrets", func(c *points.Context) (points.Verdict, error) {
			if strings.Contains(c.Get("response.content").Str, "secret") {
				return points.Deny("secret_in_output", "no secrets"), nil
			}
			return points.Allow(), nil
		}))
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(helloStream), helloStream)
	raw, _ := io.ReadAll(conn)
	if !bytes.HasPrefix(raw, []byte("HTTP/1.1 403 ")) {
		t.Fatalf("first bytes: %q", raw[:min(len(raw), 40)])
	}
	for _, leak := range []string{"Hello", "secret is", "data:"} {
		if bytes.Contains(raw, []byte(leak)) {
			t.Fatalf("denied payload leaked (%q): %s", leak, raw)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("X-Should-Retry") != "false" || gjson.GetBytes(b, "error.type").Str != "agent_hooks_denied" ||
		gjson.GetBytes(b, "error.code").Str != "secret_in_output" || gjson.GetBytes(b, "error.agent_hooks.interception_point").Str != "post_model_call" {
		t.Fatalf("deny body: %s", b)
	}
}

func TestTransformOutputOnStream(t *testing.T) {
	up, _ := upstream(t, textStream, true, 3)
	p := newProxy(t, up.URL, allowAll(points.AgentStartup, points.Input, points.PreModelCall, points.PostModelCall, points.AgentShutdown),
		at(points.Output, "mask", func(c *points.Context) (points.Verdict, error) {
			s := strings.ReplaceAll(c.Get("output.content").Str, "secret", "[MASKED]")
			b, _ := json.Marshal(s)
			return points.Replace("$target.content", b), nil
		}))
	resp, body := post(t, p.URL, helloStream)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	cs := NewChatStream(1 << 20)
	if _, err := cs.ReadFrom(bytes.NewReader(body)); err != nil {
		t.Fatalf("client re-read: %v\n%s", err, body)
	}
	comp, err := cs.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(comp, "choices.0.message.content").Str; got != "Hello there, the [MASKED] is safe." {
		t.Fatalf("content = %q", got)
	}
	if bytes.Contains(body, []byte("secret")) {
		t.Fatal("original content leaked")
	}
}

func TestTransformPreModelCallReachesUpstream(t *testing.T) {
	up, got := upstream(t, plainCompletion, false, 0)
	p := newProxy(t, up.URL, allowAll(points.AgentStartup, points.Input, points.PostModelCall, points.Output, points.AgentShutdown),
		at(points.PreModelCall, "rewrite", func(c *points.Context) (points.Verdict, error) {
			return points.Replace("$target[0].content", []byte(`"rewritten"`)), nil
		}))
	resp, _ := post(t, p.URL, hello)
	if resp.StatusCode != 200 || gjson.Get((*got)[0], "messages.0.content").Str != "rewritten" {
		t.Fatalf("upstream saw %v", *got)
	}
}

func TestHostErrorIs503(t *testing.T) {
	up, got := upstream(t, plainCompletion, false, 0)
	p := newProxy(t, up.URL, allowAll(points.AgentStartup, points.Input, points.AgentShutdown),
		at(points.PreModelCall, "broken", func(*points.Context) (points.Verdict, error) { panic("boom") }))
	resp, body := post(t, p.URL, hello)
	if resp.StatusCode != 503 || gjson.GetBytes(body, "error.code").Str != points.ReasonInterceptorFailed || len(*got) != 0 {
		t.Fatalf("status %d body %s upstream %d", resp.StatusCode, body, len(*got))
	}
}

func TestNoInterceptorDeniesEverything(t *testing.T) {
	up, got := upstream(t, plainCompletion, false, 0)
	p := newProxy(t, up.URL)
	resp, body := post(t, p.URL, hello)
	if resp.StatusCode != 503 || gjson.GetBytes(body, "error.code").Str != points.ReasonNoInterceptor || len(*got) != 0 {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
}

// refusals records the codes requests are refused under.
type refusals struct {
	noMetrics
	mu    sync.Mutex
	codes []string
}

func (r *refusals) RequestRefused(code string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.codes = append(r.codes, code)
}

func TestBadRequests(t *testing.T) {
	up, got := upstream(t, plainCompletion, false, 0)
	p := newProxy(t, up.URL, allowAll())
	refused := &refusals{}
	p.srv.opts.Metrics = refused
	cases := []struct {
		name, body, ct string
		status         int
	}{
		{"not json", `{"messages":`, "application/json", 400},
		{"no messages", `{"model":"x"}`, "application/json", 400},
		{"empty messages", `{"messages":[]}`, "application/json", 400},
		{"text content type", hello, "text/plain", 400},
		{"n=2", `{"n":2,"messages":[{"role":"user","content":"x"}]}`, "application/json", 400},
		{"stream a string", `{"stream":"yes","messages":[{"role":"user","content":"x"}]}`, "application/json", 400},
		{"stream a number", `{"stream":1,"messages":[{"role":"user","content":"x"}]}`, "application/json", 400},
		{"too large", `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 9<<20) + `"}]}`, "application/json", 413},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", p.URL+"/v1/chat/completions", strings.NewReader(c.body))
			req.Header.Set("Content-Type", c.ct)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || gjson.GetBytes(b, "error.message").Str == "" {
				t.Fatalf("status %d body %s", resp.StatusCode, b)
			}
		})
	}
	// A session named twice, differently; the same name twice is one.
	for _, hs := range [][]string{{"X-Agent-Hooks-Session", "s1", "s2"}, {"X-Agent-Hooks-Session", "", "s2"}} {
		req, _ := http.NewRequest("POST", p.URL+"/v1/chat/completions", strings.NewReader(hello))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Add(hs[0], hs[1])
		req.Header.Add(hs[0], hs[2])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(gjson.GetBytes(b, "error.message").Str, "more than once") {
			t.Fatalf("%s twice: %d %s", hs[0], resp.StatusCode, b)
		}
	}
	if len(*got) != 0 {
		t.Fatalf("bad requests reached the upstream: %d", len(*got))
	}
	// Each refusal is counted, by its code.
	if n := len(cases) + 2; len(refused.codes) != n || !slices.Contains(refused.codes, "request_too_large") || !slices.Contains(refused.codes, "invalid_content_type") {
		t.Fatalf("refusals counted %v, want %d", refused.codes, n)
	}
	req, _ := http.NewRequest("POST", p.URL+"/v1/chat/completions", strings.NewReader(hello))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("X-Agent-Hooks-Session", "s1")
	req.Header.Add("X-Agent-Hooks-Session", "s1")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the same session twice: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	resp, err := http.Get(p.URL + "/v1/embeddings")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 404 || gjson.GetBytes(b, "error.type").Str == "" {
		t.Fatalf("unmediated path: %d %s", resp.StatusCode, b)
	}
}

func TestUpstreamErrorPassesThrough(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(429)
		_, _ = io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit"}}`)
	}))
	defer srv.Close()
	p := newProxy(t, srv.URL, allowAll())
	resp, body := post(t, p.URL, hello)
	if resp.StatusCode != 429 || gjson.GetBytes(body, "error.type").Str != "rate_limit" {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
}

func TestBrokenStreamFailsClosed(t *testing.T) {
	// Cut before the finish_reason: a stream that ends cleanly after it
	// is complete (TestStreamEndingAfterFinishWithoutDone).
	up, _ := upstream(t, textStream[:strings.Index(textStream, chunk(`{}`, "stop"))], true, 10)
	p := newProxy(t, up.URL, allowAll())
	resp, body := post(t, p.URL, helloStream)
	// An upstream that ends its stream early errored: nothing released,
	// answered as an upstream error (retryable), not a host failure.
	if resp.StatusCode != 502 || gjson.GetBytes(body, "error.code").Str != "upstream_stream_incomplete" || bytes.Contains(body, []byte("Hello")) {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
}

func TestToolLoopLinksHeaderlessRun(t *testing.T) {
	var calls int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Content-Type", "application/json")
		if calls == 1 {
			_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}]},"finish_reason":"tool_calls"}]}`)
			return
		}
		_, _ = io.WriteString(w, plainCompletion)
	}))
	defer srv.Close()
	p := newProxy(t, srv.URL, allowAll())
	r1, b1 := post(t, p.URL, `{"model":"m","tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}],"messages":[{"role":"user","content":"find x"}]}`)
	if r1.StatusCode != 200 || p.srv.Sessions() != 1 {
		t.Fatalf("first: %d %s sessions=%d", r1.StatusCode, b1, p.srv.Sessions())
	}
	r2, _ := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"find x"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"found"}]}`)
	if r2.StatusCode != 200 {
		t.Fatal(r2.StatusCode)
	}
	want := "agent_startup input pre_model_call post_model_call pre_model_call post_model_call output agent_shutdown"
	if g := strings.Join(points_(p.sink), " "); g != want {
		t.Fatalf("points = %s", g)
	}
	sid := p.sink.Records()[0].SessionID
	for _, r := range p.sink.Records() {
		if r.SessionID != sid {
			t.Fatalf("run split across sessions")
		}
	}
}

func TestConcurrentStreams(t *testing.T) {
	up, _ := upstream(t, toolStream+"", true, 11)
	p := newProxy(t, up.URL, allowAll())
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req, _ := http.NewRequest("POST", p.URL+"/v1/chat/completions", strings.NewReader(helloStream))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Agent-Hooks-Session", fmt.Sprint("s-", i%20))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.Contains(b, []byte("[DONE]")) {
				errs <- fmt.Errorf("status %d", resp.StatusCode)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	seqs := map[string]map[int64]bool{}
	for _, r := range p.sink.Records() {
		if seqs[r.SessionID] == nil {
			seqs[r.SessionID] = map[int64]bool{}
		}
		if seqs[r.SessionID][r.Sequence] {
			t.Fatalf("duplicate sequence %d in %s", r.Sequence, r.SessionID)
		}
		seqs[r.SessionID][r.Sequence] = true
	}
}

// TestUpstreamBasePath: a base URL with a path prefix (and an encoded
// character in it) is joined with the request path and query as sent.
func TestUpstreamBasePath(t *testing.T) {
	var uri, host string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uri, host = r.RequestURI, r.Host
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, plainCompletion)
	}))
	t.Cleanup(up.Close)
	p := newProxy(t, up.URL+"/openai%20eu/", allowAll())
	req, _ := http.NewRequest("POST", p.URL+"/v1/chat/completions?api-version=2024-10-21", strings.NewReader(hello))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if want := "/openai%20eu/v1/chat/completions?api-version=2024-10-21"; uri != want {
		t.Fatalf("upstream saw %q, want %q", uri, want)
	}
	if want := strings.TrimPrefix(up.URL, "http://"); host != want {
		t.Fatalf("upstream Host %q, want %q", host, want)
	}
}

// TestStreamReusesUpstreamConnection: a held stream is read to the end of
// its body, so sequential streams share one upstream connection instead of
// dialing (with a real upstream, a TLS handshake) each time.
func TestStreamReusesUpstreamConnection(t *testing.T) {
	var mu sync.Mutex
	conns := 0
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, part := range strings.SplitAfter(textStream, "\n\n") {
			_, _ = io.WriteString(w, part)
			w.(http.Flusher).Flush()
		}
		// The end of the body comes a little after data: [DONE], as it
		// does from a busy upstream; not waiting for it lost the connection.
		time.Sleep(2 * time.Millisecond)
	}))
	up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	p := newProxy(t, up.URL, allowAll())
	for i := 0; i < 5; i++ {
		resp, b := post(t, p.URL, helloStream)
		if resp.StatusCode != 200 || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
			t.Fatalf("request %d: status %d body %s", i, resp.StatusCode, b)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 1 {
		t.Fatalf("5 sequential streams opened %d upstream connections, want 1", conns)
	}
}

// TestStreamUpstreamKeepsBodyOpen: an upstream that sends data: [DONE] and
// then neither ends its body nor sends more does not hold the answer: the
// client gets it while the upstream handler is still blocked.
func TestStreamUpstreamKeepsBodyOpen(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, textStream)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(release) })
	p := newProxy(t, up.URL, allowAll())
	resp, b := post(t, p.URL, helloStream)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "is safe.") || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Fatalf("status %d body %s", resp.StatusCode, b)
	}
}

// A host API /end for a session that is not open is a refusal before any
// emission, counted as the host API's other refusals are.
func TestEndOfUnknownSessionIsCounted(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	p := newProxy(t, up.URL, allowAll())
	refused := &refusals{}
	p.srv.opts.Metrics = refused
	resp, err := http.Post(p.URL+"/agent-hooks/v1/sessions/nosuch/end", "application/json", strings.NewReader(`{"reason":"completed"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	refused.mu.Lock()
	defer refused.mu.Unlock()
	if resp.StatusCode != http.StatusNotFound || gjson.GetBytes(b, "error.code").Str != "session_not_found" || !slices.Equal(refused.codes, []string{"session_not_found"}) {
		t.Fatalf("%d %s; refusals %v", resp.StatusCode, b, refused.codes)
	}
}

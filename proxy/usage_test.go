package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// usageUpstream streams a short answer and, as OpenAI does, the usage
// chunk (and "usage":null on every other chunk) only when the request
// asks for it. It keeps the request bodies.
func usageUpstream(t *testing.T) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		// Only the JSON boolean asks, as an upstream that reads a
		// boolean (and falls back to false on another type) sees it.
		usage := gjson.GetBytes(b, "stream_options.include_usage").Type == gjson.True
		null := ""
		if usage {
			null = `,"usage":null`
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]` + null + `}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]` + null + `}`,
		} {
			_, _ = io.WriteString(w, "data: "+d+"\n\n")
		}
		if usage {
			_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`+"\n\n")
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

func TestStreamUsage(t *testing.T) {
	for _, tc := range []struct {
		name      string
		body      string
		wantChunk bool
	}{
		{"client did not ask", helloStream, false},
		{"client asked", helloStreamUsage, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, got := usageUpstream(t)
			var mu sync.Mutex
			var seen string
			p := newProxy(t, up.URL, points.Binding{Name: "usage", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
				if c.Point() == points.PostModelCall {
					mu.Lock()
					seen = c.Get("usage").Raw
					mu.Unlock()
				}
				return points.Allow(), nil
			})})
			r, b := post(t, p.URL, tc.body)
			if r.StatusCode != 200 {
				t.Fatalf("%d %s", r.StatusCode, b)
			}
			sent := got()[0]
			if !gjson.Get(sent, "stream_options.include_usage").Bool() {
				t.Fatalf("upstream was not asked for usage: %s", sent)
			}
			if tc.wantChunk && sent != tc.body {
				t.Fatalf("a request that asked for usage was changed: %s", sent)
			}
			if gjson.Get(seen, "prompt_tokens").Int() != 3 || gjson.Get(seen, "completion_tokens").Int() != 2 {
				t.Fatalf("post_model_call usage = %q", seen)
			}
			hasChunk := strings.Contains(string(b), `"choices":[]`)
			if hasChunk != tc.wantChunk {
				t.Fatalf("usage chunk released = %v, want %v:\n%s", hasChunk, tc.wantChunk, b)
			}
			if !strings.Contains(string(b), `"content":"Hel"`) || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
				t.Fatalf("stream not released whole:\n%s", b)
			}
		})
	}
}

// TestFailedModelCallIsNotAResponse: an errored model call has no
// post_model_call (§12.1: no response to evaluate, and post_model_call is
// not the vehicle for the provider's error); the error is answered as it is.
func TestFailedModelCallIsNotAResponse(t *testing.T) {
	errUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit_error"}}`)
	}))
	defer errUp.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()
	for _, tc := range []struct {
		name   string
		up     string
		status int
	}{
		{"upstream error status", errUp.URL, http.StatusTooManyRequests},
		{"upstream unreachable", goneURL, http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProxy(t, tc.up, allowAll())
			r, b := post(t, p.URL, hello)
			if r.StatusCode != tc.status {
				t.Fatalf("%d %s", r.StatusCode, b)
			}
			want := []string{"agent_startup", "input", "pre_model_call", "agent_shutdown"}
			if g := points_(p.sink); strings.Join(g, ",") != strings.Join(want, ",") {
				t.Fatalf("points %v, want %v", g, want)
			}
		})
	}
}

func TestUpstreamHeadersAndRedirects(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/v1/chat/completions" && strings.Contains(r.URL.RawQuery, "go=away") {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
			return
		}
		w.Header().Set("X-Request-Id", "req_upstream_1")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, plainCompletion)
	}))
	defer up.Close()
	p := newProxy(t, up.URL, allowAll())
	r, b := post(t, p.URL, hello)
	if r.StatusCode != 200 || len(r.Header.Values("X-Request-Id")) != 1 || !strings.HasPrefix(r.Header.Get("X-Request-Id"), "hpr_") ||
		r.Header.Get("X-Upstream-Request-Id") != "req_upstream_1" || len(r.Header.Values("X-Upstream-Request-Id")) != 1 {
		t.Fatalf("%d %v %s", r.StatusCode, r.Header, b)
	}
	// A deny after the upstream answered still names the upstream's id.
	pd := newProxy(t, up.URL, points.Binding{Name: "deny-out", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		if c.Point() == points.Output {
			return points.Deny("no", ""), nil
		}
		return points.Allow(), nil
	})})
	if r, b := post(t, pd.URL, hello); r.StatusCode != 403 || r.Header.Get("X-Upstream-Request-Id") != "req_upstream_1" {
		t.Fatalf("deny: %d %v %s", r.StatusCode, r.Header, b)
	}
	req, _ := http.NewRequest("POST", p.URL+"/v1/chat/completions?go=away", strings.NewReader(hello))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultTransport.RoundTrip(req) // the test client must not follow either
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Location") != "" || hits["/elsewhere"] != 0 {
		t.Fatalf("status %d, redirect target hit %d times", resp.StatusCode, hits["/elsewhere"])
	}
}

func TestMultiLineJSONEventIsReplayedOnOneLine(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\n"+
			"data: \"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hello world\"},\"finish_reason\":\"stop\"}]}\n\n"+
			"data: [DONE]\n\n")
	}))
	defer up.Close()
	p := newProxy(t, up.URL, allowAll())
	r, b := post(t, p.URL, helloStream)
	if r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n\n")
	if len(lines) != 2 || strings.Count(lines[0], "data:") != 1 || gjson.Get(strings.TrimPrefix(lines[0], "data: "), "choices.0.delta.content").Str != "Hello world" {
		t.Fatalf("released:\n%s", b)
	}
}

func TestMethodNotAllowedListsAllow(t *testing.T) {
	p := newProxy(t, "http://127.0.0.1:1", allowAll())
	resp, err := http.Get(p.URL + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("%d Allow=%q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestDeepNestingDoesNotCrash: gjson's recursive validator overflows the
// goroutine stack (a fatal error, not a panic) on a few MB of "["; every
// entrance of untrusted JSON must be depth-bounded.
func TestDeepNestingDoesNotCrash(t *testing.T) {
	deep := strings.Repeat("[", 6<<20)
	upDeep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: "+deep+"\n\ndata: [DONE]\n\n")
	}))
	defer upDeep.Close()
	up, _ := seqUpstream(t, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_d","type":"function","function":{"name":"f","arguments":"`+deep+`"}}]},"finish_reason":"tool_calls"}]}`)
	p := seamProxy(t, up.URL, allowAll())
	p.srv.opts.MaxRequestBytes = 16 << 20
	p.srv.opts.MaxBufferedResponseBytes = 16 << 20
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"request body", deep, 400},
		{"tool result content", `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"` + deep + `"}]}`, 0},
		{"model tool-call arguments", hello, 0},
	} {
		r, b := post(t, p.URL, tc.body)
		if tc.status != 0 && r.StatusCode != tc.status {
			t.Fatalf("%s: %d %.200s", tc.name, r.StatusCode, b)
		}
	}
	r, b := hostCall(t, p.URL+"/agent-hooks/v1/sessions/deep/tool-calls/c1/pre", deep)
	if r.StatusCode != 400 {
		t.Fatalf("host API: %d %.200s", r.StatusCode, b)
	}
	ps := newProxy(t, upDeep.URL, allowAll())
	ps.srv.opts.MaxBufferedResponseBytes = 16 << 20
	if r, b := post(t, ps.URL, helloStream); r.StatusCode != 502 { // the upstream's fault, as for a json body
		t.Fatalf("upstream event: %d %.200s", r.StatusCode, b)
	}
}

func TestOnlyJudgedMembersAreReleased(t *testing.T) {
	extras := `{"id":"c","object":"chat.completion","created":1,"model":"m","citations":["the secret"],"x_top":1,` +
		`"choices":[{"index":0,"x_choice":"the secret","message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_1","type":"function","x_call":"the secret","function":{"name":"get","arguments":"{}","x_fn":"the secret"}}]},"finish_reason":"tool_calls"}]}`
	up, _ := seqUpstream(t, extras)
	p := seamProxy(t, up.URL, allowAll())
	r, b := post(t, p.URL, hello)
	if r.StatusCode != 200 || strings.Contains(string(b), "secret") || strings.Contains(string(b), "x_top") ||
		gjson.GetBytes(b, "choices.0.message.tool_calls.0.function.name").Str != "get" {
		t.Fatalf("%d %s", r.StatusCode, b)
	}

	custom := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_2","type":"custom","custom":{"name":"delete_files","input":"rm -rf /"}}]},"finish_reason":"tool_calls"}]}`
	up2, _ := seqUpstream(t, custom)
	p2 := seamProxy(t, up2.URL, allowAll())
	r, b = post(t, p2.URL, hello)
	if r.StatusCode != 503 || gjson.GetBytes(b, "error.code").Str != "host_error:adapter_unsupported" || strings.Contains(string(b), "rm -rf") {
		t.Fatalf("custom tool: %d %s", r.StatusCode, b)
	}

	stream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: the secret id\ndata: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"citations\":[\"the secret\"],"+
			"\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hello\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer stream.Close()
	p3 := newProxy(t, stream.URL, allowAll())
	r, b = post(t, p3.URL, helloStream)
	if r.StatusCode != 200 || strings.Contains(string(b), "secret") || !strings.Contains(string(b), `"content":"Hello"`) {
		t.Fatalf("stream: %d %s", r.StatusCode, b)
	}
}

func TestUpstreamFailureInsideAStream(t *testing.T) {
	for _, tc := range []struct {
		name, body, code string
	}{
		{"error event", "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
			"data: {\"error\":{\"message\":\"upstream exploded\",\"type\":\"server_error\",\"code\":\"boom\"}}\n\n", "boom"},
		{"cut short", "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n", "upstream_stream_incomplete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, tc.body)
			}))
			defer up.Close()
			p := newProxy(t, up.URL, allowAll())
			codes := &upstreamCodes{}
			p.srv.opts.Metrics = codes
			r, b := post(t, p.URL, helloStream)
			// Both are counted as the upstream's error: no usable
			// answer arrived (cut short, or an error in the 200).
			if len(codes.got) != 1 || codes.got[0] != 0 {
				t.Fatalf("upstream metric codes %v, want [0]", codes.got)
			}
			if r.StatusCode != 502 || gjson.GetBytes(b, "error.type").Str != "upstream_error" || gjson.GetBytes(b, "error.code").Str != tc.code ||
				strings.Contains(string(b), "Hel\"") || r.Header.Get("X-Should-Retry") == "false" {
				t.Fatalf("%d %v %s", r.StatusCode, r.Header, b)
			}
			if n := count(p.sink, points.PostModelCall); n != 0 {
				t.Fatalf("%d post_model_call records for an errored call", n)
			}
		})
	}
}

// upstreamCodes records the status each upstream call is counted under.
type upstreamCodes struct {
	noMetrics
	mu  sync.Mutex
	got []int
}

func (u *upstreamCodes) UpstreamRequest(status int, _ bool, _ time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.got = append(u.got, status)
}

func TestHeadHealthz(t *testing.T) {
	p := newProxy(t, "http://127.0.0.1:1", allowAll())
	resp, err := http.Head(p.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("HEAD /healthz: %d", resp.StatusCode)
	}
}

func TestUpstreamInvalidJSONIsAnUpstreamError(t *testing.T) {
	up, _ := seqUpstream(t, `{"id":"c","id":"d","choices":[]}`)
	p := newProxy(t, up.URL, allowAll())
	r, b := post(t, p.URL, hello)
	if r.StatusCode != 502 || gjson.GetBytes(b, "error.code").Str != "upstream_invalid_response" {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
}

// A model call the client abandons before any answer says nothing of the
// upstream's health: it is not counted as the upstream's error, while one
// that times out is.
func TestAbandonedCallIsNotAnUpstreamError(t *testing.T) {
	arrived := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server notices a closed connection only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer up.Close()

	t.Run("client gone", func(t *testing.T) {
		p := newProxy(t, up.URL, allowAll())
		codes := &upstreamCodes{}
		p.srv.opts.Metrics = codes
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+"/v1/chat/completions", strings.NewReader(hello))
		req.Header.Set("Content-Type", "application/json")
		done := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		<-arrived
		cancel()
		if err := <-done; err == nil {
			t.Fatal("the cancelled request got an answer")
		}
		// The run ends with the session's shutdown record.
		for i := 0; i < 500 && count(p.sink, points.AgentShutdown) == 0; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if count(p.sink, points.AgentShutdown) == 0 {
			t.Fatal("no agent_shutdown record for the abandoned run")
		}
		codes.mu.Lock()
		defer codes.mu.Unlock()
		if len(codes.got) != 0 {
			t.Fatalf("abandoned call counted under %v", codes.got)
		}
	})
	t.Run("client gone from a passthrough", func(t *testing.T) {
		p := newProxy(t, up.URL, allowAll())
		m := &countingMetrics{passthrough: map[int]int{}}
		p.srv.opts.Metrics = m
		// Served by hand, to know when the proxy's handler has returned.
		served := make(chan struct{}, 1)
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.srv.ServeHTTP(w, r)
			served <- struct{}{}
		}))
		defer hs.Close()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/v1/models", nil)
		go func() {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		<-arrived
		cancel()
		<-served
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.passthrough) != 0 {
			t.Fatalf("abandoned passthrough counted under %v", m.passthrough)
		}
	})
	t.Run("upstream timeout", func(t *testing.T) {
		p := newProxy(t, up.URL, allowAll())
		codes := &upstreamCodes{}
		p.srv.opts.Metrics = codes
		p.srv.opts.UpstreamTimeout = 100 * time.Millisecond
		r, b := post(t, p.URL, hello)
		<-arrived
		if r.StatusCode != http.StatusBadGateway || gjson.GetBytes(b, "error.code").Str != "upstream_unavailable" {
			t.Fatalf("%d %s", r.StatusCode, b)
		}
		codes.mu.Lock()
		defer codes.mu.Unlock()
		if len(codes.got) != 1 || codes.got[0] != 0 {
			t.Fatalf("timed-out call counted under %v, want [0] (error)", codes.got)
		}
	})
}

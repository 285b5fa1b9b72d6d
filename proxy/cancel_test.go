package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// lrGauge is a held-streams gauge that also remembers its lowest value.
type lrGauge struct {
	noMetrics
	n, low atomic.Int64
}

func (g *lrGauge) HeldStreams(d int) {
	v := g.n.Add(int64(d))
	for {
		l := g.low.Load()
		if v >= l || g.low.CompareAndSwap(l, v) {
			return
		}
	}
}

// lrReasons captures summary.reason of agent_shutdown per session.
type lrReasons struct {
	mu sync.Mutex
	m  map[string][]string
}

func (r *lrReasons) binding() points.Binding {
	return at(points.AgentShutdown, "capture", func(c *points.Context) (points.Verdict, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.m == nil {
			r.m = map[string][]string{}
		}
		sid := c.Get("session.id").Str
		r.m[sid] = append(r.m[sid], c.Get("summary.reason").Str)
		return points.Allow(), nil
	})
}

func (r *lrReasons) of(sid string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.m[sid]...)
}

// blockAt blocks the first emission at p until its context ends (the
// client leaving); entered is closed when it starts.
func blockAt(p points.Point, entered chan struct{}) points.Binding {
	var once sync.Once
	return points.Binding{Name: "block-" + string(p), At: []points.Point{p}, Interceptor: points.InterceptorFunc(func(ctx context.Context, c *points.Context) (points.Verdict, error) {
		first := false
		once.Do(func() { first = true })
		if !first {
			return points.Allow(), nil
		}
		close(entered)
		<-ctx.Done()
		return points.Verdict{}, ctx.Err()
	})}
}

func lrServer(t *testing.T, up string, opts Options, bindings ...points.Binding) (*Server, *httptest.Server, *points.MemorySink) {
	t.Helper()
	sink := points.NewMemorySink(0)
	em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: bindings, Sink: sink, HostMembers: true})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up)
	opts.Upstream, opts.Emitter = u, em
	s := New(opts)
	s.Start()
	hs := httptest.NewServer(s)
	t.Cleanup(func() { hs.Close(); s.Close() })
	return s, hs, sink
}

func inFlight(s *Server, sid string) int {
	s.sessions.mu.Lock()
	sess := s.sessions.byID[sid]
	s.sessions.mu.Unlock()
	if sess == nil {
		return -1
	}
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	return sess.inFlight
}

// A named session's agent_startup is cut by its client leaving: the run
// ends as a cancellation (agent_shutdown{cancelled}). A second request of
// the same session that waited for that startup, whose client is still
// there, should not be told the session was denied by policy.
func TestStartupCutWaiterIsNotDenied(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	entered := make(chan struct{})
	var rs lrReasons
	s, hs, _ := lrServer(t, up.URL, Options{}, rs.binding(), blockAt(points.AgentStartup, entered), allowAll())
	const sid = "wait-1"
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	ctxA, cancelA := context.WithCancel(context.Background())
	aDone := make(chan struct{})
	go func() {
		defer close(aDone)
		req, _ := http.NewRequestWithContext(ctxA, "POST", hs.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Agent-Hooks-Session", sid)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	type answer struct {
		status int
		body   []byte
		retry  string
	}
	got := make(chan answer, 1)
	go func() {
		r, b := post(t, hs.URL, body, "X-Agent-Hooks-Session", sid)
		got <- answer{r.StatusCode, b, r.Header.Get("X-Should-Retry")}
	}()
	waitFor(t, "the second request to join", func() bool { return inFlight(s, sid) == 2 })
	cancelA()
	<-aDone
	a := <-got
	waitFor(t, "agent_shutdown", func() bool { return len(rs.of(sid)) > 0 })
	t.Logf("waiter: %d X-Should-Retry=%q %s; shutdown reasons %v", a.status, a.retry, a.body, rs.of(sid))
	if a.status == http.StatusForbidden && gjson.GetBytes(a.body, "error.code").Str == "session_blocked" {
		t.Errorf("the waiting request of a session whose startup was cancelled (agent_shutdown %v) is answered 403 session_blocked "+
			"(X-Should-Retry %q, 'denied at agent_startup'): no policy denied anything", rs.of(sid), a.retry)
	}
}

// A new named session's agent_startup cut by its client leaving is
// recorded as a deny (host_error:interceptor_failed, "cancelled"), and
// §6.1a asks for agent_shutdown{error} after a denied startup, on the host
// API and the chat path alike (both run Server.startup).
func TestStartupCutEndsError(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	for _, tc := range []struct {
		name, sid, path, body string
	}{
		{"host API", "host-1", "/agent-hooks/v1/sessions/host-1/tool-calls/c1/pre", `{"name":"search","args":{}}`},
		{"chat", "chat-1", "/v1/chat/completions", hello},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entered := make(chan struct{})
			var rs lrReasons
			_, hs, _ := lrServer(t, up.URL, Options{}, rs.binding(), blockAt(points.AgentStartup, entered), allowAll())
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+tc.path, strings.NewReader(tc.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Agent-Hooks-Session", tc.sid)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			<-entered
			cancel()
			<-done
			waitFor(t, "agent_shutdown", func() bool { return len(rs.of(tc.sid)) > 0 })
			if got := rs.of(tc.sid); len(got) != 1 || got[0] != "error" {
				t.Errorf("startup cut by the client leaving: agent_shutdown %v, want [error]", got)
			}
		})
	}
}

// bodyDeadline is bounded: a large max_request_bytes (the config takes
// sizes up to 2^62) must not overflow the Duration into the past.
func TestBodyDeadlineBounded(t *testing.T) {
	for _, limit := range []int64{1 << 50, 1 << 62} {
		if d := bodyDeadline(-1, limit); d < bodyReadTimeout {
			t.Errorf("bodyDeadline(-1, %d) = %v; want at least %v", limit, d, bodyReadTimeout)
		}
	}
}

// End to end: with max_request_bytes 1 PiB, a chunked request (no
// Content-Length) is read, not refused as unreadable.
func TestHugeLimitReadsChunkedBodies(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	_, hs, _ := lrServer(t, up.URL, Options{MaxRequestBytes: 1 << 50}, allowAll())
	req, _ := http.NewRequest("POST", hs.URL+"/v1/chat/completions", stringsReader(hello))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("chunked request under max_request_bytes 1PiB: %d %s; want 200", resp.StatusCode, b)
	}
}

// The held-streams gauge over every way a streamed turn ends: it must be 0
// after each request and never negative.
func TestHeldGaugeBalanced(t *testing.T) {
	var calls atomic.Int64
	var atSecond atomic.Int64
	atSecond.Store(-1)
	g := &lrGauge{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body := textStream
		for _, w := range []string{"deny-output", "deny-post", "cut-output"} {
			if strings.Contains(string(b), w) {
				body = chunk(`{"role":"assistant","content":"`+w+`"}`, "") + chunk(`{}`, "stop") + "data: [DONE]\n\n"
			}
		}
		if strings.Contains(string(b), "tools please") {
			if calls.Add(1) == 1 {
				body = toolStream
			} else {
				atSecond.Store(g.n.Load()) // the continuation's model call
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	defer up.Close()
	outEntered := make(chan struct{})
	var outOnce sync.Once
	pol := points.Binding{Name: "pol", Interceptor: points.InterceptorFunc(func(ctx context.Context, c *points.Context) (points.Verdict, error) {
		all := c.Raw()
		switch {
		case c.Point() == points.PreToolCall:
			return points.Deny("tool_forbidden", ""), nil
		case c.Point() == points.Output && strings.Contains(string(all), "deny-output"):
			return points.Deny("no", ""), nil
		case c.Point() == points.PostModelCall && strings.Contains(string(all), "deny-post"):
			return points.Deny("no", ""), nil
		case c.Point() == points.Output && strings.Contains(string(all), "cut-output"):
			outOnce.Do(func() { close(outEntered) })
			<-ctx.Done()
			return points.Verdict{}, ctx.Err()
		}
		return points.Allow(), nil
	})}
	_, hs, _ := lrServer(t, up.URL, Options{Metrics: g, TransparentToolSeam: true}, pol)
	msg := func(s string) string {
		return `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + s + `"}]}`
	}
	check := func(what string) {
		t.Helper()
		if n := g.n.Load(); n != 0 {
			t.Errorf("%s: gauge %d after the request, want 0", what, n)
		}
		if l := g.low.Load(); l < 0 {
			t.Errorf("%s: gauge went to %d", what, l)
		}
	}
	// Output and post_model_call deny; a plain release.
	for _, c := range []struct {
		body string
		want int
	}{{msg("deny-output"), 403}, {msg("deny-post"), 403}, {msg("hello"), 200}} {
		r, b := post(t, hs.URL, c.body)
		if r.StatusCode != c.want {
			t.Errorf("%s: %d %s", c.body, r.StatusCode, b)
		}
		check(c.body)
	}
	// Every tool call denied: the proxy continues on its own.
	r, b := post(t, hs.URL, msg("tools please"))
	if r.StatusCode != 200 || calls.Load() != 2 {
		t.Errorf("continuation: %d %s, upstream calls %d", r.StatusCode, b, calls.Load())
	}
	check("continuation")
	t.Logf("gauge during the continuation's model call (turn 0's stream already discarded): %d", atSecond.Load())
	if atSecond.Load() != 0 {
		t.Errorf("held-streams gauge during the continuation's model call: %d, want 0 (turn 0's stream was discarded, none is held back pending a verdict)", atSecond.Load())
	}
	// The client leaves while output decides.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/chat/completions", strings.NewReader(msg("cut-output")))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-outEntered
	if n := g.n.Load(); n != 1 {
		t.Errorf("gauge while output decides: %d, want 1", n)
	}
	cancel()
	<-done
	waitFor(t, "gauge back to 0", func() bool { return g.n.Load() == 0 })
	check("cut-output")
}

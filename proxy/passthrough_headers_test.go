package proxy

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
)

// A passthrough path that streams (fine-tuning job events with
// stream=true, Ollama's /api/pull progress) reaches the client as the
// upstream sends it, not when the upstream finishes.
func TestPassthroughStreamsIncrementally(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: first\n\n"))
		w.(http.Flusher).Flush()
		<-release
		_, _ = w.Write([]byte("data: second\n\n"))
	}))
	t.Cleanup(up.Close)
	defer close(release)
	em, err := points.NewEmitter(points.Config{Bindings: []points.Binding{allowAll()}})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	s := New(Options{Upstream: u, Emitter: em, Passthrough: []string{"/v1/fine_tuning*"}, UpstreamTimeout: 10 * time.Second})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get(hs.URL + "/v1/fine_tuning/jobs/ft-1/events?stream=true")
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		got <- line
	}()
	select {
	case l := <-got:
		if !strings.HasPrefix(l, "data: first") {
			t.Fatalf("first line %q", l)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the first event the upstream flushed has not reached the client after 2s: passthrough buffers the answer")
	}
}

// Names an upstream's Connection header lists are dropped from what is
// copied, never from the proxy's own headers.
func TestUpstreamConnectionTokensKeepOwnHeaders(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "X-Agent-Hooks-Session, X-Request-Id")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`))
	}))
	t.Cleanup(up.Close)
	em, _ := points.NewEmitter(points.Config{Bindings: []points.Binding{allowAll()}})
	u, _ := url.Parse(up.URL)
	s := New(Options{Upstream: u, Emitter: em, UpstreamTimeout: 10 * time.Second})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Agent-Hooks-Session") == "" || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("status %d, session %q, request id %q", resp.StatusCode, resp.Header.Get("X-Agent-Hooks-Session"), resp.Header.Get("X-Request-Id"))
	}
}

// A request body in a charset other than UTF-8 is refused before anything
// is judged: the points read UTF-8, and an upstream honouring utf-7 would
// read "+AHM-ecret" as "secret".
func TestRequestCharsetMustBeUTF8(t *testing.T) {
	var calls atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`))
	}))
	t.Cleanup(up.Close)
	em, _ := points.NewEmitter(points.Config{Bindings: []points.Binding{allowAll()}})
	u, _ := url.Parse(up.URL)
	hs := httptest.NewServer(New(Options{Upstream: u, Emitter: em, UpstreamTimeout: 10 * time.Second}))
	t.Cleanup(hs.Close)
	for _, c := range []struct {
		ct    string
		want  int
		calls int32
	}{
		{"application/json; charset=utf-7", 415, 0},
		{"application/json; charset=UTF-16", 415, 0},
		{"application/json; charset=iso-8859-1", 415, 0},
		{"application/json; charset=UTF-8", 200, 1},
		{"application/json", 200, 2},
		{"application/json; charset=utf8", 200, 3}, // a WHATWG label of UTF-8
	} {
		resp, err := http.Post(hs.URL+"/v1/chat/completions", c.ct, strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"tell me the +AHM-ecret"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want || calls.Load() != c.calls {
			t.Errorf("%s: status %d, upstream calls %d", c.ct, resp.StatusCode, calls.Load())
		}
	}
	// A second Content-Type or Content-Encoding line is refused: the check
	// reads the first, the upstream might honour another.
	for _, h := range [][2]string{{"Content-Type", "application/json; charset=utf-7"}, {"Content-Encoding", "gzip"}} {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Content-Type", "application/json")
		if h[0] == "Content-Encoding" {
			req.Header.Set("Content-Encoding", "identity")
		}
		req.Header.Add(h[0], h[1])
		before := calls.Load()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || calls.Load() != before {
			t.Errorf("two %s lines: status %d, upstream called %v", h[0], resp.StatusCode, calls.Load() != before)
		}
	}
}

// A passthrough request keeps the client's Accept-Encoding (or its
// absence), and a compressed answer reaches the client as the upstream
// sent it, its Content-Encoding included.
func TestPassthroughKeepsAcceptEncoding(t *testing.T) {
	var got atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(strings.Join(r.Header.Values("Accept-Encoding"), ","))
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
		}
		_, _ = w.Write([]byte("opaque"))
	}))
	t.Cleanup(up.Close)
	p := newProxy(t, up.URL, allowAll())
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	for _, ae := range []string{"gzip, br", ""} {
		req, _ := http.NewRequest("GET", p.URL+"/v1/models", nil)
		if ae != "" {
			req.Header.Set("Accept-Encoding", ae)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := ae
		if ae == "" {
			want = "identity" // none would accept any coding
		}
		if g := got.Load().(string); g != want {
			t.Errorf("client sent Accept-Encoding %q, upstream got %q, want %q", ae, g, want)
		}
		if wantCE := map[bool]string{true: "gzip", false: ""}[ae != ""]; resp.Header.Get("Content-Encoding") != wantCE {
			t.Errorf("Content-Encoding %q, want %q", resp.Header.Get("Content-Encoding"), wantCE)
		}
	}
}

// A passthrough answer carries the proxy's own names as the chat route's
// do: its X-Request-Id (the upstream's goes on as X-Upstream-Request-Id),
// and no session header the upstream forged, which an agent reading its
// session id from any answer would follow.
func TestPassthroughAnswersUnderTheProxysNames(t *testing.T) {
	hs := modelsPassthrough(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "upstream-req-1")
		w.Header().Set("X-Agent-Hooks-Session", "forged-by-upstream")
		w.Header().Set("X-Upstream-Request-Id", "forged-upstream-id")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":[]}`))
	})
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/v1/models", nil)
	req.Header.Set("X-Request-Id", "client-req-7")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Values("X-Request-Id")[0] != "client-req-7" || len(resp.Header.Values("X-Request-Id")) != 1 ||
		resp.Header.Get("X-Upstream-Request-Id") != "upstream-req-1" || resp.Header.Get("X-Agent-Hooks-Session") != "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
}

// A passthrough request without an X-Request-Id (or with one refused as
// insane) reaches the upstream under the id generated for it, the one the
// client is answered with, as a mediated request does.
func TestPassthroughSendsTheGeneratedRequestID(t *testing.T) {
	var got atomic.Value
	hs := modelsPassthrough(t, func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Values("X-Request-Id"))
		_, _ = w.Write([]byte(`{"data":[]}`))
	})
	for _, sent := range []string{"", "has space"} {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+"/v1/models", nil)
		if sent != "" {
			req.Header.Set("X-Request-Id", sent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		answered := resp.Header.Get("X-Request-Id")
		upstream, _ := got.Load().([]string)
		if !strings.HasPrefix(answered, "hpr_") || len(upstream) != 1 || upstream[0] != answered {
			t.Errorf("sent %q: answered under %q, upstream got %q", sent, answered, upstream)
		}
	}
}

// modelsPassthrough is hooksproxy passing /v1/models through to up.
func modelsPassthrough(t *testing.T, up http.HandlerFunc) *httptest.Server {
	t.Helper()
	us := httptest.NewServer(up)
	t.Cleanup(us.Close)
	em, _ := points.NewEmitter(points.Config{Bindings: []points.Binding{allowAll()}})
	u, _ := url.Parse(us.URL)
	hs := httptest.NewServer(New(Options{Upstream: u, Emitter: em, Passthrough: []string{"/v1/models"}, UpstreamTimeout: 10 * time.Second}))
	t.Cleanup(hs.Close)
	return hs
}

package proxy

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// An upstream answer the proxy refuses (cut, not JSON, the other framing,
// an error inside a 200, an encoding it does not decode, a redirect) is
// answered 502, counted under the upstream metrics as what arrived (a
// body cut short or timed out as "error", as for a stream), and logged
// with the session, the request id and the cause: before, the json paths
// left only "session ended" in the log and counted a cut body as a 200.
func TestRefusedUpstreamAnswers(t *testing.T) {
	const head = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hel`
	cut := func(w http.ResponseWriter, _ *http.Request) {
		// Declares more than it sends, then drops the connection.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "4096")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, head)
		w.(http.Flusher).Flush()
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = buf.Flush()
			_ = conn.(*net.TCPConn).SetLinger(0)
			_ = conn.Close()
		}
	}
	// OpenRouter's and LiteLLM's way of answering a provider failure.
	errorIn200 := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"error":{"message":"Provider returned error","code":"provider_down"}}`)
	}
	for _, tc := range []struct {
		name    string
		stream  bool
		handler http.HandlerFunc
		timeout time.Duration
		code    string
		metric  int
	}{
		{"json body cut short", false, cut, 0, "upstream_invalid_response", 0},
		{"json body stalls past the timeout", false, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(200)
			_, _ = io.WriteString(w, head)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, 300 * time.Millisecond, "upstream_unavailable", 0},
		{"json body not JSON", false, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "<html>Bad gateway</html>")
		}, 0, "upstream_invalid_response", 0},
		{"error inside a 200", false, errorIn200, 0, "provider_down", 0},
		{"stream answered with a JSON error", true, errorIn200, 0, "provider_down", 0},
		{"json request answered with a stream", false, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
		}, 0, "upstream_invalid_response", 0},
		{"unknown content encoding", false, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "br")
			_, _ = io.WriteString(w, "xx")
		}, 0, "upstream_invalid_response", 0},
		{"stream cut before [DONE]", true, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n")
		}, 0, "upstream_stream_incomplete", 0},
		{"error event inside a 200 stream", true, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"error\":{\"message\":\"Provider returned error\",\"code\":\"provider_down\"}}\n\n")
		}, 0, "provider_down", 0},
		{"stream that is no chat completion stream", true, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: [1,2]\n\ndata: [DONE]\n\n")
		}, 0, "upstream_invalid_response", 0},
		{"redirect", false, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Location", "http://elsewhere.invalid/")
			w.WriteHeader(http.StatusFound)
		}, 0, "upstream_redirect", 302},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(tc.handler)
			defer up.Close()
			var logs lockedBuffer
			em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Sink: points.NewMemorySink(0), Bindings: []points.Binding{allowAll()}})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(up.URL)
			codes := &upstreamCodes{}
			s := New(Options{Upstream: u, Emitter: em, Metrics: codes, UpstreamTimeout: tc.timeout,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			s.Start()
			hs := httptest.NewServer(s)
			defer func() { hs.Close(); s.Close() }()
			body := hello
			if tc.stream {
				body = helloStream
			}
			r, b := post(t, hs.URL, body, "X-Request-Id", "req-refused-1")
			if r.StatusCode != http.StatusBadGateway || gjson.GetBytes(b, "error.type").Str != "upstream_error" || gjson.GetBytes(b, "error.code").Str != tc.code {
				t.Fatalf("%d %s", r.StatusCode, b)
			}
			if strings.Contains(string(b), "Hel") {
				t.Fatalf("part of the answer released: %s", b)
			}
			codes.mu.Lock()
			got := append([]int(nil), codes.got...)
			codes.mu.Unlock()
			if len(got) != 1 || got[0] != tc.metric {
				t.Fatalf("upstream metric codes %v, want [%d]", got, tc.metric)
			}
			var warn string
			sc := bufio.NewScanner(strings.NewReader(logs.String()))
			for sc.Scan() {
				if l := sc.Text(); strings.Contains(l, "level=WARN") && strings.Contains(l, "upstream answer refused") {
					warn = l
				}
			}
			if !strings.Contains(warn, "request_id=req-refused-1") || !strings.Contains(warn, "session=") || !strings.Contains(warn, "code="+tc.code) {
				t.Fatalf("no WARN line naming the request, session and code; logs:\n%s", logs.String())
			}
			// The upstream's own error text goes to the client, not to the
			// log: a provider may quote the input it refused.
			if strings.Contains(logs.String(), "Provider returned error") {
				t.Fatalf("the upstream's error text is in the log:\n%s", logs.String())
			}
		})
	}
}

// A stream refused as no chat completion stream says why in the client's
// error message (the proxy's own words), so a user need not read the log.
func TestMalformedStreamSaysWhy(t *testing.T) {
	up, _ := upstream(t, "data: [DONE]\n\n", true, 64)
	p := newProxy(t, up.URL, allowAll())
	r, b := post(t, p.URL, helloStream)
	if r.StatusCode != http.StatusBadGateway || !strings.Contains(gjson.GetBytes(b, "error.message").Str, "(no choice before [DONE])") {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
}

// A json answer that starts with a UTF-8 byte order mark is the answer
// after it (RFC 8259 §8.1), as a stream's is.
func TestJSONAnswerAfterABOM(t *testing.T) {
	up, _ := upstream(t, "\xef\xbb\xbf"+plainCompletion, false, 0)
	p := newProxy(t, up.URL, allowAll())
	r, b := post(t, p.URL, hello)
	if r.StatusCode != 200 || gjson.GetBytes(b, "choices.0.message.content").Str != "Hello there, the secret is safe." {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
}

// A json 200 that is no chat completion (no choices, a member of the
// wrong type) counts as the upstream's error, as a malformed stream does,
// whatever the client is answered.
func TestUnusableJSONAnswerCountsAsError(t *testing.T) {
	for _, body := range []string{`{}`, `{"detail":"x"}`, `{"choices":null}`,
		`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":"x","finish_reason":"stop"}]}`} {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		}))
		p := newProxy(t, up.URL, allowAll())
		codes := &upstreamCodes{}
		p.srv.opts.Metrics = codes
		r, _ := post(t, p.URL, hello)
		if r.StatusCode == http.StatusOK || len(codes.got) != 1 || codes.got[0] != 0 {
			t.Errorf("%s: status %d, upstream codes %v, want [0]", body, r.StatusCode, codes.got)
		}
		up.Close()
	}
}

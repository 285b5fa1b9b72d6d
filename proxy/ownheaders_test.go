package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The headers hooksproxy sets itself keep one value whatever the upstream
// sends under the same names (a chained hooksproxy sends all of them):
// success, held stream and relayed error alike.
func TestOwnHeadersNotDuplicated(t *testing.T) {
	const sseBody = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	const jsonBody = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`
	for _, tc := range []struct {
		name, req string
		status    int
		ct, body  string
	}{
		{"json", hello, 200, "application/json", jsonBody},
		{"stream", helloStream, 200, "text/event-stream", sseBody},
		{"error", hello, 500, "application/json", `{"error":{"message":"boom"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				h := w.Header()
				h.Set("Content-Type", tc.ct)
				h.Set("X-Request-Id", "req_up")
				h.Set("X-Agent-Hooks-Session", "inner_session")
				h.Set("X-Upstream-Request-Id", "inner_up")
				h.Set("Openai-Processing-Ms", "42")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer up.Close()
			hs := newProxy(t, up.URL, allowAll())
			resp, _ := post(t, hs.URL, tc.req)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d", resp.StatusCode)
			}
			for _, name := range []string{"X-Agent-Hooks-Session", "X-Upstream-Request-Id", "X-Request-Id"} {
				if vs := resp.Header.Values(name); len(vs) != 1 {
					t.Errorf("%s: %q, want one value", name, vs)
				}
			}
			if got := resp.Header.Get("X-Agent-Hooks-Session"); got == "inner_session" {
				t.Errorf("X-Agent-Hooks-Session is the upstream's")
			}
			if got := resp.Header.Get("X-Upstream-Request-Id"); got != "req_up" {
				t.Errorf("X-Upstream-Request-Id %q, want req_up", got)
			}
			if got := resp.Header.Get("Openai-Processing-Ms"); got != "42" {
				t.Errorf("Openai-Processing-Ms %q: upstream headers must still pass", got)
			}
		})
	}
}

// The upstream's request id reaches the client even on a deny, so only a
// sane token is passed on as X-Upstream-Request-Id.
func TestUpstreamRequestIDMustBeAToken(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"req_abc123", "req_abc123"},
		{"the secret is sk-proj-abc", ""},
		{"a,b", ""},
		{strings.Repeat("x", 129), ""},
		{strings.Repeat("x", 128), strings.Repeat("x", 128)},
	} {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Request-Id", tc.id)
			_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`)
		}))
		hs := newProxy(t, up.URL, allowAll())
		resp, _ := post(t, hs.URL, hello)
		up.Close()
		if got := resp.Header.Get("X-Upstream-Request-Id"); got != tc.want {
			t.Errorf("upstream id %q: X-Upstream-Request-Id %q, want %q", tc.id, got, tc.want)
		}
	}
}

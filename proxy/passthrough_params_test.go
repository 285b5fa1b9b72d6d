package proxy

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
)

// Servers that read path parameters (Tomcat, Jetty, Spring, and
// gateways built on them) take "..;" for ".." (the ";..." is a
// parameter they strip before normalising): /v1/files/..;/chat/completions
// is /v1/chat/completions behind them, reached unmediated. cleanPath
// refuses such a segment (path.Clean does not know it).
func TestPassthroughPathParamDotDot(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.EscapedPath())
		mu.Unlock()
	}))
	t.Cleanup(up.Close)
	em, err := points.NewEmitter(points.Config{Bindings: []points.Binding{allowAll()}})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	s := New(Options{Upstream: u, Emitter: em, Passthrough: []string{"/v1/files*"}, UpstreamTimeout: 10 * time.Second})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	for _, p := range []string{"/v1/files/..;/chat/completions", "/v1/files/..;x/chat/completions", "/v1/files/.;/x"} {
		resp, err := http.Post(hs.URL+p, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d, forwarded as %v; want 404", p, resp.StatusCode, seen)
		}
	}
}

package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
)

// countingMetrics records the passthrough counts.
type countingMetrics struct {
	noMetrics
	mu          sync.Mutex
	passthrough map[int]int
}

func (m *countingMetrics) PassthroughRequest(status int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.passthrough[status]++
}

// A passthrough path is forwarded only when no decoding or normalising
// behind the upstream could make it another path: a '%' left after one
// decoding, a control byte or a dot segment with a ;parameter is refused
// like a dot segment. What is forwarded is counted by the
// upstream's status.
func TestPassthroughPaths(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.EscapedPath())
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/missing") {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	}))
	t.Cleanup(up.Close)
	em, err := points.NewEmitter(points.Config{Bindings: []points.Binding{allowAll()}})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	m := &countingMetrics{passthrough: map[int]int{}}
	s := New(Options{Upstream: u, Emitter: em, Passthrough: []string{"/v1/models", "/v1/files*"}, Metrics: m, UpstreamTimeout: 10 * time.Second})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	for _, tc := range []struct {
		path    string
		forward bool
	}{
		{"/v1/models", true},
		{"/v1/files/file-abc", true},
		{"/v1/files", true},                   // a prefix covers whole segments:
		{"/v1/filesystem", false},             // the README's own example
		{"/v1/files/ft%3Agpt-4o%3Aorg", true}, // an encoded ':' decodes to itself
		{"/v1/files/missing", true},
		{"/v1/files/%252e%252e/chat/completions", false},
		{"/v1/files/%252fchat", false},
		{"/v1/files/a%25b", false},
		{"/v1/files/a%00b", false},
		{"/v1/files/a%0ab", false},
		{"/v1/files/a%7fb", false},
		{"/v1/files/%2e%2e/chat/completions", false},
		{"/v1/files/a%5cb", false},
		// Servers that read path parameters (Tomcat, Jetty, Spring) take
		// "..;" for "..": /v1/files/..;/chat/completions is
		// /v1/chat/completions behind them.
		{"/v1/files/..;/chat/completions", false},
		{"/v1/files/..;x/chat/completions", false},
		{"/v1/files/.;/x", false},
	} {
		mu.Lock()
		before := len(seen)
		mu.Unlock()
		req, err := http.NewRequest(http.MethodGet, hs.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		mu.Lock()
		forwarded := len(seen) > before
		mu.Unlock()
		if forwarded != tc.forward {
			t.Errorf("%s: forwarded %v (status %d), want %v", tc.path, forwarded, resp.StatusCode, tc.forward)
		}
		if !tc.forward && resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", tc.path, resp.StatusCode)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.passthrough[200] != 4 || m.passthrough[404] != 1 || len(m.passthrough) != 2 {
		t.Errorf("passthrough counts %v, want 4 of 200 and 1 of 404", m.passthrough)
	}
}

package app_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A history the request limit admits is judged, not refused for its size:
// pre_model_call's context carries the messages twice (member and target),
// so the context bound follows the request and response limits unless
// limits.max_context_bytes sets it, and then fails closed above it.
func TestContextBoundFollowsLimits(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(up.Close)
	big := strings.Repeat("history ", 3<<20/8) // 3 MiB of one message: 6 MiB of context
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + big + `"}]}`)
	for _, tc := range []struct {
		limits string
		status int
	}{
		{"", 200},
		{"limits: {max_context_bytes: 4MiB}\n", 503},
	} {
		cfg := tc.limits + "upstream: {base_url: " + up.URL + "}\nagent: {id: a}\nhooks:\n  declaration: agent-hooks-declaration/1.0\n  bindings:\n    - {id: allow, kind: hooksproxy.allow_all}\n"
		path := filepath.Join(t.TempDir(), "hp.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startAppFile(t, path)
		r, err := p.chat(context.Background(), body)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != tc.status || (tc.status == 503 && r.code() != "host_error:context_invalid") {
			t.Fatalf("limits %q: %d %s", tc.limits, r.status, r.body[:min(len(r.body), 300)])
		}
	}
}

package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/app"
	"github.com/hooksproxy/hooksproxy/approvals"
	"github.com/hooksproxy/hooksproxy/config"
	"github.com/hooksproxy/hooksproxy/points"
)

// testIdentityKey is the HMAC key the examples' identity providers read
// (hooksproxy.hmac wants at least 32 bytes).
const testIdentityKey = "example-identity-key-0123456789abcdef"

// exampleEnv is the environment every example file may ask for.
func exampleEnv() app.Env {
	vars := map[string]string{
		"HOOKSPROXY_IDENTITY_KEY": testIdentityKey,
		"HOOKSPROXY_ADMIN_TOKEN":  "example-admin-token",
	}
	return app.Env{Getenv: func(k string) string { return vars[k] }}
}

// consoles registers the approval resolver kinds the way the binary does
// (cmd/hooksproxy's consoleExtra is in package main) and keeps the console
// built last, so tests can decide its approvals.
type consoles struct {
	mu   sync.Mutex
	last *approvals.Console
}

func (c *consoles) extra() app.Extra {
	return func(r *config.MapRegistry) error {
		if err := r.RegisterResolverKind("hooksproxy.console", func(_ string, cfg json.RawMessage) (points.Resolver, error) {
			con, err := approvals.NewConsoleFromConfig(cfg)
			if err != nil {
				return nil, err
			}
			c.mu.Lock()
			c.last = con
			c.mu.Unlock()
			return con, nil
		}); err != nil {
			return err
		}
		return r.RegisterResolverKind("hooksproxy.webhook", func(_ string, cfg json.RawMessage) (points.Resolver, error) {
			return approvals.NewWebhook(cfg, func(string) string { return "" }, &http.Client{})
		})
	}
}

func (c *consoles) console() *approvals.Console {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// proxyUnderTest is an app built from a config file and served on loopback.
type proxyUnderTest struct {
	app  *app.App
	srv  *httptest.Server
	sink *points.MemorySink
	cons *consoles
	path string
}

// startApp loads path (after replacing each old string with its new one,
// e.g. the upstream address), builds the app and serves it.
func startApp(t *testing.T, path string, replace ...string) *proxyUnderTest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(replace) > 0 {
		data = []byte(strings.NewReplacer(replace...).Replace(string(data)))
	}
	tmp := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return startAppFile(t, tmp)
}

// startAppFile builds and serves the app for the config file at path.
func startAppFile(t *testing.T, path string) *proxyUnderTest {
	t.Helper()
	p := &proxyUnderTest{sink: points.NewMemorySink(0), cons: &consoles{}, path: path}
	opts := app.Options{Env: exampleEnv(), Sink: p.sink, Extra: []app.Extra{p.cons.extra()}}
	cfg, err := app.Load(path, opts)
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	if p.app, err = app.New(cfg, path, opts); err != nil {
		t.Fatalf("new %s: %v", path, err)
	}
	p.app.Server.Start()
	p.srv = httptest.NewServer(p.app.Server)
	t.Cleanup(func() {
		p.srv.Close()
		p.app.Server.Close()
		if c := p.cons.console(); c != nil {
			_ = c.Close()
		}
	})
	return p
}

// chatResult is one answered chat request.
type chatResult struct {
	status  int
	header  http.Header
	body    []byte
	session string
}

func (r chatResult) get(path string) gjson.Result { return gjson.GetBytes(r.body, path) }

// code is the OpenAI-shaped error code (the verdict reason for a deny).
func (r chatResult) code() string { return r.get("error.code").String() }

// chatBody builds a one-message chat request.
func chatBody(prompt string, stream bool) []byte {
	b, _ := json.Marshal(map[string]any{
		"model":    "demo",
		"stream":   stream,
		"messages": []map[string]string{{"role": "user", "content": prompt}},
	})
	return b
}

// chat posts body to the proxy with optional header pairs.
func (p *proxyUnderTest) chat(ctx context.Context, body []byte, headers ...string) (chatResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.srv.URL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return chatResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := p.srv.Client().Do(req)
	if err != nil {
		return chatResult{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return chatResult{}, err
	}
	return chatResult{status: resp.StatusCode, header: resp.Header, body: b, session: resp.Header.Get("X-Agent-Hooks-Session")}, nil
}

// mustChat is chat that fails the test on a transport error.
func (p *proxyUnderTest) mustChat(t *testing.T, prompt string, headers ...string) chatResult {
	t.Helper()
	r, err := p.chat(context.Background(), chatBody(prompt, false), headers...)
	if err != nil {
		t.Fatalf("chat %q: %v", prompt, err)
	}
	return r
}

// records returns the sink's records for one session.
func (p *proxyUnderTest) records(session string) []*points.Record {
	var out []*points.Record
	for _, r := range p.sink.Records() {
		if r.SessionID == session {
			out = append(out, r)
		}
	}
	return out
}

// findRecord returns the first record at point with the given decision and
// reason, in any session.
func (p *proxyUnderTest) findRecord(point points.Point, decision points.Decision, reason string) *points.Record {
	for _, r := range p.sink.Records() {
		if r.InterceptionPoint == point && r.Verdict.Decision == decision && r.Verdict.Reason == reason {
			return r
		}
	}
	return nil
}

// waitPending waits (bounded) for the console to hold an approval.
func waitPending(t *testing.T, cons *consoles) approvals.Approval {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c := cons.console(); c != nil {
			if l := c.List(); len(l) > 0 {
				return l[0]
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no approval reached the console within 10s")
	return approvals.Approval{}
}

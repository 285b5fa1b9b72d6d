package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func adminStatus(t *testing.T, addr, path, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A reload that moves the admin token to another variable (rotating a
// leaked one) applies to every admin route: the approval console too, or
// the revoked token could still approve held denies.
func TestReloadRotatesEveryAdminRoute(t *testing.T) {
	t.Setenv("HOOKSPROXY_ADMIN_TOKEN", "old-token")
	t.Setenv("OPS_TEST_NEW_ADMIN", "new-token")
	path := writeConfig(t, baseConfig)
	ctx, cancel := context.WithCancel(context.Background())
	rt, err := startRuntime(ctx, path, "127.0.0.1:0", slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); rt.wait(ctx) }()
	routes := []string{"/agent-hooks/v1/records", "/agent-hooks/v1/approvals"}
	for _, p := range routes {
		if got := adminStatus(t, rt.addr, p, "old-token"); got != http.StatusOK {
			t.Fatalf("%s before the reload: %d", p, got)
		}
	}
	if err := os.WriteFile(path, []byte(baseConfig+"admin: {token_env: OPS_TEST_NEW_ADMIN}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rt.app.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	for _, p := range routes {
		if got := adminStatus(t, rt.addr, p, "old-token"); got != http.StatusUnauthorized {
			t.Errorf("%s with the revoked token after reload: %d, want 401", p, got)
		}
		if got := adminStatus(t, rt.addr, p, "new-token"); got != http.StatusOK {
			t.Errorf("%s with the new token after reload: %d, want 200", p, got)
		}
	}
	// A token variable left unset disables them all.
	if err := os.WriteFile(path, []byte(baseConfig+"admin: {token_env: OPS_TEST_UNSET_ADMIN}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rt.app.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	for _, p := range routes {
		if got := adminStatus(t, rt.addr, p, "new-token"); got != http.StatusForbidden {
			t.Errorf("%s with no token configured: %d, want 403", p, got)
		}
	}
}

// A SIGHUP that arrives while a shutdown drains (logrotate's postrotate,
// systemctl reload during a deploy) must not end the process: the request
// in flight finishes, its session gets agent_shutdown, the exit is 0. The
// proxy runs as a child process (this test binary, as serve), since the
// signal's default action would end the test binary itself.
func TestSighupDuringShutdownKeepsDraining(t *testing.T) {
	if cfg := os.Getenv("OPS_TEST_CHILD_CONFIG"); cfg != "" {
		os.Exit(run([]string{"serve", "--config", cfg, "--listen", os.Getenv("OPS_TEST_CHILD_LISTEN")}, io.Discard, os.Stderr))
	}
	uaddr, arrived, release := heldUpstream(t)
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pln.Addr().String()
	pln.Close()
	rec := filepath.Join(t.TempDir(), "records.jsonl")
	cfg := strings.Replace(baseConfig, "http://127.0.0.1:1", "http://"+uaddr, 1) + "records: {file: " + rec + "}\n"
	cmd := exec.Command(os.Args[0], "-test.run=^TestSighupDuringShutdownKeepsDraining$")
	cmd.Env = append(os.Environ(), "OPS_TEST_CHILD_CONFIG="+writeConfig(t, cfg), "OPS_TEST_CHILD_LISTEN="+addr, "HOOKSPROXY_ADMIN_TOKEN=")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if !waitReady("http://" + addr) {
		t.Fatal("the proxy did not get ready")
	}
	got := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Agent-Hooks-Session", "ops-test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- 0
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	<-arrived // the request is in flight, held at the upstream
	_ = cmd.Process.Signal(syscall.SIGTERM)
	// The shutdown has begun once the listener is gone (no delay is set).
	for i := 0; readyz("http://"+addr) != 0; i++ {
		if i == 200 {
			t.Fatal("the shutdown did not begin")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGHUP)
	select {
	case err := <-exited:
		t.Fatalf("serve ended on a SIGHUP while it drained: %v", err)
	case <-time.After(300 * time.Millisecond): // a default action would have ended it by now
	}
	close(release)
	if code := <-got; code != http.StatusOK {
		t.Errorf("in-flight request during shutdown and SIGHUP: status %d, want 200", code)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve exit after SIGTERM then SIGHUP: %v, want 0", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not exit")
	}
	b, _ := os.ReadFile(rec)
	if !strings.Contains(string(b), `"agent_shutdown"`) {
		t.Errorf("records have no agent_shutdown for the session:\n%s", b)
	}
}

// With --log-format json, stderr is a JSON log stream from the first line:
// a serve that cannot start says why in JSON lines, one per config
// problem with its line and key.
func TestServeStartFailureLogsJSON(t *testing.T) {
	bad := writeConfig(t, "upstream: {base_url: http://127.0.0.1:1, timeout: xx}\nagent: {}\nfoo: 1\n")
	for _, tc := range []struct {
		name   string
		config string
		want   []string // in the lines, in order
	}{
		{"config problems", bad, []string{`"key":"upstream.timeout"`, `"key":"agent.id"`, `"line":3`, `"problems":`}},
		{"missing file", filepath.Join(t.TempDir(), "none.yaml"), []string{`"msg":"hooksproxy could not start"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runCmd(t, "serve", "--config", tc.config, "--log-format", "json", "--listen", "127.0.0.1:0")
			if code != 1 {
				t.Fatalf("exit %d, want 1", code)
			}
			lines := strings.Split(strings.TrimSpace(errs), "\n")
			for _, l := range lines {
				if !json.Valid([]byte(l)) {
					t.Fatalf("stderr line is not JSON: %q", l)
				}
			}
			all := strings.Join(lines, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("stderr lacks %s:\n%s", w, all)
				}
			}
		})
	}
}

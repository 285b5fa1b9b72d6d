package app_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/examples/upstream"
	"github.com/hooksproxy/hooksproxy/points"
)

// opaExampleURL is the OPA address examples/opa.yaml names.
const opaExampleURL = "http://127.0.0.1:8181"

// opaBinary finds opa: $OPA_BIN, then PATH, then the repo's .cache/bin
// (where deploy/opa/build.sh puts it).
func opaBinary() string {
	if p := os.Getenv("OPA_BIN"); p != "" {
		return p
	}
	if p, err := exec.LookPath("opa"); err == nil {
		return p
	}
	if p, err := filepath.Abs(filepath.Join("..", ".cache", "bin", "opa")); err == nil {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	return ""
}

// lockedBuffer collects a process's output for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// opaServer is a running `opa run --server` on loopback.
type opaServer struct {
	url  string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

// stop kills OPA and waits for it to exit.
func (o *opaServer) stop() {
	_ = o.cmd.Process.Kill()
	<-o.done
}

// startOPA serves policy on a free loopback port and waits for /health.
func startOPA(t *testing.T, bin, policy string) *opaServer {
	t.Helper()
	help, _ := exec.Command(bin, "run", "--help").CombinedOutput()
	for attempt := 0; attempt < 3; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		args := []string{"run", "--server", "--addr", addr, "--log-level", "error"}
		// No phoning home from a test: OPA 1.x's only outbound call is the
		// release check (--skip-version-check); older builds called it
		// telemetry.
		for _, flag := range []string{"--skip-version-check", "--disable-telemetry"} {
			if bytes.Contains(help, []byte(flag)) {
				args = append(args, flag)
			}
		}
		o := &opaServer{url: "http://" + addr, cmd: exec.Command(bin, append(args, policy)...), out: &lockedBuffer{}, done: make(chan struct{})}
		o.cmd.Stdout, o.cmd.Stderr = o.out, o.out
		if err := o.cmd.Start(); err != nil {
			t.Fatalf("starting opa: %v", err)
		}
		go func() { _ = o.cmd.Wait(); close(o.done) }()
		if o.waitHealthy(30 * time.Second) {
			t.Cleanup(o.stop)
			return o
		}
		o.stop()
		t.Logf("opa on %s did not become healthy (attempt %d): %s", addr, attempt+1, o.out.String())
	}
	t.Fatal("opa did not start")
	return nil
}

// waitHealthy polls /health until OPA answers 200, it exits, or the bound
// passes.
func (o *opaServer) waitHealthy(bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-o.done:
			return false
		default:
		}
		if resp, err := client.Get(o.url + "/health"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// startOPAExample serves examples/opa.yaml against the scripted upstream
// and the policy engine at opaURL.
func startOPAExample(t *testing.T, opaURL string) *proxyUnderTest {
	t.Helper()
	us := httptest.NewServer(upstream.New())
	t.Cleanup(us.Close)
	return startApp(t, filepath.Join(examplesDir, "opa.yaml"), "http://"+upstream.Addr, us.URL, opaExampleURL, opaURL)
}

// TestOPAEndToEnd runs examples/opa.yaml against a real OPA serving
// examples/opa/hooks.rego.
func TestOPAEndToEnd(t *testing.T) {
	bin := opaBinary()
	if bin == "" {
		t.Skip("opa binary not found; run deploy/opa/build.sh (or set OPA_BIN)")
	}
	policyDir := filepath.Join(examplesDir, "opa")
	if out, err := exec.Command(bin, "test", policyDir).CombinedOutput(); err != nil {
		t.Fatalf("opa test %s: %v\n%s", policyDir, err, out)
	}
	opa := startOPA(t, bin, filepath.Join(policyDir, "hooks.rego"))
	p := startOPAExample(t, opa.url)

	// The model asks for dangerous tools: OPA's reason is the error code.
	for _, prompt := range []string{upstream.PromptDelete, upstream.PromptShell} {
		r := p.mustChat(t, prompt)
		expect(t, r, http.StatusForbidden, "dangerous_tool", points.PostModelCall)
		if r.get("error.type").String() != "agent_hooks_denied" || !strings.Contains(r.get("error.message").String(), "is not allowed by policy") {
			t.Errorf("deny body %s", r.body)
		}
	}

	// Benign: a plain answer and a harmless tool call pass; OPA decided
	// both the response and the released call.
	expect(t, p.mustChat(t, upstream.PromptHello), http.StatusOK, "", "")
	r := p.mustChat(t, upstream.PromptWeather)
	expect(t, r, http.StatusOK, "", "")
	if got := r.get("choices.0.message.tool_calls.0.function.name").String(); got != "get_weather" {
		t.Fatalf("tool call %q, want get_weather", got)
	}
	decided := map[points.Point]bool{}
	for _, rec := range p.records(r.session) {
		for _, v := range rec.Verdicts {
			if v.Name == "opa" && v.Decision == points.DecisionAllow {
				decided[rec.InterceptionPoint] = true
			}
		}
	}
	if !decided[points.PostModelCall] || !decided[points.PreToolCall] {
		t.Errorf("OPA allowed at %v, want post_model_call and pre_tool_call", decided)
	}

	// The host API's pre_tool_call asks OPA too.
	resp, err := http.Post(p.srv.URL+"/agent-hooks/v1/sessions/opa-host/tool-calls/c1/pre", "application/json",
		strings.NewReader(`{"name":"format_disk","args":{"device":"/dev/sda"}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || gjson.GetBytes(body, "proceed").Bool() || gjson.GetBytes(body, "control_error.reason").String() != "dangerous_tool" {
		t.Errorf("host API pre: %d %s", resp.StatusCode, body)
	}

	// OPA down: fail closed.
	opa.stop()
	r = p.mustChat(t, upstream.PromptHello)
	expect(t, r, http.StatusServiceUnavailable, "host_error:interceptor_failed", points.PostModelCall)
	if r.get("error.type").String() != "agent_hooks_host_error" {
		t.Errorf("error.type %q", r.get("error.type"))
	}
}

// TestOPAExampleWire checks examples/opa.yaml's wire contract with a stand-in
// for OPA's data API (runs without the binary): the context arrives under
// "input", the verdict is read from "result", and an undefined result
// ({}), as OPA answers for a misspelt rule, fails closed.
func TestOPAExampleWire(t *testing.T) {
	var mu sync.Mutex
	undefined := false
	var seen []string
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		point := gjson.GetBytes(b, "input.interception_point").String()
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+point)
		u := undefined
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case u:
			_, _ = io.WriteString(w, `{}`)
		case gjson.GetBytes(b, `input.response.tool_calls.#(name=="delete_files")`).Exists():
			_, _ = io.WriteString(w, `{"result":{"decision":"deny","reason":"dangerous_tool"}}`)
		default:
			_, _ = io.WriteString(w, `{"result":{"decision":"allow"}}`)
		}
	}))
	defer fake.Close()
	p := startOPAExample(t, fake.URL)

	expect(t, p.mustChat(t, upstream.PromptDelete), http.StatusForbidden, "dangerous_tool", points.PostModelCall)
	expect(t, p.mustChat(t, upstream.PromptHello), http.StatusOK, "", "")
	mu.Lock()
	got := fmt.Sprint(seen)
	undefined = true
	mu.Unlock()
	if got != "[/v1/data/hooks/verdict post_model_call /v1/data/hooks/verdict post_model_call]" {
		t.Errorf("OPA saw %s", got)
	}
	expect(t, p.mustChat(t, upstream.PromptHello), http.StatusServiceUnavailable, "host_error:interceptor_failed", points.PostModelCall)
}

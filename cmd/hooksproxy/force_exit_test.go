package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A second signal during the shutdown ends the process at once, but with a
// log line saying the exit is forced and what it abandons; before, the
// signal's default action ended it without a word.
func TestSecondSignalForcesExitWithCounts(t *testing.T) {
	uaddr, arrived, release := heldUpstream(t)
	var released bool
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})

	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	path := writeConfig(t, strings.Replace(baseConfig, "http://127.0.0.1:1", "http://"+uaddr, 1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := startRuntime(ctx, path, "127.0.0.1:0", log, nil)
	if err != nil {
		t.Fatal(err)
	}
	force := make(chan os.Signal, 1)
	rt.forceSignals = func() <-chan os.Signal { return force }

	got := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+rt.addr+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Agent-Hooks-Session", "force-test")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		got <- err
	}()
	<-arrived // in flight, held at the upstream: the shutdown cannot finish
	cancel()  // the first signal
	force <- syscall.SIGTERM
	if code := rt.wait(ctx); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	var line struct {
		Msg              string
		Signal           string
		RequestsInFlight *int64 `json:"requests_in_flight"`
		Sessions         *int   `json:"sessions"`
		HeldStreams      *int64 `json:"held_streams"`
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"forced exit`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !strings.HasPrefix(line.Msg, "forced exit") || line.Signal != syscall.SIGTERM.String() ||
		line.RequestsInFlight == nil || *line.RequestsInFlight != 1 || line.Sessions == nil || *line.Sessions != 1 || line.HeldStreams == nil || *line.HeldStreams != 0 {
		t.Errorf("forced exit line %+v\n%s", line, logs.String())
	}
	released = true
	close(release)
	<-got
}

// The same through real signals: serve (this test binary as a child
// process) gets SIGTERM twice while a request is in flight, and its last
// JSON log line says the exit was forced.
func TestSecondSIGTERMLogsForcedExit(t *testing.T) {
	if cfg := os.Getenv("FORCE_TEST_CHILD_CONFIG"); cfg != "" {
		os.Exit(run([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0", "--log-format", "json"}, io.Discard, os.Stderr))
	}
	uaddr, arrived, release := heldUpstream(t)
	defer close(release)
	cfg := strings.Replace(baseConfig, "http://127.0.0.1:1", "http://"+uaddr, 1)
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondSIGTERMLogsForcedExit$")
	cmd.Env = append(os.Environ(), "FORCE_TEST_CHILD_CONFIG="+writeConfig(t, cfg), "HOOKSPROXY_ADMIN_TOKEN=", "HOOKSPROXY_LISTEN=")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// The child listens on a port of its own choosing, which its JSON
	// listening line names.
	var base string
	for i := 0; base == ""; i++ {
		if i == 200 {
			t.Fatalf("no listening line:\n%s", stderr.String())
		}
		for _, l := range strings.Split(stderr.String(), "\n") {
			var line struct{ Msg, URL string }
			if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "hooksproxy listening" {
				base = line.URL
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !waitReady(base) {
		t.Fatalf("the proxy did not get ready:\n%s", stderr.String())
	}
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-arrived
	_ = cmd.Process.Signal(syscall.SIGTERM)
	for i := 0; !strings.Contains(stderr.String(), `"msg":"shutting down`); i++ {
		if i == 200 {
			t.Fatalf("the shutdown did not begin:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
			t.Errorf("exit %v, want status %d", err, 128+int(syscall.SIGTERM))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit on the second SIGTERM")
	}
	if !strings.Contains(stderr.String(), `"msg":"forced exit`) || !strings.Contains(stderr.String(), `"requests_in_flight":1`) {
		t.Errorf("no forced exit line:\n%s", stderr.String())
	}
}

// heldUpstream is an upstream whose answers wait: each request signals
// arrived, then its answer (a chat completion) waits until release is
// closed or 20 s pass. It is closed when the test ends.
func heldUpstream(t *testing.T) (addr string, arrived chan struct{}, release chan struct{}) {
	arrived, release = make(chan struct{}, 1), make(chan struct{})
	upstream := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-time.After(20 * time.Second):
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go upstream.Serve(ln)
	t.Cleanup(func() { upstream.Close() })
	return ln.Addr().String(), arrived, release
}

// readyz is the status of base's /readyz, 0 when it does not answer.
func readyz(base string) int {
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitReady polls base's /readyz until it answers 200, for at most 10 s.
func waitReady(base string) bool {
	for range 200 {
		if readyz(base) == http.StatusOK {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

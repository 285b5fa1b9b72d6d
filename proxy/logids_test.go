package proxy

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

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

// A request's log lines carry its X-Request-Id beside the session, so a
// log line joins the client's request and the records' http_request_id.
func TestLogLinesCarryRequestID(t *testing.T) {
	// A deny at input, and one at agent_startup (here fail-closed: no
	// binding covers it), each leave their blocked line.
	for _, tc := range []struct {
		name     string
		bindings []points.Binding
		status   int
	}{
		{"input deny", []points.Binding{
			at(points.Input, "no-input", func(*points.Context) (points.Verdict, error) { return points.Deny("no_input", ""), nil }),
			allowAll(points.AgentStartup, points.AgentShutdown),
		}, http.StatusForbidden},
		{"startup fails closed", []points.Binding{allowAll(points.Input, points.AgentShutdown)}, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, _ := seqUpstream(t, plainCompletion)
			var logs lockedBuffer
			em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Sink: points.NewMemorySink(0), Bindings: tc.bindings})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(up.URL)
			s := New(Options{Upstream: u, Emitter: em, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			s.Start()
			hs := httptest.NewServer(s)
			t.Cleanup(func() { hs.Close(); s.Close() })
			resp, _ := post(t, hs.URL, hello, "X-Request-Id", "req-log-42")
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "msg=blocked") {
					line = l
				}
			}
			if !strings.Contains(line, "request_id=req-log-42") || !strings.Contains(line, "session=") {
				t.Fatalf("blocked log line %q lacks the request and session ids; logs:\n%s", line, logs.String())
			}
		})
	}
}

// A tool call the transparent seam withholds (its pre_tool_call denied)
// leaves a blocked line too: the answer goes out without it, 200.
func TestWithheldCallIsLogged(t *testing.T) {
	up, _ := seqUpstream(t, oneCall("call_withheld_1234567890", "delete_files"), plainCompletion)
	var logs lockedBuffer
	em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Sink: points.NewMemorySink(0), Bindings: []points.Binding{denyTool("delete_files")}})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	s := New(Options{Upstream: u, Emitter: em, TransparentToolSeam: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	s.Start()
	hs := httptest.NewServer(s)
	t.Cleanup(func() { hs.Close(); s.Close() })
	resp, b := post(t, hs.URL, `{"model":"m","messages":[{"role":"user","content":"clean up"}]}`, "X-Request-Id", "req-withheld")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	found := false
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "msg=blocked") && strings.Contains(l, "point=pre_tool_call") && strings.Contains(l, "request_id=req-withheld") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no blocked line for the withheld call; logs:\n%s", logs.String())
	}
}

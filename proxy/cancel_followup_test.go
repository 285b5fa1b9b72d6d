package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

// A header-less tool-loop follow-up whose client gives up (an SDK timeout)
// and retries: the retry carries the same results, exactly as after a
// retryable upstream failure (README: "leaves the run open ... the retry
// goes on in the same run"), so it must continue the same run, not open a
// second session with a second agent_startup and input.
func TestCancelledFollowUpRetryStaysInRun(t *testing.T) {
	var mu sync.Mutex
	n := 0
	var hang atomic.Bool
	arrived, upGone := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case i == 1:
			_, _ = io.WriteString(w, oneCallAnswer)
		case hang.Load(): // the follow-up the client gives up on
			close(arrived)
			<-r.Context().Done()
			close(upGone)
		default:
			_, _ = io.WriteString(w, plainCompletion)
		}
	}))
	t.Cleanup(up.Close)
	p := seamProxy(t, up.URL, points.Binding{Name: "allow", Interceptor: points.InterceptorFunc(func(context.Context, *points.Context) (points.Verdict, error) {
		return points.Allow(), nil
	})})
	r1, b1 := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`)
	if r1.StatusCode != 200 {
		t.Fatalf("%d %s", r1.StatusCode, b1)
	}
	sid := r1.Header.Get("X-Agent-Hooks-Session")
	follow := strings.Replace(inflightFollow, "RAW-RESULT-UNDER-REVIEW", "result one", 1)
	// Synchronised on events, not on sleeps: the client gives up once the
	// follow-up is at the upstream, and the retry is sent once the
	// follow-up's handler has ended (else it would find the run open
	// whatever cancelled does).
	hang.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+"/v1/chat/completions", strings.NewReader(follow))
	req.Header.Set("Content-Type", "application/json")
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Error("expected the client to give up")
		}
	}()
	<-arrived
	cancel()
	<-gone
	<-upGone
	hang.Store(false)
	waitFor(t, "the given-up follow-up's handler to end", func() bool {
		p.srv.sessions.mu.Lock()
		defer p.srv.sessions.mu.Unlock()
		s := p.srv.sessions.byID[sid]
		return s == nil || s.inFlight == 0
	})
	r2, b2 := post(t, p.URL, follow) // the SDK's retry
	if r2.StatusCode != 200 {
		t.Fatalf("%d %s", r2.StatusCode, b2)
	}
	if got := r2.Header.Get("X-Agent-Hooks-Session"); got != sid {
		t.Errorf("retry of the follow-up opened session %s, want the run's %s", got, sid)
	}
	if c := count(p.sink, points.AgentStartup); c != 1 {
		t.Errorf("agent_startup emitted %d times for one agent run, want 1", c)
	}
	if c := count(p.sink, points.Input); c != 1 {
		t.Errorf("input emitted %d times, want 1 (a tool-loop follow-up does not fire it)", c)
	}
}

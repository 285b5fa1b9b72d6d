package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

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
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch i {
		case 1:
			_, _ = io.WriteString(w, oneCallAnswer)
		case 2: // the follow-up the client gives up on
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
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
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+"/v1/chat/completions", strings.NewReader(follow))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("expected the client to time out")
	}
	cancel()
	time.Sleep(200 * time.Millisecond)
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

package proxy

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
)

// outlive is for the one emission a host pre runs: a retry that only
// waits for that emission's outcome waits on its own client's context, so
// retries whose clients gave up do not stay in their handlers (a
// goroutine, a session in flight each) until the first decision arrives.
func TestHostRetriesDoNotOutliveTheirClients(t *testing.T) {
	up, _ := seqUpstream(t, plainCompletion)
	entered, release := make(chan struct{}), make(chan struct{})
	p := seamProxy(t, up.URL, heldAt(points.PreToolCall, entered, release))
	defer close(release)
	u := p.URL + "/agent-hooks/v1/sessions/s-pile/tool-calls/call_1/pre"
	body := `{"name":"send_email","args":{"to":"a"}}`
	try := func(wait func()) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		wait()
		cancel()
		<-done
	}
	try(func() { <-entered })
	for i := 0; i < 10; i++ {
		try(func() { time.Sleep(20 * time.Millisecond) })
	}
	// Every client is gone: the handlers of the retries end, the one
	// emission's goes on.
	waitInFlight(t, p, "s-pile", func(n int) bool { return n <= 1 }, "only the one emission (1) in flight after every client left")
}

// waitInFlight waits (at most 10s) until ok holds for sid's in-flight
// count: an event to wait on instead of a sleep that a loaded machine
// outlasts.
func waitInFlight(t *testing.T, p *testProxy, sid string, ok func(int) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n := inFlight(p.srv, sid); !ok(n); n = inFlight(p.srv, sid) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s: %d in flight", what, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A request that gives up waiting for another request's post_tool_call
// (postReady, its client gone) ends there: no later point is handed the
// result still unjudged in its body.
func TestGivenUpPostWaitDoesNotCarryResultOn(t *testing.T) {
	up, _ := seqUpstream(t, oneCallAnswer, plainCompletion)
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	sawRaw := false
	watch := points.Binding{Name: "watch", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		if c.Point() == points.PreModelCall && strings.Contains(string(c.Raw()), "RAW-RESULT-UNDER-REVIEW") {
			mu.Lock()
			sawRaw = true
			mu.Unlock()
		}
		return points.Allow(), nil
	})}
	p := seamProxy(t, up.URL, watch, slowPostDeny(entered, release))
	sid := "sess-giveup"
	if r, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`, "X-Agent-Hooks-Session", sid); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	first := make(chan struct{})
	go func() { defer close(first); post(t, p.URL, inflightFollow, "X-Agent-Hooks-Session", sid) }()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/v1/chat/completions", strings.NewReader(inflightFollow))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Agent-Hooks-Session", sid)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	time.Sleep(200 * time.Millisecond) // the given-up request runs on to pre_model_call
	close(release)
	<-first
	mu.Lock()
	defer mu.Unlock()
	if sawRaw {
		t.Fatal("pre_model_call was handed a tool result whose post_tool_call was still deciding (then denied)")
	}
}

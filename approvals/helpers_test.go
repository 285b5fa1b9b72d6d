package approvals

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

// watch is a Metrics that lets tests wait for the queue to reach a length
// without sleeping.
type watch struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	decided map[string]int
	enq     int // how many times the length grew
}

func newWatch() *watch {
	w := &watch{decided: map[string]int{}}
	w.cond = sync.NewCond(&w.mu)
	return w
}

func (w *watch) Pending(n int) {
	w.mu.Lock()
	if n > w.n {
		w.enq++
	}
	w.n = n
	w.mu.Unlock()
	w.cond.Broadcast()
}

func (w *watch) Decided(o string) {
	w.mu.Lock()
	w.decided[o]++
	w.mu.Unlock()
}

// waitLen blocks until the queue holds n approvals.
func (w *watch) waitLen(n int) {
	w.mu.Lock()
	for w.n != n {
		w.cond.Wait()
	}
	w.mu.Unlock()
}

// waitEnqueued blocks until n approvals were queued in total.
func (w *watch) waitEnqueued(n int) {
	w.mu.Lock()
	for w.enq < n {
		w.cond.Wait()
	}
	w.mu.Unlock()
}

func (w *watch) count(o string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.decided[o]
}

func sp(s string) *string { return &s }

// testRequest is a small approval request as the emitter would hand it.
func testRequest(identity *string, ctx string) points.ApprovalRequest {
	if ctx == "" {
		ctx = `{"interception_point":"pre_tool_call","target":{"name":"send_email","arguments":{"to":"a@example.com"}}}`
	}
	return points.ApprovalRequest{
		ContextIdentity: identity,
		Point:           points.PreToolCall,
		Verdict:         points.Escalate("needs_approval", "send_email needs a person"),
		Context:         json.RawMessage(ctx),
	}
}

type resolved struct {
	res points.ApprovalResolution
	err error
}

// resolveAsync starts a Resolve and returns where its answer arrives.
func resolveAsync(ctx context.Context, r points.Resolver, req points.ApprovalRequest) <-chan resolved {
	ch := make(chan resolved, 1)
	go func() {
		res, err := r.Resolve(ctx, req)
		ch <- resolved{res, err}
	}()
	return ch
}

func newTestConsole(t testing.TB, o ConsoleOptions) (*Console, *watch) {
	t.Helper()
	w := newWatch()
	o.Metrics = w
	c := NewConsole(o)
	t.Cleanup(func() { _ = c.Close() })
	return c, w
}

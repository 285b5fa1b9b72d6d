package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
)

func TestDecide(t *testing.T) {
	type step struct {
		outcome  string
		identity *string
		id       string // "" is the queued approval's id
		want     error
	}
	const ident = "sha256:aaaa"
	tests := []struct {
		name     string
		identity *string // the request's context_identity
		steps    []step
		// wantRes is the resolution after the steps; nil means Resolve is
		// still waiting (then the test cancels it).
		wantRes *points.ApprovalResolution
	}{
		{
			name: "approve", identity: sp(ident),
			steps:   []step{{outcome: "approve", identity: sp(ident)}},
			wantRes: &points.ApprovalResolution{Outcome: "approve", ContextIdentity: sp(ident), Verdict: json.RawMessage(`{"decision":"allow"}`)},
		},
		{
			name: "reject keeps the reason", identity: sp(ident),
			steps:   []step{{outcome: "reject", identity: sp(ident)}},
			wantRes: &points.ApprovalResolution{Outcome: "reject", ContextIdentity: sp(ident), Verdict: json.RawMessage(`{"decision":"deny","reason":"needs_approval"}`)},
		},
		{
			name: "null identity echoes null", identity: nil,
			steps:   []step{{outcome: "approve", identity: nil}},
			wantRes: &points.ApprovalResolution{Outcome: "approve", Verdict: json.RawMessage(`{"decision":"allow"}`)},
		},
		{
			name: "wrong identity is refused and leaves it pending", identity: sp(ident),
			steps: []step{
				{outcome: "approve", identity: sp("sha256:bbbb"), want: ErrIdentityMismatch},
				{outcome: "approve", identity: nil, want: ErrIdentityMismatch},
			},
		},
		{
			name: "string identity for a null request is refused", identity: nil,
			steps: []step{{outcome: "approve", identity: sp(""), want: ErrIdentityMismatch}},
		},
		{
			name: "unknown id", identity: sp(ident),
			steps: []step{{outcome: "approve", identity: sp(ident), id: "NOPE", want: ErrNotFound}},
		},
		{
			name: "invalid outcome", identity: sp(ident),
			steps: []step{{outcome: "unresolved", identity: sp(ident), want: ErrInvalidOutcome}},
		},
		{
			name: "replay after approve", identity: sp(ident),
			steps: []step{
				{outcome: "approve", identity: sp(ident)},
				{outcome: "approve", identity: sp(ident), want: ErrAlreadyDecided},
				{outcome: "reject", identity: sp(ident), want: ErrAlreadyDecided},
			},
			wantRes: &points.ApprovalResolution{Outcome: "approve", ContextIdentity: sp(ident), Verdict: json.RawMessage(`{"decision":"allow"}`)},
		},
		{
			name: "mismatch then the right identity", identity: sp(ident),
			steps: []step{
				{outcome: "approve", identity: sp("sha256:forged"), want: ErrIdentityMismatch},
				{outcome: "reject", identity: sp(ident)},
			},
			wantRes: &points.ApprovalResolution{Outcome: "reject", ContextIdentity: sp(ident), Verdict: json.RawMessage(`{"decision":"deny","reason":"needs_approval"}`)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, w := newTestConsole(t, ConsoleOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := resolveAsync(ctx, c, testRequest(tt.identity, ""))
			w.waitLen(1)
			id := c.List()[0].ID
			for i, s := range tt.steps {
				sid := s.id
				if sid == "" {
					sid = id
				}
				if err := c.Decide(sid, s.outcome, s.identity, "n"); !errors.Is(err, s.want) {
					t.Fatalf("step %d: Decide = %v, want %v", i, err, s.want)
				}
			}
			if tt.wantRes == nil {
				if c.Len() != 1 {
					t.Fatalf("pending = %d, want 1", c.Len())
				}
				cancel()
				r := <-done
				if !errors.Is(r.err, context.Canceled) {
					t.Fatalf("Resolve after cancel = %v", r.err)
				}
				if c.Len() != 0 {
					t.Fatalf("leftover after cancel: %d", c.Len())
				}
				return
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if got, want := resJSON(r.res), resJSON(*tt.wantRes); got != want {
				t.Fatalf("resolution\n got %s\nwant %s", got, want)
			}
			if c.Len() != 0 {
				t.Fatalf("leftover: %d", c.Len())
			}
		})
	}
}

func resJSON(r points.ApprovalResolution) string {
	b, _ := json.Marshal(r)
	return string(b)
}

func TestResolveContextEndLeavesNoLeftover(t *testing.T) {
	for _, name := range []string{"deadline", "cancel"} {
		t.Run(name, func(t *testing.T) {
			c, w := newTestConsole(t, ConsoleOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			dl := &firedDeadline{Context: ctx, done: make(chan struct{})}
			if name == "deadline" {
				// The emitter's resolver timeout arrives as a ctx deadline.
				// It is fired by hand once the approval is queued: a real
				// 1 ms timer could run out before Resolve queued it, and
				// the wait for the queue would never end.
				ctx = dl
			}
			done := resolveAsync(ctx, c, testRequest(sp("i"), ""))
			w.waitEnqueued(1)
			id := ""
			if l := c.List(); len(l) == 1 {
				id = l[0].ID
			}
			if name == "cancel" {
				cancel()
			} else {
				dl.fire()
			}
			r := <-done
			cancel()
			want := context.Canceled
			if name == "deadline" {
				want = context.DeadlineExceeded
			}
			if !errors.Is(r.err, want) {
				t.Fatalf("Resolve = %+v, %v; want %v", r.res, r.err, want)
			}
			if c.Len() != 0 || len(c.List()) != 0 {
				t.Fatalf("leftover in queue: %d", c.Len())
			}
			if w.count(OutcomeExpired) != 1 {
				t.Fatalf("expired count = %d", w.count(OutcomeExpired))
			}
			if id != "" {
				if err := c.Decide(id, "approve", sp("i"), ""); !errors.Is(err, ErrExpired) {
					t.Fatalf("late Decide = %v, want ErrExpired", err)
				}
			}
		})
	}
}

func TestResolveCancelledBeforeQueueing(t *testing.T) {
	c, _ := newTestConsole(t, ConsoleOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Resolve(ctx, testRequest(nil, "")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if c.Len() != 0 {
		t.Fatal("queued a cancelled request")
	}
}

func TestConsoleTimeoutFailsAsResolverTimeout(t *testing.T) {
	c, w := newTestConsole(t, ConsoleOptions{Timeout: time.Millisecond})
	_, err := c.Resolve(context.Background(), testRequest(sp("x"), ""))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error (host_error:approval_resolver_failed)", err)
	}
	if c.Len() != 0 || w.count(OutcomeExpired) != 1 {
		t.Fatalf("pending %d, expired %d", c.Len(), w.count(OutcomeExpired))
	}
}

func TestQueueBound(t *testing.T) {
	c, w := newTestConsole(t, ConsoleOptions{MaxPending: 2})
	ctx, cancel := context.WithCancel(context.Background())
	a := resolveAsync(ctx, c, testRequest(nil, ""))
	b := resolveAsync(ctx, c, testRequest(nil, ""))
	w.waitLen(2)
	if _, err := c.Resolve(ctx, testRequest(nil, "")); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third Resolve = %v, want ErrQueueFull", err)
	}
	cancel()
	<-a
	<-b
	if c.Len() != 0 {
		t.Fatal("leftover")
	}
}

func TestResolveRefusesNonJSONContext(t *testing.T) {
	c, _ := newTestConsole(t, ConsoleOptions{})
	req := testRequest(nil, "")
	req.Context = json.RawMessage(`{"broken"`)
	if _, err := c.Resolve(context.Background(), req); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("err = %v", err)
	}
}

func TestClose(t *testing.T) {
	c, w := newTestConsole(t, ConsoleOptions{})
	done := resolveAsync(context.Background(), c, testRequest(nil, ""))
	w.waitLen(1)
	id := c.List()[0].ID
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if r := <-done; !errors.Is(r.err, ErrClosed) {
		t.Fatalf("pending Resolve after Close = %v", r.err)
	}
	if _, err := c.Resolve(context.Background(), testRequest(nil, "")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Resolve after Close = %v", err)
	}
	if err := c.Decide(id, "approve", nil, ""); !errors.Is(err, ErrExpired) {
		t.Fatalf("Decide after Close = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestListNewestFirstAndProjection(t *testing.T) {
	c, w := newTestConsole(t, ConsoleOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var chans []<-chan resolved
	for i := range 3 {
		req := testRequest(sp(fmt.Sprint("id-", i)), fmt.Sprintf(`{"n":%d}`, i))
		req.Verdict.Message = string(make([]byte, 5000)) // bounded by the projection
		chans = append(chans, resolveAsync(ctx, c, req))
		w.waitLen(i + 1) // sequential, so the order is known
	}
	l := c.List()
	if len(l) != 3 {
		t.Fatalf("len = %d", len(l))
	}
	for i, a := range l {
		want := fmt.Sprint("id-", 2-i)
		if *a.ContextIdentity != want || string(a.Context) != fmt.Sprintf(`{"n":%d}`, 2-i) {
			t.Fatalf("List[%d] = %s %s, want %s", i, *a.ContextIdentity, a.Context, want)
		}
		if a.Reason != "needs_approval" || a.InterceptionPoint != points.PreToolCall || len(a.ID) < 26 {
			t.Fatalf("List[%d] = %+v", i, a)
		}
		if len(a.Message) >= 5000 {
			t.Fatalf("message not bounded: %d bytes", len(a.Message))
		}
	}
	// Mutating a listed identity does not reach the queue.
	*l[0].ContextIdentity = "changed"
	if err := c.Decide(l[0].ID, "approve", sp("id-2"), ""); err != nil {
		t.Fatal(err)
	}
	cancel()
	for _, ch := range chans {
		<-ch
	}
}

func TestRejectReason(t *testing.T) {
	tests := []struct{ reason, want string }{
		{"dangerous_tool", `{"decision":"deny","reason":"dangerous_tool"}`},
		{"", `{"decision":"deny","reason":"approval_rejected"}`},
		{points.ReasonCompositionDisagreement, `{"decision":"deny","reason":"approval_rejected"}`},
		{`quote"and\back`, `{"decision":"deny","reason":"quote\"and\\back"}`},
	}
	for _, tt := range tests {
		res := resolution(points.OutcomeReject, nil, tt.reason)
		if string(res.Verdict) != tt.want {
			t.Errorf("reason %q: verdict %s, want %s", tt.reason, res.Verdict, tt.want)
		}
		if _, err := points.ParseVerdict(res.Verdict); err != nil {
			t.Errorf("reason %q: verdict fails §5: %v", tt.reason, err)
		}
	}
}

func TestOnDecisionAndMetrics(t *testing.T) {
	var got []Decision
	var mu sync.Mutex
	c, w := newTestConsole(t, ConsoleOptions{OnDecision: func(d Decision) {
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
	}})
	done := resolveAsync(context.Background(), c, testRequest(sp("i"), ""))
	w.waitLen(1)
	id := c.List()[0].ID
	if err := c.Decide(id, "reject", sp("i"), "not today"); err != nil {
		t.Fatal(err)
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].ID != id || got[0].Outcome != "reject" || got[0].Note != "not today" || got[0].Reason != "needs_approval" {
		t.Fatalf("OnDecision got %+v", got)
	}
	if w.count("reject") != 1 {
		t.Fatalf("Decided(reject) = %d", w.count("reject"))
	}
}

// TestTombstonesBounded: the memory of decided ids is a ring; the oldest
// id is forgotten (then unknown, 404) once enough newer ones are decided.
func TestTombstonesBounded(t *testing.T) {
	c, w := newTestConsole(t, ConsoleOptions{MaxPending: 1})
	var first string
	n := len(c.tombRing) + 1
	for i := range n {
		done := resolveAsync(context.Background(), c, testRequest(nil, ""))
		w.waitEnqueued(i + 1)
		id := c.List()[0].ID
		if i == 0 {
			first = id
		}
		if err := c.Decide(id, "approve", nil, ""); err != nil {
			t.Fatal(err)
		}
		<-done
	}
	if err := c.Decide(first, "approve", nil, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("oldest id = %v, want ErrNotFound", err)
	}
	if len(c.tombs) != len(c.tombRing) {
		t.Fatalf("tombs = %d, ring = %d", len(c.tombs), len(c.tombRing))
	}
}

func TestConcurrentResolveDecide(t *testing.T) {
	const n = 64
	c, _ := newTestConsole(t, ConsoleOptions{MaxPending: n})
	var wg sync.WaitGroup
	results := make([]resolved, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := testRequest(sp(fmt.Sprint("ident-", i)), fmt.Sprintf(`{"i":%d}`, i))
			res, err := c.Resolve(context.Background(), req)
			results[i] = resolved{res, err}
		}()
	}
	// Deciders race each other (and the enqueuers): each approval is
	// decided exactly once; every other attempt is refused.
	var decided sync.Map
	var dwg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for d := range 4 {
		dwg.Add(1)
		go func() {
			defer dwg.Done()
			for {
				mu.Lock()
				if wins == n {
					mu.Unlock()
					return
				}
				mu.Unlock()
				for _, a := range c.List() {
					outcome := "approve"
					if d%2 == 1 {
						outcome = "reject"
					}
					err := c.Decide(a.ID, outcome, a.ContextIdentity, "")
					switch {
					case err == nil:
						if _, dup := decided.LoadOrStore(a.ID, outcome); dup {
							t.Errorf("approval %s decided twice", a.ID)
						}
						mu.Lock()
						wins++
						mu.Unlock()
					case errors.Is(err, ErrAlreadyDecided):
					default:
						t.Errorf("Decide: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	dwg.Wait()
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("Resolve %d: %v", i, r.err)
		}
		if r.res.ContextIdentity == nil || *r.res.ContextIdentity != fmt.Sprint("ident-", i) {
			t.Fatalf("Resolve %d echoed %v", i, r.res.ContextIdentity)
		}
		if r.res.Outcome != "approve" && r.res.Outcome != "reject" {
			t.Fatalf("Resolve %d outcome %q", i, r.res.Outcome)
		}
	}
	if c.Len() != 0 {
		t.Fatalf("leftover %d", c.Len())
	}
}

// TestWithEmitter runs the console behind a real emitter: approve lifts
// the escalation, reject keeps it with the original reason, and the
// emitter's resolver timeout fails closed with no queue leftover.
func TestWithEmitter(t *testing.T) {
	tests := []struct {
		name        string
		outcome     string // "" lets the resolver timeout expire
		wantProceed bool
		wantReason  string
		resolvedBy  string
	}{
		{"approve", "approve", true, "", "approval"},
		{"reject", "reject", false, "needs_approval", "rejection"},
		{"timeout", "", false, points.ReasonApprovalResolverFailed, "rejection"}, // §10.3: a failed consultation is a rejection
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, w := newTestConsole(t, ConsoleOptions{})
			returned := make(chan struct{}, 1)
			timeout := -1 * time.Second // unbounded: the person decides
			if tt.outcome == "" {
				timeout = time.Millisecond
			}
			e, err := points.NewEmitter(points.Config{
				Identity: points.JCSSHA256(),
				Bindings: []points.Binding{{Name: "gate", Interceptor: points.InterceptorFunc(
					func(context.Context, *points.Context) (points.Verdict, error) {
						return points.Escalate("needs_approval", "ask a person"), nil
					})}},
				Resolver: points.ResolverFunc(func(ctx context.Context, req points.ApprovalRequest) (points.ApprovalResolution, error) {
					defer func() { returned <- struct{}{} }()
					return c.Resolve(ctx, req)
				}),
				ResolverTimeout: timeout,
			})
			if err != nil {
				t.Fatal(err)
			}
			s := points.NewSession(points.Agent{ID: "a", Framework: "test"}, "s-1")
			done := make(chan points.Result, 1)
			go func() {
				done <- e.Emit(context.Background(), s, points.PreToolCallEvent("c1", "send_email", json.RawMessage(`{"to":"x"}`)))
			}()
			if tt.outcome != "" {
				w.waitLen(1)
				a := c.List()[0]
				if a.ContextIdentity == nil {
					t.Fatal("no identity presented")
				}
				if err := c.Decide(a.ID, tt.outcome, a.ContextIdentity, ""); err != nil {
					t.Fatal(err)
				}
			}
			res := <-done
			if res.Proceed != tt.wantProceed || res.Verdict.Reason != tt.wantReason || res.Record.ResolvedBy != tt.resolvedBy {
				t.Fatalf("proceed %v reason %q resolved_by %q", res.Proceed, res.Verdict.Reason, res.Record.ResolvedBy)
			}
			// The emitter stops waiting at its deadline; the console's own
			// wait ends on the same ctx and leaves nothing queued.
			<-returned
			if c.Len() != 0 {
				t.Fatalf("leftover %d", c.Len())
			}
		})
	}
}

// firedDeadline is a context whose deadline passes when the test says so:
// Done closes and Err reports context.DeadlineExceeded, as a timer's would.
type firedDeadline struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func (d *firedDeadline) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }
func (d *firedDeadline) Done() <-chan struct{}       { return d.done }

func (d *firedDeadline) Err() error {
	select {
	case <-d.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (d *firedDeadline) fire() { d.once.Do(func() { close(d.done) }) }

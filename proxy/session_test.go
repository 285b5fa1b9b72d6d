package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/hooksproxy/hooksproxy/points"
)

// reasons captures summary.reason of every agent_shutdown by session.
var reasons sync.Map

func sessionProxy(t *testing.T, up string, opts Options) (*httptest.Server, *Server, *points.MemorySink) {
	sink := points.NewMemorySink(0)
	capture := at(points.AgentShutdown, "capture", func(c *points.Context) (points.Verdict, error) {
		reasons.Store(c.Get("session.id").Str, c.Get("summary.reason").Str)
		return points.Allow(), nil
	})
	em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: []points.Binding{capture,
		allowAll(points.AgentStartup, points.Input, points.PreModelCall, points.PostModelCall, points.PreToolCall, points.PostToolCall, points.Output)}, Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up)
	opts.Upstream, opts.Emitter = u, em
	s := New(opts)
	s.Start()
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs, s, sink
}

func shutdownReasons(sink *points.MemorySink) map[string]string {
	out := map[string]string{}
	for _, r := range sink.Records() {
		if r.InterceptionPoint == points.AgentShutdown {
			out[r.SessionID] = "shutdown"
		}
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestIdleSessionsEndWithShutdown(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	hs, s, sink := sessionProxy(t, up.URL, Options{IdleTimeout: 50 * time.Millisecond})
	defer s.Close()
	post(t, hs.URL, hello, "X-Agent-Hooks-Session", "idle-1")
	if s.Sessions() != 1 {
		t.Fatalf("sessions = %d", s.Sessions())
	}
	waitFor(t, "idle eviction", func() bool { return s.Sessions() == 0 })
	// The session leaves the table before its agent_shutdown is emitted
	// (it is ending meanwhile): wait for the record, bounded.
	waitFor(t, "agent_shutdown", func() bool { return len(shutdownReasons(sink)) >= 1 })
	if len(shutdownReasons(sink)) != 1 {
		t.Fatal("idle eviction did not emit agent_shutdown once")
	}
	recs := sink.Records()
	last := recs[len(recs)-1]
	if last.InterceptionPoint != points.AgentShutdown || last.SessionID != "idle-1" {
		t.Fatalf("last record %+v", last)
	}
	if r, _ := reasons.Load("idle-1"); r != "completed" {
		t.Fatalf("idle named session ended %v, want completed", r)
	}
}

func TestSessionCountBounded(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	hs, s, sink := sessionProxy(t, up.URL, Options{MaxSessions: 3, IdleTimeout: time.Hour})
	defer s.Close()
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		post(t, hs.URL, hello, "X-Agent-Hooks-Session", id)
	}
	if s.Sessions() != 3 {
		t.Fatalf("sessions = %d, want 3", s.Sessions())
	}
	if n := len(shutdownReasons(sink)); n != 2 {
		t.Fatalf("evictions emitted %d shutdowns, want 2", n)
	}
}

func TestCloseCancelsOpenSessions(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	hs, s, sink := sessionProxy(t, up.URL, Options{IdleTimeout: time.Hour})
	post(t, hs.URL, hello, "X-Agent-Hooks-Session", "open-1")
	post(t, hs.URL, hello, "X-Agent-Hooks-Session", "open-2")
	s.Close()
	if s.Sessions() != 0 || len(shutdownReasons(sink)) != 2 {
		t.Fatalf("close left %d sessions, %d shutdowns", s.Sessions(), len(shutdownReasons(sink)))
	}
	for _, id := range []string{"open-1", "open-2"} {
		if r, _ := reasons.Load(id); r != "cancelled" {
			t.Fatalf("%s ended %v, want cancelled", id, r)
		}
	}
}

// TestSessionKeepsClonesOfCallIDs: tool call ids and names are read from
// answers through views; the session must keep copies, or each entry would
// pin the whole answer it came from for the session's life.
func TestSessionKeepsClonesOfCallIDs(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	_, s, _ := sessionProxy(t, up.URL, Options{})
	defer s.Close()
	sess, _ := s.sessions.get("sess-pin", false, time.Now())
	answer := []byte(`{"id":"call_1","name":"lookup"}`)
	id, name := view(answer)[7:13], view(answer)[23:29]
	if id != "call_1" || name != "lookup" {
		t.Fatalf("test slicing is off: %q %q", id, name)
	}
	s.preTool(t.Context(), s.Emitter(), sess, id, name, []byte(`{}`))
	s.sessions.link(sess, []string{id}, -1)
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(answer)))
	inside := func(str string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(str)))
		return p >= lo && p < lo+uintptr(len(answer))
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	for k, tc := range sess.tools {
		if inside(k) || inside(tc.name) {
			t.Errorf("session tool entry %q/%q points into the answer", k, tc.name)
		}
	}
	for k := range sess.callIDs {
		if inside(k) {
			t.Errorf("session call id %q points into the answer", k)
		}
	}
	if len(sess.tools) != 1 || len(sess.callIDs) != 1 {
		t.Fatalf("tools %d, call ids %d; want 1 and 1", len(sess.tools), len(sess.callIDs))
	}
}

// A session header of the deployment's own naming is answered under that
// name as well as X-Agent-Hooks-Session.
func TestCustomSessionHeaderEchoed(t *testing.T) {
	up, _ := seqUpstream(t, plainCompletion)
	sink := points.NewMemorySink(0)
	em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: []points.Binding{allowAll()}, Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	s := New(Options{Upstream: u, Emitter: em, SessionHeader: "X-My-Session"})
	hs := httptest.NewServer(s)
	defer func() { hs.Close(); s.Close() }()
	resp, body := post(t, hs.URL, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "X-My-Session", "conv-7")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if a, b := resp.Header.Get("X-My-Session"), resp.Header.Get("X-Agent-Hooks-Session"); a != "conv-7" || b != "conv-7" {
		t.Errorf("X-My-Session %q, X-Agent-Hooks-Session %q; want conv-7 in both", a, b)
	}
}

// A session's idle time starts when its last request ends, not when it
// arrived: a model call or an approval that takes most of the idle timeout
// must not leave the session to the sweeper right after its answer.
func TestIdleCountsFromTheRequestsEnd(t *testing.T) {
	var mu sync.Mutex
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		clock = clock.Add(10 * time.Minute) // the model takes ten minutes
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, plainCompletion)
	}))
	defer up.Close()
	em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: []points.Binding{allowAll()}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	s := New(Options{Upstream: u, Emitter: em, Now: now, IdleTimeout: 15 * time.Minute})
	hs := httptest.NewServer(s)
	defer func() { hs.Close(); s.Close() }()
	if r, b := post(t, hs.URL, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "X-Agent-Hooks-Session", "slow-1"); r.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", r.StatusCode, b)
	}
	s.sessions.mu.Lock()
	sess := s.sessions.byID["slow-1"]
	s.sessions.mu.Unlock()
	if sess == nil {
		t.Fatal("session not open after its request")
	}
	s.sessions.mu.Lock()
	last := sess.lastActive
	s.sessions.mu.Unlock()
	if want := now(); !last.Equal(want) {
		t.Errorf("last activity %s, want the request's end %s", last.Format(time.TimeOnly), want.Format(time.TimeOnly))
	}
}

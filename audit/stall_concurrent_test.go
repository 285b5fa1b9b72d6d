package audit

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestStallConcurrentThenClose(t *testing.T) {
	base := runtime.NumGoroutine()
	w := &blockingWriter{release: make(chan struct{})}
	s := NewWriterSink("file", w, WithSyncWrite(), WithSyncTimeout(30*time.Millisecond), WithReporter(newFakeReporter()))
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 50 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = s.Append(rec("s", int64(i))) }()
	}
	wg.Wait()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("appends waited %v", d)
	}
	if !s.Stalled() {
		t.Fatal("not stalled")
	}
	closed := make(chan error)
	go func() { closed <- s.Close() }()
	time.Sleep(50 * time.Millisecond)
	close(w.release)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("close hung after the disk answered")
	}
	// The stall clears on a goroutine of its own once the stalled write
	// returns, which may be just after Close: wait (bounded) for both.
	for deadline := time.Now().Add(2 * time.Second); (runtime.NumGoroutine() > base || s.Stalled()) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Errorf("goroutines %d > %d", n, base)
	}
	st := s.Stats()
	t.Logf("stats %+v writes %d stalled=%v", st, w.n, s.Stalled())
	if s.Stalled() {
		t.Error("still stalled after close")
	}
}

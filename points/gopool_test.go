package points

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestGoPoolNeverQueues: a call that blocks does not hold up the next one,
// every call runs exactly once, and idle workers are reused.
func TestGoPoolNeverQueues(t *testing.T) {
	p := newGoPool(2, time.Minute)
	block := make(chan struct{})
	started := make(chan struct{})
	p.run(func() { close(started); <-block })
	<-started
	done := make(chan struct{})
	p.run(func() { close(done) }) // no idle worker: must get a goroutine of its own
	<-done

	var wg sync.WaitGroup
	var mu sync.Mutex
	ran := 0
	for i := 0; i < 200; i++ {
		wg.Add(1)
		p.run(func() {
			mu.Lock()
			ran++
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	close(block)
	if ran != 200 {
		t.Fatalf("ran %d calls, want 200", ran)
	}
}

// TestGoPoolIdleBound: no more than maxIdle workers wait, and they leave
// after linger.
func TestGoPoolIdleBound(t *testing.T) {
	p := newGoPool(3, 20*time.Millisecond)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := 0; i < 10; i++ {
		wg.Add(1)
		p.run(func() { <-gate; wg.Done() })
	}
	close(gate)
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for p.idle.Load() > 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := p.idle.Load(); n > 3 {
		t.Fatalf("%d idle workers, want at most 3", n)
	}
	for p.idle.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := p.idle.Load(); n != 0 {
		t.Fatalf("%d workers still idle after linger", n)
	}
}

// deepStack uses about n KiB of stack, as CEL's interpreter does.
//
//go:noinline
func deepStack(n int) int {
	var pad [1024]byte
	pad[n%1024] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deepStack(n-1) + int(pad[n%1024])
}

// BenchmarkEmitGoroutineCall is one emission with one interceptor that does
// not run inline and needs 12 KiB of stack, like the CEL kind.
func BenchmarkEmitGoroutineCall(b *testing.B) {
	benchmarkEmitOne(b, InterceptorFunc(func(_ context.Context, c *Context) (Verdict, error) {
		deepStack(12)
		return Allow(), nil
	}))
}

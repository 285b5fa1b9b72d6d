package points

import (
	"sync/atomic"
	"time"
)

// goPool runs the calls of interceptors that do not run inline on reused
// goroutines. A new goroutine per call paid for its stack growth every time
// (CEL's interpreter grows a stack to 32 KiB, copying it twice), and a
// burst of calls left as many grown stacks behind for the GC.
//
// A call never waits for another: with no idle worker it gets a new
// goroutine, which stays as a worker afterwards while fewer than maxIdle
// are idle, for at most linger.
type goPool struct {
	jobs    chan func()
	idle    atomic.Int32
	maxIdle int32
	linger  time.Duration
}

func newGoPool(maxIdle int, linger time.Duration) *goPool {
	return &goPool{jobs: make(chan func()), maxIdle: int32(maxIdle), linger: linger}
}

// run starts f on an idle worker or on a new goroutine. f must not panic
// (the emitter's call recovers inside it).
func (p *goPool) run(f func()) {
	select {
	case p.jobs <- f:
	default:
		go p.work(f)
	}
}

func (p *goPool) work(f func()) {
	var t *time.Timer
	for {
		f()
		f = nil // do not keep the finished call's closure (and its context) alive while idle
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		if t == nil {
			t = time.NewTimer(p.linger)
		} else {
			t.Reset(p.linger)
		}
		select {
		case f = <-p.jobs:
			p.idle.Add(-1)
			t.Stop()
		case <-t.C:
			p.idle.Add(-1)
			return
		}
	}
}

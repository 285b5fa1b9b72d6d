package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hooksproxy/hooksproxy/bench"
)

// scenario is one point of the matrix.
type scenario struct {
	Stream bool `json:"stream"`
	Size   int  `json:"size"`
	Conc   int  `json:"concurrency"`
}

func (s scenario) mode() string {
	if s.Stream {
		return "stream"
	}
	return "json"
}

func (s scenario) String() string {
	return fmt.Sprintf("%s %s c=%d", s.mode(), sizeName(s.Size), s.Conc)
}

func sizeName(n int) string {
	if n%1024 == 0 {
		return strconv.Itoa(n/1024) + " KB"
	}
	return strconv.Itoa(n) + " B"
}

// cell accumulates one target's batches within a scenario.
type cell struct {
	Target   string `json:"target"`
	Requests int    `json:"requests"`
	Errors   int    `json:"errors"`
	FirstErr string `json:"first_error,omitempty"`
	// Wall is the summed batch time; Requests/Wall is the throughput.
	Wall time.Duration `json:"wall_ns"`
	// CPU and Mallocs are deltas of the measured process: the upstream for
	// direct, the proxy otherwise. UpstreamCPU is the upstream's share in
	// every case.
	CPU         time.Duration `json:"cpu_ns"`
	UpstreamCPU time.Duration `json:"upstream_cpu_ns"`
	Mallocs     uint64        `json:"mallocs"`
	// Counter is the measured process's counter delta: records emitted by
	// hooksproxy, errors logged by the bare proxy, requests answered by
	// the upstream.
	Counter int64 `json:"counter"`
	Bytes   int64 `json:"bytes"`
	// Summaries of the successful samples.
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	TTFBP50 time.Duration `json:"ttfb_p50_ns"`

	lat, ttfb []time.Duration
}

func (c *cell) rps() float64 {
	if c.Wall <= 0 {
		return 0
	}
	return float64(c.Requests-c.Errors) / c.Wall.Seconds()
}

func (c *cell) perReq(v float64) float64 {
	if c.Requests == 0 {
		return 0
	}
	return v / float64(c.Requests)
}

// scenarioResult is one scenario's cells.
type scenarioResult struct {
	scenario
	BatchSize int              `json:"batch_size"`
	Rounds    int              `json:"rounds"`
	Cells     map[string]*cell `json:"cells"`
}

// env is the running set of child processes.
type env struct {
	upstream *child
	proxies  map[string]*child // bare, allow_all, policy
	client   *http.Client
}

// measured returns the process whose cost a target's requests show.
func (e *env) measured(target string) *child {
	if target == bench.Direct {
		return e.upstream
	}
	return e.proxies[target]
}

func (e *env) base(target string) string { return e.measured(target).base }

// batch runs one batch against target and adds it to c.
func (e *env) batch(ctx context.Context, c *cell, call bench.Call, n, conc int) error {
	m := e.measured(c.Target)
	before, err := m.stats(false)
	if err != nil {
		return err
	}
	ubefore, err := e.upstream.stats(false)
	if err != nil {
		return err
	}
	b := bench.RunBatch(ctx, e.client, call, n, conc)
	after, err := m.stats(false)
	if err != nil {
		return err
	}
	uafter, err := e.upstream.stats(false)
	if err != nil {
		return err
	}
	c.Requests += len(b.Samples) + b.Errors
	c.Errors += b.Errors
	if b.FirstErr != nil && c.FirstErr == "" {
		c.FirstErr = b.FirstErr.Error()
	}
	c.Wall += b.Wall
	c.CPU += after.CPU - before.CPU
	c.UpstreamCPU += uafter.CPU - ubefore.CPU
	c.Mallocs += after.Mallocs - before.Mallocs
	c.Counter += after.Counter - before.Counter
	for _, s := range b.Samples {
		c.lat = append(c.lat, s.Latency)
		c.ttfb = append(c.ttfb, s.TTFB)
		c.Bytes += s.Bytes
	}
	return nil
}

// limits bound a scenario in time and request count.
type limits struct {
	scenarioTime time.Duration // stop starting rounds after this
	batchTime    time.Duration // aim for batches about this long
	minRounds    int
	maxRequests  int // per target per scenario
}

// runScenario measures every target in rounds: each round runs one batch
// per target, the order rotating from round to round, so machine noise
// falls on all targets alike.
func (e *env) runScenario(ctx context.Context, sc scenario, lim limits) (*scenarioResult, error) {
	targets := bench.Targets()
	calls := map[string]bench.Call{}
	for _, t := range targets {
		calls[t] = bench.NewCall(e.base(t), sc.Stream, sc.Size)
	}
	// Warm up every target and size the batches from the slowest one.
	warm := max(2*sc.Conc, 8)
	slowest := time.Duration(0)
	for _, t := range targets {
		start := time.Now()
		b := bench.RunBatch(ctx, e.client, calls[t], warm, sc.Conc)
		if b.Errors == warm {
			return nil, fmt.Errorf("%s %s: every warm-up request failed: %v", sc, t, b.FirstErr)
		}
		slowest = max(slowest, time.Since(start)/time.Duration(warm))
	}
	n := int(lim.batchTime / max(slowest, time.Microsecond))
	n = max(n, sc.Conc, 4)
	n = (n + sc.Conc - 1) / sc.Conc * sc.Conc // whole waves
	n = min(n, 4000, lim.maxRequests)

	res := &scenarioResult{scenario: sc, BatchSize: n, Cells: map[string]*cell{}}
	for _, t := range targets {
		res.Cells[t] = &cell{Target: t}
	}
	start := time.Now()
	for round := 0; ; round++ {
		if round >= lim.minRounds && time.Since(start) >= lim.scenarioTime {
			break
		}
		if res.Cells[bench.Direct].Requests+n > lim.maxRequests {
			break
		}
		for i := range targets {
			t := targets[(round+i)%len(targets)]
			if err := e.batch(ctx, res.Cells[t], calls[t], n, sc.Conc); err != nil {
				return nil, err
			}
		}
		res.Rounds++
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	for _, c := range res.Cells {
		lat, ttfb := bench.Sorted(c.lat), bench.Sorted(c.ttfb)
		c.P50, c.P99, c.TTFBP50 = bench.Percentile(lat, 50), bench.Percentile(lat, 99), bench.Percentile(ttfb, 50)
	}
	return res, nil
}

// heldResult is the memory of one proxy holding many streams at once.
type heldResult struct {
	Target  string `json:"target"`
	Size    int    `json:"size"`
	Streams int    `json:"streams"`
	// Completed streams after release, and the first failure.
	Completed int    `json:"completed"`
	FirstErr  string `json:"first_error,omitempty"`
	// WireBytes is the mean body a client received per stream.
	WireBytes int64 `json:"wire_bytes"`
	// Base, Held (no GC) and Live (after a GC) snapshots of the proxy.
	Base bench.ProcStats `json:"base"`
	Held bench.ProcStats `json:"held"`
	Live bench.ProcStats `json:"live"`
	// After is the proxy once every stream has finished (no GC): its CPU
	// minus Held's is the cost of verdicts and replay.
	After bench.ProcStats `json:"after"`
	// HoldTime is how long it took until every stream was parked;
	// ReleaseTime from the release until every stream finished.
	HoldTime time.Duration `json:"hold_ns"`
	// EndedEarly counts streams that ended (failed) before the release.
	EndedEarly  int           `json:"ended_early"`
	ReleaseTime time.Duration `json:"release_ns"`
}

// heldWave is how many streams open at once in the held-stream test.
const heldWave = 100

// holding is the number of streams that were parked when measured.
func (h *heldResult) holding() int { return max(h.Streams-h.EndedEarly, 1) }

func perStream(a, b uint64, n int) float64 {
	return (float64(a) - float64(b)) / float64(n)
}

// runHeld starts a fresh proxy for target, warms it, makes the upstream
// stall every stream before [DONE], opens streams of size until all are
// parked at the upstream, lets the proxy settle, snapshots it, then
// releases them and checks every answer.
func runHeld(ctx context.Context, exe string, up *child, client *http.Client, target string, size, streams int, profile string, stderr io.Writer) (*heldResult, error) {
	px, err := startChild(exe, roleArgs{role: target, upstream: up.base}, stderr)
	if err != nil {
		return nil, err
	}
	defer px.stop()
	call := bench.NewCall(px.base, true, size)
	// The bare proxy aborts a few streams (CLIENTS-AND-SSE.md); only a
	// warm-up where nothing works stops the run.
	if b := bench.RunBatch(ctx, client, call, 16, 4); b.Errors == 16 {
		return nil, fmt.Errorf("held %s warm-up: %v", target, b.FirstErr)
	}
	res := &heldResult{Target: target, Size: size, Streams: streams}
	if res.Base, err = px.stats(true); err != nil {
		return nil, err
	}
	if _, err := up.call(http.MethodPost, "/stall"); err != nil {
		return nil, err
	}
	released := false
	release := func() {
		if !released {
			released = true
			_, _ = up.call(http.MethodPost, "/release")
		}
	}
	defer release()

	hctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		bytes int64
		// ended counts streams that finished before the release: failed
		// ones (the bare proxy's aborts) never park at the upstream.
		ended atomic.Int64
	)
	open := func() {
		wg.Go(func() {
			s, err := call.Do(hctx, client, make([]byte, 16<<10))
			ended.Add(1)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if res.FirstErr == "" {
					res.FirstErr = err.Error()
				}
				return
			}
			res.Completed++
			bytes += s.Bytes
		})
	}
	// Streams open in waves of heldWave, each once the last is parked: a
	// burst of a thousand starves a 2-core machine so badly that dials and
	// interceptor calls time out, which measures the burst, not memory.
	start := time.Now()
	wctx, wcancel := context.WithTimeout(hctx, 3*time.Minute)
	var parked string
	lastLog := time.Now()
	for opened := 0; opened < streams && err == nil; {
		n := min(heldWave, streams-opened)
		for range n {
			open()
		}
		opened += n
		err = waitUntil(wctx, 20*time.Millisecond, func() (bool, error) {
			s, err := up.call(http.MethodGet, "/parked")
			parked = s
			if err != nil {
				return false, err
			}
			p, err := strconv.Atoi(s)
			if err != nil {
				return false, fmt.Errorf("upstream /parked: %w", err)
			}
			if time.Since(lastLog) > 10*time.Second {
				lastLog = time.Now()
				fmt.Fprintf(stderr, "hooksbench: held %s %s: %d of %d streams parked, %d ended, after %s\n", target, sizeName(size), p, streams, ended.Load(), time.Since(start).Round(time.Second))
			}
			// Every stream is parked at the upstream (it has sent all
			// but [DONE]) or has ended.
			return int64(p)+ended.Load() >= int64(opened), nil
		})
	}
	wcancel()
	if err != nil {
		release()
		cancel()
		wg.Wait()
		return nil, fmt.Errorf("held %s: only %s of %d streams parked: %w", target, parked, streams, err)
	}
	res.HoldTime = time.Since(start)
	res.EndedEarly = int(ended.Load())
	// Let the proxy read what is still in its sockets: wait until its CPU
	// stays idle for an interval.
	last, err := px.stats(false)
	if err != nil {
		return nil, err
	}
	sctx, scancel := context.WithTimeout(hctx, 20*time.Second)
	_ = waitUntil(sctx, 200*time.Millisecond, func() (bool, error) {
		st, err := px.stats(false)
		if err != nil {
			return false, err
		}
		idle := st.CPU-last.CPU < 4*time.Millisecond
		last = st
		return idle, nil
	})
	scancel()
	if res.Held, err = px.stats(false); err != nil {
		return nil, err
	}
	if res.Live, err = px.stats(true); err != nil {
		return nil, err
	}
	if profile != "" {
		name := filepath.Join(profile, fmt.Sprintf("held-%s-%d.heap.pprof", target, size))
		if err := saveHeap(px, name); err != nil {
			return nil, err
		}
	}
	rstart := time.Now()
	release()
	wg.Wait()
	res.ReleaseTime = time.Since(rstart)
	if res.After, err = px.stats(false); err != nil {
		return nil, err
	}
	if res.Completed > 0 {
		res.WireBytes = bytes / int64(res.Completed)
	}
	return res, nil
}

// saveHeap writes the child's heap profile to name.
func saveHeap(c *child, name string) error {
	b, err := c.call(http.MethodGet, "/heap")
	if err != nil {
		return err
	}
	return os.WriteFile(name, []byte(b), 0o644)
}

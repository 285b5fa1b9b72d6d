// Command hooksbench measures what hooksproxy adds over a direct call and
// over the floor for any Go proxy (a bare httputil.ReverseProxy), and what
// it costs to hold streams.
//
//	go run ./cmd/hooksbench           # full run, about 5 minutes
//	go run ./cmd/hooksbench -quick    # about 30 seconds, for CI
//
// It re-executes itself as child processes, one per role: the scripted
// upstream, the bare proxy, hooksproxy with allow_all and hooksproxy with
// a realistic policy set. The load generator (this process) talks to them
// over loopback only. Per-request CPU time and allocations are deltas of
// the one process a target's requests exercise (the upstream for direct,
// the proxy otherwise), read from getrusage and runtime.MemStats inside
// that process.
//
// Each scenario (json or stream answer, size, concurrency) runs in rounds;
// a round runs one batch per target, rotating the order, so noise from the
// machine falls on every target alike. Held-stream memory is measured on a
// fresh proxy process per target while the upstream parks every stream
// just before its [DONE].
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hooksproxy/hooksproxy/bench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// config is the parsed command line.
type config struct {
	quick      bool
	chunk      int
	sizes      []int
	concs      []int
	modes      []bool // stream or not
	lim        limits
	held       int
	heldSizes  []int
	heldTgts   []string
	profile    string
	jsonOut    string
	mdOut      string
	timeout    time.Duration
	commandArg []string
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hooksbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", "", "internal: run as a child process of this role")
	upstream := fs.String("upstream", "", "internal: the upstream base URL of a proxy role")
	chunk := fs.Int("chunk", bench.DefaultChunk, "content bytes per streamed event")
	sizes := fs.String("sizes", "1K,32K", "answer content sizes")
	concs := fs.String("conc", "1,16,64", "concurrencies; the largest is the saturation point (1,16 with -quick)")
	modes := fs.String("modes", "json,stream", "answer modes: json, stream")
	quick := fs.Bool("quick", false, "short run for CI (about 30 s)")
	scenarioTime := fs.Duration("scenario-time", 0, "time per scenario (default 10s; 800ms with -quick)")
	batchTime := fs.Duration("batch-time", 0, "target length of one batch (default 250ms; 40ms with -quick)")
	maxReq := fs.Int("max-requests", 20000, "most requests per target per scenario")
	held := fs.Int("held", 1000, "concurrent streams held for the memory test; 0 skips it")
	heldTargets := fs.String("held-targets", "bare,allow_all,policy", "proxies measured holding streams")
	heldSizes := fs.String("held-sizes", "", "answer sizes for the memory test (default 1K,32K; 1K with -quick)")
	profile := fs.String("cpuprofile", "", "directory where each child writes <role>.cpu.pprof and <role>.allocs.pprof")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file")
	mdOut := fs.String("md", "", "also write the markdown report to this file")
	timeout := fs.Duration("timeout", 15*time.Minute, "abort the run after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	ints := func(name, s string) []int {
		v, err := parseInts(s)
		if err != nil {
			fmt.Fprintf(stderr, "hooksbench: -%s: %v\n", name, err)
			return nil
		}
		return v
	}
	sz := ints("sizes", *sizes)
	if sz == nil {
		return 2
	}
	if *role != "" {
		return serveRole(roleArgs{role: *role, upstream: *upstream, chunk: *chunk, sizes: sz, profile: *profile}, stdin, stdout, stderr)
	}
	c := config{quick: *quick, chunk: *chunk, sizes: sz, held: *held, profile: *profile, jsonOut: *jsonOut, mdOut: *mdOut, timeout: *timeout, commandArg: args}
	if c.concs = ints("conc", *concs); c.concs == nil {
		return 2
	}
	for m := range strings.SplitSeq(*modes, ",") {
		switch strings.TrimSpace(m) {
		case "json":
			c.modes = append(c.modes, false)
		case "stream":
			c.modes = append(c.modes, true)
		default:
			fmt.Fprintf(stderr, "hooksbench: -modes: %q is not json or stream\n", m)
			return 2
		}
	}
	c.lim = limits{scenarioTime: 10 * time.Second, batchTime: 250 * time.Millisecond, minRounds: 3, maxRequests: *maxReq}
	hs := "1K,32K"
	if c.quick {
		c.lim = limits{scenarioTime: 800 * time.Millisecond, batchTime: 40 * time.Millisecond, minRounds: 2, maxRequests: *maxReq}
		hs = "1K"
		if !set["conc"] {
			c.concs = []int{1, 16}
		}
	}
	if *scenarioTime > 0 {
		c.lim.scenarioTime = *scenarioTime
	}
	if *batchTime > 0 {
		c.lim.batchTime = *batchTime
	}
	if *heldSizes != "" {
		hs = *heldSizes
	}
	if c.heldSizes = ints("held-sizes", hs); c.heldSizes == nil {
		return 2
	}
	for t := range strings.SplitSeq(*heldTargets, ",") {
		if t = strings.TrimSpace(t); !bench.IsProxy(t) {
			fmt.Fprintf(stderr, "hooksbench: -held-targets: %q is not bare, allow_all or policy\n", t)
			return 2
		}
		c.heldTgts = append(c.heldTgts, t)
	}
	if c.chunk < 1 || c.held < 0 || c.lim.maxRequests < 1 {
		fmt.Fprintln(stderr, "hooksbench: -chunk and -max-requests must be positive, -held not negative")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rep, err := bench1(ctx, c, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "hooksbench:", err)
		return 1
	}
	md := rep.markdown()
	fmt.Fprint(stdout, md)
	if c.mdOut != "" {
		if err := os.WriteFile(c.mdOut, []byte(md), 0o644); err != nil {
			fmt.Fprintln(stderr, "hooksbench:", err)
			return 1
		}
	}
	if c.jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(c.jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, "hooksbench:", err)
			return 1
		}
	}
	return 0
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func firstErr(s string) string {
	if s == "" {
		return ""
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return "; first error: " + s
}

func containsInt(v []int, n int) bool {
	for _, x := range v {
		if x == n {
			return true
		}
	}
	return false
}

// bench1 runs the whole benchmark: children up, the scenario matrix, the
// held-stream test, children down.
func bench1(ctx context.Context, c config, stderr io.Writer) (*report, error) {
	exe, err := selfExe()
	if err != nil {
		return nil, err
	}
	if _, ok := stderr.(*os.File); !ok {
		// exec copies each child's stderr in its own goroutine unless it
		// is a file; serialise the writes.
		stderr = &lockedWriter{w: stderr}
	}
	rep := newReport(c)
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "hooksbench: "+format+"\n", a...) }

	// The upstream answers every size either part asks for.
	upSizes := append([]int(nil), c.sizes...)
	for _, n := range c.heldSizes {
		if !containsInt(upSizes, n) {
			upSizes = append(upSizes, n)
		}
	}
	up, err := startChild(exe, roleArgs{role: roleUpstream, chunk: c.chunk, sizes: upSizes, profile: c.profile}, stderr)
	if err != nil {
		return nil, err
	}
	defer up.stop()
	e := &env{upstream: up, proxies: map[string]*child{}, client: bench.NewClient(max(c.held, 64) + 64)}
	for _, t := range []string{bench.Bare, bench.AllowAll, bench.Policy} {
		px, err := startChild(exe, roleArgs{role: t, upstream: up.base, profile: c.profile}, stderr)
		if err != nil {
			return nil, err
		}
		defer px.stop()
		e.proxies[t] = px
	}
	logf("children: upstream pid %d, bare %d, allow_all %d, policy %d", up.pid(), e.proxies[bench.Bare].pid(), e.proxies[bench.AllowAll].pid(), e.proxies[bench.Policy].pid())

	start := time.Now()
	for _, stream := range c.modes {
		for _, size := range c.sizes {
			for _, conc := range c.concs {
				sc := scenario{Stream: stream, Size: size, Conc: conc}
				res, err := e.runScenario(ctx, sc, c.lim)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", sc, err)
				}
				rep.Scenarios = append(rep.Scenarios, res)
				d := res.Cells[bench.Direct]
				logf("%-20s batch %4d x %2d rounds  direct p50 %s  %s", sc, res.BatchSize, res.Rounds, fmtDur(d.P50), rowSummary(res))
			}
		}
	}
	rep.MatrixTime = time.Since(start)

	if c.held > 0 {
		start = time.Now()
		for _, size := range c.heldSizes {
			for _, t := range c.heldTgts {
				h, err := runHeld(ctx, exe, up, e.client, t, size, c.held, c.profile, stderr)
				if err != nil {
					return nil, err
				}
				rep.Held = append(rep.Held, h)
				logf("held %-9s %s x %d: %d completed, %s live heap/stream, %s RSS/stream, %s wire/stream; held in %s, released in %s (%s CPU/stream)%s",
					t, sizeName(size), c.held, h.Completed, fmtBytes(perStream(h.Live.HeapAlloc, h.Base.HeapAlloc, h.holding())),
					fmtBytes(perStream(h.Held.RSS, h.Base.RSS, h.holding())), fmtBytes(float64(h.WireBytes)),
					fmtDur(h.HoldTime), fmtDur(h.ReleaseTime), fmtDur((h.After.CPU-h.Live.CPU)/time.Duration(h.holding())), firstErr(h.FirstErr))
			}
		}
		rep.HeldTime = time.Since(start)
	}
	rep.finish()
	if ctx.Err() != nil {
		return nil, errors.New("interrupted")
	}
	return rep, nil
}

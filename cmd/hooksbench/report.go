package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/hooksproxy/hooksproxy/bench"
)

// Targets from issue 8, as ratios from one interleaved run.
const (
	maxAllowLatency  = 1.5 // allow_all added p50/p99 over bare's
	maxPolicyLatency = 2.0 // policy added p50/p99 over bare's
	minThroughput    = 0.7 // proxy req/s over bare's at saturation
	maxHeldPerStream = 2.0 // held memory per stream over the response's bytes
)

// machine describes where the run happened.
type machine struct {
	NumCPU int    `json:"nproc"`
	CPU    string `json:"cpu_model"`
	Go     string `json:"go"`
	Kernel string `json:"kernel"`
	// Revision is the VCS commit the binary was built from ("+dirty"
	// when the tree had changes).
	Revision  string `json:"revision"`
	LoadStart string `json:"loadavg_start"`
	LoadEnd   string `json:"loadavg_end"`
}

// reportConfig is the run's parameters as reported.
type reportConfig struct {
	Command      string        `json:"command"`
	Quick        bool          `json:"quick"`
	Chunk        int           `json:"chunk"`
	Sizes        []int         `json:"sizes"`
	Concs        []int         `json:"concurrencies"`
	ScenarioTime time.Duration `json:"scenario_time_ns"`
	BatchTime    time.Duration `json:"batch_time_ns"`
	Held         int           `json:"held_streams"`
	HeldSizes    []int         `json:"held_sizes"`
}

// check is one target verdict.
type check struct {
	What  string  `json:"what"`
	Value float64 `json:"value"`
	Limit float64 `json:"limit"`
	// Holds is false when the value misses the limit or cannot be
	// computed (then Note says why).
	Holds bool   `json:"holds"`
	Note  string `json:"note,omitempty"`
}

// report is everything one run produced.
type report struct {
	Machine    machine           `json:"machine"`
	Config     reportConfig      `json:"config"`
	Started    time.Time         `json:"started"`
	MatrixTime time.Duration     `json:"matrix_ns"`
	HeldTime   time.Duration     `json:"held_ns"`
	Scenarios  []*scenarioResult `json:"scenarios"`
	Held       []*heldResult     `json:"held"`
	Checks     []check           `json:"checks"`
}

func newReport(c config) *report {
	cmd := "go run ./cmd/hooksbench"
	if len(c.commandArg) > 0 {
		cmd += " " + strings.Join(c.commandArg, " ")
	}
	return &report{
		Machine: machine{
			NumCPU:    runtime.NumCPU(),
			CPU:       cpuModel(),
			Go:        runtime.Version(),
			Kernel:    strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")),
			Revision:  revision(),
			LoadStart: loadavg(),
		},
		Config: reportConfig{
			Command: cmd, Quick: c.quick, Chunk: c.chunk, Sizes: c.sizes, Concs: c.concs,
			ScenarioTime: c.lim.scenarioTime, BatchTime: c.lim.batchTime, Held: c.held, HeldSizes: c.heldSizes,
		},
		Started: time.Now().UTC(),
	}
}

func readFile(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return string(b)
}

func cpuModel() string {
	for line := range strings.SplitSeq(readFile("/proc/cpuinfo"), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// revision names the commit the binary was built from: the build's VCS
// stamp, or (with -buildvcs=false) what git says about the working
// directory, read without taking git's optional locks.
func revision() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", ""
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision":
				rev = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "+dirty"
			}
		}
		if rev != "" {
			return rev + dirty
		}
	}
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	rev, err := git("rev-parse", "HEAD")
	if err != nil {
		return "unknown"
	}
	if st, err := git("status", "--porcelain", "--untracked-files=no"); err == nil && st != "" {
		rev += "+dirty"
	}
	return rev
}

// loadavg is the 1, 5 and 15 minute load average: how shared the machine was.
func loadavg() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// added is a target's added latency over direct at p (50 or 99).
func added(res *scenarioResult, target string, p int) time.Duration {
	c, d := res.Cells[target], res.Cells[bench.Direct]
	if p == 50 {
		return c.P50 - d.P50
	}
	return c.P99 - d.P99
}

// ratio is a/b, or ok=false when b is not positive.
func ratio(a, b float64) (float64, bool) {
	if b <= 0 {
		return 0, false
	}
	return a / b, true
}

// finish computes the target checks.
func (r *report) finish() {
	r.Machine.LoadEnd = loadavg()
	maxConc := slices.Max(r.Config.Concs)
	for _, res := range r.Scenarios {
		bare := res.Cells[bench.Bare]
		for _, t := range []struct {
			target string
			limit  float64
		}{{bench.AllowAll, maxAllowLatency}, {bench.Policy, maxPolicyLatency}} {
			for _, p := range []int{50, 99} {
				what := fmt.Sprintf("%s: %s added p%d ÷ bare added p%d", res.scenario, t.target, p, p)
				v, ok := ratio(float64(added(res, t.target, p)), float64(added(res, bench.Bare, p)))
				ch := check{What: what, Value: v, Limit: t.limit, Holds: ok && v <= t.limit}
				if !ok {
					ch.Note = "bare added nothing measurable"
				}
				r.Checks = append(r.Checks, ch)
			}
			if res.Conc == maxConc {
				v, ok := ratio(res.Cells[t.target].rps(), bare.rps())
				r.Checks = append(r.Checks, check{
					What: fmt.Sprintf("%s: %s req/s ÷ bare req/s", res.scenario, t.target), Value: v, Limit: minThroughput,
					Holds: ok && v >= minThroughput,
				})
			}
		}
	}
	for _, h := range r.Held {
		if h.Target == bench.Bare {
			continue
		}
		// What holding costs is the memory per stream beyond what the bare
		// proxy spends on the same connection (goroutines, socket and bufio
		// buffers: about 62 KiB, 6.6x a 1 KB answer, for any Go proxy).
		// Without a bare row for this size the whole figure is checked.
		bare := r.heldBare(h.Size)
		for _, m := range []struct {
			name    string
			a, base uint64
			floor   float64
		}{{"RSS", h.Held.RSS, h.Base.RSS, bare.rss}, {"live heap", h.Live.HeapAlloc, h.Base.HeapAlloc, bare.heap}} {
			v, ok := ratio(perStream(m.a, m.base, h.holding())-m.floor, float64(h.WireBytes))
			what := fmt.Sprintf("held %s %s: %s per stream over bare ÷ response bytes", h.Target, sizeName(h.Size), m.name)
			if !bare.ok {
				what = fmt.Sprintf("held %s %s: %s per stream ÷ response bytes", h.Target, sizeName(h.Size), m.name)
			}
			ch := check{
				What:  what,
				Value: v, Limit: maxHeldPerStream, Holds: ok && v < maxHeldPerStream && h.Completed == h.Streams,
			}
			if h.Completed != h.Streams {
				ch.Note = fmt.Sprintf("only %d of %d streams completed", h.Completed, h.Streams)
			}
			r.Checks = append(r.Checks, ch)
		}
	}
}

// heldFloor is the bare proxy's memory per held stream of one size.
type heldFloor struct {
	rss, heap float64
	ok        bool
}

func (r *report) heldBare(size int) heldFloor {
	for _, h := range r.Held {
		if h.Target == bench.Bare && h.Size == size {
			return heldFloor{
				rss:  perStream(h.Held.RSS, h.Base.RSS, h.holding()),
				heap: perStream(h.Live.HeapAlloc, h.Base.HeapAlloc, h.holding()),
				ok:   true,
			}
		}
	}
	return heldFloor{}
}

func fmtDur(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d < time.Millisecond:
		s = fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < 10*time.Millisecond:
		s = fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d < time.Second:
		s = fmt.Sprintf("%.1fms", float64(d)/1e6)
	default:
		s = fmt.Sprintf("%.2fs", d.Seconds())
	}
	if neg {
		return "−" + s
	}
	return s
}

func fmtBytes(b float64) string {
	switch {
	case b < 0:
		return "−" + fmtBytes(-b)
	case b < 10<<10:
		return fmt.Sprintf("%.0f B", b)
	case b < 10<<20:
		return fmt.Sprintf("%.1f KiB", b/1024)
	default:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	}
}

func fmtRatio(v float64, ok bool) string {
	if !ok {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", v)
}

// rowSummary is the one-line progress view of a scenario.
func rowSummary(res *scenarioResult) string {
	var b strings.Builder
	for _, t := range []string{bench.Bare, bench.AllowAll, bench.Policy} {
		c := res.Cells[t]
		fmt.Fprintf(&b, " %s +%s/+%s", t, fmtDur(added(res, t, 50)), fmtDur(added(res, t, 99)))
		if c.Errors > 0 {
			fmt.Fprintf(&b, " [%d err]", c.Errors)
		}
	}
	return b.String()
}

// markdown renders the report.
func (r *report) markdown() string {
	var b bytes.Buffer
	m := r.Machine
	fmt.Fprintf(&b, "## hooksbench run %s\n\n", r.Started.Format(time.RFC3339))
	fmt.Fprintf(&b, "Command: `%s`  \n", r.Config.Command)
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), Linux %s, %s; load average %s at start, %s at end.  \n", m.NumCPU, m.CPU, m.Kernel, m.Go, m.LoadStart, m.LoadEnd)
	fmt.Fprintf(&b, "Revision: %s  \n", m.Revision)
	fmt.Fprintf(&b, "Streams carry %d content bytes per event. Matrix %s, held streams %s.\n\n", r.Config.Chunk, r.MatrixTime.Round(time.Second), r.HeldTime.Round(time.Second))

	b.WriteString("### Latency, throughput and cost per request\n\n")
	b.WriteString("Latency is request sent → body fully read, at the client. +p50/+p99 are over direct in the same run. CPU and allocs per request are of the proxy process (for direct: the upstream process); the upstream column is the upstream's CPU per request in every row.\n\n")
	b.WriteString("| scenario | target | requests | errors | p50 | p99 | +p50 | +p99 | req/s | CPU/req | allocs/req | upstream CPU/req |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, res := range r.Scenarios {
		for _, t := range bench.Targets() {
			c := res.Cells[t]
			plus50, plus99 := "—", "—"
			if t != bench.Direct {
				plus50, plus99 = fmtDur(added(res, t, 50)), fmtDur(added(res, t, 99))
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %s | %s | %.0f | %s | %.0f | %s |\n",
				res.scenario, t, c.Requests, c.Errors, fmtDur(c.P50), fmtDur(c.P99), plus50, plus99, c.rps(),
				fmtDur(time.Duration(c.perReq(float64(c.CPU)))), c.perReq(float64(c.Mallocs)),
				fmtDur(time.Duration(c.perReq(float64(c.UpstreamCPU)))))
		}
	}

	b.WriteString("\n### Ratios to the bare ReverseProxy (the floor)\n\n")
	fmt.Fprintf(&b, "Added latency ÷ bare's added latency (targets: allow_all ≤ %.1fx, policy ≤ %.1fx); req/s ÷ bare's (target ≥ %.1fx at the largest concurrency); proxy CPU per request ÷ bare's.\n\n", maxAllowLatency, maxPolicyLatency, minThroughput)
	b.WriteString("| scenario | allow_all +p50 | allow_all +p99 | allow_all req/s | allow_all CPU | policy +p50 | policy +p99 | policy req/s | policy CPU |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, res := range r.Scenarios {
		bare := res.Cells[bench.Bare]
		fmt.Fprintf(&b, "| %s", res.scenario)
		for _, t := range []string{bench.AllowAll, bench.Policy} {
			c := res.Cells[t]
			for _, p := range []int{50, 99} {
				fmt.Fprintf(&b, " | %s", fmtRatio(ratio(float64(added(res, t, p)), float64(added(res, bench.Bare, p)))))
			}
			fmt.Fprintf(&b, " | %s", fmtRatio(ratio(c.rps(), bare.rps())))
			fmt.Fprintf(&b, " | %s", fmtRatio(ratio(c.perReq(float64(c.CPU)), bare.perReq(float64(bare.CPU)))))
		}
		b.WriteString(" |\n")
	}

	if len(r.Held) > 0 {
		b.WriteString("\n### Memory with held streams\n\n")
		b.WriteString("A fresh proxy process per row; the upstream parks every stream just before `data: [DONE]` until all are parked and the proxy is idle. Δ is against the same process warmed and idle. Response bytes = the SSE body one client receives.\n\n")
		b.WriteString("The over-bare columns subtract the bare proxy's figure for the same size: the memory any Go proxy spends per open connection, so what remains is what holding the stream costs.\n\n")
		b.WriteString("Stack Δ/stream is part of RSS Δ and not of the live heap: the goroutines' stacks, after the same GC.\n\n")
		b.WriteString("| target | size | streams | completed | response bytes | RSS Δ/stream | live heap Δ/stream | stack Δ/stream | RSS ÷ response | heap ÷ response | RSS over bare ÷ response | heap over bare ÷ response | goroutines/stream | time to hold all |\n")
		b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, h := range r.Held {
			rss := perStream(h.Held.RSS, h.Base.RSS, h.holding())
			heap := perStream(h.Live.HeapAlloc, h.Base.HeapAlloc, h.holding())
			stack := perStream(h.Live.StackInuse, h.Base.StackInuse, h.holding())
			g := float64(h.Held.Goroutines-h.Base.Goroutines) / float64(h.holding())
			overRSS, overHeap := "—", "—"
			if bare := r.heldBare(h.Size); bare.ok && h.Target != bench.Bare {
				overRSS = fmtRatio(ratio(rss-bare.rss, float64(h.WireBytes)))
				overHeap = fmtRatio(ratio(heap-bare.heap, float64(h.WireBytes)))
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %s |\n", h.Target, sizeName(h.Size), h.Streams, h.Completed,
				fmtBytes(float64(h.WireBytes)), fmtBytes(rss), fmtBytes(heap), fmtBytes(stack),
				fmtRatio(ratio(rss, float64(h.WireBytes))), fmtRatio(ratio(heap, float64(h.WireBytes))), overRSS, overHeap, g, fmtDur(h.HoldTime))
		}
	}

	b.WriteString("\n### Targets\n\n")
	held, total := 0, 0
	for _, c := range r.Checks {
		total++
		if c.Holds {
			held++
		}
	}
	fmt.Fprintf(&b, "%d of %d checks hold.\n\n", held, total)
	b.WriteString("| check | value | limit | holds |\n|---|--:|--:|---|\n")
	for _, c := range r.Checks {
		v := fmt.Sprintf("%.2f", c.Value)
		if c.Note != "" {
			v += " (" + c.Note + ")"
		}
		yes := "yes"
		if !c.Holds {
			yes = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %.1f | %s |\n", c.What, v, c.Limit, yes)
	}
	return b.String()
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hooksproxy/hooksproxy/app"
	"github.com/hooksproxy/hooksproxy/approvals"
	"github.com/hooksproxy/hooksproxy/audit"
	"github.com/hooksproxy/hooksproxy/config"
	"github.com/hooksproxy/hooksproxy/metrics"
	"github.com/hooksproxy/hooksproxy/points"
)

// wiring holds the process-wide pieces that outlive a reload: the metrics
// registry, record sinks, the approval console's queue and each console
// resolver's pending count.
type wiring struct {
	log     *slog.Logger
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	ring    *audit.Ring
	file    *audit.Sink
	sink    *audit.Fanout
	// closeWait bounds close's wait for the sinks (defaultCloseWait).
	closeWait time.Duration
	// recordsToStdout: records.file is the process's standard output, so
	// nothing else may be printed there (the banner goes to stderr).
	recordsToStdout bool

	// held counts the streams the proxy holds back now, for the forced
	// exit's log line (the metrics gauge cannot be read back).
	held atomic.Int64

	mu      sync.Mutex
	console *approvals.Console       // the one approval queue (see queue)
	pending map[string]*atomic.Int64 // per console resolver name (see pendingFor)
}

func newWiring(log *slog.Logger) (*wiring, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg)
	if err != nil {
		return nil, err
	}
	return &wiring{log: log, reg: reg, metrics: m, ring: audit.NewRing(10000), closeWait: defaultCloseWait}, nil
}

// openSinks opens the record file the config names (once per process; a
// reload that changes records.* applies after a restart).
func (w *wiring) openSinks(cfg *config.Config) error {
	sinks := []points.RecordSink{w.ring}
	w.metrics.MemorySinkOpened("ring")
	if cfg.Records.File != "" {
		opts := []audit.Option{audit.WithReporter(w.metrics), audit.WithLogger(w.log), audit.WithRotation(cfg.Records.MaxBytes, cfg.Records.MaxBackups)}
		if cfg.Records.Fsync {
			opts = append(opts, audit.WithSyncWrite())
		}
		if n := cfg.Hooks.RecordsMaxBuffered(); n > 0 {
			// The declaration's in-memory record bound is the file's
			// queue; null keeps the default bound (never none: a stalled
			// disk must not grow memory without limit).
			opts = append(opts, audit.WithQueueSize(n))
		}
		f, err := audit.OpenFile(cfg.Records.File, opts...)
		if err != nil {
			return fmt.Errorf("records.file: %w", err)
		}
		w.file = f
		w.recordsToStdout = isStdout(cfg.Records.File)
		sinks = append(sinks, f)
	}
	w.sink = audit.NewFanout(sinks...)
	return nil
}

func (w *wiring) options(log *slog.Logger) app.Options {
	o := app.Options{Logger: log, Observer: w.metrics, ProxyMetrics: heldCounter{w.metrics, &w.held}, OnReload: func(ok bool, _ error) { w.metrics.ConfigReload(ok) }}
	if w.sink != nil {
		o.Sink = w.sink
	}
	o.Unready = w.unready
	return o
}

// heldCounter is the proxy's metrics, counting held streams on the side.
type heldCounter struct {
	*metrics.Metrics
	n *atomic.Int64
}

// HeldStreams implements proxy.Metrics.
func (h heldCounter) HeldStreams(delta int) {
	h.n.Add(int64(delta))
	h.Metrics.HeldStreams(delta)
}

// unready is why /readyz should answer 503: a record file whose
// synchronous write is past its bound (records are dropped meanwhile).
func (w *wiring) unready() string {
	if w.file != nil && w.file.Stalled() {
		return "record sink stalled"
	}
	return ""
}

// defaultCloseWait bounds how long the exit waits for the record sinks to
// drain: a stalled disk (a hung NFS mount, a FIFO nobody reads) must not
// keep the process from exiting after SIGTERM.
const defaultCloseWait = 10 * time.Second

func (w *wiring) close() {
	if w.sink != nil {
		done := make(chan struct{})
		go func() {
			_ = w.sink.Close()
			close(done)
		}()
		t := time.NewTimer(w.closeWait)
		select {
		case <-done:
		case <-t.C:
			w.log.Error("record sinks did not drain before exit; records still queued are lost", "waited", w.closeWait.String())
		}
		t.Stop()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.console != nil {
		_ = w.console.Close()
	}
}

// logDecision logs each approve or reject with the approver's note: the
// records carry the outcome (resolved_by), the log who said why.
func (w *wiring) logDecision(d approvals.Decision) {
	ident := ""
	if d.ContextIdentity != nil {
		ident = *d.ContextIdentity
	}
	w.log.Info("approval decided", "session", d.SessionID, "id", d.ID, "outcome", d.Outcome, "point", string(d.InterceptionPoint),
		"reason", d.Reason, "context_identity", ident, "note", d.Note)
}

// queue returns the process's one approval queue, creating it on first
// use. Every hooksproxy.console resolver queues into it, so the web page and
// the API show every pending approval, and a reload keeps them decidable.
// The queue itself has no timeout and the largest bound a config may ask
// for: each resolver applies its own timeout and max_pending (see
// consoleResolver).
func (w *wiring) queue() *approvals.Console {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.console == nil {
		w.console = approvals.NewConsole(approvals.ConsoleOptions{MaxPending: approvals.MaxPendingLimit, OnDecision: w.logDecision})
	}
	return w.console
}

// pendingFor is the count of approvals that resolvers named name have
// queued and not yet seen end. It outlives reloads, so approvals queued
// before a reload count towards the new config's max_pending.
func (w *wiring) pendingFor(name string) *atomic.Int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending == nil {
		w.pending = map[string]*atomic.Int64{}
	}
	n := w.pending[name]
	if n == nil {
		n = new(atomic.Int64)
		w.pending[name] = n
	}
	return n
}

// consoleResolver is one hooksproxy.console resolver definition: its own
// timeout and max_pending over the process's shared queue. A reload builds
// a new one from the new config, so changed settings apply to every
// approval queued after the reload; approvals already waiting keep the
// deadline they were queued with and stay decidable.
type consoleResolver struct {
	name    string
	q       *approvals.Console // nil while only validating
	timeout time.Duration      // 0: only approval_resolver_ms bounds the wait
	max     int64
	pending *atomic.Int64
}

var _ config.BoundedResolver = (*consoleResolver)(nil)

func newConsoleResolver(w *wiring, name string, cfg json.RawMessage) (*consoleResolver, error) {
	o, err := approvals.ParseConsoleConfig(cfg)
	if err != nil {
		return nil, err
	}
	r := &consoleResolver{name: name, timeout: o.Timeout, max: int64(o.MaxPending), pending: new(atomic.Int64)}
	if r.max <= 0 {
		r.max = approvals.DefaultMaxPending
	}
	if w != nil {
		r.q, r.pending = w.queue(), w.pendingFor(name)
	}
	return r, nil
}

// ResolverTimeout implements config.BoundedResolver.
func (r *consoleResolver) ResolverTimeout() time.Duration { return r.timeout }

// Resolve queues req and waits for a person, at most the resolver's
// timeout. Every way the wait ends without a decision is an error, which
// the emitter answers with host_error:approval_resolver_failed (§9: a
// resolver that times out).
func (r *consoleResolver) Resolve(ctx context.Context, req points.ApprovalRequest) (points.ApprovalResolution, error) {
	// Each failure carries a payload-free class and cause, so the log and
	// the record say which bound ended the wait.
	if r.q == nil {
		return points.ApprovalResolution{}, approvals.ResolverFailure(approvals.ClassClosed, approvals.ErrClosed)
	}
	if n := r.pending.Add(1); n > r.max {
		r.pending.Add(-1)
		return points.ApprovalResolution{}, approvals.ResolverFailure(approvals.ClassQueueFull,
			fmt.Errorf("%w (resolver %q: max_pending %d reached)", approvals.ErrQueueFull, r.name, r.max))
	}
	defer r.pending.Add(-1)
	wctx := ctx
	if r.timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	res, err := r.q.Resolve(wctx, req)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		err = approvals.ResolverFailure(approvals.ClassTimedOut,
			fmt.Errorf("approvals: resolver %q: no decision within its timeout %s: %w", r.name, r.timeout, context.DeadlineExceeded))
	}
	return res, err
}

// boundedResolver is a resolver whose config sets a timeout of its own
// (hooksproxy.webhook), so loading can check it against the declaration's
// approval_resolver_ms.
type boundedResolver struct {
	points.Resolver
	timeout time.Duration
}

func (b boundedResolver) ResolverTimeout() time.Duration { return b.timeout }

// mount adds the ops and admin routes: metrics, the approval console and
// the record ring.
func (w *wiring) mount(a *app.App, cfg *config.Config) {
	r := a.Server.Router()
	r.Method(http.MethodGet, cfg.Metrics.Path, promhttp.HandlerFor(w.reg, promhttp.HandlerOpts{Registry: w.reg}))
	// The token in force, read per request: a reload may rotate it.
	w.queue().Mount(r, a.Server.AdminToken)
	r.Method(http.MethodGet, "/agent-hooks/v1/records", a.Server.AdminOnly(w.ring))
	w.metrics.ConfigLoaded()
}

// consoleExtra registers the approval resolver kinds: the built-in console
// queue and the webhook. With a nil wiring (validate) consoles are built
// only to check their config and queue nothing.
func consoleExtra(w *wiring) app.Extra {
	return func(r *config.MapRegistry) error {
		if err := r.RegisterResolverKind(kindConsole, func(name string, cfg json.RawMessage) (points.Resolver, error) {
			return newConsoleResolver(w, name, cfg)
		}); err != nil {
			return err
		}
		return r.RegisterResolverKind(kindWebhook, func(_ string, cfg json.RawMessage) (points.Resolver, error) {
			wh, err := approvals.NewWebhook(cfg, app.Getenv, &http.Client{})
			if err != nil {
				return nil, err
			}
			return boundedResolver{Resolver: wh, timeout: webhookTimeout(cfg)}, nil
		})
	}
}

// isStdout reports whether path names the process's standard output.
func isStdout(path string) bool {
	switch filepath.Clean(path) {
	case "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1":
		return true
	}
	return false
}

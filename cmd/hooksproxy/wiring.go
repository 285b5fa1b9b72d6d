package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

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
// registry, record sinks and the approval console's queue.
type wiring struct {
	log     *slog.Logger
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	ring    *audit.Ring
	file    *audit.Sink
	sink    *audit.Fanout

	mu      sync.Mutex
	console *approvals.Console
}

func newWiring(log *slog.Logger) (*wiring, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg)
	if err != nil {
		return nil, err
	}
	return &wiring{log: log, reg: reg, metrics: m, ring: audit.NewRing(10000)}, nil
}

// openSinks opens the record file the config names (once per process; a
// reload that changes records.* applies after a restart).
func (w *wiring) openSinks(cfg *config.Config) error {
	sinks := []points.RecordSink{w.ring}
	if cfg.Records.File != "" {
		opts := []audit.Option{audit.WithReporter(w.metrics), audit.WithLogger(w.log), audit.WithRotation(cfg.Records.MaxBytes, cfg.Records.MaxBackups)}
		if cfg.Records.Fsync {
			opts = append(opts, audit.WithSyncWrite())
		}
		f, err := audit.OpenFile(cfg.Records.File, opts...)
		if err != nil {
			return fmt.Errorf("records.file: %w", err)
		}
		w.file = f
		sinks = append(sinks, f)
	}
	w.sink = audit.NewFanout(sinks...)
	return nil
}

func (w *wiring) options(log *slog.Logger) app.Options {
	o := app.Options{Logger: log, Observer: w.metrics, ProxyMetrics: w.metrics, OnReload: func(ok bool, _ error) { w.metrics.ConfigReload(ok) }}
	if w.sink != nil {
		o.Sink = w.sink
	}
	return o
}

func (w *wiring) close() {
	if w.sink != nil {
		_ = w.sink.Close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.console != nil {
		_ = w.console.Close()
	}
}

// consoleFor returns the process's one approval queue, built from the first
// console definition seen; every hooksproxy.console resolver shares it, so
// the web page shows every pending approval and a reload keeps them.
func (w *wiring) consoleFor(cfg json.RawMessage) (*approvals.Console, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.console != nil {
		if _, err := approvals.ParseConsoleConfig(cfg); err != nil {
			return nil, err
		}
		return w.console, nil
	}
	c, err := approvals.NewConsoleFromConfig(cfg)
	if err != nil {
		return nil, err
	}
	w.console = c
	return c, nil
}

// mount adds the ops and admin routes: metrics, the approval console and
// the record ring.
func (w *wiring) mount(a *app.App, cfg *config.Config) {
	r := a.Server.Router()
	token := func() string { return app.Getenv(cfg.Admin.TokenEnv) }
	r.Method(http.MethodGet, cfg.Metrics.Path, promhttp.HandlerFor(w.reg, promhttp.HandlerOpts{Registry: w.reg}))
	w.mu.Lock()
	if w.console == nil {
		w.console = approvals.NewConsole(approvals.ConsoleOptions{})
	}
	c := w.console
	w.mu.Unlock()
	c.Mount(r, token)
	r.Method(http.MethodGet, "/agent-hooks/v1/records", a.Server.AdminOnly(w.ring))
	w.metrics.ConfigReload(true)
}

// consoleExtra registers the approval resolver kinds: the built-in console
// queue and the webhook. With a nil wiring (validate) consoles are built
// only to check their config.
func consoleExtra(w *wiring) app.Extra {
	return func(r *config.MapRegistry) error {
		if err := r.RegisterResolverKind("hooksproxy.console", func(_ string, cfg json.RawMessage) (points.Resolver, error) {
			if w == nil {
				return approvals.NewConsoleFromConfig(cfg)
			}
			return w.consoleFor(cfg)
		}); err != nil {
			return err
		}
		return r.RegisterResolverKind("hooksproxy.webhook", func(_ string, cfg json.RawMessage) (points.Resolver, error) {
			return approvals.NewWebhook(cfg, app.Getenv, &http.Client{})
		})
	}
}

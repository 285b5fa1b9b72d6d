package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hooksproxy/hooksproxy/config"
	"github.com/hooksproxy/hooksproxy/points"
	"github.com/hooksproxy/hooksproxy/proxy"
)

// Options are the process-level parts the config file does not name.
type Options struct {
	Logger *slog.Logger
	Env    Env
	// Sink receives records besides the configured file (tests, the ring).
	Sink points.RecordSink
	// Observer receives emission metrics.
	Observer points.Observer
	// ProxyMetrics receives upstream, held-stream, session and token metrics.
	ProxyMetrics proxy.Metrics
	// Extra registers additional kinds (approval console, conformance kit).
	Extra []Extra
	// OnReload is told of every reload attempt.
	OnReload func(ok bool, err error)
	// Unready says why /readyz should answer 503 now ("" when not).
	Unready func() string
	// Warnings lists what a loaded config asks for that works, but not as
	// written (serve's own checks beside the config's); a reload logs
	// them as serve does at start. Nil logs the config's own warnings.
	Warnings func(*config.Config) []config.Problem
}

// App is a configured, running hooksproxy.
type App struct {
	opts   Options
	path   string
	mu     sync.Mutex
	cfg    *config.Config
	Server *proxy.Server
	log    *slog.Logger
	// limits are the ones the server started with, in force until a
	// restart; reloading serializes Reload. started is the config the
	// process started with: what reloads cannot change is compared to it,
	// so every reload that still differs there says so.
	limits    config.Limits
	started   *config.Config
	reloading sync.Mutex
}

// Load reads and validates the config file at path.
func Load(path string, opts Options, extra ...Extra) (*config.Config, error) {
	reg, err := NewRegistry(opts.Env, append(opts.Extra, extra...)...)
	if err != nil {
		return nil, err
	}
	return config.Load(path, reg)
}

// Parse validates config bytes (name is used in problem messages).
func Parse(data []byte, name string, opts Options) (*config.Config, error) {
	reg, err := NewRegistry(opts.Env, opts.Extra...)
	if err != nil {
		return nil, err
	}
	return config.Parse(data, name, reg)
}

// Emitter builds the emitter a config declares.
func Emitter(cfg *config.Config, opts Options) (*points.Emitter, error) {
	return emitterWith(cfg, opts, cfg.Limits)
}

// emitterWith is Emitter with the limits in force (a reload keeps the ones
// the server started with, and the context bound with them).
func emitterWith(cfg *config.Config, opts Options, limits config.Limits) (*points.Emitter, error) {
	ec := cfg.Hooks.EmitterConfig()
	ec.Sink = opts.Sink
	ec.Observer = opts.Observer
	ec.Logger = opts.Logger
	ec.Targets = proxy.WriteBack{}
	ec.HostMembers = cfg.Records.HostMembers
	ec.MaxContextBytes = int(limits.ContextBytes())
	em, err := points.NewEmitter(ec)
	if err != nil {
		return nil, err
	}
	if bo, ok := opts.Observer.(BindingsObserver); ok {
		bo.BindingsLoaded(ec.Bindings)
	}
	return em, nil
}

// sinkOf is the part of records that the sink, built at start, uses;
// host_members is the emitter's, which a reload rebuilds.
func sinkOf(r config.Records) config.Records {
	r.HostMembers = false
	return r
}

// BindingsObserver is told of the bindings each loaded configuration
// dispatches (metrics start their failure counters at zero).
type BindingsObserver interface {
	BindingsLoaded([]points.Binding)
}

// New builds the proxy for cfg; path, when set, is the file Reload re-reads.
func New(cfg *config.Config, path string, opts Options) (*App, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Env = opts.Env.withDefaults()
	em, err := Emitter(cfg, opts)
	if err != nil {
		return nil, err
	}
	up, err := url.Parse(cfg.Upstream.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("upstream.base_url: %w", err)
	}
	var key string
	if cfg.Upstream.APIKeyEnv != "" {
		if key = opts.Env.Getenv(cfg.Upstream.APIKeyEnv); key == "" {
			return nil, fmt.Errorf("upstream.api_key_env: env var %s is unset or empty", config.ShownEnvName(cfg.Upstream.APIKeyEnv))
		}
	}
	srv := proxy.New(proxy.Options{
		Upstream:                 up,
		APIKey:                   key,
		UpstreamTimeout:          cfg.Upstream.Timeout,
		Agent:                    points.Agent{ID: cfg.Agent.ID, Framework: cfg.Agent.Framework},
		SessionHeader:            cfg.Sessions.Header,
		AllowAgentHeader:         cfg.Agent.AllowHeaderOverride,
		IdleTimeout:              cfg.Sessions.IdleTimeout,
		MaxSessions:              cfg.Sessions.MaxSessions,
		MaxRequestBytes:          cfg.Limits.MaxRequestBytes,
		MaxBufferedResponseBytes: cfg.Limits.MaxBufferedResponseBytes,
		MaxTotalBufferedBytes:    cfg.Limits.MaxTotalBufferedBytes,
		Passthrough:              cfg.Passthrough,
		TransparentToolSeam:      cfg.ToolSeam.Transparent,
		MaxAutoTurns:             cfg.ToolSeam.MaxAutoTurns,
		ToolSeamHostError:        cfg.Hooks.Posture(),
		AdminToken:               func() string { return opts.Env.Getenv(cfg.Admin.TokenEnv) },
		Logger:                   opts.Logger,
		Metrics:                  opts.ProxyMetrics,
		Unready:                  opts.Unready,
		Emitter:                  em,
	})
	return &App{opts: opts, path: path, cfg: cfg, started: cfg, Server: srv, log: opts.Logger, limits: cfg.Limits}, nil
}

// settingsOf is what of cfg a reload applies to a running server.
func settingsOf(cfg *config.Config, opts Options) proxy.Settings {
	tokenEnv := cfg.Admin.TokenEnv
	return proxy.Settings{
		Agent:               points.Agent{ID: cfg.Agent.ID, Framework: cfg.Agent.Framework},
		AllowAgentHeader:    cfg.Agent.AllowHeaderOverride,
		Passthrough:         cfg.Passthrough,
		TransparentToolSeam: cfg.ToolSeam.Transparent,
		MaxAutoTurns:        cfg.ToolSeam.MaxAutoTurns,
		ToolSeamHostError:   cfg.Hooks.Posture(),
		AdminToken:          func() string { return opts.Env.Getenv(tokenEnv) },
	}
}

// Config returns the config in force.
func (a *App) Config() *config.Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg
}

// ErrRestartNeeded marks a reload that changed settings only a restart applies.
var ErrRestartNeeded = errors.New("changed settings apply only after a restart")

// Reload re-reads the config file, validates it whole and swaps the new
// policies in atomically. A bad file keeps the running config. Requests
// already in flight finish on the emitter they started with.
func (a *App) Reload() error {
	// The file watch and SIGHUP may both ask at once: one reload at a time.
	a.reloading.Lock()
	defer a.reloading.Unlock()
	cfg, err := Load(a.path, a.opts)
	if err == nil {
		var em *points.Emitter
		if em, err = emitterWith(cfg, a.opts, a.limits); err == nil {
			a.mu.Lock()
			a.cfg = cfg
			a.mu.Unlock()
			a.Server.Apply(em, settingsOf(cfg, a.opts))
			if changed := restartOnly(a.started, cfg); len(changed) > 0 {
				a.log.Warn("config reloaded; listen, upstream, sessions, limits, metrics and records changes apply only after a restart",
					"changed", strings.Join(changed, ", "))
			}
			warns := cfg.Warnings
			if a.opts.Warnings != nil {
				warns = a.opts.Warnings(cfg)
			}
			for _, pr := range warns {
				a.log.Warn(pr.Msg, "config", a.path, "line", pr.Line, "path", pr.Path)
			}
		}
	}
	if a.opts.OnReload != nil {
		a.opts.OnReload(err == nil, err)
	}
	if err != nil {
		// Each problem on a line of its own, as at startup: joined, a few
		// of them pass the log's bound on one string and read as elided.
		var ps *config.Problems
		if errors.As(err, &ps) && len(ps.List) > 0 {
			for _, pr := range ps.List {
				a.log.Error("config problem", "file", ps.File, "line", pr.Line, "key", pr.Path, "problem", pr.Msg)
			}
			a.log.Error("config reload refused; the previous config stays in force", "file", ps.File, "problems", len(ps.List))
			return err
		}
		a.log.Error("config reload refused; the previous config stays in force", "error", err.Error())
		return err
	}
	a.log.Info("config reloaded", "path", a.path)
	return nil
}

func maxBuffered(c *config.Config) int {
	if c.Hooks == nil {
		return 0
	}
	return c.Hooks.RecordsMaxBuffered()
}

// restartOnly names the sections that differ from the config the process
// started with and that only a restart applies.
func restartOnly(old, cfg *config.Config) []string {
	var out []string
	for _, c := range []struct {
		name string
		diff bool
	}{
		{"listen", old.Listen != cfg.Listen},
		{"upstream", old.Upstream != cfg.Upstream},
		{"sessions", old.Sessions != cfg.Sessions},
		{"limits", old.Limits != cfg.Limits},
		{"metrics", old.Metrics != cfg.Metrics},
		{"records", sinkOf(old.Records) != sinkOf(cfg.Records)},
		// The record file's queue is sized when it opens.
		{"hooks.configuration.records.max_buffered", maxBuffered(old) != maxBuffered(cfg)},
	} {
		if c.diff {
			out = append(out, c.name)
		}
	}
	return out
}

// Watch reloads on every change of the file's size or modification time,
// or when another file took its name (a copy that kept both, cp -p or
// rsync -t, renamed into place), polling every interval, until ctx ends.
// Polling works on every platform and for editors that replace the file.
func (a *App) Watch(ctx context.Context, interval time.Duration) {
	last, _ := os.Stat(a.path)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fi, err := os.Stat(a.path)
			if err != nil {
				continue // gone for now (mid-replace): the next look sees it
			}
			if last != nil && fi.ModTime().Equal(last.ModTime()) && fi.Size() == last.Size() && os.SameFile(fi, last) {
				continue
			}
			last = fi
			_ = a.Reload()
		}
	}
}

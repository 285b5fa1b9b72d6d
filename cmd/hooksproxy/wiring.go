package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"

	"github.com/hooksproxy/hooksproxy/app"
	"github.com/hooksproxy/hooksproxy/approvals"
	"github.com/hooksproxy/hooksproxy/config"
	"github.com/hooksproxy/hooksproxy/points"
)

// wiring holds the process-wide pieces that outlive a reload: record
// sinks, metrics and the approval console's queue.
type wiring struct {
	log  *slog.Logger
	ring *points.MemorySink

	mu      sync.Mutex
	console *approvals.Console
}

func newWiring(log *slog.Logger) *wiring {
	return &wiring{log: log, ring: points.NewMemorySink(10000)}
}

func (w *wiring) options(log *slog.Logger) app.Options {
	return app.Options{Logger: log, Sink: w.ring}
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

// mount adds the admin routes: the approval console and the record ring.
func (w *wiring) mount(a *app.App, cfg *config.Config) {
	r := a.Server.Router()
	token := func() string { return app.Getenv(cfg.Admin.TokenEnv) }
	w.mu.Lock()
	c := w.console
	w.mu.Unlock()
	if c == nil {
		c = approvals.NewConsole(approvals.ConsoleOptions{})
		w.mu.Lock()
		w.console = c
		w.mu.Unlock()
	}
	c.Mount(r, token)
	r.Method(http.MethodGet, "/agent-hooks/v1/records", a.Server.AdminOnly(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		sid := req.URL.Query().Get("session")
		out := []*points.Record{}
		for _, rec := range w.ring.Records() {
			if sid == "" || rec.SessionID == sid {
				out = append(out, rec)
			}
		}
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(map[string]any{"records": out})
	})))
}

// consoleExtra registers the approval resolver kinds: the built-in console
// queue and the webhook.
func consoleExtra(w *wiring) app.Extra {
	return func(r *config.MapRegistry) error {
		if err := r.RegisterResolverKind("hooksproxy.console", func(_ string, cfg json.RawMessage) (points.Resolver, error) {
			if w == nil { // validate only
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

package main

import (
	"log/slog"

	"github.com/hooksproxy/hooksproxy/app"
	"github.com/hooksproxy/hooksproxy/config"
	"github.com/hooksproxy/hooksproxy/points"
)

// wiring holds the process-wide pieces shared across reloads: record sinks,
// metrics and the approval console.
type wiring struct {
	log  *slog.Logger
	ring *points.MemorySink
}

func newWiring(log *slog.Logger) *wiring {
	return &wiring{log: log, ring: points.NewMemorySink(10000)}
}

func (w *wiring) options(log *slog.Logger) app.Options {
	return app.Options{Logger: log, Sink: w.ring}
}

// mount adds the ops and admin routes to the server.
func (w *wiring) mount(a *app.App, cfg *config.Config) {}

// consoleExtra registers the approval console resolver kind.
func consoleExtra(w *wiring) app.Extra {
	return func(r *config.MapRegistry) error { return nil }
}

// Command hooksproxy is an AGENT-HOOKS-0.1 governance proxy for
// OpenAI-compatible model APIs.
//
//	hooksproxy [serve] --config hooksproxy.yaml
//	hooksproxy validate --config hooksproxy.yaml
//	hooksproxy demo
//	hooksproxy conformance [--vectors DIR] [--json]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hooksproxy/hooksproxy/app"
	"github.com/hooksproxy/hooksproxy/audit"
	"github.com/hooksproxy/hooksproxy/config"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: hooksproxy <command> [flags]

commands:
  serve        run the proxy (default)
  validate     check a config file and the flags serve would use; list every problem, exit 1 if any
  demo         run with an embedded scripted upstream and example policies (no API key)
  conformance  run the AGENT-HOOKS conformance vectors end to end over HTTP
               [--vectors DIR] [--json] [--seam host-api|transparent|both] [--wire plain|stream|both]
  version      print the version (also --version, -v)
  help         print this text

serve and validate flags (each also read from its environment variable):
  --config FILE          HOOKSPROXY_CONFIG
  --listen HOST:PORT     HOOKSPROXY_LISTEN      overrides the config's listen
  --log-format text|json HOOKSPROXY_LOG_FORMAT  (default text)
  --log-level LEVEL      HOOKSPROXY_LOG_LEVEL   debug, info, warn, error (default info)
  --shutdown-delay D     HOOKSPROXY_SHUTDOWN_DELAY  on SIGTERM, /readyz answers 503 for D before
                                                the listener closes (default 0s, at most 10m)

"hooksproxy <command> --help" lists a command's flags.
`

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help"):
		cmd, args = "help", nil
	case len(args) > 0 && (args[0] == "-v" || args[0] == "-version" || args[0] == "--version"):
		cmd, args = "version", args[1:]
	case len(args) > 0 && !strings.HasPrefix(args[0], "-"):
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(args, stdout, stderr)
	case "validate":
		return validate(args, stdout, stderr)
	case "demo":
		return demo(args, stdout, stderr)
	case "conformance":
		return conformance(args, stdout, stderr)
	case "version":
		if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			fmt.Fprintln(stdout, "usage: hooksproxy version (also --version, -v): print the version and revision")
			return 0
		}
		if len(args) > 0 {
			fmt.Fprintf(stderr, "hooksproxy version: unexpected argument %q\n", args[0])
			return 2
		}
		fmt.Fprintln(stdout, "hooksproxy", buildVersion())
		return 0
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "hooksproxy: unknown command %q\n\n%s", cmd, usage)
	return 2
}

type commonFlags struct {
	config    string
	logFormat string
	logLevel  string
	listen    string
	// shutdownDelay is serve's --shutdown-delay (validate checks the
	// environment's value).
	shutdownDelay string
}

// maxShutdownDelay bounds --shutdown-delay.
const maxShutdownDelay = 10 * time.Minute

// registerShutdown adds --shutdown-delay (env HOOKSPROXY_SHUTDOWN_DELAY).
func (c *commonFlags) registerShutdown(fs *flag.FlagSet, usage string) {
	fs.StringVar(&c.shutdownDelay, "shutdown-delay", envOr("HOOKSPROXY_SHUTDOWN_DELAY", "0s"), usage+" (env HOOKSPROXY_SHUTDOWN_DELAY)")
}

// drainDelay is the parsed --shutdown-delay.
func (c *commonFlags) drainDelay() (time.Duration, error) {
	if c.shutdownDelay == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(c.shutdownDelay)
	if err != nil || d < 0 || d > maxShutdownDelay {
		return 0, fmt.Errorf("--shutdown-delay (env HOOKSPROXY_SHUTDOWN_DELAY) %q: must be a duration from 0s to 10m, such as 5s", c.shutdownDelay)
	}
	return d, nil
}

// register adds --config and the log flags.
func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", os.Getenv("HOOKSPROXY_CONFIG"), "config file (env HOOKSPROXY_CONFIG)")
	c.registerLog(fs, "info")
}

// registerLog adds --log-format and --log-level, whose default is level.
func (c *commonFlags) registerLog(fs *flag.FlagSet, level string) {
	fs.StringVar(&c.logFormat, "log-format", envOr("HOOKSPROXY_LOG_FORMAT", "text"), "log format: text or json (env HOOKSPROXY_LOG_FORMAT)")
	fs.StringVar(&c.logLevel, "log-level", envOr("HOOKSPROXY_LOG_LEVEL", level), "log level: debug, info, warn, error (env HOOKSPROXY_LOG_LEVEL)")
}

// registerListen adds --listen (env HOOKSPROXY_LISTEN) with default def.
func (c *commonFlags) registerListen(fs *flag.FlagSet, def, usage string) {
	fs.StringVar(&c.listen, "listen", envOr("HOOKSPROXY_LISTEN", def), usage+" (env HOOKSPROXY_LISTEN)")
}

// check reports every flag (or environment variable) value that serve
// would refuse, so validate and serve agree on them.
func (c *commonFlags) check() []error {
	var errs []error
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level (env HOOKSPROXY_LOG_LEVEL) %q: must be debug, info, warn or error", c.logLevel))
	}
	if _, err := audit.NewLogHandler(io.Discard, c.logFormat, slog.LevelInfo); err != nil {
		errs = append(errs, fmt.Errorf("--log-format (env HOOKSPROXY_LOG_FORMAT) %q: must be text or json", c.logFormat))
	}
	if c.listen != "" {
		if err := config.CheckListen(c.listen); err != nil {
			errs = append(errs, fmt.Errorf("--listen (env HOOKSPROXY_LISTEN) %q: %w", c.listen, err))
		}
	}
	if _, err := c.drainDelay(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// flagArgs names the value each flag takes in --help.
var flagArgs = map[string]string{
	"config": "FILE", "listen": "HOST:PORT", "log-format": "text|json", "log-level": "LEVEL",
	"shutdown-delay": "DURATION", "vectors": "DIR", "seam": "SEAM", "wire": "WIRE",
}

// setUsage makes fs's --help print what the command does and its flags
// in the form they are documented (--name VALUE), not the flag package's
// default dump.
func setUsage(fs *flag.FlagSet, what string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: hooksproxy %s [flags]\n\n%s\n\nflags:\n", fs.Name(), what)
		fs.VisitAll(func(f *flag.Flag) {
			arg, usage := flag.UnquoteUsage(f)
			name := "--" + f.Name
			if a, ok := flagArgs[f.Name]; ok && arg != "" {
				name += " " + a
			} else if arg != "" {
				name += " " + strings.ToUpper(arg)
			}
			def := ""
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0s" {
				def = " (default " + f.DefValue + ")"
			}
			if len(name) > 22 {
				fmt.Fprintf(w, "  %s\n  %-22s %s%s\n", name, "", usage, def)
				return
			}
			fmt.Fprintf(w, "  %-22s %s%s\n", name, usage, def)
		})
	}
}

// parseFlags parses args. stop is true when the command must end here with
// exit code code: 0 after -h (the flags are printed), 2 for a bad flag.
func parseFlags(fs *flag.FlagSet, args []string) (code int, stop bool) {
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		return 0, true
	case err != nil:
		return 2, true
	}
	return 0, false
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func (c *commonFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level (env HOOKSPROXY_LOG_LEVEL): %w", err)
	}
	// The audit handler redacts payload-shaped attributes, so a careless
	// log call cannot leak a denied payload.
	h, err := audit.NewLogHandler(w, c.logFormat, lvl)
	if err != nil {
		return nil, fmt.Errorf("--log-format (env HOOKSPROXY_LOG_FORMAT): %w", err)
	}
	return slog.New(h), nil
}

func validate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, "Checks a config file, and the flags serve would use with it, and lists every problem\nwith its file, line and key. Exit status 0: it would load; 1: it would not.")
	var c commonFlags
	c.register(fs)
	c.registerListen(fs, "", "the listen address serve would use instead of the config's")
	c.registerShutdown(fs, "the shutdown delay serve would use")
	if code, stop := parseFlags(fs, args); stop {
		return code
	}
	rest := fs.Args()
	if c.config == "" && len(rest) > 0 {
		c.config, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "hooksproxy validate: unexpected argument %q (one config file, as --config FILE)\n", rest[0])
		return 2
	}
	if c.config == "" {
		fmt.Fprintln(stderr, "hooksproxy validate: --config FILE (or HOOKSPROXY_CONFIG) is required")
		return 2
	}
	// Every problem at once: the flags and environment serve would refuse,
	// then the config's own.
	n := 0
	for _, err := range c.check() {
		fmt.Fprintln(stderr, "hooksproxy validate:", err)
		n++
	}
	cfg, err := app.Load(c.config, app.Options{}, consoleExtra(nil), envExtra(app.Getenv), checkFiles)
	if err != nil {
		var ps *config.Problems
		if errors.As(err, &ps) {
			fmt.Fprintln(stderr, ps.Error())
			n += len(ps.List)
		} else {
			fmt.Fprintf(stderr, "%s: %v\n", c.config, err)
			n++
		}
	} else if warns := approvalWarnings(cfg, app.Getenv); len(warns) > 0 {
		fmt.Fprintln(stderr, (&config.Problems{File: c.config, List: warns}).Error())
	}
	if n > 0 {
		fmt.Fprintf(stderr, "%s: %d problem(s)\n", c.config, n)
		return 1
	}
	n = len(cfg.Hooks.Bindings())
	noun := "bindings"
	if n == 1 {
		noun = "binding"
	}
	fmt.Fprintf(stdout, "%s: ok (%d %s, mode %s, profile %s)\n", c.config, n, noun, cfg.Hooks.Mode(), cfg.Hooks.Composition().Profile)
	return 0
}

func serve(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, "Runs the proxy with the config file's policies (the default command). SIGHUP, or a\nchange of the file, reloads it; SIGTERM or SIGINT shuts down gracefully.")
	var c commonFlags
	c.register(fs)
	c.registerListen(fs, "", "override the config's listen address")
	c.registerShutdown(fs, "on SIGTERM, keep accepting requests this long with /readyz answering 503, so load balancers stop routing here before the listener closes")
	if code, stop := parseFlags(fs, args); stop {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "hooksproxy serve: unexpected argument %q (the config file is --config FILE)\n", fs.Arg(0))
		return 2
	}
	if errs := c.check(); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(stderr, "hooksproxy:", err)
		}
		return 2
	}
	log, err := c.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "hooksproxy:", err)
		return 2
	}
	if c.config == "" {
		fmt.Fprintln(stderr, "hooksproxy serve: --config FILE (or HOOKSPROXY_CONFIG) is required; try `hooksproxy demo`")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rt, err := startRuntime(ctx, c.config, c.listen, log, nil)
	if err != nil {
		if strings.EqualFold(c.logFormat, "json") {
			// stderr is a JSON log stream: the failure is one of its
			// lines, each config problem an element of its own.
			var ps *config.Problems
			if errors.As(err, &ps) {
				for _, pr := range ps.List {
					log.Error("config problem", "file", ps.File, "line", pr.Line, "key", pr.Path, "problem", pr.Msg)
				}
				log.Error("hooksproxy could not start: the config has problems", "file", ps.File, "problems", len(ps.List))
			} else {
				log.Error("hooksproxy could not start", "error", err.Error())
			}
			return 1
		}
		// As validate prints them: one problem a line, then the count.
		var ps *config.Problems
		if errors.As(err, &ps) {
			fmt.Fprintln(stderr, ps.Error())
			fmt.Fprintf(stderr, "%s: %d problem(s); hooksproxy did not start\n", ps.File, len(ps.List))
			return 1
		}
		fmt.Fprintln(stderr, "hooksproxy:", err)
		return 1
	}
	announce(stdout, stderr, log, strings.EqualFold(c.logFormat, "json"), rt.wiring.recordsToStdout, rt.addr)
	rt.drainDelay, _ = c.drainDelay() // checked above (c.check)
	rt.stopSignals, rt.forceSignals = stop, notifyForce
	return rt.wait(ctx)
}

// announce says where the proxy listens: a text banner for a person, or,
// with JSON logs, a log line with the same facts as attributes, so that
// the log stream stays JSON lines only.
func announce(stdout, stderr io.Writer, log *slog.Logger, jsonLogs, recordsToStdout bool, addr string) {
	if jsonLogs {
		// At the lowest level the logger writes, from info up: the
		// address is printed at any --log-level, as the banner was.
		ctx, level := context.Background(), slog.LevelInfo
		for level < slog.LevelError && !log.Enabled(ctx, level) {
			level += 4
		}
		log.Log(ctx, level, "hooksproxy listening", "url", "http://"+addr, "openai_base_url", "http://"+addr+"/v1")
		return
	}
	banner := stdout
	if recordsToStdout {
		banner = stderr // stdout carries JSON lines only
	}
	fmt.Fprintf(banner, "hooksproxy listening on http://%s (OPENAI_BASE_URL=http://%s/v1)\n", addr, addr)
}

// runtime is a serving process: listener, HTTP server, app and reload.
type runtime struct {
	addr   string
	app    *app.App
	hs     *http.Server
	done   chan error
	log    *slog.Logger
	stop   func()
	wiring *wiring
	// drainDelay is how long a shutdown keeps serving with /readyz at 503
	// before it closes the listener.
	drainDelay time.Duration
	// stopSignals, when set, stops the first SIGINT/SIGTERM's handler once
	// a shutdown began.
	stopSignals func()
	// forceSignals, when set, catches the signals after the first: one of
	// them ends the shutdown at once, with a log line saying what it
	// abandons (see forced).
	forceSignals func() <-chan os.Signal
	// inFlight counts the requests being served.
	inFlight atomic.Int64
}

func startRuntime(ctx context.Context, path, listenOverride string, log *slog.Logger, extra []app.Extra) (*runtime, error) {
	wiring, err := newWiring(log)
	if err != nil {
		return nil, err
	}
	base := app.Options{Logger: log, Extra: append(extra, consoleExtra(wiring), envExtra(app.Getenv))}
	// The first load checks the files the config names, as validate does,
	// so that serve refuses with the same list of problems; reloads do not
	// (a records file that changes needs a restart anyway, and its state
	// must not hold back a policy change).
	first := base
	first.Extra = append(slices.Clip(base.Extra), checkFiles)
	cfg, err := app.Load(path, first)
	if err != nil {
		return nil, err
	}
	// What validate warns about, serve logs: the config is valid, but
	// approvals would not work as written.
	for _, pr := range approvalWarnings(cfg, app.Getenv) {
		log.Warn(pr.Msg, "config", path, "line", pr.Line, "path", pr.Path)
	}
	if err := wiring.openSinks(cfg); err != nil {
		return nil, err
	}
	opts := wiring.options(log)
	opts.Extra = base.Extra
	opts.Warnings = func(c *config.Config) []config.Problem { return approvalWarnings(c, app.Getenv) }
	a, err := app.New(cfg, path, opts)
	if err != nil {
		wiring.close()
		return nil, err
	}
	wiring.mount(a, cfg)
	addr := cfg.Listen
	if listenOverride != "" {
		addr = listenOverride
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	// IdleTimeout closes keep-alive connections no request uses, so idle
	// clients cannot hold descriptors forever; the request body and the
	// held answer have deadlines of their own (proxy), since a whole-
	// request ReadTimeout or WriteTimeout would cut long model calls.
	hs := &http.Server{Handler: a.Server, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// Requests a timed-out shutdown leaves running are cancelled by
		// the proxy's Close, before their sessions end.
		BaseContext: a.Server.BaseContext}
	rt := &runtime{addr: ln.Addr().String(), app: a, hs: hs, done: make(chan error, 1), log: log, wiring: wiring}
	hs.Handler = rt.countRequests(a.Server)
	a.Server.Start()
	wctx, cancel := context.WithCancel(ctx)
	rt.stop = cancel
	go a.Watch(wctx, time.Second)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-wctx.Done():
				// hup stays registered (not signal.Stop): SIGHUP's
				// default action ends the process, and one sent while
				// the shutdown drains (logrotate, systemctl reload)
				// would cut the requests in flight and lose their
				// records. Unread, later ones are dropped.
				return
			case <-hup:
				_ = a.Reload()
			}
		}
	}()
	go func() { rt.done <- hs.Serve(ln) }()
	log.Info("hooksproxy started", "listen", rt.addr, "upstream", cfg.Upstream.BaseURL, "mode", cfg.Hooks.Mode(), "bindings", len(cfg.Hooks.Bindings()))
	return rt, nil
}

// wait serves until ctx ends, then shuts down gracefully: in-flight requests
// finish, then open sessions get agent_shutdown{cancelled}. A further
// signal (forceSignals) during the shutdown ends it at once, saying so.
func (rt *runtime) wait(ctx context.Context) int {
	select {
	case err := <-rt.done:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			rt.log.Error("server failed", "error", err)
			return 1
		}
	case <-ctx.Done():
		var force <-chan os.Signal
		if rt.forceSignals != nil {
			// Caught before the first signal's handler stops, so a second
			// one is never left to its default action (a silent exit).
			force = rt.forceSignals()
		}
		if rt.stopSignals != nil {
			rt.stopSignals()
		}
		// Not ready from the first moment of the shutdown; with a delay,
		// the listener stays open meanwhile so that load balancers see
		// the 503 rather than a refused connection.
		rt.app.Server.Drain()
		if rt.drainDelay <= 0 {
			rt.log.Info("shutting down: requests in flight finish (up to 30s), then open sessions end (a second signal ends the process now)")
		}
		if rt.drainDelay > 0 {
			rt.log.Info("shutting down: /readyz answers 503; serving on until the listener closes (a second signal ends the process now)", "delay", rt.drainDelay.String())
			t := time.NewTimer(rt.drainDelay)
			defer t.Stop()
			select {
			case <-t.C:
			case sig := <-force:
				return rt.forced(sig)
			case err := <-rt.done:
				if err != nil && !errors.Is(err, http.ErrServerClosed) {
					rt.log.Error("server failed", "error", err)
					rt.stop()
					rt.app.Server.Close()
					rt.wiring.close()
					return 1
				}
			}
		}
		finished := make(chan int, 1)
		go func() { finished <- rt.shutdown() }()
		select {
		case code := <-finished:
			return code
		case sig := <-force:
			return rt.forced(sig)
		}
	}
	return rt.shutdown()
}

// shutdown closes the listener, lets requests in flight finish (up to
// 30s), ends open sessions and drains the record sinks.
func (rt *runtime) shutdown() int {
	rt.stop()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = rt.hs.Shutdown(sctx)
	rt.app.Server.Close()
	rt.wiring.close()
	rt.log.Info("hooksproxy stopped")
	return 0
}

// forced logs a shutdown cut short by sig, with what it leaves behind,
// and returns the exit status: 128+signal, as a shell reports a process
// the signal ended.
func (rt *runtime) forced(sig os.Signal) int {
	rt.log.Error("forced exit: a second signal ended the shutdown; requests in flight are cut, open sessions get no agent_shutdown record, held streams are dropped and records still queued are lost",
		"signal", sig.String(), "requests_in_flight", rt.inFlight.Load(), "sessions", rt.app.Server.Sessions(), "held_streams", rt.wiring.held.Load())
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// notifyForce catches SIGINT and SIGTERM on a channel of its own: a
// runtime's forceSignals in a process that owns its signals.
func notifyForce() <-chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	return ch
}

// countRequests counts the requests h is serving in rt.inFlight.
func (rt *runtime) countRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt.inFlight.Add(1)
		defer rt.inFlight.Add(-1)
		h.ServeHTTP(w, r)
	})
}

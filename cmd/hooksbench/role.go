package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/hooksproxy/hooksproxy/bench"
)

// Roles a child process can play; each one is a separate process so that
// its CPU time, allocations and RSS are its own.
const (
	roleUpstream = "upstream"
)

// roleArgs are what a child needs besides its role.
type roleArgs struct {
	role     string
	upstream string // base URL, for the proxies
	chunk    int    // streamed piece size, for the upstream
	sizes    []int  // answer sizes, for the upstream
	profile  string // directory for CPU and heap profiles; "" writes none
}

// serveRole runs one child: a data listener serving the role's handler and
// a control listener for stats (and, for the upstream, the stall gate). It
// prints "READY <data addr> <control addr>" and runs until stdin closes,
// so a parent that dies takes its children with it.
func serveRole(a roleArgs, stdin io.Reader, stdout, stderr io.Writer) int {
	var (
		h       http.Handler
		counter func() int64
		ctl     = http.NewServeMux()
		cleanup = func() {}
	)
	switch a.role {
	case roleUpstream:
		up := bench.NewUpstream(a.chunk, a.sizes...)
		h, counter = up, up.Requests
		ctl.HandleFunc("POST /stall", func(http.ResponseWriter, *http.Request) { up.Stall() })
		ctl.HandleFunc("POST /release", func(http.ResponseWriter, *http.Request) { up.Release() })
		ctl.HandleFunc("GET /parked", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, strconv.FormatInt(up.Parked(), 10))
		})
	case bench.Bare:
		u, err := url.Parse(a.upstream)
		if err != nil || u.Host == "" {
			fmt.Fprintf(stderr, "hooksbench: -upstream %q: not a base URL\n", a.upstream)
			return 2
		}
		bp := bench.NewBareProxy(u)
		h, counter = bp, bp.Errors.Load
	case bench.AllowAll, bench.Policy:
		// Warnings and errors (failed upstream calls, fail-closed
		// answers) reach the parent's stderr; the report counts them.
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		hp, err := bench.NewHooksproxy(a.role, a.upstream, logger.With("role", a.role))
		if err != nil {
			fmt.Fprintln(stderr, "hooksbench:", err)
			return 1
		}
		h, counter = hp.App.Server, hp.Records.Load
		cleanup = hp.Close
	default:
		fmt.Fprintf(stderr, "hooksbench: unknown role %q\n", a.role)
		return 2
	}
	ctl.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		st, err := bench.ReadProcStats(r.URL.Query().Get("gc") == "1")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		st.Counter = counter()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})

	// The heap profile lets the parent see what held streams are made of.
	ctl.HandleFunc("GET /heap", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		w.Header().Set("Content-Type", "application/octet-stream")
		_ = pprof.Lookup("heap").WriteTo(w, 0)
	})
	if a.profile != "" {
		f, err := os.Create(filepath.Join(a.profile, a.role+".cpu.pprof"))
		if err != nil {
			fmt.Fprintln(stderr, "hooksbench:", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "hooksbench:", err)
			return 1
		}
		prev := cleanup
		cleanup = func() {
			pprof.StopCPUProfile()
			_ = f.Close()
			if hf, err := os.Create(filepath.Join(a.profile, a.role+".allocs.pprof")); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(hf, 0)
				_ = hf.Close()
			}
			prev()
		}
	}

	dl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, "hooksbench:", err)
		return 1
	}
	cl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, "hooksbench:", err)
		return 1
	}
	// Server logs (client disconnects, aborted copies) are counted by the
	// roles that care, not printed.
	quiet := log.New(io.Discard, "", 0)
	ds := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ErrorLog: quiet}
	cs := &http.Server{Handler: ctl, ReadHeaderTimeout: 30 * time.Second, ErrorLog: quiet}
	go func() { _ = ds.Serve(dl) }()
	go func() { _ = cs.Serve(cl) }()
	fmt.Fprintf(stdout, "READY %s %s\n", dl.Addr(), cl.Addr())
	_, _ = io.Copy(io.Discard, stdin)
	_ = dl.Close()
	_ = cl.Close()
	cleanup()
	return 0
}

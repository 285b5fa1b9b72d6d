//go:build unix

package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/app"
	"github.com/hooksproxy/hooksproxy/audit"
	"github.com/hooksproxy/hooksproxy/points"
	"github.com/hooksproxy/hooksproxy/proxy"
)

// cannedTransport answers every round trip with one recorded upstream
// answer, without a socket: the handler benchmark measures the proxy's
// own work, not loopback TCP or the scripted upstream's JSON encoding.
type cannedTransport struct {
	header http.Header
	body   []byte
}

// newCanned records the scripted upstream's answer to req once.
func newCanned(tb testing.TB, req []byte, sizes ...int) *cannedTransport {
	tb.Helper()
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(req))
	r.Header.Set("Content-Type", "application/json")
	NewUpstream(DefaultChunk, sizes...).ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		tb.Fatalf("scripted upstream answered %d", rec.Code)
	}
	return &cannedTransport{header: rec.Header().Clone(), body: rec.Body.Bytes()}
}

func (c *cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: c.header.Clone(), Body: io.NopCloser(bytes.NewReader(c.body)),
		ContentLength: int64(len(c.body)), Request: r,
	}, nil
}

// deadlineRecorder is a ResponseRecorder that takes the read and write
// deadlines the handler sets through http.ResponseController, as a real
// connection does (the plain recorder answers each with an error, which
// costs allocations the served path does not have).
type deadlineRecorder struct{ *httptest.ResponseRecorder }

func (deadlineRecorder) SetReadDeadline(time.Time) error  { return nil }
func (deadlineRecorder) SetWriteDeadline(time.Time) error { return nil }

// handlerProxy builds hooksproxy's server for target (AllowAll or Policy)
// with the record sinks NewHooksproxy wires (the ring and a queued line
// sink, here writing to io.Discard rather than a file, so that disk
// writeback adds no noise; no Prometheus), and tr as its upstream transport.
func handlerProxy(b *testing.B, target string, tr http.RoundTripper) *proxy.Server {
	b.Helper()
	cfg, err := Config(target, "http://upstream.invalid")
	if err != nil {
		b.Fatal(err)
	}
	lines := audit.NewWriterSink("bench", io.Discard)
	b.Cleanup(func() { _ = lines.Close() })
	sink := audit.NewFanout(audit.NewRing(10000), lines)
	opts := app.Options{Sink: sink}
	c, err := app.Parse(cfg, "bench-"+target+".yaml", opts)
	if err != nil {
		b.Fatal(err)
	}
	em, err := app.Emitter(c, opts)
	if err != nil {
		b.Fatal(err)
	}
	up, _ := url.Parse(c.Upstream.BaseURL)
	s := proxy.New(proxy.Options{
		Upstream:  up,
		Transport: tr,
		Agent:     points.Agent{ID: c.Agent.ID, Framework: c.Agent.Framework},
		Emitter:   em,
	})
	s.Start()
	b.Cleanup(s.Close)
	return s
}

// BenchmarkHandler serves one chat completion per iteration
// straight into an httptest.ResponseRecorder, with a canned upstream
// transport: no sockets, no client, no upstream encoding, so the figures
// are the handler's own and vary little between runs. bare is
// httputil.ReverseProxy over the same transport. Compare A/B with
//
//	go test -run '^$' -bench 'BenchmarkHandler/json/1KB' -cpu 1 -count 8 ./bench
//
// stream/ serves the same answer streamed (held, judged, then replayed).
//
// (-cpu 1 runs the record sink's goroutine and the GC on the benchmark's
// one P, so ns/op is the CPU a request costs, with less scheduling noise.)
func BenchmarkHandler(b *testing.B) {
	for _, mode := range []string{"json", "stream"} {
		for _, size := range []int{1 << 10, 32 << 10} {
			benchHandler(b, mode, size)
		}
	}
}

func benchHandler(b *testing.B, mode string, size int) {
	{
		req := RequestBody(mode == "stream", size)
		tr := newCanned(b, req, size)
		up, _ := url.Parse("http://upstream.invalid")
		handlers := map[string]http.Handler{
			Bare: &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(up) }, Transport: tr},
		}
		for _, target := range []string{AllowAll, Policy} {
			handlers[target] = handlerProxy(b, target, tr)
		}
		for _, target := range []string{Bare, AllowAll, Policy} {
			h := handlers[target]
			b.Run(fmt.Sprintf("%s/%dKB/%s", mode, size>>10, target), func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(req))
					r.Header.Set("Content-Type", "application/json")
					r.Header.Set("Content-Length", strconv.Itoa(len(req)))
					w := httptest.NewRecorder()
					h.ServeHTTP(deadlineRecorder{w}, r)
					if w.Code != http.StatusOK || w.Body.Len() < size {
						b.Fatalf("%s: status %d, %d bytes: %.200s", target, w.Code, w.Body.Len(), w.Body.Bytes())
					}
				}
				// The process's CPU time per request (all goroutines, GC
				// included): time the host gives other tenants is not
				// counted, which wall time per op is at the mercy of.
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

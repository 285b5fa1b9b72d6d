// Package bench holds the pieces hooksbench and the end-to-end Go
// benchmarks share: the scripted upstream with a stall gate, the four
// targets (direct, a bare httputil.ReverseProxy, hooksproxy with
// allow_all, hooksproxy with a realistic policy set), the request bodies,
// a client that checks every answer, and process statistics.
//
// Everything listens on loopback only.
package bench

import (
	"bytes"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hooksproxy/hooksproxy/app"
	"github.com/hooksproxy/hooksproxy/audit"
	"github.com/hooksproxy/hooksproxy/metrics"
	"github.com/hooksproxy/hooksproxy/points"
)

// Target names, in report order.
const (
	Direct   = "direct"
	Bare     = "bare"
	AllowAll = "allow_all"
	Policy   = "policy"
)

// Targets lists the target names in report order.
func Targets() []string { return []string{Direct, Bare, AllowAll, Policy} }

// IsProxy reports whether target is one of the proxies (not the upstream).
func IsProxy(target string) bool {
	return target == Bare || target == AllowAll || target == Policy
}

// configHead is what both hooksproxy targets share: everything but the
// bindings, which follow it.
const configHead = `listen: 127.0.0.1:0
upstream:
  base_url: %s
  timeout: 120s
agent: {id: bench-agent, framework: openai-compatible}
hooks:
  declaration: agent-hooks-declaration/1.0
  configuration:
    mode: enforce
    composition: {profile: sequential/first_deny}
    identity_provider: jcs-sha256
    timeouts: {interceptor_ms: 5000}
  bindings:
`

// allowAllYAML passes everything: the cheapest hooksproxy configuration,
// which still holds every response and runs every interception point.
const allowAllYAML = configHead + `    - id: allow-all
      kind: hooksproxy.allow_all
`

// policyYAML is a realistic policy set: secrets and PII packs on the model
// response and the final answer, tool governance on the model response, a
// budget on every point and a CEL model guard before the call. None of it
// matches the benchmark's text, so every verdict is allow and the cost
// measured is that of looking.
const policyYAML = configHead + `    - id: model-guard
      kind: hooksproxy.cel
      at: [pre_model_call]
      config:
        rules:
          - when: 'ctx.model.id.startsWith("o1-") || size(ctx.messages) > 256'
            verdict: {decision: deny, reason: model_not_allowed}
    - id: budget
      kind: hooksproxy.budget
      config: {max_model_calls: 1000000000, max_tool_calls: 1000000000, max_total_tokens: 1000000000000, scope: both}
    - id: response-secrets-pii
      kind: hooksproxy.content
      at: [post_model_call]
      config: {packs: {secrets: redact, pii: redact}}
    - id: output-secrets-pii
      kind: hooksproxy.content
      at: [output]
      config: {packs: {secrets: deny, pii: redact}}
    - id: tool-governance
      kind: hooksproxy.tools
      at: [post_model_call]
      config: {deny: [delete_files, 'shell_*'], escalate: [send_email]}
    - id: allow-rest
      kind: hooksproxy.allow_all
`

// Config returns the hooksproxy config of target (AllowAll or Policy) with
// upstream as the base URL.
func Config(target, upstream string) ([]byte, error) {
	switch target {
	case AllowAll:
		return fmt.Appendf(nil, allowAllYAML, upstream), nil
	case Policy:
		return fmt.Appendf(nil, policyYAML, upstream), nil
	}
	return nil, fmt.Errorf("bench: %q is not a hooksproxy target", target)
}

// Hooksproxy is a built hooksproxy with a record counter.
type Hooksproxy struct {
	App *app.App
	// Records counts the InterceptionRecords emitted.
	Records *atomic.Int64
	file    *audit.Sink
	dir     string
}

// Close stops the proxy and removes its records.
func (h *Hooksproxy) Close() {
	h.App.Server.Close()
	_ = h.file.Close()
	_ = os.RemoveAll(h.dir)
}

// NewHooksproxy builds hooksproxy for target (AllowAll or Policy) in front
// of upstream and starts its session sweeper. It is wired as `serve` wires
// it: Prometheus metrics, the in-memory record ring, and a JSONL records
// file (in a temporary directory, rotated at 64 MiB with one backup so a
// long run stays bounded); a counter sees every record too. log receives
// the proxy's logs; nil discards them. Close removes the records.
func NewHooksproxy(target, upstream string, log *slog.Logger) (*Hooksproxy, error) {
	cfg, err := Config(target, upstream)
	if err != nil {
		return nil, err
	}
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hooksbench-records-")
	if err != nil {
		return nil, err
	}
	file, err := audit.OpenFile(filepath.Join(dir, "records.jsonl"), audit.WithReporter(m), audit.WithRotation(64<<20, 1))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	n := &atomic.Int64{}
	sink := audit.NewFanout(audit.NewRing(10000), file, points.RecordSinkFunc(func(*points.Record) { n.Add(1) }))
	opts := app.Options{Logger: log, Sink: sink, Observer: m, ProxyMetrics: m}
	c, err := app.Parse(cfg, "bench-"+target+".yaml", opts)
	if err != nil {
		return nil, fmt.Errorf("bench: %s config: %w", target, err)
	}
	a, err := app.New(c, "", opts)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", target, err)
	}
	a.Server.Start()
	return &Hooksproxy{App: a, Records: n, file: file, dir: dir}, nil
}

// NewTransport returns the upstream transport the bare proxy uses: the same
// pool sizes and timeouts as hooksproxy's own, so connection reuse is not
// what separates them.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 120 * time.Second,
		ForceAttemptHTTP2:     true,
		DisableCompression:    true,
	}
}

// BareProxy is the floor for any Go proxy: httputil.ReverseProxy with
// Rewrite SetURL and immediate flushes, counting the errors it logs.
type BareProxy struct {
	*httputil.ReverseProxy
	// Errors counts ReverseProxy log lines (body copy aborts) and
	// ErrorHandler calls (failed round trips).
	Errors *atomic.Int64
}

// NewBareProxy returns a bare ReverseProxy in front of upstream.
func NewBareProxy(upstream *url.URL) *BareProxy {
	n := &atomic.Int64{}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(upstream) },
		FlushInterval: -1,
		Transport:     NewTransport(),
		ErrorLog:      log.New(countWriter{n}, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			n.Add(1)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	return &BareProxy{ReverseProxy: rp, Errors: n}
}

// countWriter counts log lines instead of printing them: the body copy
// aborts are expected (see CLIENTS-AND-SSE.md) and counted in the report.
type countWriter struct{ n *atomic.Int64 }

func (c countWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(max(1, bytes.Count(p, []byte("\n")))))
	return len(p), nil
}

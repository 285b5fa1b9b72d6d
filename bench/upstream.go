package bench

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hooksproxy/hooksproxy/scripted"
)

// words make up the benchmark's answers: plain prose with no digits, keys,
// addresses or the word "secret", so no policy matches and every verdict
// is allow.
var words = strings.Fields(`the quarterly review shows steady progress across every region and
team while the roadmap keeps its focus on reliability careful rollout and clear ownership of each
service the platform group finished the migration ahead of plan and the support queue is shorter
than last season customers mention faster answers and fewer surprises during upgrades`)

// Content returns deterministic prose of exactly size bytes.
func Content(size int) string {
	var b strings.Builder
	b.Grow(size + 16)
	for i := 0; b.Len() < size; i++ {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[i%len(words)])
	}
	return b.String()[:size]
}

// sizeMarker is what a request names to pick its answer size.
func sizeMarker(size int) string { return "size=" + strconv.Itoa(size) + ";" }

// RequestBody returns a chat completions request asking for an answer of
// size bytes; stream requests ask for the usage chunk, as agent SDKs do.
func RequestBody(stream bool, size int) []byte {
	b := []byte(`{"model":"bench-1","messages":[{"role":"system","content":"You are a concise assistant for an operations team."},{"role":"user","content":"`)
	b = append(b, sizeMarker(size)...)
	b = append(b, ` Summarise the quarterly review for the team in plain words."}]`...)
	if stream {
		b = append(b, `,"stream":true,"stream_options":{"include_usage":true}`...)
	}
	return append(b, '}')
}

// Upstream is the scripted OpenAI-wire upstream, answering Content(size)
// for each size it was built with, plus a gate that can park streams just
// before their [DONE] so a proxy can be measured holding them.
type Upstream struct {
	s      *scripted.Server
	stall  atomic.Bool
	parked atomic.Int64
	mu     sync.Mutex
	gate   chan struct{}
}

// DefaultChunk is the content bytes per streamed event hooksbench and the
// Go benchmarks use: about eight tokens, coarser than real streams (one
// token each), so 32 KB answers stay affordable on small machines.
const DefaultChunk = 32

// NewUpstream returns an upstream that streams chunk-byte content pieces
// and answers Content(size) for each of sizes.
func NewUpstream(chunk int, sizes ...int) *Upstream {
	var rules []scripted.Rule
	for _, n := range sizes {
		rules = append(rules, scripted.Rule{When: sizeMarker(n), Reply: scripted.Text(Content(n))})
	}
	s := scripted.New(rules...)
	s.Chunk = chunk
	return &Upstream{s: s, gate: make(chan struct{})}
}

// Requests is the number of chat requests answered so far.
func (u *Upstream) Requests() int64 { return u.s.Requests.Load() }

// Stall makes every stream that reaches its [DONE] from now on flush what
// it has written and park until Release.
func (u *Upstream) Stall() {
	u.mu.Lock()
	u.stall.Store(true)
	u.mu.Unlock()
}

// Release lets every parked stream finish and ends stalling.
func (u *Upstream) Release() {
	u.mu.Lock()
	u.stall.Store(false)
	close(u.gate)
	u.gate = make(chan struct{})
	u.mu.Unlock()
}

// Parked is the number of streams waiting at the gate.
func (u *Upstream) Parked() int64 { return u.parked.Load() }

// ServeHTTP implements [http.Handler].
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.s.ServeHTTP(&gateWriter{ResponseWriter: w, u: u}, r)
}

// gateWriter parks the [DONE] write while the upstream stalls.
type gateWriter struct {
	http.ResponseWriter
	u *Upstream
}

var doneEvent = []byte("data: [DONE]")

func (g *gateWriter) Write(p []byte) (int, error) {
	if g.u.stall.Load() && bytes.HasPrefix(p, doneEvent) {
		// Flush first: the usage chunk before [DONE] is written without
		// a flush and would otherwise sit in the server's buffer.
		g.Flush()
		g.u.mu.Lock()
		if !g.u.stall.Load() { // released meanwhile
			g.u.mu.Unlock()
			return g.ResponseWriter.Write(p)
		}
		gate := g.u.gate
		g.u.parked.Add(1)
		g.u.mu.Unlock()
		<-gate
		g.u.parked.Add(-1)
	}
	return g.ResponseWriter.Write(p)
}

// Flush implements [http.Flusher]; scripted flushes every event.
func (g *gateWriter) Flush() {
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (g *gateWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

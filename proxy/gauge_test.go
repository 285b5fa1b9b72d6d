package proxy

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

// A stream stays counted as held while its output is decided (an approval
// may take minutes), and is let go once it is released.
func TestHeldStreamsGaugeCoversOutput(t *testing.T) {
	up, _ := upstream(t, textStream, true, 64)
	g := &lrGauge{}
	var atOutput atomic.Int64
	atOutput.Store(-1)
	sink := points.NewMemorySink(0)
	watch := at(points.Output, "watch", func(*points.Context) (points.Verdict, error) {
		atOutput.Store(g.n.Load())
		return points.Allow(), nil
	})
	em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: []points.Binding{watch, allowAll(points.AgentStartup, points.Input, points.PreModelCall, points.PostModelCall, points.AgentShutdown)}, Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	s := New(Options{Upstream: u, Emitter: em, Metrics: g})
	hs := httptest.NewServer(s)
	defer func() { hs.Close(); s.Close() }()
	if r, b := post(t, hs.URL, helloStream); r.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", r.StatusCode, b)
	}
	if got := atOutput.Load(); got != 1 {
		t.Errorf("held streams while output was decided: %d, want 1", got)
	}
	if got := g.n.Load(); got != 0 {
		t.Errorf("held streams after the answer: %d, want 0", got)
	}
}

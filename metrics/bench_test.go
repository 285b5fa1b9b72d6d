package metrics

import (
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
)

// BenchmarkEmission is what the observer adds to one emission.
func BenchmarkEmission(b *testing.B) {
	m, _ := newMetrics(b)
	trunc := true
	di := 0
	r := &points.Record{InterceptionPoint: points.PreToolCall, Mode: points.Enforce,
		Verdict: points.RecordVerdict{Decision: points.DecisionDeny, Reason: "tool_denied"}, DecidedBy: &di,
		Verdicts:      []points.VerdictSummary{{Index: 0, Decision: points.DecisionDeny, Reason: "tool_denied", Name: "tool-governance"}},
		FoldTruncated: &trunc}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Emission(r, time.Millisecond)
		}
	})
}

// BenchmarkEmissionAllow is the common case: an allow with nothing to add.
func BenchmarkEmissionAllow(b *testing.B) {
	m, _ := newMetrics(b)
	r := &points.Record{InterceptionPoint: points.Output, Mode: points.Enforce,
		Verdict: points.RecordVerdict{Decision: points.DecisionAllow}}
	b.ReportAllocs()
	for b.Loop() {
		m.Emission(r, time.Millisecond)
	}
}

func BenchmarkInterceptor(b *testing.B) {
	m, _ := newMetrics(b)
	v := points.Allow()
	b.ReportAllocs()
	for b.Loop() {
		m.Interceptor("allow-all", points.Output, v, time.Millisecond)
	}
}

func BenchmarkUpstreamRequest(b *testing.B) {
	m, _ := newMetrics(b)
	b.ReportAllocs()
	for b.Loop() {
		m.UpstreamRequest(200, true, time.Millisecond)
	}
}

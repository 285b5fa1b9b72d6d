package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hooksproxy/hooksproxy/points"
)

// maxCachedSeries bounds each series cache. Label values are already capped
// (see capSet), but cache keys use the raw binding name, and reloads may
// bring new names over a process's life; past the bound calls resolve their
// series uncached, as before.
const maxCachedSeries = 4096

// seriesCache remembers the children a vector resolved for one key. The
// client library validates, hashes and looks up label values under a lock
// on every WithLabelValues call; with one observation per emission and per
// interceptor call that was 3–4% of a policy proxy's CPU.
type seriesCache[K comparable, V any] struct {
	m sync.Map
	n atomic.Int32
}

// get returns the cached value for k, or resolves and caches it.
func (c *seriesCache[K, V]) get(k K, resolve func(K) (V, bool)) (V, bool) {
	if v, ok := c.m.Load(k); ok {
		return v.(V), true
	}
	v, ok := resolve(k)
	if !ok {
		return v, false
	}
	if c.n.Load() < maxCachedSeries {
		if _, loaded := c.m.LoadOrStore(k, v); !loaded {
			c.n.Add(1)
		}
	}
	return v, true
}

// interceptorKey identifies an interceptor call's series before labelling:
// a binding name maps to the same label for the life of the process, since
// capSet only grows. The decision is part of the key as each decision has
// its own verdict counter (a loaded binding's start at zero).
type interceptorKey struct {
	name     string
	point    points.Point
	decision points.Decision
}

// interceptorSeries holds one binding and point's duration histogram and
// the verdict counter for one decision.
type interceptorSeries struct {
	binding, point string
	duration       prometheus.Observer
	verdicts       prometheus.Counter
}

func (m *Metrics) resolveInterceptor(k interceptorKey) (*interceptorSeries, bool) {
	s := &interceptorSeries{binding: m.bindings.label(k.name), point: pointLabel(k.point)}
	h, err := m.interceptorDuration.GetMetricWithLabelValues(s.binding, s.point)
	if err != nil {
		return nil, false
	}
	c, err := m.interceptorVerdicts.GetMetricWithLabelValues(s.binding, s.point, decisionLabel(k.decision))
	if err != nil {
		return nil, false
	}
	s.duration, s.verdicts = h, c
	return s, true
}

// emissionKey identifies an emission's always-present series.
type emissionKey struct {
	point    points.Point
	mode     points.Mode
	decision points.Decision
	liftable bool
	reason   string // the label (reasonLabel): owned, never a view of a request
}

// emissionSeries holds the decisions counter for one key and the point's
// emission duration histogram.
type emissionSeries struct {
	point     string
	decisions prometheus.Counter
	duration  prometheus.Observer
}

func (m *Metrics) resolveEmission(k emissionKey) (*emissionSeries, bool) {
	s := &emissionSeries{point: pointLabel(k.point)}
	c, err := m.decisions.GetMetricWithLabelValues(s.point, decisionLabel(k.decision), modeLabel(k.mode), strconv.FormatBool(k.liftable), k.reason)
	if err != nil {
		return nil, false
	}
	h, err := m.emissionDuration.GetMetricWithLabelValues(s.point)
	if err != nil {
		return nil, false
	}
	s.decisions, s.duration = c, h
	return s, true
}

// upstreamKey identifies an upstream call's series: the status code (0 when
// the call failed) and whether the answer was a stream.
type upstreamKey struct {
	status int
	stream bool
}

// upstreamSeries holds the requests counter of one status and the duration
// histogram of its class.
type upstreamSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

func (m *Metrics) resolveUpstream(k upstreamKey) (*upstreamSeries, bool) {
	code, class := "error", "error"
	if k.status >= 100 && k.status <= 599 {
		code, class = strconv.Itoa(k.status), strconv.Itoa(k.status/100)+"xx"
	}
	s := strconv.FormatBool(k.stream)
	c, err := m.upstreamRequests.GetMetricWithLabelValues(code, s)
	if err != nil {
		return nil, false
	}
	h, err := m.upstreamDuration.GetMetricWithLabelValues(class, s)
	if err != nil {
		return nil, false
	}
	return &upstreamSeries{requests: c, duration: h}, true
}

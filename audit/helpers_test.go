package audit

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
)

// rec builds a payload-free record for session sid with sequence seq.
func rec(sid string, seq int64) *points.Record {
	id := "jcs-sha256:0000"
	prov := points.JCSSHA256Name
	return &points.Record{
		InterceptionPoint: points.PreToolCall, Mode: points.Enforce,
		Verdict:       points.Project(points.Deny("tool_denied", "not allowed")),
		InputIdentity: &id, EnforcedIdentity: &id, IdentityProvider: &prov,
		SessionID: sid, Sequence: seq, Timestamp: "2026-01-02T03:04:05.000Z",
		Composition:            points.Composition{Profile: points.ProfileFirstDeny, OnApproval: points.OnApprovalStop},
		InterceptorsRegistered: 1,
	}
}

// fakeReporter records Reporter calls.
type fakeReporter struct {
	mu      sync.Mutex
	dropped map[string]uint64
	errs    map[string]int // sink/op
	opened  []string
}

func newFakeReporter() *fakeReporter {
	return &fakeReporter{dropped: map[string]uint64{}, errs: map[string]int{}}
}

func (f *fakeReporter) RecordsDropped(sink string, n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropped[sink] += n
}

func (f *fakeReporter) SinkError(sink, op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[sink+"/"+op]++
}

func (f *fakeReporter) SinkOpened(sink string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opened = append(f.opened, sink)
}

func (f *fakeReporter) snapshot() (map[string]uint64, map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, e := map[string]uint64{}, map[string]int{}
	for k, v := range f.dropped {
		d[k] = v
	}
	for k, v := range f.errs {
		e[k] = v
	}
	return d, e
}

// fakeClock is a settable clock for the log limiter.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logBuffer is a concurrency-safe log destination.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{ReplaceAttr: func(g []string, a slog.Attr) slog.Attr {
		if len(g) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
}

// readAll returns the sequences of every record in path and its backups,
// oldest file first, failing on any malformed or torn line.
func readAll(t *testing.T, path string) []int64 {
	t.Helper()
	files, err := Backups(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err == nil {
		files = append(files, path)
	}
	var seqs []int64
	for _, f := range files {
		rs, res, err := ReadFile(f)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		if res.TornBytes != 0 {
			t.Fatalf("%s: torn tail of %d bytes", filepath.Base(f), res.TornBytes)
		}
		for _, r := range rs {
			seqs = append(seqs, r.Sequence)
		}
	}
	return seqs
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func equalSeqs(a, b []int64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

package audit

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dropLines returns the dropped= and dropped_total= of each "audit records
// dropped" line in logs.
func dropLines(t *testing.T, logs string) [][2]uint64 {
	t.Helper()
	re := regexp.MustCompile(`msg="audit records dropped".* dropped=(\d+) dropped_total=(\d+)`)
	var out [][2]uint64
	for _, l := range strings.Split(logs, "\n") {
		m := re.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a, _ := strconv.ParseUint(m[1], 10, 64)
		b, _ := strconv.ParseUint(m[2], 10, 64)
		out = append(out, [2]uint64{a, b})
	}
	return out
}

// scheduled collects the functions a sink asked to run later, so a test
// runs them when it chooses instead of waiting for a timer.
type scheduled struct{ fs chan func() }

func newScheduled() *scheduled { return &scheduled{fs: make(chan func(), 16)} }

func (s *scheduled) afterFunc(_ time.Duration, f func()) { s.fs <- f }

// The rate-limited drop lines add up to the drop counter: a burst that
// stops inside an interval gets a line for the drops held back when the
// interval ends, each line counts the records since the previous one, and
// records a failed write lost are counted in them too.
func TestDropLogLinesAddUpToTheCounter(t *testing.T) {
	for _, tc := range []struct {
		name string
		// burst drops records within one interval and returns the sink.
		burst func(t *testing.T, opts []Option) *Sink
		want  uint64
		// closeHeld: the held-back drops are logged by Close, not by the
		// scheduled line.
		closeHeld bool
	}{
		{"queue full", func(t *testing.T, opts []Option) *Sink {
			w := newGateWriter()
			s := NewWriterSink("q", w, append(opts, WithQueueSize(1))...)
			t.Cleanup(func() { close(w.release); _ = s.Close() })
			s.Write(rec("s", 0))
			<-w.entered // the drain goroutine holds record 0
			s.Write(rec("s", 1))
			for i := int64(2); i < 127; i++ {
				if err := s.Append(rec("s", i)); !errors.Is(err, ErrDropped) {
					t.Fatalf("record %d: %v, want ErrDropped", i, err)
				}
			}
			return s
		}, 125, false},
		{"write failed/sync", func(t *testing.T, opts []Option) *Sink {
			s := NewWriterSink("w", failWriter{errors.New("disk on fire")}, append(opts, WithSyncWrite())...)
			for i := int64(0); i < 7; i++ {
				s.Write(rec("s", i))
			}
			if err := s.Close(); err == nil {
				t.Fatal("Close after failed writes = nil")
			}
			return s
		}, 7, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			clock := &fakeClock{t: time.Unix(1000, 0)}
			later := newScheduled()
			s := tc.burst(t, []Option{WithLogger(logs.logger()), WithLogInterval(time.Minute),
				withClock(clock.now), withAfterFunc(later.afterFunc)})
			if got := s.Stats().Dropped; got != tc.want {
				t.Fatalf("dropped %d, want %d", got, tc.want)
			}
			if !tc.closeHeld {
				if got := dropLines(t, logs.String()); len(got) != 1 || got[0] != [2]uint64{1, 1} {
					t.Fatalf("lines within the interval %v, want one of dropped=1 dropped_total=1:\n%s", got, logs.String())
				}
				if n := len(later.fs); n != 1 {
					t.Fatalf("%d lines scheduled for the held-back drops, want 1", n)
				}
				clock.add(time.Minute)
				(<-later.fs)()
			}
			got := dropLines(t, logs.String())
			if len(got) != 2 {
				t.Fatalf("drop lines %v, want 2:\n%s", got, logs.String())
			}
			if got[1] != [2]uint64{tc.want - 1, tc.want} {
				t.Fatalf("second line dropped=%d dropped_total=%d, want %d and %d:\n%s", got[1][0], got[1][1], tc.want-1, tc.want, logs.String())
			}
			// Nothing held back is left, so a late scheduled line says nothing.
			for len(later.fs) > 0 {
				(<-later.fs)()
			}
			if n := len(dropLines(t, logs.String())); n != 2 {
				t.Fatalf("%d drop lines after the scheduled ones ran, want 2:\n%s", n, logs.String())
			}
		})
	}
}

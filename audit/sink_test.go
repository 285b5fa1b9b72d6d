package audit

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseFsyncPolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    FsyncPolicy
		wantErr bool
	}{
		{"always", FsyncAlways, false},
		{"interval", FsyncInterval, false},
		{"never", FsyncNever, false},
		{"", FsyncInterval, false},
		{"Always", "", true},
		{"sometimes", "", true},
	}
	for _, tt := range tests {
		got, err := ParseFsyncPolicy(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseFsyncPolicy(%q) = %q, %v; want %q, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestFileSinkModes(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
	}{
		{"async interval", []Option{WithFsync(FsyncInterval)}},
		{"async always", []Option{WithFsync(FsyncAlways)}},
		{"async never", []Option{WithFsync(FsyncNever)}},
		{"sync write", []Option{WithSyncWrite(), WithFsync(FsyncAlways)}},
		{"tiny queue, flush each", []Option{WithQueueSize(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "nested", "deeper", "records.jsonl")
			rep := newFakeReporter()
			s, err := OpenFile(path, append(tt.opts, WithReporter(rep))...)
			if err != nil {
				t.Fatal(err)
			}
			for i := int64(0); i < 50; i++ {
				if err := s.Append(rec("s", i)); err != nil {
					t.Fatalf("append %d: %v", i, err)
				}
				if tt.name == "tiny queue, flush each" {
					if err := s.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := s.Flush(); err != nil {
				t.Fatalf("flush: %v", err)
			}
			// Acknowledged: readable before Close.
			if got := readAll(t, path); !equalSeqs(got, seqRange(0, 50)) {
				t.Fatalf("before close: %v", got)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("file mode %v, want 0600", st.Mode().Perm())
			}
			dst, _ := os.Stat(filepath.Dir(path))
			if dst.Mode().Perm() != 0o700 {
				t.Errorf("dir mode %v, want 0700", dst.Mode().Perm())
			}
			if got := s.Stats(); got.Written != 50 || got.Dropped != 0 || got.Errors != 0 {
				t.Errorf("stats = %+v", got)
			}
			if len(rep.opened) != 1 || rep.opened[0] != "file" {
				t.Errorf("SinkOpened calls = %v", rep.opened)
			}
		})
	}
}

func TestSyncWriteIsDurableOnReturn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	s, err := OpenFile(path, WithSyncWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := s.Append(rec("s", int64(g*50+i))); err != nil {
					t.Error(err)
				}
			}
		}(g)
	}
	wg.Wait()
	// No Flush: every Append that returned nil is in the file.
	if got := readAll(t, path); len(got) != 400 {
		t.Fatalf("%d records in the file, want 400", len(got))
	}
}

func TestConcurrentAsyncWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	s, err := OpenFile(path, WithQueueSize(100000))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				s.Write(rec("s", int64(g*200+i)))
			}
		}(g)
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, path)
	if len(got) != 1600 {
		t.Fatalf("%d records, want 1600", len(got))
	}
	seen := map[int64]bool{}
	for _, q := range got {
		seen[q] = true
	}
	if len(seen) != 1600 {
		t.Fatalf("%d distinct records, want 1600", len(seen))
	}
}

// gateWriter blocks every Write until released, telling when one started.
type gateWriter struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	out     strings.Builder
}

func newGateWriter() *gateWriter {
	return &gateWriter{entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.entered <- struct{}{}
	<-g.release
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.out.Write(p)
}

func (g *gateWriter) String() string { g.mu.Lock(); defer g.mu.Unlock(); return g.out.String() }

func TestQueueFullDropsCountsAndLogsOncePerInterval(t *testing.T) {
	w := newGateWriter()
	rep := newFakeReporter()
	var logs logBuffer
	clock := &fakeClock{t: time.Unix(1000, 0)}
	s := NewWriterSink("q", w, WithQueueSize(2), WithReporter(rep), WithLogger(logs.logger()),
		WithLogInterval(time.Minute), withClock(clock.now))

	if err := s.Append(rec("s", 0)); err != nil {
		t.Fatal(err)
	}
	<-w.entered // the drain goroutine holds record 0 inside Write
	for i := int64(1); i <= 2; i++ {
		if err := s.Append(rec("s", i)); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	for i := int64(3); i <= 5; i++ {
		if err := s.Append(rec("s", i)); !errors.Is(err, ErrDropped) {
			t.Fatalf("record %d: err = %v, want ErrDropped", i, err)
		}
	}
	if n := strings.Count(logs.String(), "audit records dropped"); n != 1 {
		t.Fatalf("%d drop log lines within one interval, want 1:\n%s", n, logs.String())
	}
	clock.add(time.Minute)
	if err := s.Append(rec("s", 6)); !errors.Is(err, ErrDropped) {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "audit records dropped"); n != 2 {
		t.Fatalf("%d drop log lines after the interval, want 2:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "dropped=3") {
		t.Errorf("second line should count the 3 drops since the first:\n%s", logs.String())
	}
	close(w.release)
	if err := s.Flush(); !errors.Is(err, ErrDropped) {
		t.Fatalf("Flush after drops = %v, want ErrDropped", err)
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("second Flush = %v, want nil", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got.Dropped != 4 || got.Written != 3 {
		t.Errorf("stats = %+v, want 4 dropped, 3 written", got)
	}
	d, _ := rep.snapshot()
	if d["q"] != 4 {
		t.Errorf("reported drops = %v", d)
	}
	if n := strings.Count(w.String(), "\n"); n != 3 {
		t.Errorf("%d lines written, want 3", n)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write(p []byte) (int, error) { return 0, f.err }

func TestWriteFailuresCountedAndLoggedOncePerInterval(t *testing.T) {
	rep := newFakeReporter()
	var logs logBuffer
	clock := &fakeClock{t: time.Unix(1000, 0)}
	boom := errors.New("disk on fire")
	s := NewWriterSink("w", failWriter{boom}, WithReporter(rep), WithLogger(logs.logger()), withClock(clock.now))
	for i := int64(0); i < 5; i++ {
		s.Write(rec("s", i))
		if err := s.Flush(); !errors.Is(err, boom) || !errors.Is(err, ErrDropped) {
			t.Fatalf("Flush = %v, want the write error and ErrDropped", err)
		}
	}
	if n := strings.Count(logs.String(), "audit record sink failing"); n != 1 {
		t.Fatalf("%d failure log lines, want 1:\n%s", n, logs.String())
	}
	_, e := rep.snapshot()
	if e["w/write"] != 5 {
		t.Errorf("reported errors = %v", e)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Errors != 5 || st.Dropped != 5 || st.Written != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestFileWriteFailure(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	rep := newFakeReporter()
	s, err := OpenFile("/dev/full", WithReporter(rep), WithName("full"))
	if err != nil {
		t.Skipf("cannot open /dev/full for append: %v", err)
	}
	s.Write(rec("s", 1))
	if err := s.Flush(); err == nil || !errors.Is(err, ErrDropped) {
		t.Fatalf("Flush = %v, want a write failure", err)
	}
	_, e := rep.snapshot()
	if e["full/write"] != 1 {
		t.Errorf("reported errors = %v", e)
	}
	_ = s.Close()
}

func TestCloseDrainsAndLaterCallsFail(t *testing.T) {
	for _, sync := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "r.jsonl")
		var opts []Option
		if sync {
			opts = append(opts, WithSyncWrite())
		}
		s, err := OpenFile(path, opts...)
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(0); i < 100; i++ {
			s.Write(rec("s", i))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, path); !equalSeqs(got, seqRange(0, 100)) {
			t.Fatalf("sync=%v: after close: %d records", sync, len(got))
		}
		if err := s.Append(rec("s", 100)); !errors.Is(err, ErrClosed) {
			t.Errorf("sync=%v: Append after Close = %v", sync, err)
		}
		if err := s.Flush(); !errors.Is(err, ErrClosed) {
			t.Errorf("sync=%v: Flush after Close = %v", sync, err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("sync=%v: second Close = %v", sync, err)
		}
		if st := s.Stats(); st.Dropped != 1 {
			t.Errorf("sync=%v: stats = %+v", sync, st)
		}
	}
}

func TestConcurrentFlushAndClose(t *testing.T) {
	// Flush racing Close must return nil or ErrClosed, never hang.
	for i := 0; i < 20; i++ {
		s := NewWriterSink("x", io.Discard)
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 20; j++ {
					s.Write(rec("s", int64(j)))
					if err := s.Flush(); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrDropped) {
						t.Error(err)
					}
				}
			}()
		}
		_ = s.Close()
		wg.Wait()
	}
}

func TestEncodeFailureCounted(t *testing.T) {
	rep := newFakeReporter()
	s := NewWriterSink("x", io.Discard, WithReporter(rep))
	r := rec("s", 1)
	r.Verdict.Evidence = []byte(`{not json`)
	if err := s.Append(r); err == nil {
		t.Fatal("want an encode error")
	}
	if err := s.Flush(); !errors.Is(err, ErrDropped) {
		t.Fatalf("Flush = %v", err)
	}
	_, e := rep.snapshot()
	if e["x/encode"] != 1 {
		t.Errorf("errors = %v", e)
	}
	_ = s.Close()
}

func TestLimiter(t *testing.T) {
	l := limiter{every: time.Second}
	t0 := time.Unix(100, 0)
	// in: the events of one call (a failed write loses several records at
	// once); n: what the line reports, those held back included.
	steps := []struct {
		at   time.Duration
		in   uint64
		n    uint64
		logs bool
	}{
		{0, 1, 1, true},
		{100 * time.Millisecond, 5, 0, false},
		{999 * time.Millisecond, 1, 0, false},
		{time.Second, 2, 8, true},
		{1500 * time.Millisecond, 1, 0, false},
		{10 * time.Second, 1, 2, true},
	}
	for i, s := range steps {
		n, ok := l.allow(t0.Add(s.at), s.in)
		if ok != s.logs || n != s.n {
			t.Errorf("step %d: allow = %d, %v; want %d, %v", i, n, ok, s.n, s.logs)
		}
	}
}

func TestStdoutSinkName(t *testing.T) {
	s := NewStdoutSink(WithName("console"))
	if s.Name() != "console" {
		t.Errorf("name = %q", s.Name())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

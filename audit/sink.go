package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
)

// Defaults for the options.
const (
	DefaultQueueSize     = 8192
	DefaultFsyncInterval = time.Second
	DefaultLogInterval   = 10 * time.Second
	// DefaultReopenCheck is how often a file sink checks that its path
	// still names its file.
	DefaultReopenCheck = time.Second
	// DefaultSyncTimeout bounds a synchronous write and fsync.
	DefaultSyncTimeout = 5 * time.Second
)

// The operations a sink error is counted under ([Reporter.SinkError]).
const (
	OpEncode = "encode" // the record could not be marshalled
	OpOpen   = "open"   // the file could not be opened or recovered
	OpWrite  = "write"  // a write to the file or writer failed
	OpSync   = "sync"   // fsync failed
	OpRotate = "rotate" // rotation or pruning of backups failed
	OpClose  = "close"  // the final close failed
	OpStall  = "stall"  // a synchronous write or fsync outlasted its bound
)

// SinkOps lists every operation a sink error can be counted under.
func SinkOps() []string {
	return []string{OpEncode, OpOpen, OpWrite, OpSync, OpRotate, OpClose, OpStall}
}

var (
	// ErrDropped reports records that were dropped: the queue was full,
	// the sink was closed, or their write failed.
	ErrDropped = errors.New("audit: records dropped")
	// ErrClosed reports a call on a closed sink.
	ErrClosed = errors.New("audit: sink closed")
	// ErrStalled reports a synchronous write that outlasted its bound, or
	// a record dropped because one has not returned yet.
	ErrStalled = errors.New("audit: sink stalled")
)

// Reporter is told about lost records and sink failures; the metrics
// package implements it. Calls are made from Write's caller and from the
// sink's goroutine, so implementations must be cheap and concurrency-safe.
type Reporter interface {
	// RecordsDropped counts n records of sink that will never be written.
	RecordsDropped(sink string, n uint64)
	// SinkError counts one failure of op (one of [SinkOps]) in sink.
	SinkError(sink, op string)
}

// SinkOpener is an optional [Reporter] capability: it is told the sink's
// name when the sink opens, so that counters can start at zero (an alert on
// increase() misses a series' first increment otherwise).
type SinkOpener interface {
	SinkOpened(sink string)
}

// FsyncPolicy says when a file sink calls fsync.
type FsyncPolicy string

// The fsync policies.
const (
	// FsyncAlways fsyncs after every batch the drain goroutine writes (group
	// commit: at most one batch of queued records per fsync). Combine with
	// [WithSyncWrite] to fsync each record before Append returns.
	FsyncAlways FsyncPolicy = "always"
	// FsyncInterval fsyncs at most once per interval, when something was
	// written ([WithFsyncInterval]); lines reach the OS as soon as the
	// queue is momentarily empty, so a process crash loses nothing written.
	FsyncInterval FsyncPolicy = "interval"
	// FsyncNever leaves durability to the OS, except on Flush, rotation and
	// Close.
	FsyncNever FsyncPolicy = "never"
)

// ParseFsyncPolicy reads "always", "interval" or "never"; "" is interval.
func ParseFsyncPolicy(s string) (FsyncPolicy, error) {
	switch p := FsyncPolicy(s); p {
	case FsyncAlways, FsyncInterval, FsyncNever:
		return p, nil
	case "":
		return FsyncInterval, nil
	}
	return "", fmt.Errorf("audit: fsync policy %q: want always, interval or never", s)
}

// Option configures a [Sink].
type Option func(*options)

type options struct {
	name          string
	queue         int
	fsync         FsyncPolicy
	fsyncInterval time.Duration
	syncWrite     bool
	syncTimeout   time.Duration
	maxBytes      int64
	maxBackups    int
	logger        *slog.Logger
	reporter      Reporter
	logInterval   time.Duration
	now           func() time.Time
	tailChunk     int
	reopenCheck   time.Duration
	afterFunc     func(time.Duration, func())
}

// WithName sets the sink's name, the sink label of its metrics and logs
// (default "file" or "stdout"). Use a short constant identifier.
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithQueueSize bounds the queue between Write and the drain goroutine
// (default [DefaultQueueSize]).
func WithQueueSize(n int) Option { return func(o *options) { o.queue = n } }

// WithFsync sets the fsync policy (default [FsyncInterval]).
func WithFsync(p FsyncPolicy) Option { return func(o *options) { o.fsync = p } }

// WithFsyncInterval sets the [FsyncInterval] period (default 1 s).
func WithFsyncInterval(d time.Duration) Option { return func(o *options) { o.fsyncInterval = d } }

// WithSyncWrite makes Write and Append write and fsync each record under a
// mutex before returning, instead of queueing it. Use it when the operator
// asked for fsync on every record: the decision then waits for the disk,
// at most the sync timeout (WithSyncTimeout).
func WithSyncWrite() Option { return func(o *options) { o.syncWrite = true } }

// WithSyncTimeout bounds how long a synchronous write waits for the disk
// (default [DefaultSyncTimeout]).
func WithSyncTimeout(d time.Duration) Option { return func(o *options) { o.syncTimeout = d } }

// WithRotation rotates the file before a record would take it past
// maxBytes (0: never) and keeps maxBackups rotated files (0: all). Backups
// are named like records.000001.jsonl, the highest number the newest.
func WithRotation(maxBytes int64, maxBackups int) Option {
	return func(o *options) { o.maxBytes, o.maxBackups = maxBytes, maxBackups }
}

// WithLogger sets the logger for drops and failures (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithReporter sets the counter sink for drops and failures (the metrics).
func WithReporter(r Reporter) Option { return func(o *options) { o.reporter = r } }

// WithLogInterval rate-limits drop and failure logs to one line per kind
// per interval (default [DefaultLogInterval]); the line carries the count
// since the previous one, and drops held back get a line at the end of the
// interval.
func WithLogInterval(d time.Duration) Option { return func(o *options) { o.logInterval = d } }

// WithReopenCheck sets how often a file sink looks whether its path still
// names the file it writes (default [DefaultReopenCheck]; 0 at every
// write), reopening the path when the file was moved or removed.
func WithReopenCheck(d time.Duration) Option { return func(o *options) { o.reopenCheck = d } }

// withClock, withTailChunk and withAfterFunc are test seams.
func withClock(now func() time.Time) Option { return func(o *options) { o.now = now } }
func withTailChunk(n int) Option            { return func(o *options) { o.tailChunk = n } }
func withAfterFunc(f func(time.Duration, func())) Option {
	return func(o *options) { o.afterFunc = f }
}

func buildOptions(name string, opts []Option) options {
	o := options{name: name, queue: DefaultQueueSize, fsync: FsyncInterval, fsyncInterval: DefaultFsyncInterval,
		logInterval: DefaultLogInterval, now: time.Now, tailChunk: 64 << 10, reopenCheck: DefaultReopenCheck}
	for _, f := range opts {
		f(&o)
	}
	if o.queue <= 0 {
		o.queue = DefaultQueueSize
	}
	if o.fsync == "" {
		o.fsync = FsyncInterval
	}
	if o.fsyncInterval <= 0 {
		o.fsyncInterval = DefaultFsyncInterval
	}
	if o.syncTimeout <= 0 {
		o.syncTimeout = DefaultSyncTimeout
	}
	if o.logInterval <= 0 {
		o.logInterval = DefaultLogInterval
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if o.tailChunk <= 0 {
		o.tailChunk = 64 << 10
	}
	if o.afterFunc == nil {
		o.afterFunc = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	return o
}

// backend is where lines end up: add buffers a line (rotating first when
// due), flush hands the buffer to the OS, sync makes it durable. Backends
// report failures and written lines through the sink's hooks.
type backend interface {
	add(line []byte)
	flush() error
	sync() error
	close() error
}

// hooks is how a backend reports to its sink.
type hooks struct {
	fail  func(op string, lost int, err error)
	wrote func(lines int)
	// drop counts lines the backend discarded without a failed operation
	// (a file sink whose file was removed).
	drop func(lines int, why string)
}

// Stats are a sink's counters since it opened.
type Stats struct {
	Written uint64 // records handed to the OS
	Dropped uint64 // records that will never be written
	Errors  uint64 // failed operations
	Torn    int64  // bytes of a torn tail removed when the file was opened
}

// Sink is a bounded, asynchronous record sink in front of a JSONL file or
// an io.Writer; see the package doc for its delivery and acknowledgement
// contract. It implements points.RecordSink.
type Sink struct {
	o  options
	be backend

	// Asynchronous mode. gate orders Write's "not closed" check against
	// Close so that every accepted record is queued ahead of the close
	// marker; it is held only around a non-blocking send.
	q      chan item
	done   chan struct{}
	gate   sync.RWMutex
	closed bool

	// mu serialises the backend in synchronous mode.
	mu sync.Mutex
	// stalled: a synchronous write has outlasted syncTimeout and not
	// returned yet; records are dropped at once until it does.
	stalled atomic.Bool

	written, dropped, errs atomic.Uint64
	torn                   int64
	dropLog, errLog        limiter
	heldWhy                atomic.Pointer[string] // why of the latest drop the log held back

	// Owned by the drain goroutine (or mu in synchronous mode).
	pendingErr     error
	flushedDropped uint64
	closeErr       error
}

type itemKind uint8

const (
	kindLine itemKind = iota
	kindFlush
	kindClose
)

type item struct {
	kind  itemKind
	line  []byte
	reply chan error
}

// maxBatch bounds the records written between two looks at fsync and the
// flush markers, so a flood cannot postpone a Flush indefinitely.
const maxBatch = 1024

func (s *Sink) hooks() hooks {
	return hooks{fail: s.fail, wrote: func(n int) { s.written.Add(uint64(n)) },
		drop: func(n int, why string) {
			if n > 0 {
				s.drop(uint64(n), why)
			}
		}}
}

// newSink wires be to the sink through attach before the drain goroutine
// starts, so the backend's hooks are set before anything can call them.
func newSink(o options, be backend, attach func(hooks)) *Sink {
	s := &Sink{o: o, be: be}
	attach(s.hooks())
	s.dropLog.every = o.logInterval
	s.errLog.every = o.logInterval
	if so, ok := o.reporter.(SinkOpener); ok {
		so.SinkOpened(o.name)
	}
	if !o.syncWrite {
		s.q = make(chan item, o.queue)
		s.done = make(chan struct{})
		go s.run()
	}
	return s
}

// NewWriterSink returns a sink that writes JSON lines to w (name labels its
// metrics). It never closes w. Options about files are ignored.
func NewWriterSink(name string, w io.Writer, opts ...Option) *Sink {
	o := buildOptions(name, opts)
	wb := &writerBackend{w: w}
	return newSink(o, wb, func(h hooks) { wb.h = h })
}

// NewStdoutSink returns a writer sink on standard output named "stdout".
func NewStdoutSink(opts ...Option) *Sink {
	return NewWriterSink("stdout", os.Stdout, opts...)
}

// Stats returns the sink's counters.
func (s *Sink) Stats() Stats {
	return Stats{Written: s.written.Load(), Dropped: s.dropped.Load(), Errors: s.errs.Load(), Torn: s.torn}
}

// QueueCap is how many records the queue between Write and the drain
// goroutine holds (0 when each record is written before Write returns).
func (s *Sink) QueueCap() int { return cap(s.q) }

// Name is the sink's metrics label.
func (s *Sink) Name() string { return s.o.name }

// Write hands r to the sink; it implements points.RecordSink and never
// blocks in asynchronous mode. Failures are counted, not returned.
func (s *Sink) Write(r *points.Record) { _ = s.Append(r) }

// Append is Write with an answer. In synchronous mode nil means r is written
// and fsynced (acknowledged). Otherwise nil means r is queued, and
// [ErrDropped] that it was dropped; durability then comes from Flush.
func (s *Sink) Append(r *points.Record) error {
	line, err := encode(r)
	if err != nil {
		s.encodeFailed(err)
		return fmt.Errorf("audit: %s: %w", s.o.name, err)
	}
	return s.appendLine(line)
}

// writeLine implements lineWriter for Fanout.
func (s *Sink) writeLine(_ string, line []byte) { _ = s.appendLine(line) }

func (s *Sink) appendLine(line []byte) error {
	if s.o.syncWrite {
		return s.appendSync(line)
	}
	s.gate.RLock()
	if s.closed {
		s.gate.RUnlock()
		s.drop(1, "sink closed")
		return ErrClosed
	}
	select {
	case s.q <- item{kind: kindLine, line: line}:
		s.gate.RUnlock()
		return nil
	default:
		s.gate.RUnlock()
		s.drop(1, "queue full")
		return ErrDropped
	}
}

// appendSync writes and fsyncs line before it returns, waiting at most
// syncTimeout: a disk that stalls (a hung NFS mount, a FIFO nobody reads)
// must not hang every decision behind it. Past the bound the decision goes
// on, the stall is counted (OpStall) and logged, and later records are
// dropped at once, counted, until the stalled write returns.
func (s *Sink) appendSync(line []byte) error {
	if s.stalled.Load() {
		s.drop(1, "sink stalled")
		return ErrStalled
	}
	done := make(chan error, 1)
	go func() { done <- s.writeSync(line) }()
	t := time.NewTimer(s.o.syncTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
	}
	if !s.stalled.Swap(true) {
		s.errs.Add(1)
		if s.o.reporter != nil {
			s.o.reporter.SinkError(s.o.name, OpStall)
		}
		s.o.logger.Error("audit record sink stalled: decisions go on without waiting for it; records are dropped until it answers",
			"sink", s.o.name, "waited", s.o.syncTimeout.String())
		go func() {
			<-done // the stalled write returned: records are written again
			s.stalled.Store(false)
		}()
	}
	return ErrStalled
}

// writeSync is one synchronous write and fsync, under mu.
func (s *Sink) writeSync(line []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.drop(1, "sink closed")
		return ErrClosed
	}
	s.be.add(line)
	if err := s.be.flush(); err != nil {
		return fmt.Errorf("audit: %s: %w", s.o.name, err)
	}
	if err := s.be.sync(); err != nil {
		return fmt.Errorf("audit: %s: %w", s.o.name, err)
	}
	return nil
}

// Stalled reports whether a synchronous write is past its bound (the
// sink then drops records); /readyz reports it.
func (s *Sink) Stalled() bool { return s.stalled.Load() }

// Flush writes and fsyncs everything handed over before it was called. It
// returns an error when any record was dropped or failed since the
// previous Flush, so nil acknowledges every record since then. It may
// wait for the disk; never call it on a decision path.
func (s *Sink) Flush() error {
	if s.o.syncWrite {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return ErrClosed
		}
		s.flushSync()
		return s.takePending()
	}
	s.gate.RLock()
	closed := s.closed
	s.gate.RUnlock()
	if closed {
		return ErrClosed
	}
	reply := make(chan error, 1)
	select {
	case s.q <- item{kind: kindFlush, reply: reply}:
	case <-s.done:
		return ErrClosed
	}
	select {
	case err := <-reply:
		return err
	case <-s.done:
		select {
		case err := <-reply:
			return err
		default:
			return ErrClosed
		}
	}
}

// Close drains the queue, writes, fsyncs and closes the sink. It returns
// what Flush would, plus any close failure. Later calls return nil; later
// records are dropped.
func (s *Sink) Close() error {
	if s.o.syncWrite {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return nil
		}
		s.closed = true
		s.flushSync()
		err := s.takePending()
		if cerr := s.be.close(); cerr != nil {
			s.fail(OpClose, 0, cerr)
			err = errors.Join(err, fmt.Errorf("audit: %s: close: %w", s.o.name, cerr))
		}
		s.logDropsNow()
		return err
	}
	s.gate.Lock()
	if s.closed {
		s.gate.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	s.gate.Unlock()
	s.q <- item{kind: kindClose} // the drain goroutine is alive until it takes this
	<-s.done
	s.logDropsNow()
	return s.closeErr
}

func (s *Sink) flushSync() {
	if s.be.flush() == nil {
		_ = s.be.sync()
	}
}

// takePending returns and clears what went wrong since the last Flush.
func (s *Sink) takePending() error {
	err := s.pendingErr
	s.pendingErr = nil
	d := s.dropped.Load()
	if n := d - s.flushedDropped; n > 0 {
		err = errors.Join(err, fmt.Errorf("audit: %s: %d since the last flush: %w", s.o.name, n, ErrDropped))
	}
	s.flushedDropped = d
	return err
}

// run is the drain goroutine.
func (s *Sink) run() {
	defer close(s.done)
	var tick <-chan time.Time
	if s.o.fsync == FsyncInterval {
		t := time.NewTicker(s.o.fsyncInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case it := <-s.q:
			b := s.batch(it)
			if s.be.flush() == nil && (len(b.replies) > 0 || b.closing || s.o.fsync == FsyncAlways) {
				_ = s.be.sync()
			}
			if len(b.replies) == 0 && !b.closing {
				continue
			}
			err := s.takePending()
			for _, r := range b.replies {
				r <- err
			}
			if b.closing {
				if cerr := s.be.close(); cerr != nil {
					s.fail(OpClose, 0, cerr)
					err = errors.Join(err, fmt.Errorf("audit: %s: close: %w", s.o.name, cerr))
				}
				s.closeErr = err
				return
			}
		case <-tick:
			_ = s.be.sync()
		}
	}
}

type batch struct {
	replies []chan error
	closing bool
}

// batch buffers first and whatever else is queued, up to maxBatch records;
// after the close marker it takes everything, since nothing can follow.
func (s *Sink) batch(first item) batch {
	var b batch
	take := func(it item) {
		switch it.kind {
		case kindLine:
			s.be.add(it.line)
		case kindFlush:
			b.replies = append(b.replies, it.reply)
		case kindClose:
			b.closing = true
		}
	}
	take(first)
	for n := 1; n < maxBatch || b.closing; n++ {
		select {
		case it := <-s.q:
			take(it)
		default:
			return b
		}
	}
	return b
}

// fail counts and logs a failed operation; lost records count as dropped.
// It runs on the drain goroutine or under mu.
func (s *Sink) fail(op string, lost int, err error) {
	s.errs.Add(1)
	if s.o.reporter != nil {
		s.o.reporter.SinkError(s.o.name, op)
	}
	if lost > 0 {
		s.drop(uint64(lost), op+" failed")
	}
	if s.pendingErr == nil {
		s.pendingErr = fmt.Errorf("audit: %s: %s: %w", s.o.name, op, err)
	}
	if n, ok := s.errLog.allow(s.o.now(), 1); ok {
		s.o.logger.Error("audit record sink failing", "sink", s.o.name, "op", op, "error", err.Error(), "failures", n, "records_lost", lost)
	}
}

// encodeFailed runs on the caller's goroutine, so it leaves pendingErr to
// the drop count.
func (s *Sink) encodeFailed(err error) {
	s.errs.Add(1)
	if s.o.reporter != nil {
		s.o.reporter.SinkError(s.o.name, OpEncode)
	}
	s.drop(1, "record could not be encoded")
	if n, ok := s.errLog.allow(s.o.now(), 1); ok {
		s.o.logger.Error("audit record sink failing", "sink", s.o.name, "op", OpEncode, "error", fmt.Sprintf("%T", err), "failures", n)
	}
}

// drop counts n records that will never be written. Its log line says how
// many were dropped since the previous line; drops the rate limit held
// back get a line of their own when the interval ends (and at Close), so
// that the lines add up to the counter even when a burst stops inside an
// interval.
func (s *Sink) drop(n uint64, why string) {
	s.dropped.Add(n)
	if s.o.reporter != nil {
		s.o.reporter.RecordsDropped(s.o.name, n)
	}
	now := s.o.now()
	if c, ok := s.dropLog.allow(now, n); ok {
		s.logDrops(why, c)
		return
	}
	if p := s.heldWhy.Load(); p == nil || *p != why {
		w := why // allocated only when the reason changes
		s.heldWhy.Store(&w)
	}
	s.armDropLog(now)
}

func (s *Sink) logDrops(why string, n uint64) {
	s.o.logger.Warn("audit records dropped", "sink", s.o.name, "why", why, "dropped", n, "dropped_total", s.dropped.Load())
}

// armDropLog schedules the line for held-back drops at the end of the
// interval, unless one is scheduled already.
func (s *Sink) armDropLog(now time.Time) {
	if d, ok := s.dropLog.arm(now); ok {
		s.o.afterFunc(d, s.logHeldDrops)
	}
}

// logHeldDrops is the line armDropLog scheduled.
func (s *Sink) logHeldDrops() {
	s.dropLog.armed.Store(false)
	if s.dropLog.pending.Load() == 0 {
		return // a line since took them
	}
	now := s.o.now()
	if c, ok := s.dropLog.allow(now, 0); ok {
		if c > 0 {
			s.logDrops(s.heldReason(), c)
		}
		return
	}
	s.armDropLog(now) // a line went out meanwhile: wait for its interval
}

// logDropsNow logs the held-back drops at once, for Close: a process that
// exits next would never run the scheduled line.
func (s *Sink) logDropsNow() {
	if c := s.dropLog.pending.Swap(0); c > 0 {
		s.dropLog.last.Store(s.o.now().UnixNano())
		s.logDrops(s.heldReason(), c)
	}
}

func (s *Sink) heldReason() string {
	if p := s.heldWhy.Load(); p != nil {
		return *p
	}
	return "unknown"
}

// limiter lets one log line through per interval and counts the events in
// between, without locks so that Write stays cheap.
type limiter struct {
	every   time.Duration
	last    atomic.Int64 // UnixNano of the last line; 0 before the first
	pending atomic.Uint64
	armed   atomic.Bool // a line for the held-back events is scheduled
}

// allow records n events and reports whether to log now, with the number
// of events the line stands for: n and those held back since the previous
// line.
func (l *limiter) allow(now time.Time, n uint64) (uint64, bool) {
	l.pending.Add(n)
	t := now.UnixNano()
	last := l.last.Load()
	if last != 0 && t-last < int64(l.every) {
		return 0, false
	}
	if !l.last.CompareAndSwap(last, t) {
		return 0, false
	}
	return l.pending.Swap(0), true
}

// arm claims the one scheduled line for held-back events and returns how
// long until the current interval ends; false when a line is scheduled
// already.
func (l *limiter) arm(now time.Time) (time.Duration, bool) {
	if !l.armed.CompareAndSwap(false, true) {
		return 0, false
	}
	d := time.Duration(l.last.Load() + int64(l.every) - now.UnixNano())
	return min(max(d, 0), l.every), true // bounded should the clock jump
}

// encode marshals r as one line. HTML escaping is off: the lines are read
// by tools, not browsers, and reasons stay readable.
func encode(r *points.Record) ([]byte, error) {
	if r == nil {
		return nil, errors.New("nil record")
	}
	// A typical record is 650-750 bytes; starting at 512 grew every one.
	if line, ok := appendRecord(make([]byte, 0, 1024), r); ok {
		return line, nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return b.Bytes(), nil // Encode ends the line with '\n'
}

// writerBackend writes lines to an io.Writer; it has nothing to fsync.
type writerBackend struct {
	w   io.Writer
	buf []byte
	h   hooks
}

func (b *writerBackend) add(line []byte) { b.buf = append(b.buf, line...) }

func (b *writerBackend) flush() error {
	if len(b.buf) == 0 {
		return nil
	}
	lines := bytes.Count(b.buf, []byte{'\n'})
	_, err := b.w.Write(b.buf)
	b.buf = b.buf[:0]
	if err != nil {
		b.h.fail(OpWrite, lines, err)
		return err
	}
	b.h.wrote(lines)
	return nil
}

func (b *writerBackend) sync() error { return nil }

// close leaves w open: the sink does not own it. flush reported its own
// failure already.
func (b *writerBackend) close() error { _ = b.flush(); return nil }

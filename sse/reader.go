// Package sse reads and writes the Server-Sent Events wire format
// (text/event-stream) as defined by the WHATWG HTML Living Standard,
// §9.2.5 "Parsing an event stream" and §9.2.6 "Interpreting an event stream".
//
// The package knows nothing about what the events carry. A [Reader] turns any
// byte stream into dispatched [Event] values, exactly as a browser's
// EventSource would, and additionally keeps the raw bytes of every event so
// that a proxy can count or replay them. A [Writer] emits events in one
// canonical framing that every client we care about parses identically.
//
// # Reading
//
// The reader follows the standard:
//   - Lines end in CR LF, a lone LF or a lone CR, in any mix. A CR at the end
//     of one Read and an LF at the start of the next form one line ending.
//   - One U+FEFF byte order mark at the very start of the stream is ignored.
//   - A line starting with ':' is a comment.
//   - A line without a colon is a field name with an empty value.
//   - After the colon, exactly one leading space is removed from the value.
//   - "data" lines are joined with LF; "event" sets the type; "id" sets the
//     event ID unless the value contains NUL; "retry" is honoured only when
//     it is all ASCII digits; other field names are ignored.
//   - A blank line dispatches the event, unless no "data" field was seen, in
//     which case the block fires nothing.
//   - At EOF a block that was not closed by a blank line is not dispatched.
//     Unlike a browser, the reader reports that as io.ErrUnexpectedEOF, so
//     a caller can fail closed on a truncated stream.
//
// The reader does not replace invalid UTF-8: bytes pass through unchanged.
// It does not substitute the default type "message" either: Event.Type is
// empty when the stream did not name a type.
//
// # Writing
//
// See [AppendEvent] for the canonical framing rules.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// Event is one dispatched server-sent event.
//
// The Data and Raw slices returned by [Reader.Next] alias the reader's
// internal buffers and are valid only until the next call to Next; use
// [Event.Clone] to keep them.
type Event struct {
	// Type is the value of the event's last "event" field, or "" when it
	// had none (which a browser reports as "message").
	Type string
	// Data is the event's data: the values of its "data" fields joined
	// with LF. It never ends in the LF that the standard strips.
	Data []byte
	// ID is the value of the event's last valid "id" field; HasID reports
	// whether the event block carried one. (The persisting last-event-ID of
	// the standard is available from [Reader.LastEventID].)
	ID    string
	HasID bool
	// Retry is the reconnection time from the event's last valid "retry"
	// field, in whole milliseconds; HasRetry reports whether there was one.
	Retry    time.Duration
	HasRetry bool
	// Raw holds the exact bytes the reader consumed for this event: every
	// line since the previous dispatched event (comments and blocks that
	// fired nothing included, and a leading byte order mark on the first
	// event) up to and including the blank line that dispatched it.
	// Concatenating Raw over all events reproduces the stream, except
	// bytes after the last dispatched event. A reader never waits for
	// bytes after a complete event, so when a CR ends the dispatching blank
	// line, a following LF is counted in the next event's Raw.
	// The Writer ignores Raw.
	Raw []byte
}

// Clone returns a copy of e whose slices do not alias any reader buffer.
func (e Event) Clone() Event {
	e.Data = bytes.Clone(e.Data)
	e.Raw = bytes.Clone(e.Raw)
	if e.Data == nil {
		e.Data = []byte{}
	}
	return e
}

// ErrTooLarge is matched (with errors.Is) by every [LimitError].
var ErrTooLarge = errors.New("sse: size limit exceeded")

// LimitError reports that an event or a single line exceeded the limit the
// reader was given. It matches [ErrTooLarge].
type LimitError struct {
	// Line is true when the limit on one line was hit, false for the limit
	// on a whole event.
	Line bool
	// Limit is the limit in bytes that was exceeded.
	Limit int
}

func (e *LimitError) Error() string {
	what := "event"
	if e.Line {
		what = "line"
	}
	return fmt.Sprintf("sse: %s longer than %d bytes", what, e.Limit)
}

// Unwrap lets errors.Is(err, ErrTooLarge) match.
func (e *LimitError) Unwrap() error { return ErrTooLarge }

const (
	minReadSize = 4096
	// maxEmptyReads mirrors bufio: a reader that keeps returning 0, nil is
	// broken, and looping forever on it would hang the proxy.
	maxEmptyReads = 100
)

var bom = []byte{0xEF, 0xBB, 0xBF}

// Reader parses an event stream. It is not safe for concurrent use.
type Reader struct {
	r   io.Reader
	buf []byte // buf[start:end] holds the current event's bytes and read-ahead
	// start is where the current event's raw bytes begin; pos is the start
	// of the first unprocessed line; end is the end of valid data.
	start, pos, end int

	maxEvent, maxLine int

	// Parser state of the current block.
	typ      []byte
	hasData  bool
	dataN    int // number of data lines
	dataOff  int // offset of the single data value, relative to start
	dataLen  int
	data     []byte // joined data once there is more than one line
	id       []byte
	hasID    bool
	retry    time.Duration
	hasRetry bool

	lastID    []byte // the standard's last-event-ID buffer
	lastIDStr string

	skipLF  bool // the previous line ended in CR; swallow one LF
	bomDone bool
	eof     bool
	err     error
}

// NewReader returns a reader of the event stream r. maxEventBytes bounds the
// raw size of one event (see [Event.Raw]); a non-positive value means no
// limit. A line is bounded by the same limit unless [Reader.SetMaxLineBytes]
// sets a smaller one.
func NewReader(r io.Reader, maxEventBytes int) *Reader {
	rd := &Reader{}
	rd.Reset(r)
	rd.SetMaxEventBytes(maxEventBytes)
	return rd
}

// Reset discards all state, keeps the allocated buffers and the limits,
// and makes the reader read from r as a new stream.
func (rd *Reader) Reset(r io.Reader) {
	*rd = Reader{
		r:        r,
		buf:      rd.buf,
		typ:      rd.typ[:0],
		data:     rd.data[:0],
		id:       rd.id[:0],
		lastID:   rd.lastID[:0],
		maxEvent: rd.maxEvent,
		maxLine:  rd.maxLine,
	}
}

// SetMaxEventBytes changes the limit on the raw size of one event. A
// non-positive n means no limit. It takes effect from the next line.
func (rd *Reader) SetMaxEventBytes(n int) {
	rd.maxEvent = max(n, 0)
}

// SetMaxLineBytes sets a separate, smaller limit on the length of one line,
// excluding its line ending. A non-positive n removes it, leaving lines
// bounded by the event limit only.
func (rd *Reader) SetMaxLineBytes(n int) {
	rd.maxLine = max(n, 0)
}

// lineLimit is the effective limit on one line: the smaller of the two.
func (rd *Reader) lineLimit() int {
	if rd.maxLine > 0 && (rd.maxEvent == 0 || rd.maxLine < rd.maxEvent) {
		return rd.maxLine
	}
	return rd.maxEvent
}

// overLimit checks a line of n bytes (complete or partial, terminator
// excluded) that starts at buf[lineStart]. When both limits are exceeded it
// reports the one that the earliest byte crossed (the event limit on a tie),
// so the error does not depend on how reads happened to split the stream.
func (rd *Reader) overLimit(lineStart, n int) error {
	lineCross, eventCross := math.MaxInt, math.MaxInt
	ll := rd.lineLimit()
	if ll > 0 {
		lineCross = ll + 1
	}
	if rd.maxEvent > 0 {
		// May be zero when an LF that arrived late already overflowed.
		eventCross = rd.maxEvent - (lineStart - rd.start) + 1
	}
	if n < min(lineCross, eventCross) {
		return nil
	}
	if lineCross < eventCross {
		return &LimitError{Line: true, Limit: ll}
	}
	return &LimitError{Limit: rd.maxEvent}
}

// LastEventID returns the standard's last event ID: the value of the most
// recent valid "id" field of any block closed by a blank line, persisting
// across events until another "id" field (possibly empty) replaces it.
func (rd *Reader) LastEventID() string { return rd.lastIDStr }

// Next returns the next dispatched event. At the clean end of the stream it
// returns io.EOF. If the stream ends inside an event (a partial line, or data
// fields not yet closed by a blank line) it returns an error matching
// io.ErrUnexpectedEOF. A limit overflow returns a *[LimitError]. Errors from
// the underlying reader are wrapped. Errors are sticky.
func (rd *Reader) Next() (Event, error) {
	if rd.err != nil {
		return Event{}, rd.err
	}
	rd.start = rd.pos
	emptyReads := 0
	for {
		ev, ok, err := rd.scan()
		if err != nil {
			rd.err = err
			return Event{}, err
		}
		if ok {
			return ev, nil
		}
		// No complete line is buffered: check limits on the partial line
		// before reading, so an endless line cannot grow the buffer forever.
		if rd.bomDone {
			if err := rd.overLimit(rd.pos, rd.end-rd.pos); err != nil {
				rd.err = err
				return Event{}, err
			}
		}
		if rd.eof {
			rd.err = rd.atEOF()
			return Event{}, rd.err
		}
		n, err := rd.fill()
		if err != nil {
			if errors.Is(err, io.EOF) {
				rd.eof = true
				continue
			}
			rd.err = fmt.Errorf("sse: read: %w", err)
			return Event{}, rd.err
		}
		if n == 0 {
			emptyReads++
			if emptyReads >= maxEmptyReads {
				rd.err = fmt.Errorf("sse: read: %w", io.ErrNoProgress)
				return Event{}, rd.err
			}
			continue
		}
		emptyReads = 0
	}
}

// Unclosed returns the block a stream ended in, after [Reader.Next]
// reported io.ErrUnexpectedEOF because the stream ended after a complete
// line without the blank line that dispatches it. A browser discards such
// a block; a caller may still want to look at it (a proxy that accepts a
// final "data: [DONE]" whose server closed without the blank line). It
// reports false when the stream ended inside a line or had no data field.
func (rd *Reader) Unclosed() (Event, bool) {
	if !rd.eof || !errors.Is(rd.err, io.ErrUnexpectedEOF) || rd.pos < rd.end || !rd.hasData {
		return Event{}, false
	}
	ev, ok := rd.dispatch()
	if ok {
		ev.Data = bytes.Clone(ev.Data)
		ev.Raw = bytes.Clone(ev.Raw)
	}
	return ev, ok
}

// PartialLine returns the line a stream ended in without its line break,
// after [Reader.Next] reported io.ErrUnexpectedEOF, when no earlier line of
// that block had fields: the bytes a browser would discard. A proxy can
// then accept a final "data: [DONE]" whose server closed without any line
// break. It reports false otherwise.
func (rd *Reader) PartialLine() ([]byte, bool) {
	if !rd.eof || !errors.Is(rd.err, io.ErrUnexpectedEOF) || rd.pos >= rd.end || rd.hasData || len(rd.typ) > 0 || rd.hasID || rd.hasRetry {
		return nil, false
	}
	line := rd.buf[rd.pos:rd.end]
	if bytes.IndexAny(line, "\r\n") >= 0 {
		return nil, false
	}
	return bytes.Clone(line), true
}

// atEOF decides between a clean and a truncated end of stream.
func (rd *Reader) atEOF() error {
	if rd.pos < rd.end || rd.hasData {
		return fmt.Errorf("sse: stream ended inside an event: %w", io.ErrUnexpectedEOF)
	}
	return io.EOF
}

// fill reads more bytes into buf[end:], compacting or growing the buffer as
// needed. Bytes before start are no longer referenced and may be dropped.
func (rd *Reader) fill() (int, error) {
	if rd.end == len(rd.buf) {
		if rd.start > 0 {
			n := copy(rd.buf, rd.buf[rd.start:rd.end])
			rd.pos -= rd.start
			rd.end = n
			rd.start = 0
		}
		if rd.end == len(rd.buf) || len(rd.buf)-rd.end < minReadSize/4 {
			size := max(2*len(rd.buf), minReadSize)
			if rd.maxEvent > 0 {
				// A limit check happens before every read, so the buffer
				// never needs more than the limit plus one read.
				size = min(size, max(rd.maxEvent+minReadSize, rd.end+minReadSize))
			}
			nb := make([]byte, size)
			copy(nb, rd.buf[:rd.end])
			rd.buf = nb
		}
	}
	n, err := rd.r.Read(rd.buf[rd.end:])
	if n < 0 || n > len(rd.buf)-rd.end {
		return 0, errors.New("sse: read: invalid count from reader")
	}
	rd.end += n
	if n > 0 && errors.Is(err, io.EOF) {
		// Process the bytes first; the next read reports EOF again.
		rd.eof = true
		return n, nil
	}
	return n, err
}

// scan processes the complete lines that are buffered. It returns ok when a
// blank line dispatched an event.
func (rd *Reader) scan() (Event, bool, error) {
	for {
		if rd.skipLF && rd.pos < rd.end {
			if rd.buf[rd.pos] == '\n' {
				rd.pos++
			}
			rd.skipLF = false
		}
		if !rd.bomDone {
			avail := rd.buf[rd.pos:rd.end]
			if len(avail) < len(bom) && bytes.HasPrefix(bom, avail) && !rd.eof {
				return Event{}, false, nil // cannot tell yet
			}
			if bytes.HasPrefix(avail, bom) {
				rd.pos += len(bom)
			}
			rd.bomDone = true
		}
		rest := rd.buf[rd.pos:rd.end]
		// LF is by far the common terminator; look for CR only before it.
		i := bytes.IndexByte(rest, '\n')
		limit := rest
		if i >= 0 {
			limit = rest[:i]
		}
		if j := bytes.IndexByte(limit, '\r'); j >= 0 {
			i = j
		}
		if i < 0 {
			return Event{}, false, nil
		}
		lineStart := rd.pos
		line := rest[:i]
		next := rd.pos + i + 1
		if rest[i] == '\r' {
			if next < rd.end {
				if rd.buf[next] == '\n' {
					next++
				}
			} else {
				rd.skipLF = true
			}
		}
		if err := rd.overLimit(lineStart, len(line)); err != nil {
			return Event{}, false, err
		}
		if len(line) == 0 {
			// A dispatching blank line never swallows an LF that has
			// already arrived: keep Raw independent of read boundaries.
			if rest[i] == '\r' && next > rd.pos+i+1 {
				next = rd.pos + i + 1
				rd.skipLF = true
			}
			rd.pos = next
			if rd.maxEvent > 0 && rd.pos-rd.start > rd.maxEvent {
				return Event{}, false, &LimitError{Limit: rd.maxEvent}
			}
			if ev, ok := rd.dispatch(); ok {
				return ev, true, nil
			}
			continue
		}
		rd.pos = next
		if rd.maxEvent > 0 && rd.pos-rd.start > rd.maxEvent {
			return Event{}, false, &LimitError{Limit: rd.maxEvent}
		}
		rd.field(line, lineStart)
	}
}

// field interprets one non-blank line that starts at buf[lineStart].
func (rd *Reader) field(line []byte, lineStart int) {
	if line[0] == ':' {
		return // comment
	}
	name, value := line, line[len(line):]
	if c := bytes.IndexByte(line, ':'); c >= 0 {
		name, value = line[:c], line[c+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "event":
		rd.typ = append(rd.typ[:0], value...)
	case "data":
		valueStart := lineStart + len(line) - len(value)
		switch rd.dataN {
		case 0:
			// Zero-copy for the common one-line event: remember where the
			// value sits relative to start, which survives compaction.
			rd.dataOff, rd.dataLen = valueStart-rd.start, len(value)
		case 1:
			first := rd.buf[rd.start+rd.dataOff : rd.start+rd.dataOff+rd.dataLen]
			rd.data = append(rd.data[:0], first...)
			fallthrough
		default:
			rd.data = append(rd.data, '\n')
			rd.data = append(rd.data, value...)
		}
		rd.dataN++
		rd.hasData = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			rd.id = append(rd.id[:0], value...)
			rd.hasID = true
			rd.lastID = append(rd.lastID[:0], value...)
		}
	case "retry":
		if ms, ok := parseRetry(value); ok {
			rd.retry, rd.hasRetry = ms, true
		}
	}
}

// parseRetry accepts only ASCII digits, as the standard requires, and
// ignores values too large for a time.Duration.
func parseRetry(v []byte) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	const maxMS = int64(1<<63-1) / int64(time.Millisecond)
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		if n > maxMS {
			return 0, false
		}
	}
	return time.Duration(n) * time.Millisecond, true
}

// dispatch runs the standard's dispatch step at a blank line.
func (rd *Reader) dispatch() (Event, bool) {
	if rd.lastIDStr != string(rd.lastID) {
		rd.lastIDStr = string(rd.lastID)
	}
	defer rd.resetBlock()
	if !rd.hasData {
		return Event{}, false
	}
	ev := Event{
		Data:     rd.data,
		HasID:    rd.hasID,
		Retry:    rd.retry,
		HasRetry: rd.hasRetry,
		Raw:      rd.buf[rd.start:rd.pos:rd.pos],
	}
	if rd.dataN == 1 {
		off := rd.start + rd.dataOff
		ev.Data = rd.buf[off : off+rd.dataLen : off+rd.dataLen]
	}
	if len(rd.typ) > 0 {
		ev.Type = string(rd.typ)
	}
	if rd.hasID {
		ev.ID = string(rd.id)
	}
	return ev, true
}

func (rd *Reader) resetBlock() {
	rd.typ = rd.typ[:0]
	rd.hasData = false
	rd.dataN = 0
	rd.data = rd.data[:0]
	rd.id = rd.id[:0]
	rd.hasID = false
	rd.retry, rd.hasRetry = 0, false
}

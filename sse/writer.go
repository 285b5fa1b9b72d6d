package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// ErrInvalidEvent is returned for an event that the wire format cannot
// carry: a type or ID containing CR or LF, an ID containing NUL, or a
// negative retry.
var ErrInvalidEvent = errors.New("sse: event cannot be encoded")

// AppendEvent appends the canonical encoding of ev to dst. The rules, chosen
// so that every client parses the result the same way (see
// docs/CLIENTS-AND-SSE.md §C3):
//
//   - Line endings are LF only, whatever the source stream used.
//   - "event: <Type>" is written only when Type is not empty.
//   - "id: <ID>" is written only when HasID is set, and
//     "retry: <milliseconds>" only when HasRetry is set; Retry is truncated
//     to whole milliseconds.
//   - Data becomes one "data: <line>" per line (an empty line is written as
//     "data:"). Lines are split at LF, CR LF and CR, so a CR in Data reads
//     back as LF. Data without line breaks, such as compact JSON, is exactly
//     one data line. Empty Data is one "data:" line, so the event still
//     fires.
//   - One blank line ends the event.
//
// Field values keep their leading spaces: the reader strips only the one
// space that the writer adds after the colon. ev.Raw is ignored.
func AppendEvent(dst []byte, ev Event) ([]byte, error) {
	if ev.Type != "" {
		if containsAny(ev.Type, "\r\n") {
			return dst, fmt.Errorf("%w: event type contains a line break", ErrInvalidEvent)
		}
		dst = append(dst, "event: "...)
		dst = append(dst, ev.Type...)
		dst = append(dst, '\n')
	}
	if ev.HasID {
		if containsAny(ev.ID, "\r\n\x00") {
			return dst, fmt.Errorf("%w: id contains a line break or NUL", ErrInvalidEvent)
		}
		dst = append(dst, "id: "...)
		dst = append(dst, ev.ID...)
		dst = append(dst, '\n')
	}
	if ev.HasRetry {
		if ev.Retry < 0 {
			return dst, fmt.Errorf("%w: negative retry", ErrInvalidEvent)
		}
		dst = append(dst, "retry: "...)
		dst = strconv.AppendInt(dst, int64(ev.Retry/time.Millisecond), 10)
		dst = append(dst, '\n')
	}
	dst = appendLines(dst, "data", ev.Data)
	return append(dst, '\n'), nil
}

// appendLines writes one "<prefix>: <line>" per line of text.
func appendLines(dst []byte, prefix string, text []byte) []byte {
	for {
		i := lineBreak(text)
		line := text
		if i >= 0 {
			line = text[:i]
		}
		dst = append(dst, prefix...)
		dst = append(dst, ':')
		if len(line) > 0 {
			dst = append(dst, ' ')
			dst = append(dst, line...)
		}
		dst = append(dst, '\n')
		if i < 0 {
			return dst
		}
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		text = text[i+1:]
	}
}

// lineBreak is bytes.IndexAny(text, "\r\n") with two vectorised
// IndexByte searches: JSON data has neither byte, so both usually scan
// the whole line at memory speed instead of a byte-at-a-time set test.
func lineBreak(text []byte) int {
	i := bytes.IndexByte(text, '\n')
	lim := text
	if i >= 0 {
		lim = text[:i]
	}
	if j := bytes.IndexByte(lim, '\r'); j >= 0 {
		return j
	}
	return i
}

func containsAny(s, chars string) bool {
	for i := 0; i < len(s); i++ {
		for j := 0; j < len(chars); j++ {
			if s[i] == chars[j] {
				return true
			}
		}
	}
	return false
}

// Writer writes events in canonical framing (see [AppendEvent]). Each event
// or comment reaches the underlying writer in a single Write call. Flushing
// is up to the caller, e.g. with http.NewResponseController(w).Flush after
// each event. The first write error is sticky.
type Writer struct {
	w   io.Writer
	buf []byte
	err error
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w}
}

// WriteEvent writes one event. An event that cannot be encoded returns an
// error matching [ErrInvalidEvent] and writes nothing; it does not poison
// the writer.
func (w *Writer) WriteEvent(ev Event) error {
	if w.err != nil {
		return w.err
	}
	b, err := AppendEvent(w.buf[:0], ev)
	if err != nil {
		return err
	}
	w.buf = b
	return w.write()
}

// WriteComment writes text as comment lines (": <line>", split like data)
// followed by a blank line. Readers ignore comments; the blank line makes
// the comment a complete unit, which intermediaries pass on at once, so it
// serves as a keep-alive.
func (w *Writer) WriteComment(text string) error {
	if w.err != nil {
		return w.err
	}
	w.buf = appendLines(w.buf[:0], "", []byte(text))
	w.buf = append(w.buf, '\n')
	return w.write()
}

func (w *Writer) write() error {
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = fmt.Errorf("sse: write: %w", err)
	}
	// Do not keep a huge buffer alive after one outsized event.
	if cap(w.buf) > 1<<20 {
		w.buf = nil
	}
	return w.err
}

package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// ev is a compact way to write expected events in tables.
type ev struct {
	typ   string
	data  string
	id    string
	hasID bool
	retry time.Duration
}

func (e ev) event() Event {
	return Event{Type: e.typ, Data: []byte(e.data), ID: e.id, HasID: e.hasID, Retry: e.retry, HasRetry: e.retry != 0}
}

var long2k = strings.Repeat("x", 2048)

// readerCases come from the WHATWG parsing rules (§9.2.5/9.2.6), the
// web-platform-tests eventsource/format-*.{js,htm} files and the
// launchdarkly/sse-contract-tests basic-parsing, line-feed, comment and BOM
// suites (see docs/CLIENTS-AND-SSE.md §C4).
var readerCases = []struct {
	name    string
	in      string
	want    []ev
	wantErr error // nil means a clean io.EOF
	lastID  string
}{
	{name: "basic", in: "data: hello\n\n", want: []ev{{data: "hello"}}},
	{name: "no space after colon", in: "data:hello\n\n", want: []ev{{data: "hello"}}},
	{name: "only one space stripped", in: "data:  hello\n\n", want: []ev{{data: " hello"}}},
	{name: "tab is not stripped", in: "data:\thello\n\n", want: []ev{{data: "\thello"}}},
	{name: "colon in value", in: "data: a:b: c\n\n", want: []ev{{data: "a:b: c"}}},
	{name: "field without colon", in: "data\n\n", want: []ev{{data: ""}}},
	{name: "two data fields without colon", in: "data\ndata\n\n", want: []ev{{data: "\n"}}},
	{name: "empty data", in: "data:\n\n", want: []ev{{data: ""}}},
	{name: "multi-line data joined with LF", in: "data: a\ndata: b\ndata: c\n\n", want: []ev{{data: "a\nb\nc"}}},
	{name: "trailing empty data line keeps LF", in: "data: a\ndata:\n\n", want: []ev{{data: "a\n"}}},
	{name: "json split over two data lines", in: "data: {\"a\":\ndata: 1}\n\n", want: []ev{{data: "{\"a\":\n1}"}}},
	{name: "event type", in: "event: add\ndata: 1\n\n", want: []ev{{typ: "add", data: "1"}}},
	{name: "empty event type", in: "event:\ndata: 1\n\n", want: []ev{{data: "1"}}},
	{name: "last event field wins", in: "event: a\nevent: b\ndata: 1\n\n", want: []ev{{typ: "b", data: "1"}}},
	{name: "type does not leak to next event", in: "event: a\ndata: 1\n\ndata: 2\n\n", want: []ev{{typ: "a", data: "1"}, {data: "2"}}},
	{name: "event without data fires nothing", in: "event: a\n\ndata: 2\n\n", want: []ev{{data: "2"}}},
	{name: "fields in reverse order", in: "data: x\nid: 5\nevent: e\n\n", want: []ev{{typ: "e", data: "x", id: "5", hasID: true}}, lastID: "5"},
	{name: "unknown fields ignored", in: "foo: bar\ndata: x\nDATA: y\n data: z\n\n", want: []ev{{data: "x"}}},
	{name: "id", in: "id: 1\ndata: x\n\n", want: []ev{{data: "x", id: "1", hasID: true}}, lastID: "1"},
	{name: "id with NUL ignored", in: "id: 1\ndata: a\n\nid: a\x00b\ndata: b\n\n", want: []ev{{data: "a", id: "1", hasID: true}, {data: "b"}}, lastID: "1"},
	{name: "id persists", in: "id: 1\ndata: a\n\ndata: b\n\n", want: []ev{{data: "a", id: "1", hasID: true}, {data: "b"}}, lastID: "1"},
	{name: "empty id resets", in: "id: 1\ndata: a\n\nid\ndata: b\n\n", want: []ev{{data: "a", id: "1", hasID: true}, {data: "b", hasID: true}}, lastID: ""},
	{name: "id-only block sets last id", in: "id: 7\n\n", want: nil, lastID: "7"},
	{name: "retry", in: "retry: 1500\ndata: x\n\n", want: []ev{{data: "x", retry: 1500 * time.Millisecond}}},
	{name: "retry bogus", in: "retry: 10a\ndata: a\n\nretry: -1\ndata: b\n\nretry:\ndata: c\n\nretry: 5 \ndata: d\n\nretry: 99999999999999999999\ndata: e\n\n",
		want: []ev{{data: "a"}, {data: "b"}, {data: "c"}, {data: "d"}, {data: "e"}}},
	{name: "comment", in: ": hello\ndata: x\n\n", want: []ev{{data: "x"}}},
	{name: "comment only block", in: ": keepalive\n\ndata: x\n\n", want: []ev{{data: "x"}}},
	{name: "wpt format-comments",
		in:   "data:1\r:\x00\n:\r\ndata:2\n:" + long2k + "\rdata:3\n:data:fail\r:" + long2k + "\ndata:4\n\n",
		want: []ev{{data: "1\n2\n3\n4"}}},
	{name: "CRLF", in: "data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n", want: []ev{{data: "a\nb"}, {data: "c"}}},
	{name: "CR only", in: "data: a\rdata: b\r\rdata: c\r\r", want: []ev{{data: "a\nb"}, {data: "c"}}},
	{name: "mixed line endings", in: "data: a\r\n\ndata: b\n\r\rdata: c\r\r\n", want: []ev{{data: "a"}, {data: "b"}, {data: "c"}}},
	{name: "CR CR is two line endings", in: "data: a\r\rdata: b\n\n", want: []ev{{data: "a"}, {data: "b"}}},
	{name: "LF CR is two line endings", in: "data: a\n\rdata: b\n\n", want: []ev{{data: "a"}, {data: "b"}}},
	{name: "leading blank lines", in: "\n\n\r\n\rdata: x\n\n", want: []ev{{data: "x"}}},
	{name: "BOM", in: "\xEF\xBB\xBFdata: x\n\n", want: []ev{{data: "x"}}},
	{name: "BOM only once", in: "\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\ndata: y\n\n", want: []ev{{data: "y"}}},
	{name: "BOM not at start", in: "data: a\n\n\xEF\xBB\xBFdata: b\n\n", want: []ev{{data: "a"}}},
	{name: "partial BOM", in: "\xEF\xBBdata: x\n\n", want: nil},
	{name: "utf-8", in: "data: 日本語 ✓ 𝄞\n\n", want: []ev{{data: "日本語 ✓ 𝄞"}}},
	{name: "invalid utf-8 passes through", in: "data: \xff\xfe\n\n", want: []ev{{data: "\xff\xfe"}}},
	{name: "NUL in data", in: "data: a\x00b\n\n", want: []ev{{data: "a\x00b"}}},
	{name: "done marker", in: "data: [DONE]\n\n", want: []ev{{data: "[DONE]"}}},
	{name: "trailing comment is clean", in: "data: x\n\n: bye\n", want: []ev{{data: "x"}}},
	{name: "trailing id-only block is clean", in: "data: x\n\nid: 3\n", want: []ev{{data: "x"}}},
	{name: "empty stream", in: "", want: nil},
	{name: "only blank lines", in: "\n\n\n", want: nil},
	{name: "unterminated event at EOF", in: "data: a\n\ndata: b\n", want: []ev{{data: "a"}}, wantErr: io.ErrUnexpectedEOF},
	{name: "unterminated line at EOF", in: "data: a\n\ndata: [DONE]", want: []ev{{data: "a"}}, wantErr: io.ErrUnexpectedEOF},
	{name: "unterminated comment at EOF", in: "data: a\n\n: x", want: []ev{{data: "a"}}, wantErr: io.ErrUnexpectedEOF},
	{name: "CR at EOF ends the event", in: "data: a\r\r", want: []ev{{data: "a"}}},
}

// chunkings are the ways every table case is delivered.
var chunkings = []struct {
	name string
	wrap func(string) io.Reader
}{
	{"whole", func(s string) io.Reader { return strings.NewReader(s) }},
	{"one byte", func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) }},
	{"data with EOF", func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) }},
	{"split after CR", func(s string) io.Reader { return splitAfter(s, "\r") }},
	{"split after CR and LF", func(s string) io.Reader { return splitAfter(s, "\r\n") }},
}

// chunkReader returns its chunks one per Read.
type chunkReader struct{ chunks [][]byte }

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.chunks) > 0 && len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	return n, nil
}

// splitAfter delivers s in reads that end after every byte in cuts.
func splitAfter(s string, cuts string) io.Reader {
	var chunks [][]byte
	last := 0
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(cuts, s[i]) >= 0 {
			chunks = append(chunks, []byte(s[last:i+1]))
			last = i + 1
		}
	}
	chunks = append(chunks, []byte(s[last:]))
	return &chunkReader{chunks: chunks}
}

// randomChunks splits b at pseudo-random points derived from seed.
func randomChunks(b []byte, seed uint64) io.Reader {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var chunks [][]byte
	for len(b) > 0 {
		n := 1 + rng.IntN(min(len(b), 16))
		chunks = append(chunks, b[:n])
		b = b[n:]
	}
	return &chunkReader{chunks: chunks}
}

type result struct {
	events []Event
	err    error
	lastID string
}

func readAll(r io.Reader, limit int) result {
	rd := NewReader(r, limit)
	var res result
	for {
		e, err := rd.Next()
		if err != nil {
			res.err = err
			res.lastID = rd.LastEventID()
			return res
		}
		res.events = append(res.events, e.Clone())
	}
}

func eventsEqual(a, b Event) bool {
	return a.Type == b.Type && bytes.Equal(a.Data, b.Data) && a.ID == b.ID && a.HasID == b.HasID &&
		a.Retry == b.Retry && a.HasRetry == b.HasRetry
}

func fmtEvent(e Event) string {
	return fmt.Sprintf("{Type:%q Data:%q ID:%q HasID:%v Retry:%v HasRetry:%v}", e.Type, e.Data, e.ID, e.HasID, e.Retry, e.HasRetry)
}

func TestReader(t *testing.T) {
	t.Parallel()
	for _, tc := range readerCases {
		for _, ch := range chunkings {
			t.Run(tc.name+"/"+ch.name, func(t *testing.T) {
				t.Parallel()
				res := readAll(ch.wrap(tc.in), 1<<20)
				wantErr := tc.wantErr
				if wantErr == nil {
					wantErr = io.EOF
				}
				if !errors.Is(res.err, wantErr) {
					t.Fatalf("err = %v, want %v", res.err, wantErr)
				}
				if wantErr == io.EOF && res.err != io.EOF {
					t.Fatalf("clean end must be io.EOF itself, got %#v", res.err)
				}
				if len(res.events) != len(tc.want) {
					for _, e := range res.events {
						t.Log(fmtEvent(e))
					}
					t.Fatalf("got %d events, want %d", len(res.events), len(tc.want))
				}
				var raw []byte
				for i, e := range res.events {
					if w := tc.want[i].event(); !eventsEqual(e, w) {
						t.Errorf("event %d = %s, want %s", i, fmtEvent(e), fmtEvent(w))
					}
					raw = append(raw, e.Raw...)
				}
				if !strings.HasPrefix(tc.in, string(raw)) {
					t.Errorf("concatenated Raw %q is not a prefix of the input", raw)
				}
				if res.lastID != tc.lastID {
					t.Errorf("LastEventID = %q, want %q", res.lastID, tc.lastID)
				}
			})
		}
	}
}

func TestReaderRaw(t *testing.T) {
	t.Parallel()
	in := "\xEF\xBB\xBF: hi\ndata: a\n\nid: 1\n\nevent: x\r\ndata: b\r\n\r\ndata: c\r\r\n"
	want := []string{"\xEF\xBB\xBF: hi\ndata: a\n\n", "id: 1\n\nevent: x\r\ndata: b\r\n\r", "\ndata: c\r\r", "\n"}
	for _, ch := range chunkings {
		t.Run(ch.name, func(t *testing.T) {
			res := readAll(ch.wrap(in), 0)
			if res.err != io.EOF {
				t.Fatalf("err = %v", res.err)
			}
			if len(res.events) != 3 {
				t.Fatalf("got %d events", len(res.events))
			}
			for i, e := range res.events {
				if string(e.Raw) != want[i] {
					t.Errorf("event %d Raw = %q, want %q", i, e.Raw, want[i])
				}
			}
		})
	}
}

func TestReaderLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		in        string
		maxEvent  int
		maxLine   int
		wantLine  bool
		wantCount int // events before the error
	}{
		{name: "event limit", in: "data: 12345\n\ndata: 1234567890\n\n", maxEvent: 14, wantCount: 1},
		{name: "event limit counts all lines", in: "data: a\ndata: b\ndata: c\n\n", maxEvent: 20},
		{name: "event limit counts comments", in: ": 0123456789\n\ndata: a\n\n", maxEvent: 16},
		{name: "line limit", in: "data: a\n\ndata: 0123456789\n\n", maxEvent: 100, maxLine: 10, wantLine: true, wantCount: 1},
		{name: "endless line", in: "data: " + strings.Repeat("x", 100000), maxEvent: 1000},
		{name: "endless line with line limit", in: "data: " + strings.Repeat("x", 100000), maxEvent: 1000, maxLine: 999, wantLine: true},
		{name: "event limit before line limit", in: "data: 1234\ndata: 123456789\n\n", maxEvent: 15, maxLine: 12},
		{name: "late LF overflows", in: "data: a\r\n\n", maxEvent: 8},
	}
	for _, tc := range tests {
		for _, ch := range chunkings {
			t.Run(tc.name+"/"+ch.name, func(t *testing.T) {
				rd := NewReader(ch.wrap(tc.in), tc.maxEvent)
				rd.SetMaxLineBytes(tc.maxLine)
				n := 0
				var err error
				for {
					if _, err = rd.Next(); err != nil {
						break
					}
					n++
				}
				var le *LimitError
				if !errors.As(err, &le) || !errors.Is(err, ErrTooLarge) {
					t.Fatalf("err = %v, want a LimitError", err)
				}
				if le.Line != tc.wantLine {
					t.Errorf("Line = %v, want %v (%v)", le.Line, tc.wantLine, err)
				}
				if n != tc.wantCount {
					t.Errorf("%d events before the error, want %d", n, tc.wantCount)
				}
				if _, again := rd.Next(); again != err {
					t.Errorf("error not sticky: %v", again)
				}
			})
		}
	}
}

func TestReaderEventAtLimit(t *testing.T) {
	t.Parallel()
	in := "data: 12345\n\n" // 13 bytes
	res := readAll(strings.NewReader(in), len(in))
	if res.err != io.EOF || len(res.events) != 1 {
		t.Fatalf("event of exactly the limit: %d events, err %v", len(res.events), res.err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestReaderErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	rd := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), errReader{boom}), 0)
	if e, err := rd.Next(); err != nil || string(e.Data) != "a" {
		t.Fatalf("first event: %v %v", e, err)
	}
	if _, err := rd.Next(); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want wrapped boom", err)
	}
	rd = NewReader(errReader{nil}, 0) // 0, nil forever
	if _, err := rd.Next(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err = %v, want io.ErrNoProgress", err)
	}
}

func TestReaderReset(t *testing.T) {
	t.Parallel()
	rd := NewReader(strings.NewReader("id: 1\ndata: a\n"), 0)
	if _, err := rd.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v", err)
	}
	rd.Reset(strings.NewReader("data: b\n\n"))
	e, err := rd.Next()
	if err != nil || string(e.Data) != "b" || e.HasID || rd.LastEventID() != "" {
		t.Fatalf("after Reset: %s %v last=%q", fmtEvent(e), err, rd.LastEventID())
	}
}

// TestReaderLargeEvent crosses many buffer refills and compactions.
func TestReaderLargeEvent(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	var want []string
	for i := range 50 {
		d := strings.Repeat(string(rune('a'+i%26)), i*997)
		want = append(want, d)
		b.WriteString("data: " + d + "\r\n\r\n")
	}
	for _, ch := range chunkings[:2] {
		res := readAll(ch.wrap(b.String()), 0)
		if res.err != io.EOF || len(res.events) != len(want) {
			t.Fatalf("%s: %d events, err %v", ch.name, len(res.events), res.err)
		}
		for i, e := range res.events {
			if string(e.Data) != want[i] {
				t.Fatalf("%s: event %d wrong (%d bytes)", ch.name, i, len(e.Data))
			}
		}
	}
}

// FuzzReader checks that any input, delivered whole, byte by byte or in
// random pieces, never panics and yields identical events, raw bytes and
// error class.
func FuzzReader(f *testing.F) {
	for _, tc := range readerCases {
		f.Add([]byte(tc.in), uint64(1), uint16(0))
	}
	f.Add([]byte("data: a\r\n\r\ndata: b\r\n\r\n"), uint64(7), uint16(9))
	f.Add([]byte("\xEF\xBB\xBFdata: x\r"), uint64(3), uint16(4))
	f.Fuzz(func(t *testing.T, in []byte, seed uint64, limit uint16) {
		whole := readAll(bytes.NewReader(in), int(limit))
		for name, r := range map[string]io.Reader{
			"one byte": iotest.OneByteReader(bytes.NewReader(in)),
			"random":   randomChunks(in, seed),
		} {
			got := readAll(r, int(limit))
			if errClass(got.err) != errClass(whole.err) {
				t.Fatalf("%s: err %v, whole read err %v", name, got.err, whole.err)
			}
			if len(got.events) != len(whole.events) {
				t.Fatalf("%s: %d events, whole read %d", name, len(got.events), len(whole.events))
			}
			for i := range got.events {
				if !eventsEqual(got.events[i], whole.events[i]) || !bytes.Equal(got.events[i].Raw, whole.events[i].Raw) {
					t.Fatalf("%s: event %d = %s %q, whole read %s %q", name, i,
						fmtEvent(got.events[i]), got.events[i].Raw, fmtEvent(whole.events[i]), whole.events[i].Raw)
				}
			}
			if got.lastID != whole.lastID {
				t.Fatalf("%s: last id %q vs %q", name, got.lastID, whole.lastID)
			}
		}
		var raw []byte
		for _, e := range whole.events {
			if limit > 0 && len(e.Raw) > int(limit) {
				t.Fatalf("event Raw of %d bytes exceeds limit %d", len(e.Raw), limit)
			}
			raw = append(raw, e.Raw...)
		}
		if !bytes.HasPrefix(in, raw) {
			t.Fatalf("concatenated Raw is not a prefix of the input")
		}
	})
}

func errClass(err error) string {
	var le *LimitError
	switch {
	case err == io.EOF:
		return "EOF"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected EOF"
	case errors.As(err, &le):
		return fmt.Sprintf("limit line=%v", le.Line)
	default:
		return fmt.Sprintf("other: %v", err)
	}
}

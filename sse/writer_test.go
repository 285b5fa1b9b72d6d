package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestAppendEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"json data", Event{Data: []byte(`{"a":1}`)}, "data: {\"a\":1}\n\n"},
		{"done", Event{Data: []byte("[DONE]")}, "data: [DONE]\n\n"},
		{"empty data", Event{}, "data:\n\n"},
		{"typed", Event{Type: "response.completed", Data: []byte("{}")}, "event: response.completed\ndata: {}\n\n"},
		{"id and retry", Event{Data: []byte("x"), ID: "7", HasID: true, Retry: 1500 * time.Millisecond, HasRetry: true},
			"id: 7\nretry: 1500\ndata: x\n\n"},
		{"empty id", Event{Data: []byte("x"), HasID: true}, "id: \ndata: x\n\n"},
		{"multi-line data", Event{Data: []byte("a\nb\r\nc\rd")}, "data: a\ndata: b\ndata: c\ndata: d\n\n"},
		{"trailing newline", Event{Data: []byte("a\n")}, "data: a\ndata:\n\n"},
		{"leading space kept", Event{Type: " t", Data: []byte(" x")}, "event:  t\ndata:  x\n\n"},
		{"raw ignored", Event{Data: []byte("x"), Raw: []byte("garbage")}, "data: x\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendEvent(nil, tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			// What we write must read back as the same event.
			res := readAll(bytes.NewReader(got), 0)
			want := tc.ev
			want.Data = bytes.ReplaceAll(bytes.ReplaceAll(want.Data, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
			if res.err != io.EOF || len(res.events) != 1 || !eventsEqual(res.events[0], want) {
				t.Errorf("read back %v err %v", res.events, res.err)
			}
		})
	}
}

func TestAppendEventInvalid(t *testing.T) {
	t.Parallel()
	for _, ev := range []Event{
		{Type: "a\nb"},
		{Type: "a\r"},
		{ID: "1\n", HasID: true},
		{ID: "1\x00", HasID: true},
		{Retry: -time.Second, HasRetry: true},
	} {
		if _, err := AppendEvent(nil, ev); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("%+v: err = %v, want ErrInvalidEvent", ev, err)
		}
	}
	// An ID with NUL but HasID unset is not written, so it is fine.
	if _, err := AppendEvent(nil, Event{ID: "\x00"}); err != nil {
		t.Errorf("unused ID rejected: %v", err)
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("closed")
	}
	f.n--
	return len(p), nil
}

func TestWriter(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.WriteComment("keepalive"); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteEvent(Event{Data: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteEvent(Event{Type: "x\n"}); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("invalid event: %v", err)
	}
	if err := w.WriteComment("two\nlines"); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteEvent(Event{Data: []byte("2")}); err != nil {
		t.Fatal(err)
	}
	want := ": keepalive\n\ndata: 1\n\n: two\n: lines\n\ndata: 2\n\n"
	if buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}

	fw := &failWriter{n: 1}
	w = NewWriter(fw)
	if err := w.WriteEvent(Event{Data: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	err := w.WriteEvent(Event{Data: []byte("b")})
	if err == nil {
		t.Fatal("write error not reported")
	}
	if err2 := w.WriteComment("c"); err2 != err {
		t.Fatalf("error not sticky: %v", err2)
	}
}

// writeAll writes events canonically.
func writeAll(t *testing.T, events []Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, e := range events {
		if err := w.WriteEvent(e); err != nil {
			t.Fatalf("WriteEvent(%s): %v", fmtEvent(e), err)
		}
	}
	return buf.Bytes()
}

// FuzzRoundTrip parses arbitrary bytes, writes the events canonically and
// parses them again: the events must be equal, the canonical stream must use
// LF only, and writing it again must be byte-identical.
func FuzzRoundTrip(f *testing.F) {
	for _, tc := range readerCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		first := readAll(bytes.NewReader(in), 1<<16)
		canon := writeAll(t, first.events)
		if bytes.IndexByte(canon, '\r') >= 0 {
			t.Fatalf("canonical stream contains CR: %q", canon)
		}
		second := readAll(bytes.NewReader(canon), 0)
		if second.err != io.EOF {
			t.Fatalf("re-read error %v for %q", second.err, canon)
		}
		if len(second.events) != len(first.events) {
			t.Fatalf("%d events after round trip, want %d", len(second.events), len(first.events))
		}
		var raw []byte
		for i := range first.events {
			if !eventsEqual(first.events[i], second.events[i]) {
				t.Fatalf("event %d: %s after round trip, want %s", i, fmtEvent(second.events[i]), fmtEvent(first.events[i]))
			}
			raw = append(raw, second.events[i].Raw...)
		}
		if !bytes.Equal(raw, canon) {
			t.Fatalf("Raw of canonical events does not add up to the stream")
		}
		if again := writeAll(t, second.events); !bytes.Equal(again, canon) {
			t.Fatalf("canonical form is not stable:\n%q\n%q", canon, again)
		}
	})
}

// FuzzWriter writes arbitrary field values and reads them back.
func FuzzWriter(f *testing.F) {
	f.Add("", []byte("{}"), "", false, int64(0), false)
	f.Add("message", []byte("a\r\nb\rc\n"), "id", true, int64(3000), true)
	f.Add(" x", []byte(" "), "\x00", true, int64(-1), true)
	f.Fuzz(func(t *testing.T, typ string, data []byte, id string, hasID bool, retryMS int64, hasRetry bool) {
		e := Event{Type: typ, Data: data, ID: id, HasID: hasID, HasRetry: hasRetry}
		if retryMS >= 0 && retryMS < 1<<40 {
			e.Retry = time.Duration(retryMS) * time.Millisecond
		} else {
			e.Retry = -1
		}
		b, err := AppendEvent(nil, e)
		invalid := strings.ContainsAny(typ, "\r\n") || (hasID && strings.ContainsAny(id, "\r\n\x00")) || (hasRetry && e.Retry < 0)
		if invalid {
			if !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("invalid event accepted: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		res := readAll(bytes.NewReader(b), 0)
		if res.err != io.EOF || len(res.events) != 1 {
			t.Fatalf("read back %d events, err %v from %q", len(res.events), res.err, b)
		}
		want := e
		want.Data = bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
		if !hasRetry {
			want.Retry = 0
		}
		if !hasID {
			want.ID = ""
		}
		if !eventsEqual(res.events[0], want) {
			t.Fatalf("got %s, want %s", fmtEvent(res.events[0]), fmtEvent(want))
		}
	})
}

func BenchmarkReader(b *testing.B) {
	var in bytes.Buffer
	chunk := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}` + "\n\n"
	for range 200 {
		in.WriteString(chunk)
	}
	data := in.Bytes()
	rd := NewReader(nil, 1<<20)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(bytes.NewReader(data))
		for {
			if _, err := rd.Next(); err != nil {
				break
			}
		}
	}
}

func FuzzLineBreak(f *testing.F) {
	for _, s := range []string{"", "a", "\n", "\r", "a\r\nb", "ab\nc\rd", "abc\rd\ne"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := lineBreak(b), bytes.IndexAny(b, "\r\n"); got != want {
			t.Fatalf("lineBreak(%q) = %d, want %d", b, got, want)
		}
	})
}

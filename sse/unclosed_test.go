package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestUnclosed(t *testing.T) {
	cases := []struct {
		in   string
		data string
		ok   bool
	}{
		{"data: a\n\ndata: [DONE]\n", "[DONE]", true},
		{"data: a\n\ndata: [DONE]\r\n", "[DONE]", true},
		{"data: x\ndata: y\n", "x\ny", true},
		{"data: a\n\ndata: [DONE]", "", false}, // ends inside a line
		{"data: a\n\ndata: [DONE]\nid: 7", "", false},
	}
	for _, tc := range cases {
		rd := NewReader(strings.NewReader(tc.in), 0)
		var err error
		for err == nil {
			_, err = rd.Next()
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%q: Next ended with %v", tc.in, err)
		}
		ev, ok := rd.Unclosed()
		if ok != tc.ok || string(ev.Data) != tc.data {
			t.Fatalf("%q: Unclosed = %q, %v; want %q, %v", tc.in, ev.Data, ok, tc.data, tc.ok)
		}
		if _, again := rd.Unclosed(); again {
			t.Fatalf("%q: the block was returned twice", tc.in)
		}
	}
	// A clean end has no unclosed block.
	rd := NewReader(strings.NewReader("data: a\n\n"), 0)
	for {
		if _, err := rd.Next(); err != nil {
			break
		}
	}
	if _, ok := rd.Unclosed(); ok {
		t.Fatal("clean end reported an unclosed block")
	}
}

func TestPartialLine(t *testing.T) {
	for _, tc := range []struct {
		in, line string
		ok       bool
	}{
		{"data: a\n\ndata: [DONE]", "data: [DONE]", true},
		{"data: a\n\ndata: [DO", "data: [DO", true},
		{"data: a\n\ndata: x\ndata: [DONE]", "", false}, // a data field before it in the block
		{"data: a\n\nevent: e\ndata: [DONE]", "", false},
		{"data: a\n\ndata: [DONE]\n", "", false}, // the line ended: Unclosed's case
	} {
		rd := NewReader(strings.NewReader(tc.in), 0)
		var err error
		for err == nil {
			_, err = rd.Next()
		}
		line, ok := rd.PartialLine()
		if ok != tc.ok || string(line) != tc.line {
			t.Errorf("%q: PartialLine = %q, %v; want %q, %v (Next: %v)", tc.in, line, ok, tc.line, tc.ok, err)
		}
	}
}

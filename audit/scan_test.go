package audit

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestScan(t *testing.T) {
	long := `{"k":"` + strings.Repeat("x", 200<<10) + `"}`
	huge := `{"k":"` + strings.Repeat("x", MaxLineBytes) + `"}`
	tests := []struct {
		name      string
		in        string
		lines     int
		torn      int64
		corruptAt int // 0: no corruption
	}{
		{"empty", "", 0, 0, 0},
		{"one", "{}\n", 1, 0, 0},
		{"two", "{\"a\":1}\n{\"b\":[2]}\n", 2, 0, 0},
		{"torn tail", "{}\n{\"a\":", 1, 5, 0},
		{"only torn", "{\"a\"", 0, 4, 0},
		{"crlf", "{}\r\n", 1, 0, 0},
		{"not json", "{}\nnope\n", 1, 0, 2},
		{"array", "[1]\n", 0, 0, 1},
		{"blank line", "{}\n\n{}\n", 1, 0, 2},
		{"broken object", "{\"a\":}\n", 0, 0, 1},
		{"long line spanning reads", long + "\n" + "{}\n", 2, 0, 0},
		{"long torn tail", "{}\n" + long, 1, int64(len(long)), 0},
		{"over the line bound", "{}\n" + huge + "\n{}\n", 1, 0, 2},
		{"over the bound and torn", "{}\n" + huge, 1, int64(len(huge)), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got int
			res, err := Scan(strings.NewReader(tt.in), func(line []byte) error {
				got++
				if bytes.IndexByte(line, '\n') >= 0 {
					t.Errorf("line contains a newline")
				}
				return nil
			})
			var ce *CorruptLineError
			if tt.corruptAt > 0 {
				if !errors.As(err, &ce) || ce.Line != tt.corruptAt {
					t.Fatalf("err = %v, want corruption at line %d", err, tt.corruptAt)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got != tt.lines || (tt.corruptAt == 0 && res.Lines != tt.lines) || res.TornBytes != tt.torn {
				t.Errorf("callbacks %d, result %+v; want %d lines, torn %d", got, res, tt.lines, tt.torn)
			}
		})
	}
}

func TestScanCorruptOffset(t *testing.T) {
	_, err := Scan(strings.NewReader("{}\n{\"a\":1}\nx\n"), func([]byte) error { return nil })
	var ce *CorruptLineError
	if !errors.As(err, &ce) || ce.Offset != 11 || ce.Line != 3 {
		t.Fatalf("err = %#v", err)
	}
}

func TestScanCallbackError(t *testing.T) {
	stop := errors.New("stop")
	_, err := Scan(strings.NewReader("{}\n{}\n"), func([]byte) error { return stop })
	if err != stop {
		t.Fatalf("err = %v", err)
	}
}

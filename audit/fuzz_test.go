package audit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzScan checks Scan's accounting on arbitrary input: it never panics,
// the lines it passes plus the torn tail cover the input up to the first
// corrupt line, and no line it passes contains a newline.
func FuzzScan(f *testing.F) {
	for _, s := range []string{"", "{}\n", "{}\n{\"a\"", "x\n", "{}\r\n{\"b\":[1,2]}\n", "\n\n", "{\"a\":\"\\n\"}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var seen int64
		res, err := Scan(bytes.NewReader(in), func(line []byte) error {
			if bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("line with a newline: %q", line)
			}
			if checkLine(line) != "" {
				t.Fatalf("passed a bad line: %q", line)
			}
			seen += int64(len(line)) + 1
			return nil
		})
		var ce *CorruptLineError
		switch {
		case err == nil:
			if seen+res.TornBytes != int64(len(in)) {
				t.Fatalf("lines %d + torn %d != input %d", seen, res.TornBytes, len(in))
			}
			if res.Lines != bytes.Count(in, []byte{'\n'}) {
				t.Fatalf("%d lines, %d newlines", res.Lines, bytes.Count(in, []byte{'\n'}))
			}
			if res.TornBytes != int64(len(in)-(bytes.LastIndexByte(in, '\n')+1)) {
				t.Fatalf("torn %d", res.TornBytes)
			}
		case errors.As(err, &ce):
			if ce.Offset != seen || ce.Line != res.Lines {
				t.Fatalf("corrupt at line %d offset %d, after %d lines / %d bytes", ce.Line, ce.Offset, res.Lines, seen)
			}
		default:
			t.Fatalf("unexpected error %v", err)
		}
	})
}

// FuzzTornTailRecovery writes arbitrary bytes as an existing record file,
// opens a sink on it (with a small tail chunk so the backward search
// crosses chunk boundaries), appends one record and checks that the file
// is exactly the input up to its last newline followed by the new line.
func FuzzTornTailRecovery(f *testing.F) {
	good, err := encode(rec("s", 1))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{}, uint8(1))
	f.Add(good, uint8(3))
	f.Add(append(append([]byte{}, good...), `{"interception_po`...), uint8(5))
	f.Add(append(append([]byte{}, good...), make([]byte, 100)...), uint8(16))
	f.Add([]byte("no newline at all"), uint8(2))
	f.Fuzz(func(t *testing.T, content []byte, chunk uint8) {
		path := filepath.Join(t.TempDir(), "r.jsonl")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := OpenFile(path, withTailChunk(int(chunk%32)+1), WithFsync(FsyncNever))
		if err != nil {
			t.Fatal(err)
		}
		keep := bytes.LastIndexByte(content, '\n') + 1
		if s.Stats().Torn != int64(len(content)-keep) {
			t.Fatalf("torn = %d, want %d", s.Stats().Torn, len(content)-keep)
		}
		s.Write(rec("s", 2))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		want := append(append([]byte{}, content[:keep]...), mustEncode(t, rec("s", 2))...)
		if !bytes.Equal(got, want) {
			t.Fatalf("file = %q, want %q", got, want)
		}
	})
}

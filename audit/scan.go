package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// MaxLineBytes bounds one record line when reading. Records are small
// (messages are cut to 256 bytes, evidence to 10 KiB), so a longer line is
// corruption, not a record.
const MaxLineBytes = 1 << 20

// ScanResult describes a record stream.
type ScanResult struct {
	// Lines is the number of complete lines passed to the callback.
	Lines int
	// TornBytes is the length of an unterminated last line, which a crash
	// mid-write leaves and which was never acknowledged; 0 when the stream
	// ends with a newline.
	TornBytes int64
}

// CorruptLineError reports a complete line that is not a record: not a
// JSON object, or longer than [MaxLineBytes].
type CorruptLineError struct {
	Line   int   // 1-based
	Offset int64 // of the line's first byte
	Reason string
}

func (e *CorruptLineError) Error() string {
	return fmt.Sprintf("audit: record line %d (offset %d): %s", e.Line, e.Offset, e.Reason)
}

// Scan reads a JSONL record stream and calls fn with each complete line,
// without its newline; the slice is reused, so fn must copy what it keeps.
// An unterminated last line is not passed to fn: it is reported as
// TornBytes. A complete line that is not a JSON object stops the scan with
// a *CorruptLineError; an error from fn stops it and is returned as is.
func Scan(r io.Reader, fn func(line []byte) error) (ScanResult, error) {
	var res ScanResult
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		acc     []byte // the current line, when it spans reads
		lineLen int64  // bytes of the current line so far, newline included
		off     int64  // offset of the current line
	)
	for {
		frag, err := br.ReadSlice('\n')
		lineLen += int64(len(frag))
		switch {
		case err == nil || errors.Is(err, bufio.ErrBufferFull):
			line := frag
			if err != nil || lineLen > int64(len(frag)) {
				if lineLen <= MaxLineBytes+1 {
					acc = append(acc, frag...)
				}
				line = acc
			}
			if err != nil {
				continue
			}
			res.Lines++
			if lineLen > MaxLineBytes+1 {
				return res, &CorruptLineError{Line: res.Lines, Offset: off, Reason: fmt.Sprintf("longer than %d bytes", MaxLineBytes)}
			}
			body := line[:len(line)-1]
			if why := checkLine(body); why != "" {
				return res, &CorruptLineError{Line: res.Lines, Offset: off, Reason: why}
			}
			if err := fn(body); err != nil {
				return res, err
			}
			off += lineLen
			lineLen, acc = 0, acc[:0]
		case errors.Is(err, io.EOF):
			res.TornBytes = lineLen
			return res, nil
		default:
			return res, err
		}
	}
}

// checkLine says why a complete line is not a record line, or "".
func checkLine(b []byte) string {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0:
		return "empty line"
	case b[0] != '{':
		return "not a JSON object"
	case !gjson.ValidBytes(b):
		return "invalid JSON"
	}
	return ""
}

// ReadFile decodes every complete record line of the file at path (not its
// rotated backups: see [Backups]). A torn last line is reported in the
// result, not decoded.
func ReadFile(path string) ([]points.Record, ScanResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, ScanResult{}, err
	}
	defer f.Close()
	var out []points.Record
	res, err := Scan(f, func(line []byte) error {
		var r points.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("audit: record line %d: %w", len(out)+1, err)
		}
		out = append(out, r)
		return nil
	})
	return out, res, err
}

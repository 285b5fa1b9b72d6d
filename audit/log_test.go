package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
)

func TestReplaceAttrKeepsPayloadOut(t *testing.T) {
	const marker = "PAYLOAD-MARKER-7f3a"
	long := strings.Repeat("a", MaxLogString) + marker
	type blob struct{ Secret string }
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		h, err := NewLogHandler(&buf, format, slog.LevelDebug)
		if err != nil {
			t.Fatal(err)
		}
		log := slog.New(h)
		log.Info("request denied",
			"body", marker,
			"Messages", marker,
			slog.Group("tool", "args", marker, "name", "http_get"),
			"raw_bytes", []byte(marker),
			"evidence", json.RawMessage(`{"x":"`+marker+`"}`),
			"long", long,
			"err", errors.New(long),
			"thing", blob{Secret: marker},
			"point", points.PreToolCall,
			"status", 403,
			"elapsed", 3*time.Millisecond,
			"ok", true,
			"reason", "secret_in_output",
		)
		out := buf.String()
		if strings.Contains(out, marker) {
			t.Errorf("%s: a payload reached the log:\n%s", format, out)
		}
		for _, want := range []string{"request denied", "http_get", "pre_tool_call", "403", "secret_in_output", Redacted, "[19 bytes]", "[27 bytes]", "bytes elided]", "[audit.blob]"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: %q missing from:\n%s", format, want, out)
			}
		}
	}
}

func TestNewLogHandlerFormat(t *testing.T) {
	if _, err := NewLogHandler(&bytes.Buffer{}, "xml", slog.LevelInfo); err == nil {
		t.Fatal("want an error")
	}
}

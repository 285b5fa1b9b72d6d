package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
)

// MaxLogString is the longest string attribute value [ReplaceAttr] lets
// through; longer values are replaced by their length.
const MaxLogString = 256

// isPayloadKey reports whether an attribute key names payload in this
// codebase (request and response bodies, targets, messages, tool arguments
// and results). key is lower-cased.
func isPayloadKey(key string) bool {
	switch key {
	case "body", "payload", "content", "contents", "messages", "prompt", "completion",
		"args", "arguments", "target", "input", "output", "result", "tool_result", "value",
		"context", "raw", "data", "text", "chunk", "delta", "request_body", "response_body", "event":
		return true
	}
	return false
}

// Redacted replaces the value of a payload-named attribute.
const Redacted = "[redacted]"

// ReplaceAttr is a slog.HandlerOptions.ReplaceAttr that keeps payloads out
// of logs. It is a backstop, not a licence: log identifiers, counts, sizes,
// reasons and type names, never bodies. Rules, at any group depth:
//
//   - a key that names payload (body, payload, content, messages, prompt,
//     completion, args, arguments, target, input, output, result, value,
//     context, raw, data, text, chunk, delta, event, ...) gets [Redacted];
//   - a []byte or json.RawMessage value becomes "[N bytes]";
//   - a string (or error text) longer than [MaxLogString] bytes becomes
//     "[N bytes elided]": identifiers are short, and long text is what
//     payload looks like;
//   - any other non-scalar value (structs, maps, slices) becomes its type
//     name in brackets, since its fields may hold payload;
//   - the built-in time, level, source and msg attributes pass unchanged,
//     so messages must be constant strings.
//
// Numbers, booleans, durations and times pass unchanged.
func ReplaceAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 {
		switch a.Key {
		case slog.TimeKey, slog.LevelKey, slog.SourceKey, slog.MessageKey:
			return a
		}
	}
	if isPayloadKey(strings.ToLower(a.Key)) {
		return slog.String(a.Key, Redacted)
	}
	v := a.Value
	switch v.Kind() {
	case slog.KindString:
		if s := v.String(); len(s) > MaxLogString {
			return slog.String(a.Key, fmt.Sprintf("[%d bytes elided]", len(s)))
		}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case []byte:
			return slog.String(a.Key, fmt.Sprintf("[%d bytes]", len(x)))
		case json.RawMessage:
			return slog.String(a.Key, fmt.Sprintf("[%d bytes]", len(x)))
		case error:
			s := x.Error()
			if len(s) > MaxLogString {
				s = fmt.Sprintf("[%d bytes elided]", len(s))
			}
			return slog.String(a.Key, s)
		case fmt.Stringer:
			s := x.String()
			if len(s) > MaxLogString {
				s = fmt.Sprintf("[%d bytes elided]", len(s))
			}
			return slog.String(a.Key, s)
		case nil:
			return a
		default:
			// Named scalar types (points.Point, points.Decision) are fine.
			switch rv := reflect.ValueOf(x); rv.Kind() {
			case reflect.String:
				if s := rv.String(); len(s) > MaxLogString {
					return slog.String(a.Key, fmt.Sprintf("[%d bytes elided]", len(s)))
				}
				return slog.String(a.Key, rv.String())
			case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
				return a
			}
			return slog.String(a.Key, fmt.Sprintf("[%T]", x))
		}
	}
	return a
}

// HandlerOptions returns handler options at level with [ReplaceAttr].
func HandlerOptions(level slog.Leveler) *slog.HandlerOptions {
	return &slog.HandlerOptions{Level: level, ReplaceAttr: ReplaceAttr}
}

// NewLogHandler returns a JSON ("json") or text ("text", "") handler on w
// at level with [ReplaceAttr].
func NewLogHandler(w io.Writer, format string, level slog.Leveler) (slog.Handler, error) {
	switch format {
	case "json":
		return slog.NewJSONHandler(w, HandlerOptions(level)), nil
	case "text", "":
		return slog.NewTextHandler(w, HandlerOptions(level)), nil
	}
	return nil, fmt.Errorf("audit: log format %q: want json or text", format)
}

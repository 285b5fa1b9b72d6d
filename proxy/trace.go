package proxy

import (
	"context"
	"net/http"

	"github.com/hooksproxy/hooksproxy/points"
)

// withTraceparent carries the request's W3C traceparent into every
// emission it causes (the contexts' trace block, echoed on the records).
// A missing or malformed header adds nothing.
func withTraceparent(ctx context.Context, h http.Header) context.Context {
	vs := h.Values("Traceparent")
	if len(vs) != 1 {
		return ctx // none, or several: the Trace Context spec ignores them
	}
	traceID, spanID, ok := parseTraceparent(vs[0])
	if !ok {
		return ctx
	}
	return points.WithTrace(ctx, traceID, spanID)
}

// parseTraceparent reads "version-traceid-parentid-flags" (W3C Trace
// Context §3.2): lowercase hex, a trace id and parent id not all zeros,
// version ff invalid; a later version may append fields after the flags.
func parseTraceparent(v string) (traceID, spanID string, ok bool) {
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return "", "", false
	}
	version, traceID, spanID, flags := v[:2], v[3:35], v[36:52], v[53:55]
	switch {
	case !lowerHex(version) || version == "ff", !lowerHex(traceID), !lowerHex(spanID), !lowerHex(flags):
		return "", "", false
	case allZeros(traceID), allZeros(spanID):
		return "", "", false
	case version == "00" && len(v) != 55, version != "00" && len(v) > 55 && v[55] != '-':
		return "", "", false
	}
	return traceID, spanID, true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func allZeros(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

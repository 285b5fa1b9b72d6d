package proxy

import (
	"strings"
	"testing"
)

func TestParseTraceparent(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"00-" + tid + "-" + sid + "-01", true},
		{"00-" + tid + "-" + sid + "-00", true},
		{"01-" + tid + "-" + sid + "-01-later", true}, // a later version may add fields
		{"01-" + tid + "-" + sid + "-01", true},
		{"00-" + tid + "-" + sid + "-01-x", false}, // version 00 has exactly four fields
		{"01-" + tid + "-" + sid + "-01x", false},
		{"ff-" + tid + "-" + sid + "-01", false},
		{"00-" + strings.ToUpper(tid) + "-" + sid + "-01", false},
		{"00-" + strings.Repeat("0", 32) + "-" + sid + "-01", false},
		{"00-" + tid + "-" + strings.Repeat("0", 16) + "-01", false},
		{"00-" + tid[:31] + "-" + sid + "-01", false},
		{"", false},
		{"00_" + tid + "-" + sid + "-01", false},
	} {
		traceID, spanID, ok := parseTraceparent(tc.in)
		if ok != tc.ok || ok && (traceID != tid || spanID != sid) {
			t.Errorf("%q: %q %q %v, want ok=%v", tc.in, traceID, spanID, ok, tc.ok)
		}
	}
}

func FuzzParseTraceparent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds")
	f.Fuzz(func(t *testing.T, v string) {
		traceID, spanID, ok := parseTraceparent(v)
		if !ok {
			return
		}
		if len(traceID) != 32 || len(spanID) != 16 || !lowerHex(traceID) || !lowerHex(spanID) || allZeros(traceID) || allZeros(spanID) {
			t.Fatalf("%q accepted as %q %q", v, traceID, spanID)
		}
		if !strings.HasPrefix(v[3:], traceID+"-"+spanID+"-") {
			t.Fatalf("%q: ids %q %q are not the header's", v, traceID, spanID)
		}
	})
}

// A request's traceparent reaches every context it causes and every
// record echoes it; a malformed one adds nothing.
func TestTraceparentOnRecords(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	for _, tc := range []struct {
		header string
		want   bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
	} {
		var seen []string
		p := newProxy(t, up.URL, allowAll())
		resp, body := post(t, p.URL, hello, "traceparent", tc.header)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d %s", resp.StatusCode, body)
		}
		for _, r := range p.sink.Records() {
			has := r.Trace != nil && r.Trace.TraceID == "4bf92f3577b34da6a3ce929d0e0e4736" && r.Trace.SpanID == "00f067aa0ba902b7"
			if r.InterceptionPoint == "agent_shutdown" {
				continue // the header-less run's end may come after the request
			}
			if has != tc.want || (!tc.want && r.Trace != nil) {
				t.Fatalf("%q: %s record trace %+v", tc.header, r.InterceptionPoint, r.Trace)
			}
			seen = append(seen, string(r.InterceptionPoint))
		}
		if len(seen) < 4 {
			t.Fatalf("records %v", seen)
		}
	}
}

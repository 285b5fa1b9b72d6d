package proxy

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// An upstream that refuses the stream_options the proxy adds (422 naming
// it, as some strict OpenAI-compatible servers answer) gets the stream as
// the client wrote it, and is not sent stream_options again; a client that
// asks for usage itself is still passed on as it asked, and an unrelated
// 400 is relayed as it came.
func TestStreamOptionsRefusedFallsBack(t *testing.T) {
	up, calls := recordingUpstream(t, func(w http.ResponseWriter, b []byte, _ int) {
		switch {
		case strings.Contains(string(b), "bad temperature"):
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"message":"temperature out of range","type":"invalid_request_error"}}`)
		case gjson.GetBytes(b, "stream_options").Exists():
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"object":"error","message":"body -> stream_options: Extra inputs are not permitted","type":"invalid_request_message_error"}`)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, textStream)
		}
	})
	p := newProxy(t, up.URL, allowAll())

	resp, body := post(t, p.URL, helloStream)
	if resp.StatusCode != 200 || !strings.Contains(string(body), " is safe.") {
		t.Fatalf("first stream: %d %s", resp.StatusCode, body)
	}
	if c := calls(); len(c) != 2 || !strings.Contains(c[0], "stream_options") || strings.Contains(c[1], "stream_options") {
		t.Fatalf("upstream calls %q, want one with stream_options then one without", c)
	}
	resp, body = post(t, p.URL, helloStream)
	if resp.StatusCode != 200 {
		t.Fatalf("second stream: %d %s", resp.StatusCode, body)
	}
	if c := calls(); len(c) != 3 || strings.Contains(c[2], "stream_options") {
		t.Fatalf("upstream calls %q, want the second stream sent once, without stream_options", c)
	}
	// The client's own stream_options is its request: refused as it is.
	resp, body = post(t, p.URL, `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi"}]}`)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "stream_options") {
		t.Fatalf("client's stream_options: %d %s", resp.StatusCode, body)
	}
}

func TestUnrelatedRefusalIsRelayed(t *testing.T) {
	up, got := recordingUpstream(t, func(w http.ResponseWriter, _ []byte, _ int) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"temperature out of range","type":"invalid_request_error"}}`)
	})
	p := newProxy(t, up.URL, allowAll())
	resp, body := post(t, p.URL, helloStream)
	if resp.StatusCode != http.StatusBadRequest || gjson.GetBytes(body, "error.message").Str != "temperature out of range" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if n := len(got()); n != 1 {
		t.Fatalf("%d upstream calls, want 1", n)
	}
}

// The fallback is the upstream's refusal of stream_options, not a client's:
// a client's own stream_options that the upstream refuses (a member inside
// it), or an error that merely echoes the body, turns nothing off for the
// other sessions, whose streams keep asking for usage.
func TestClientStreamOptionsRefusalTurnsNothingOff(t *testing.T) {
	up, got := recordingUpstream(t, func(w http.ResponseWriter, b []byte, _ int) {
		switch {
		case gjson.GetBytes(b, "stream_options.bogus").Exists():
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"message":"Unrecognized request argument supplied: stream_options.bogus","type":"invalid_request_error"}}`)
		case strings.Contains(string(b), "echo me"):
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"detail":[{"msg":"bad","input":`+string(b)+`}]}`)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, textStream)
		}
	})
	p := newProxy(t, up.URL, allowAll())
	for _, bad := range []string{
		`{"model":"m","stream":true,"stream_options":{"include_usage":false,"bogus":1},"messages":[{"role":"user","content":"Hi"}]}`,
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"echo me"}]}`,
	} {
		if resp, body := post(t, p.URL, bad, "X-Agent-Hooks-Session", "a"); resp.StatusCode < 400 {
			t.Fatalf("bad request answered %d %s", resp.StatusCode, body)
		}
	}
	if resp, body := post(t, p.URL, helloStream, "X-Agent-Hooks-Session", "b"); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	reqs := got()
	if last := reqs[len(reqs)-1]; !strings.Contains(last, `"include_usage":true`) || p.srv.noStreamOptions.Load() {
		t.Fatalf("another session's refusal turned stream_options off: %s", last)
	}
}

// The refused call reached the upstream too: its id is on the
// X-Upstream-Request-Id line before the retry's.
func TestStreamOptionsRetryKeepsBothUpstreamIDs(t *testing.T) {
	up, calls := recordingUpstream(t, func(w http.ResponseWriter, b []byte, n int) {
		w.Header().Set("X-Request-Id", "up-"+strconv.Itoa(n))
		if gjson.GetBytes(b, "stream_options").Exists() {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"object":"error","message":"body -> stream_options: Extra inputs are not permitted"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, textStream)
	})
	p := newProxy(t, up.URL, allowAll())
	resp, body := post(t, p.URL, helloStream)
	if resp.StatusCode != 200 || len(calls()) != 2 {
		t.Fatalf("%d %s (%d upstream calls)", resp.StatusCode, body, len(calls()))
	}
	if got := resp.Header.Get("X-Upstream-Request-Id"); got != "up-1, up-2" {
		t.Fatalf("X-Upstream-Request-Id %q, want %q", got, "up-1, up-2")
	}
}

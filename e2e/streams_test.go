package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/scripted"
)

// TestAbortedStreams sends many sequential streamed requests through the
// proxy to an upstream that flushes after every event (the shape that made
// a bare httputil.ReverseProxy abort 35-46 of 2,000 streams with
// "unexpected EOF", CLIENTS-AND-SSE.md "Measured here") and counts every
// stream that did not arrive whole. All counts must be zero.
//
// 2,000 streams by default; 200 with -short (under -race the full run is
// slow on 2 cores).
func TestAbortedStreams(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 200
	}
	e := start(t, policyYAML, scripted.New(rules()...))
	body := []byte(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"stream please"}]}`)
	// A plain keep-alive client, like the SDKs' default transport.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}
	t.Cleanup(client.CloseIdleConnections)

	var unexpectedEOF, otherReadErr, transportErr, badStatus, missingDone, wrongContent int
	var firstFailure string
	note := func(format string, args ...any) {
		if firstFailure == "" {
			firstFailure = fmt.Sprintf(format, args...)
		}
	}
	begin := time.Now()
	for i := range n {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.URL+"/v1/chat/completions", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer test-key")
		resp, err := client.Do(req)
		if err != nil {
			transportErr++
			note("request %d: %v", i, err)
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF):
			unexpectedEOF++
			note("request %d: %v after %d bytes", i, err, len(data))
			continue
		case err != nil:
			otherReadErr++
			note("request %d: %v after %d bytes", i, err, len(data))
			continue
		case resp.StatusCode != http.StatusOK:
			badStatus++
			note("request %d: status %d: %s", i, resp.StatusCode, data)
			continue
		case !bytes.HasSuffix(data, []byte("data: [DONE]\n\n")):
			missingDone++
			note("request %d: stream does not end with [DONE]: ...%q", i, data[max(0, len(data)-80):])
			continue
		}
		if got := streamedContent(data); got != answerLong {
			wrongContent++
			note("request %d: content %q", i, got)
		}
	}
	elapsed := time.Since(begin)
	t.Logf("%d sequential streams in %v (%.0f/s): unexpected EOF %d, other read errors %d, transport errors %d, non-200 %d, missing [DONE] %d, wrong content %d",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), unexpectedEOF, otherReadErr, transportErr, badStatus, missingDone, wrongContent)
	if bad := unexpectedEOF + otherReadErr + transportErr + badStatus + missingDone + wrongContent; bad != 0 {
		t.Errorf("%d of %d streams did not arrive whole; first: %s", bad, n, firstFailure)
	}
	if got := e.Up.Requests.Load(); got != int64(n) {
		t.Errorf("upstream requests = %d, want %d", got, n)
	}
	// Every stream was a whole header-less run: six records each, none a
	// host error.
	recs := allRecords(e)
	if len(recs) != 6*n {
		t.Errorf("records = %d, want %d", len(recs), 6*n)
	}
	for _, r := range recs {
		if strings.HasPrefix(r.Verdict.Reason, "host_error:") {
			t.Errorf("host error at %s: %s", r.InterceptionPoint, r.Verdict.Reason)
			break
		}
	}
}

// streamedContent joins the delta contents of a chat completion stream
// framed as the proxy re-emits it (one data line per event).
func streamedContent(data []byte) string {
	var b strings.Builder
	for _, line := range bytes.Split(data, []byte("\n")) {
		p, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok || bytes.Equal(p, []byte("[DONE]")) {
			continue
		}
		b.WriteString(gjson.GetBytes(p, "choices.0.delta.content").Str)
	}
	return b.String()
}

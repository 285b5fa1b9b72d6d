package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

func TestCompressedRequestRefused(t *testing.T) {
	up, got := upstream(t, plainCompletion, false, 0)
	p := newProxy(t, up.URL, allowAll())
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = io.WriteString(zw, hello)
	_ = zw.Close()
	req, _ := http.NewRequest("POST", p.URL+"/v1/chat/completions", &zb)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType || gjson.GetBytes(b, "error.code").Str != "unsupported_content_encoding" || len(*got) != 0 {
		t.Fatalf("%d %s (upstream saw %d)", resp.StatusCode, b, len(*got))
	}
}

// An upstream error whose body is encoded keeps its Content-Encoding, so
// the client can read the bytes it is passed.
func TestUpstreamErrorKeepsContentEncoding(t *testing.T) {
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = io.WriteString(zw, `{"error":{"message":"slow down","type":"rate_limit"}}`)
	_ = zw.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write(zb.Bytes())
	}))
	t.Cleanup(up.Close)
	p := newProxy(t, up.URL, allowAll())
	req, _ := http.NewRequest("POST", p.URL+"/v1/chat/completions", strings.NewReader(hello))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req) // decodes gzip when Content-Encoding says so
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || gjson.GetBytes(b, "error.message").Str != "slow down" {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
}

// The upstream's media type parameters (a charset) are kept.
func TestContentTypeParametersKept(t *testing.T) {
	for _, tc := range []struct {
		stream bool
		ct     string
		body   string
	}{
		{false, "application/json; charset=utf-8", plainCompletion},
		{true, "text/event-stream; charset=utf-8", textStream},
	} {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", tc.ct)
			_, _ = io.WriteString(w, tc.body)
		}))
		t.Cleanup(up.Close)
		p := newProxy(t, up.URL, allowAll())
		req := hello
		if tc.stream {
			req = helloStream
		}
		r, b := post(t, p.URL, req)
		if r.StatusCode != 200 || r.Header.Get("Content-Type") != tc.ct {
			t.Fatalf("%d %q %s", r.StatusCode, r.Header.Get("Content-Type"), b)
		}
	}
}

// A base URL that ends in /v1 is the API root, as OPENAI_BASE_URL values are.
func TestUpstreamBaseEndingInV1(t *testing.T) {
	for base, want := range map[string]string{
		"/v1":         "/v1/chat/completions",
		"/openai/v1/": "/openai/v1/chat/completions",
		"/v1x":        "/v1x/v1/chat/completions",
	} {
		var uri string
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			uri = r.RequestURI
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, plainCompletion)
		}))
		p := newProxy(t, up.URL+base, allowAll())
		r, b := post(t, p.URL, hello)
		up.Close()
		if r.StatusCode != 200 || uri != want {
			t.Fatalf("base %q: %d, upstream saw %q, want %q (%s)", base, r.StatusCode, uri, want, b)
		}
	}
}

// A request opening a turn with more user messages than maxTurnInputs is
// refused before any point: each would be an input emission and a record.
func TestTooManyTurnInputsRefused(t *testing.T) {
	up, got := upstream(t, plainCompletion, false, 0)
	p := newProxy(t, up.URL, allowAll())
	msgs := strings.Repeat(`{"role":"user","content":"x"},`, maxTurnInputs+1)
	r, b := post(t, p.URL, `{"model":"m","messages":[`+strings.TrimSuffix(msgs, ",")+`]}`)
	if r.StatusCode != 400 || len(*got) != 0 || len(p.sink.Records()) != 0 {
		t.Fatalf("%d %s (%d records)", r.StatusCode, b, len(p.sink.Records()))
	}
}

// An upstream that sends its headers and then stalls its JSON body past
// the upstream timeout answers 502 upstream_unavailable.
func TestUpstreamBodyTimeout(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `{"id":"c",`)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: []points.Binding{allowAll()}})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Upstream: u, Emitter: em, UpstreamTimeout: 200 * time.Millisecond})
	s.Start()
	hs := httptest.NewServer(s)
	t.Cleanup(func() { hs.Close(); s.Close() })
	r, b := post(t, hs.URL, hello)
	if r.StatusCode != 502 || gjson.GetBytes(b, "error.code").Str != "upstream_unavailable" {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
}

// When every call of an answer is withheld by a host error (an approval
// that timed out, say) twice in a row, the proxy stops asking the model
// again, which would wait out the same failure once per turn.
func TestNoAutoContinuationAfterHostError(t *testing.T) {
	up, got := seqUpstream(t, twoCalls("send_email", "send_email"))
	failing := points.Binding{Name: "fails", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		if c.Point() == points.PreToolCall {
			return points.Verdict{}, errors.New("approval backend down")
		}
		return points.Allow(), nil
	})}
	p := seamProxy(t, up.URL, failing)
	r, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`)
	// The first failure goes to the model (the posture's continue); the
	// second in a row ends the request.
	if r.StatusCode != 503 || len(got()) != 2 {
		t.Fatalf("%d %s after %d upstream calls", r.StatusCode, b, len(got()))
	}
}

func TestBodyDeadlineGrowsWithTheBody(t *testing.T) {
	for _, tc := range []struct {
		declared, limit int64
		want            time.Duration
	}{
		{300, 8 << 20, time.Minute},
		{8 << 20, 8 << 20, time.Minute + 128*time.Second},
		{-1, 8 << 20, time.Minute + 128*time.Second}, // chunked: as long as the limit allows
		{1 << 30, 8 << 20, time.Minute + 128*time.Second},
		{1 << 20, 8 << 20, time.Minute + 16*time.Second},
	} {
		if got := bodyDeadline(tc.declared, tc.limit); got != tc.want {
			t.Errorf("bodyDeadline(%d, %d) = %s, want %s", tc.declared, tc.limit, got, tc.want)
		}
	}
}

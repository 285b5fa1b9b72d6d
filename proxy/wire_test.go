package proxy

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
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

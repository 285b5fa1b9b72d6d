package proxy

import (
	"bytes"
	"compress/gzip"
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

const testKey = "sk-upstream-SECRET-0123456789abcdef"

func TestKeyMaskWriterSplits(t *testing.T) {
	body := "Incorrect API key provided: Bearer " + testKey + ". Again: " + testKey + "\n\ntail sk-upstream"
	want := strings.ReplaceAll(body, testKey, keyMaskText)
	m := newKeyMask(testKey)
	for size := 1; size <= len(body); size++ {
		var got bytes.Buffer
		w := m.writer(&got)
		for i := 0; i < len(body); i += size {
			if _, err := w.Write([]byte(body[i:min(i+size, len(body))])); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got.String() != want {
			t.Fatalf("writes of %d bytes: got %q, want %q", size, got.String(), want)
		}
	}
}

// The end of a line or event is written at once: only a tail that could
// begin the key is held back.
func TestKeyMaskWriterHoldsOnlyAKeyPrefix(t *testing.T) {
	m := newKeyMask(testKey)
	var got bytes.Buffer
	w := m.writer(&got)
	_, _ = w.Write([]byte("data: {}\n\n"))
	if got.String() != "data: {}\n\n" {
		t.Errorf("held %q of an event", "data: {}\n\n"[got.Len():])
	}
	_, _ = w.Write([]byte("x sk-up"))
	if got.String() != "data: {}\n\nx " {
		t.Errorf("wrote %q; want the key's possible beginning held", got.String())
	}
}

func TestKeyMaskShortKeyMasksNothing(t *testing.T) {
	for _, k := range []string{"", "EMPTY", "token-abc123"} {
		if m := newKeyMask(k); m != nil {
			t.Errorf("key %q is masked", k)
		}
	}
	var m *keyMask
	if m.string("EMPTY") != "EMPTY" || string(m.bytes([]byte("x"))) != "x" {
		t.Error("a nil mask changed its input")
	}
}

func FuzzKeyMaskWriter(f *testing.F) {
	f.Add("key-0123456789abcdef", "a key-0123456789abcdef b key-0123", uint8(3))
	f.Add("aaaaaaaaaaaaaaaaab", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", uint8(1))
	f.Fuzz(func(t *testing.T, key, body string, step uint8) {
		// A key with ']' could be completed by the mask's own text, where
		// replacing piecewise and replacing the whole differ (both mask).
		if strings.Contains(key, "]") {
			return
		}
		m := newKeyMask(key)
		size := int(step%64) + 1
		var got bytes.Buffer
		w := m.writer(&got)
		for i := 0; i < len(body); i += size {
			if _, err := w.Write([]byte(body[i:min(i+size, len(body))])); err != nil {
				t.Fatal(err)
			}
		}
		_ = w.Close()
		want := body
		if m != nil {
			want = strings.ReplaceAll(body, key, keyMaskText)
		}
		if got.String() != want {
			t.Fatalf("key %q, writes of %d: got %q, want %q", key, size, got.String(), want)
		}
	})
}

// keyProxy is hooksproxy with testKey configured in front of up.
func keyProxy(t *testing.T, up http.Handler, passthrough ...string) *httptest.Server {
	t.Helper()
	us := httptest.NewServer(up)
	t.Cleanup(us.Close)
	em, _ := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: []points.Binding{allowAll()}})
	u, _ := url.Parse(us.URL)
	s := New(Options{Upstream: u, Emitter: em, APIKey: testKey, Passthrough: passthrough, UpstreamTimeout: 10 * time.Second})
	s.Start()
	hs := httptest.NewServer(s)
	t.Cleanup(func() { hs.Close(); s.Close() })
	return hs
}

// An upstream that refuses the configured key and quotes it: the client,
// which was never given the key, does not get it from the error either.
func TestUpstreamKeyMaskedInRelayedErrors(t *testing.T) {
	echo := func(status int, ct, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ct)
			w.Header().Set("WWW-Authenticate", `Bearer error_description="bad key `+r.Header.Get("Authorization")+`"`)
			w.WriteHeader(status)
			_, _ = io.WriteString(w, strings.ReplaceAll(body, "AUTH", r.Header.Get("Authorization")))
		}
	}
	cases := []struct {
		name, req string
		up        http.HandlerFunc
		status    int
	}{
		{"401 json", hello, echo(401, "application/json", `{"error":{"message":"Incorrect API key provided: AUTH","type":"invalid_request_error","code":"invalid_api_key"}}`), 401},
		{"429 text", hello, echo(429, "text/plain", "slow down, AUTH"), 429},
		{"200 json error to a stream", helloStream, echo(200, "application/json", `{"error":{"message":"bad key AUTH","code":"AUTH"}}`), 502},
		{"error event in a stream", helloStream, echo(200, "text/event-stream", "data: {\"error\":{\"message\":\"bad key AUTH\"}}\n\n"), 502},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hs := keyProxy(t, c.up)
			resp, body := post(t, hs.URL, c.req, "Authorization", "Bearer client-key")
			if resp.StatusCode != c.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			if bytes.Contains(body, []byte("SECRET")) || !bytes.Contains(body, []byte(keyMaskText)) {
				t.Errorf("body %s; want the key masked as %s", body, keyMaskText)
			}
			for k, vs := range resp.Header {
				if strings.Contains(strings.Join(vs, ","), "SECRET") {
					t.Errorf("header %s: %q carries the key", k, vs)
				}
			}
		})
	}
}

// A passthrough answer quoting the key is masked, also split across reads
// and when the client asked for gzip (the upstream is asked for identity
// bytes so that they can be read).
func TestUpstreamKeyMaskedInPassthrough(t *testing.T) {
	var gotAE []string
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAE = r.Header.Values("Accept-Encoding")
		w.Header().Set("Content-Type", "application/json")
		auth := r.Header.Get("Authorization")
		_, _ = io.WriteString(w, `{"data":[],"echo":"`+auth[:20])
		w.(http.Flusher).Flush()
		time.Sleep(10 * time.Millisecond)
		_, _ = io.WriteString(w, auth[20:]+`"}`)
	})
	hs := keyProxy(t, up, "/v1/models")
	for _, ae := range []string{"", "gzip"} {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+"/v1/models", nil)
		if ae != "" {
			req.Header.Set("Accept-Encoding", ae)
		}
		resp, err := http.DefaultTransport.(*http.Transport).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = resp.Body
		if resp.Header.Get("Content-Encoding") == "gzip" {
			if r, err = gzip.NewReader(resp.Body); err != nil {
				t.Fatal(err)
			}
		}
		body, _ := io.ReadAll(r)
		resp.Body.Close()
		if len(gotAE) != 1 || gotAE[0] != "identity" {
			t.Errorf("client Accept-Encoding %q: upstream asked with %q, want identity", ae, gotAE)
		}
		if gjson.GetBytes(body, "echo").Str != "Bearer "+keyMaskText {
			t.Errorf("client Accept-Encoding %q: body %s; want the key masked", ae, body)
		}
	}
}

// A byte range could cut the key in two, each part released unmasked: a
// passthrough request with a key configured asks for the whole answer,
// and the answer carries no range or digest of bytes it no longer has.
func TestUpstreamKeyMaskedPassthroughRange(t *testing.T) {
	var gotRange []string
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotRange = r.Header.Values("Range")
		w.Header().Set("Content-Range", "bytes 0-99/100")
		w.Header().Set("Digest", "sha-256=abc")
		_, _ = io.WriteString(w, "file quoting "+testKey)
	})
	hs := keyProxy(t, up, "/v1/files/*")
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/v1/files/f1/content", nil)
	req.Header.Set("Range", "bytes=0-19")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(gotRange) != 0 || resp.Header.Get("Content-Range") != "" || resp.Header.Get("Digest") != "" ||
		string(body) != "file quoting "+keyMaskText {
		t.Errorf("upstream got Range %q; client got %q with headers %v", gotRange, body, resp.Header)
	}
}

// A write that fails ends the stream: Close does not write the held tail
// after bytes of unknown length went.
func TestKeyMaskWriterStopsAfterAFailedWrite(t *testing.T) {
	fw := &failWriter{}
	w := newKeyMask(testKey).writer(fw)
	_, _ = w.Write([]byte("abc sk-up"))
	fw.fail = true
	if _, err := w.Write([]byte("x more sk-up")); err == nil {
		t.Fatal("a failed write reported success")
	}
	fw.fail = false
	_ = w.Close()
	if fw.n != 1 {
		t.Errorf("%d writes reached the writer, want 1 (nothing after the failure)", fw.n)
	}
}

type failWriter struct {
	fail bool
	n    int
}

func (f *failWriter) Write(p []byte) (int, error) {
	if f.fail {
		return 0, io.ErrClosedPipe
	}
	f.n++
	return len(p), nil
}

package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A request refused before its body is read, whose client then sends
// nothing (it waits for 100 Continue), does not hold the connection open
// for good: the proxy closes it once the refusal's grace has passed.
func TestRefusedUnreadBodyClosesTheConnection(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	p := newProxy(t, up.URL, allowAll())
	for _, req := range []string{
		"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 99999999\r\nExpect: 100-continue\r\n\r\n",
		"POST /v1/embeddings HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n",
		"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 5000\r\n\r\n",
	} {
		c, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		// Bounded: the grace is 2 s; 20 s is only a guard against a hang.
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("%q: status %d", req, resp.StatusCode)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%q: after the refusal the connection gave %v, want EOF (closed)", strings.SplitN(req, "\r\n", 2)[0], err)
		}
		c.Close()
	}
}

// A passthrough answer the upstream cut short (less than its declared
// length) reaches the client cut short too, not re-framed as complete.
func TestPassthroughCutAnswerStaysCut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `{"object":"list","data":[`)
		w.(http.Flusher).Flush()
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
	}))
	t.Cleanup(srv.Close)
	p := newProxy(t, srv.URL, allowAll())
	resp, err := http.Get(p.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("the cut answer read as complete")
	}
}

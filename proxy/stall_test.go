package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestStalledBodyIsAnswered: a client that stops sending partway through a
// declared body gets its 400 when the body deadline passes, and the
// connection closes; net/http's drain of the unread body must not wait for
// the rest with the deadline lifted (it held the connection for as long as
// the client kept it open).
func TestStalledBodyIsAnswered(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	p := newProxy(t, up.URL, allowAll())
	p.srv.bodyTimeout = 200 * time.Millisecond
	for _, path := range []string{"/v1/chat/completions", "/agent-hooks/v1/sessions/s1/tool-calls/c1/pre"} {
		t.Run(path, func(t *testing.T) {
			c, err := net.Dial("tcp", p.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The client stops after 15 of 57 bytes, and keeps its end open.
			head := "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 57\r\n\r\n"
			if _, err := c.Write([]byte(head + `{"model":"m","mes`)); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // the test's own bound
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to a stalled body: %v", err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !resp.Close {
				t.Fatalf("status %d, close %v; want 400 and the connection closed", resp.StatusCode, resp.Close)
			}
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Fatalf("the connection stayed open after the answer: %q %v", rest, err)
			}
		})
	}
}

package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func utf8Chunk(content string) string {
	return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + content + `"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
}

const utf8Tail = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\ndata: [DONE]\n\n"

// A stream whose chunk data is not UTF-8 is a malformed chunk, like a json
// answer with such bytes: 502 upstream_invalid_response, not a 503 host
// error, and nothing replayed.
func TestStreamInvalidUTF8(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		bad  bool
	}{
		{"valid multibyte", utf8Chunk("Hel") + utf8Chunk("h\u00e9 \u4e16") + utf8Tail, false},
		{"stray byte", utf8Chunk("Hel\xff") + utf8Tail, true},
		{"overlong", utf8Chunk("Hel\xc0\xaf") + utf8Tail, true},
		{"split across chunks", utf8Chunk("Hel\xe4\xb8") + utf8Chunk("\x96lo") + utf8Tail, true},
		{"surrogate bytes", utf8Chunk("\xed\xa0\x80") + utf8Tail, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, full := range []bool{false, true} {
				s := NewChatStream(1 << 20)
				s.fullParse = full
				_, err := s.ReadFrom(strings.NewReader(tc.in))
				if tc.bad != errors.Is(err, ErrMalformedChunk) {
					t.Fatalf("fullParse=%v: err %v, want malformed=%v", full, err, tc.bad)
				}
			}
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, tc.in)
			}))
			defer up.Close()
			hs := newProxy(t, up.URL, allowAll())
			resp, body := post(t, hs.URL, helloStream)
			if !tc.bad {
				if resp.StatusCode != 200 || !bytes.Contains(body, []byte("h\u00e9 \u4e16")) {
					t.Fatalf("valid stream: %d %s", resp.StatusCode, body)
				}
				return
			}
			if resp.StatusCode != http.StatusBadGateway || gjson.GetBytes(body, "error.code").Str != "upstream_invalid_response" {
				t.Fatalf("got %d %s, want 502 upstream_invalid_response", resp.StatusCode, body)
			}
		})
	}
}

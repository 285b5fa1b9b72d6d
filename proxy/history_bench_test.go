package proxy

import (
	"strconv"
	"strings"
	"testing"
)

// historyBody is a chat request with n alternating user/assistant
// messages of about size bytes of prose each.
func historyBody(n, size int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","messages":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		b.WriteString(`{"role":"` + role + `","content":"` + strings.Repeat("lorem ipsum dolor ", size/18) + `"}`)
	}
	b.WriteString(`],"temperature":0.2,"n":1}`)
	return []byte(b.String())
}

// BenchmarkRequestPasses is what the handler reads of a request before its
// contexts are built: the checks, the session's tool-call ids, the input
// selection, the messages projection and the tool seam's fields.
func BenchmarkRequestPasses(b *testing.B) {
	for _, tc := range []struct{ n, size int }{{2, 512}, {200, 5 << 10}} {
		body := historyBody(tc.n, tc.size)
		b.Run(strconv.Itoa(len(body)>>10)+"KB", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if msg := checkChatRequest(body); msg != "" {
					b.Fatal(msg)
				}
				_, _ = toolCallIDsIn(body)
				_ = turnInputs(messagesOf(body))
				_ = projectMessages(body)
				_, _ = messageFields(body)
			}
		})
	}
}

package proxy

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// An answer whose text is only in members the chat wire does not have is
// refused with a recorded host error, not released empty; an answer that
// is empty for its own reasons (all of it reasoning, cut by max_tokens)
// is released.
func TestAnswerElsewhereFailsClosed(t *testing.T) {
	legacyChunk := func(text, finish string) string {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"text":"` + text + `","finish_reason":` + f + `}]}` + "\n\n"
	}
	for _, tc := range []struct {
		name   string
		answer string
		stream bool
		refuse bool
	}{
		{"json choice text", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"text":"the secret is 42","finish_reason":"stop"}]}`, false, true},
		{"json message text", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"text":"the secret is 42"},"finish_reason":"stop"}]}`, false, true},
		{"stream choice text", legacyChunk("the secret", "") + legacyChunk(" is 42", "stop") + "data: [DONE]\n\n", true, true},
		{"stream choice message", `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"the secret is 42"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n", true, true},
		{"json reasoning only", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"thinking about the secret"},"finish_reason":"length"}]}`, false, false},
		{"stream reasoning only", chunk(`{"role":"assistant","content":null,"reasoning_content":"thinking"}`, "") + chunk(`{}`, "length") + "data: [DONE]\n\n", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, _ := upstream(t, tc.answer, tc.stream, 1<<20)
			p := newProxy(t, up.URL, allowAll())
			ask := hello
			if tc.stream {
				ask = helloStream
			}
			resp, body := post(t, p.URL, ask)
			if strings.Contains(string(body), "secret") || strings.Contains(string(body), "thinking") {
				t.Fatalf("unjudged text released: %s", body)
			}
			if !tc.refuse {
				if resp.StatusCode != 200 {
					t.Fatalf("status %d %s", resp.StatusCode, body)
				}
				return
			}
			if resp.StatusCode != 503 || gjson.GetBytes(body, "error.code").Str != points.ReasonAdapterUnsupported {
				t.Fatalf("status %d %s", resp.StatusCode, body)
			}
			var recorded bool
			for _, r := range p.sink.Records() {
				recorded = recorded || r.InterceptionPoint == points.PostModelCall && r.Verdict.Reason == points.ReasonAdapterUnsupported
			}
			if !recorded {
				t.Fatalf("no post_model_call host error record: %v", points_(p.sink))
			}
		})
	}
}

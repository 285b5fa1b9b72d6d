package proxy

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// A json answer whose members the release keeps as sent but of a type the
// chat wire does not have is refused whole, as a stream with such a chunk
// is: the points would judge such a member as empty or as a default, the
// client would get it as sent.
func TestAnswerOfWrongShapeIsRefused(t *testing.T) {
	const msg = `"message":{"role":"assistant","content":"hi"}`
	for _, tc := range []struct{ name, answer string }{
		{"message string", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":"the secret","finish_reason":"stop"}]}`},
		{"message array", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":["the secret"],"finish_reason":"stop"}]}`},
		{"choice string", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":["the secret"]}`},
		{"finish_reason object", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` + msg + `,"finish_reason":{"x":"the secret"}}]}`},
		{"object object", `{"id":"c","object":{"x":"the secret"},"created":1,"model":"m","choices":[{"index":0,` + msg + `,"finish_reason":"stop"}]}`},
		{"id array", `{"id":["the secret"],"object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` + msg + `,"finish_reason":"stop"}]}`},
		{"created string", `{"id":"c","object":"chat.completion","created":"the secret","model":"m","choices":[{"index":0,` + msg + `,"finish_reason":"stop"}]}`},
		{"system_fingerprint object", `{"id":"c","object":"chat.completion","created":1,"model":"m","system_fingerprint":{"x":"the secret"},"choices":[{"index":0,` + msg + `,"finish_reason":"stop"}]}`},
		{"index object", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":{"x":"the secret"},` + msg + `,"finish_reason":"stop"}]}`},
		{"logprobs string", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` + msg + `,"logprobs":"the secret","finish_reason":"stop"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, _ := upstream(t, tc.answer, false, 1<<20)
			p := newProxy(t, up.URL, allowAll())
			resp, body := post(t, p.URL, hello)
			if resp.StatusCode != 502 || gjson.GetBytes(body, "error.code").Str != "upstream_invalid_response" || strings.Contains(string(body), "secret") {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
		})
	}
	// The shapes the wire has pass: nulls where members may be null.
	for _, answer := range []string{
		`{"id":"c","object":"chat.completion","created":1,"model":"m","system_fingerprint":null,"service_tier":null,"choices":[{"index":0,` + msg + `,"logprobs":null,"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":null,"finish_reason":"stop"}]}`,
	} {
		up, _ := upstream(t, answer, false, 1<<20)
		p := newProxy(t, up.URL, allowAll())
		if resp, body := post(t, p.URL, hello); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", answer, resp.StatusCode, body)
		}
	}
}

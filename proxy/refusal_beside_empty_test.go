package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// A refusal beside an empty content is the answer: OpenAI opens every
// stream with content "" and refusal null, so a streamed refusal assembles
// to content "" and the refusal's text, and a json answer may carry the
// same. It is judged as the answer (a deny on its text holds) and, allowed,
// reaches the client whole, in json and in a stream.
func TestRefusalBesideEmptyContentIsTheAnswer(t *testing.T) {
	const refusal = "I can not help: the secret is 42"
	json := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"","refusal":"` + refusal + `"},"finish_reason":"stop"}]}`
	stream := chunk(`{"role":"assistant","content":"","refusal":null}`, "") +
		chunk(`{"refusal":"I can not help: "}`, "") +
		chunk(`{"refusal":"the secret is 42"}`, "") +
		chunk(`{}`, "stop") + "data: [DONE]\n\n"
	deny := points.Binding{Name: "secret", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		if c.Point() == points.Output && strings.Contains(c.Get("target.content").Str, "secret") {
			return points.Deny("secret_in_output", ""), nil
		}
		return points.Allow(), nil
	})}
	for _, tt := range []struct {
		name, answer, req string
	}{
		{"json", json, hello},
		{"stream", stream, `{"model":"m","stream":true,"messages":[{"role":"user","content":"Hi"}]}`},
	} {
		isStream := tt.name == "stream"
		t.Run(tt.name+"/denied", func(t *testing.T) {
			up, _ := upstream(t, tt.answer, isStream, 7)
			p := newProxy(t, up.URL, deny)
			resp, b := post(t, p.URL, tt.req)
			if resp.StatusCode != 403 || strings.Contains(string(b), "secret is 42") {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
		})
		t.Run(tt.name+"/allowed", func(t *testing.T) {
			up, _ := upstream(t, tt.answer, isStream, 7)
			p := newProxy(t, up.URL, allowAll(points.AgentStartup, points.Input, points.PreModelCall, points.PostModelCall, points.Output, points.AgentShutdown))
			resp, b := post(t, p.URL, tt.req)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			got := gjson.GetBytes(b, "choices.0.message.refusal").Str
			if isStream {
				got = ""
				for _, line := range strings.Split(string(b), "\n") {
					if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
						got += gjson.Get(d, "choices.0.delta.refusal").Str
					}
				}
			}
			if got != refusal {
				t.Fatalf("client got refusal %q, want %q: %s", got, refusal, b)
			}
		})
	}
}

package proxy

// Regressions from a review of content parts, kept reasoning and answers
// outside the chat wire.

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
	"github.com/hooksproxy/hooksproxy/sse"
)

// content parts beside tool calls skip the output point (hasText is
// false for an array), so an output-only deny never sees the thinking.
func TestPartsBesideToolCallsPassOutput(t *testing.T) {
	for _, stream := range []bool{true, false} {
		var body string
		if stream {
			body = chunk(`{"role":"assistant","content":""}`, "") +
				chunk(`{"content":[{"type":"thinking","thinking":[{"type":"text","text":"the FORBIDDEN plan"}]}]}`, "") +
				chunk(`{"tool_calls":[{"index":0,"id":"call_abcdefghijkl0123456789","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}`, "") +
				chunk(`{}`, "tool_calls") + "data: [DONE]\n\n"
		} else {
			body = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"the FORBIDDEN plan"}]}],"tool_calls":[{"id":"call_abcdefghijkl0123456789","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
		}
		up, _ := upstream(t, body, stream, 1<<20)
		outputSeen := 0
		p := newProxy(t, up.URL, at(points.Output, "egress", func(c *points.Context) (points.Verdict, error) {
			outputSeen++
			if strings.Contains(string(c.Raw()), "FORBIDDEN") {
				return points.Deny("forbidden", "no"), nil
			}
			return points.Allow(), nil
		}), allowAll())
		ask := hello
		if stream {
			ask = helloStream
		}
		resp, b := post(t, p.URL, ask)
		if resp.StatusCode == 200 && strings.Contains(string(b), "FORBIDDEN") {
			t.Errorf("stream=%v: released %d with text output never judged (output emissions: %d, points %v)", stream, resp.StatusCode, outputSeen, points_(p.sink))
		}
	}
}

// an empty answer (finish_reason length) from a server that also
// writes a choice-level "text":"" is refused 503.
func TestEmptyExtraTextMemberIsNoAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		stream     bool
	}{
		{"json", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"text":"","message":{"role":"assistant","content":""},"finish_reason":"length"}]}`, false},
		{"stream", `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"text":"","delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"text":"","delta":{},"finish_reason":"length"}]}` + "\n\n" + "data: [DONE]\n\n", true},
		{"json message null", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"","text":""},"finish_reason":"length"}]}`, false},
	} {
		up, _ := upstream(t, tc.body, tc.stream, 1<<20)
		p := newProxy(t, up.URL, allowAll())
		ask := hello
		if tc.stream {
			ask = helloStream
		}
		resp, b := post(t, p.URL, ask)
		if resp.StatusCode != 200 {
			t.Errorf("%s: an empty answer whose extra text member is empty too was refused: %d %s", tc.name, resp.StatusCode, b)
		}
	}
}

// vLLM writes "tool_calls": [] on every answer; with it, an answer
// whose text is in a choice's text is released empty instead of refused.
func TestEmptyToolCallsArrayStillFailsClosed(t *testing.T) {
	body := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"text":"the real answer","message":{"role":"assistant","content":null,"tool_calls":[]},"finish_reason":"stop"}]}`
	up, _ := upstream(t, body, false, 1<<20)
	p := newProxy(t, up.URL, allowAll())
	resp, b := post(t, p.URL, hello)
	if resp.StatusCode == 200 {
		t.Errorf("released %d %s (want 503 adapter_unsupported, as without tool_calls: [])", resp.StatusCode, b)
	}
}

// surrogate pairs split across thinking chunks, and text after parts.
func TestPartsSurrogatesAndEscapes(t *testing.T) {
	evs := []string{
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"pre\ud83d"},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"\ude00 \"q\""}]},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"a\ud83d"}]}]},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"\ude00b"}],"closed":true}]},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":""},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"x\\y"},"finish_reason":"stop"}]}`,
		`[DONE]`,
	}
	s := NewChatStream(1 << 20)
	for _, e := range evs {
		if err := s.Add(sse.Event{Data: []byte(e)}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := s.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	c := gjson.GetBytes(out, "choices.0.message.content")
	t.Logf("assembled content: %s", c.Raw)
	if !points.ValidJSON(out) {
		t.Errorf("assembled completion is not valid JSON for the contract: %s", out)
	}
	if got := c.Get("0.text").Str; got != "pre😀 \"q\"" {
		t.Errorf("part 0 %q", got)
	}
	if got := c.Get("1.thinking.0.text").Str; got != "a😀b" {
		t.Errorf("part 1 %q", got)
	}
	if got := c.Get("2.text").Str; got != `x\y` {
		t.Errorf("part 2 %q", got)
	}
}

// the thinking part's "closed" flag is kept as a view of the chunk
// buffer the next chunk overwrites.
func TestPartsClosedFlagOutlivesItsChunk(t *testing.T) {
	head := `{"id":"cmpl-7d1f0c2e9a","object":"chat.completion.chunk","created":1751299200,"model":"magistral-medium-2507","choices":[{"index":0,"delta":`
	long := strings.Repeat("The answer is four, as anyone can check. ", 4)
	evs := []string{
		head + `{"role":"assistant","content":""},"finish_reason":null}]}`,
		head + `{"content":[{"type":"thinking","thinking":[{"type":"text","text":"2+2"}]}]},"finish_reason":null}]}`,
		head + `{"content":[{"type":"thinking","thinking":[{"type":"text","text":""}],"closed":true}]},"finish_reason":null}]}`,
		head + `{"content":"` + long + `"},"finish_reason":null}]}`,
		head + `{"content":""},"finish_reason":"stop"}]}`,
		`[DONE]`,
	}
	s := NewChatStream(1 << 20)
	for _, e := range evs {
		if err := s.Add(sse.Event{Data: []byte(e)}); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := s.Assemble()
	c := gjson.GetBytes(out, "choices.0.message.content")
	if !gjson.ValidBytes(out) || c.Get("0.closed").Raw != "true" {
		t.Errorf("assembled %s", out)
	}
}

// a part with a duplicate "text" (gjson reads the first, Python and Go
// clients the last) must not be judged as the first.
func TestPartsDuplicateKeysFailClosed(t *testing.T) {
	for _, part := range []string{
		`{"type":"text","text":"hello","text":"pineapple"}`,
		`{"type":"thinking","thinking":[{"type":"text","text":"hello","text":"pineapple"}]}`,
		`{"type":"thinking","thinking":[{"type":"text","text":"hello"}],"thinking":[{"type":"text","text":"pineapple"}]}`,
	} {
		body := chunk(`{"role":"assistant","content":""}`, "") + chunk(`{"content":[`+part+`]}`, "") + chunk(`{}`, "stop") + "data: [DONE]\n\n"
		up, _ := upstream(t, body, true, 1<<20)
		p := newProxy(t, up.URL, at(points.PostModelCall, "deny", func(c *points.Context) (points.Verdict, error) {
			if strings.Contains(string(c.Raw()), "pineapple") {
				return points.Deny("fruit", "no"), nil
			}
			return points.Allow(), nil
		}), allowAll())
		resp, b := post(t, p.URL, helloStream)
		if resp.StatusCode == 200 {
			t.Errorf("%s: released %s", part, b)
		} else {
			t.Logf("%s: %d %s", part, resp.StatusCode, gjson.GetBytes(b, "error.code").Str)
		}
	}
}

package proxy

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// call is one tool call as a client assembles it.
type call struct{ id, name, args string }

func (c call) String() string { return c.id + " " + c.name + "(" + c.args + ")" }

// toolDeltas lists the tool call deltas of choice 0 in a stream body.
func toolDeltas(t *testing.T, body []byte) []gjson.Result {
	var out []gjson.Result
	for _, d := range sseData(t, body) {
		if d == "[DONE]" {
			continue
		}
		gjson.Get(d, "choices.0.delta.tool_calls").ForEach(func(_, tc gjson.Result) bool {
			out = append(out, tc)
			return true
		})
	}
	return out
}

// mergeByIndex reads tool calls as openai-go's and npm openai's
// accumulators do: by index, a later id replacing an earlier one, names
// and arguments appended.
func mergeByIndex(t *testing.T, body []byte) []call {
	var order []int64
	calls := map[int64]*call{}
	for _, d := range toolDeltas(t, body) {
		i := d.Get("index").Int()
		c := calls[i]
		if c == nil {
			c = &call{}
			calls[i] = c
			order = append(order, i)
		}
		if id := d.Get("id").Str; id != "" {
			c.id = id
		}
		c.name += d.Get("function.name").Str
		c.args += d.Get("function.arguments").Str
	}
	var out []call
	for _, i := range order {
		out = append(out, *calls[i])
	}
	return out
}

// mergeByType reads tool calls as langchaingo v0.1.14's updateToolCalls
// does: a delta without a type and with arguments is appended to the call
// opened last; any other delta opens a call.
func mergeByType(t *testing.T, body []byte) []call {
	var out []call
	for _, d := range toolDeltas(t, body) {
		args := d.Get("function.arguments").Str
		if d.Get("type").Str == "" && args != "" {
			if len(out) > 0 {
				out[len(out)-1].args += args
			}
			continue
		}
		out = append(out, call{id: d.Get("id").Str, name: d.Get("function.name").Str, args: args})
	}
	return out
}

// denseIndexes reports whether the body's tool call deltas number their
// calls 0, 1, ... in order of first appearance (npm openai's final
// completion fails on a hole, openai-go fills it with an empty call).
func denseIndexes(t *testing.T, body []byte) bool {
	next := int64(0)
	for _, d := range toolDeltas(t, body) {
		switch i := d.Get("index").Int(); {
		case i == next:
			next++
		case i > next || i < 0:
			return false
		}
	}
	return true
}

func toolChunk(deltas string) string {
	return chunk(`{"tool_calls":[`+deltas+`]}`, "")
}

// TestIrregularToolStreamsReadAlike: a tool call stream that clients
// merging by index and langchaingo (merging by type) would read as
// different calls is re-derived, so every client gets the calls that
// post_model_call judged.
func TestIrregularToolStreamsReadAlike(t *testing.T) {
	head := chunk(`{"role":"assistant","content":null}`, "")
	tail := chunk(`{}`, "tool_calls") + "data: [DONE]\n\n"
	cases := []struct {
		name, stream string
		want         []call
	}{
		{"interleaved", toolStream, []call{{"call_a", "get_weather", `{"location":"Paris"}`}, {"call_b", "get_time", "{}"}}},
		{"interleaved egress", head +
			toolChunk(`{"index":0,"id":"c0","type":"function","function":{"name":"fetch","arguments":""}}`) +
			toolChunk(`{"index":0,"function":{"arguments":"{}"}}`) +
			toolChunk(`{"index":1,"id":"c1","type":"function","function":{"name":"fetch","arguments":""}}`) +
			toolChunk(`{"index":1,"function":{"arguments":"{\"url\":\"https://"}}`) +
			toolChunk(`{"index":0,"function":{"arguments":"evil.example#"}}`) +
			toolChunk(`{"index":1,"function":{"arguments":"docs.example/\"}"}}`) + tail,
			[]call{{"c0", "fetch", "{}evil.example#"}, {"c1", "fetch", `{"url":"https://docs.example/"}`}}},
		{"head without type", head +
			toolChunk(`{"index":0,"id":"c0","type":"function","function":{"name":"fetch","arguments":""}}`) +
			toolChunk(`{"index":1,"id":"c1","function":{"name":"notes","arguments":"{\"url\":\"https://evil.example/\"}"}}`) + tail,
			[]call{{"c0", "fetch", ""}, {"c1", "notes", `{"url":"https://evil.example/"}`}}},
		{"first head without type", head +
			toolChunk(`{"index":0,"id":"c0","function":{"name":"fetch","arguments":"{}"}}`) + tail,
			[]call{{"c0", "fetch", "{}"}}},
		{"index 0 reused (Ollama)", head +
			toolChunk(`{"index":0,"id":"c0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`) +
			toolChunk(`{"index":0,"id":"c1","type":"function","function":{"name":"rm_rf","arguments":"{\"path\":\"/\"}"}}`) + tail,
			[]call{{"c0", "get_weather", `{"city":"Paris"}`}, {"c1", "rm_rf", `{"path":"/"}`}}},
		{"no index (older Ollama)", head +
			toolChunk(`{"id":"c0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`) +
			toolChunk(`{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}`) + tail,
			[]call{{"c0", "get_weather", `{"city":"Paris"}`}, {"c1", "get_weather", `{"city":"Rome"}`}}},
		{"empty fragment after the arguments", head +
			toolChunk(`{"index":0,"id":"c0","type":"function","function":{"name":"delete_files","arguments":""}}`) +
			toolChunk(`{"index":0,"function":{"arguments":"{\"path\":\"/tmp/ok\"}"}}`) +
			toolChunk(`{"index":0,"function":{"arguments":""}}`) + tail,
			[]call{{"c0", "delete_files", `{"path":"/tmp/ok"}`}}},
		{"index alone", head +
			toolChunk(`{"index":0,"id":"c0","type":"function","function":{"name":"f","arguments":"{}"}}`) +
			toolChunk(`{"index":0}`) + tail,
			[]call{{"c0", "f", "{}"}}},
		{"sparse indexes", head +
			toolChunk(`{"index":0,"id":"c0","type":"function","function":{"name":"a","arguments":"{}"}}`) +
			toolChunk(`{"index":2,"id":"c2","type":"function","function":{"name":"b","arguments":"{}"}}`) + tail,
			[]call{{"c0", "a", "{}"}, {"c2", "b", "{}"}}},
		{"one call at index 1", head +
			toolChunk(`{"index":1,"id":"c1","type":"function","function":{"name":"a","arguments":"{}"}}`) + tail,
			[]call{{"c1", "a", "{}"}}},
		{"index -1", head +
			toolChunk(`{"index":-1,"id":"c0","type":"function","function":{"name":"a","arguments":"{}"}}`) + tail,
			[]call{{"c0", "a", "{}"}}},
		{"id sent again on a continuation", head +
			toolChunk(`{"index":0,"id":"c0","type":"function","function":{"name":"get_weather","arguments":"{\"ci"}}`) +
			toolChunk(`{"index":0,"id":"c0","function":{"arguments":"ty\":\"Paris\"}"}}`) + tail,
			[]call{{"c0", "get_weather", `{"city":"Paris"}`}}},
	}
	for _, tc := range cases {
		for _, split := range []int{5, 1 << 20} {
			t.Run(fmt.Sprint(tc.name, "/", split), func(t *testing.T) {
				up, _ := upstream(t, tc.stream, true, split)
				var mu sync.Mutex
				var judged []call
				judge := at(points.PostModelCall, "names", func(c *points.Context) (points.Verdict, error) {
					mu.Lock()
					defer mu.Unlock()
					c.Get("response.tool_calls").ForEach(func(_, x gjson.Result) bool {
						judged = append(judged, call{x.Get("id").Str, x.Get("name").Str, x.Get("args").Raw})
						return true
					})
					return points.Allow(), nil
				})
				p := newProxy(t, up.URL, judge, allowAll())
				resp, body := post(t, p.URL, helloStream)
				if resp.StatusCode != 200 {
					t.Fatalf("status %d %s", resp.StatusCode, body)
				}
				byIndex, byType := mergeByIndex(t, body), mergeByType(t, body)
				if !denseIndexes(t, body) {
					t.Fatalf("tool call indexes are not 0, 1, ... in order:\n%s", body)
				}
				if fmt.Sprint(byIndex) != fmt.Sprint(tc.want) || fmt.Sprint(byType) != fmt.Sprint(tc.want) {
					t.Fatalf("by index %v\nby type  %v\nwant     %v\nbody:\n%s", byIndex, byType, tc.want, body)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(judged) != len(tc.want) {
					t.Fatalf("post_model_call judged %v, want %d calls", judged, len(tc.want))
				}
				for i, j := range judged {
					if j.id != tc.want[i].id || j.name != tc.want[i].name {
						t.Fatalf("post_model_call judged %v, want %v", judged, tc.want)
					}
				}
			})
		}
	}
}

// TestChangingDeltaFieldIsDropped: a delta field whose value changes from
// chunk to chunk (Together's token_id, audio objects) is not an error; it
// is left out of the completion and of the released stream.
func TestChangingDeltaFieldIsDropped(t *testing.T) {
	stream := `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"token_id":30,"role":"assistant","content":"Hel","tool_calls":null},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"token_id":31,"role":"assistant","content":"lo"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"token_id":"x","content":"!"},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	s := NewChatStream(1 << 20)
	if _, err := s.ReadFrom(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	if m := gjson.GetBytes(got, "choices.0.message"); m.Get("content").Str != "Hello!" || m.Get("token_id").Exists() {
		t.Fatalf("assembled %s", got)
	}
	if !s.Unjudged() {
		t.Fatal("a dropped field must make the stream re-derived")
	}

	up, _ := upstream(t, stream, true, 9)
	p := newProxy(t, up.URL, allowAll())
	resp, body := post(t, p.URL, helloStream)
	if resp.StatusCode != 200 || strings.Contains(string(body), "token_id") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	var text strings.Builder
	for _, d := range sseData(t, body) {
		text.WriteString(gjson.Get(d, "choices.0.delta.content").Str)
	}
	if text.String() != "Hello!" {
		t.Fatalf("client reads %q", text.String())
	}
}

// A server that sends a new id with every fragment of one call (and its
// name again) has one call, not one per fragment.
func TestFragmentsWithNewIDsStayOneCall(t *testing.T) {
	head := chunk(`{"role":"assistant","content":null}`, "")
	stream := head +
		toolChunk(`{"index":0,"id":"a1","type":"function","function":{"name":"f","arguments":"{\"x\""}}`) +
		toolChunk(`{"index":0,"id":"a2","function":{"name":"f","arguments":":1}"}}`) +
		chunk(`{}`, "tool_calls") + "data: [DONE]\n\n"
	up, _ := upstream(t, stream, true, 1<<20)
	p := newProxy(t, up.URL, allowAll())
	resp, body := post(t, p.URL, helloStream)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	if got := mergeByIndex(t, body); len(got) != 1 || got[0].name != "f" || got[0].args != `{"x":1}` {
		t.Fatalf("calls %v", got)
	}
}

// Chunk shapes that openai-go's accumulator or npm openai's final
// completion read wrongly are re-derived: every chunk then has the first
// chunk's id, an array of choices, and the one choice at index 0.
func TestChunkShapesClientsRead(t *testing.T) {
	c := func(s string) string { return "data: " + s + "\n\n" }
	cases := map[string]string{
		"finish chunk without id": c(`{"id":"x1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}`) +
			c(`{"object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`),
		"usage chunk with null choices": c(`{"id":"x1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`) +
			c(`{"id":"x1","object":"chat.completion.chunk","created":1,"model":"m","choices":null,"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`),
		"one choice at index 1": c(`{"id":"x1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":1,"delta":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`),
	}
	for name, stream := range cases {
		t.Run(name, func(t *testing.T) {
			up, _ := upstream(t, stream+"data: [DONE]\n\n", true, 1<<20)
			p := newProxy(t, up.URL, allowAll())
			resp, body := post(t, p.URL, helloStreamUsage)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d %s", resp.StatusCode, body)
			}
			var text string
			for _, d := range sseData(t, body) {
				if d == "[DONE]" {
					continue
				}
				ch := gjson.Parse(d)
				if ch.Get("id").Str != "x1" || !ch.Get("choices").IsArray() {
					t.Fatalf("chunk %s in\n%s", d, body)
				}
				ch.Get("choices").ForEach(func(_, x gjson.Result) bool {
					if x.Get("index").Int() != 0 {
						t.Fatalf("choice index in %s", d)
					}
					text += x.Get("delta.content").Str
					return true
				})
			}
			if text != "Hi" {
				t.Fatalf("client reads %q", text)
			}
		})
	}
}

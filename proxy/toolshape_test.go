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

// mergeByType reads tool calls as langchaingo does: a delta with a type
// opens a call, any other is appended to the call opened last.
func mergeByType(t *testing.T, body []byte) []call {
	var out []call
	for _, d := range toolDeltas(t, body) {
		if d.Get("type").Str != "" || len(out) == 0 {
			out = append(out, call{id: d.Get("id").Str, name: d.Get("function.name").Str, args: d.Get("function.arguments").Str})
			continue
		}
		out[len(out)-1].args += d.Get("function.arguments").Str
	}
	return out
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

package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// deepseekReasoning is what the thinking mode answers beside its call.
const deepseekReasoning = "The user wants the weather; call get_weather for \"Paris\"."

// deepseekUpstream answers like DeepSeek's thinking mode: an answer with
// reasoning_content beside its tool call, and a 400 for a later request
// whose history carries an assistant message with tool calls but without
// its reasoning_content.
func deepseekUpstream(t *testing.T, stream bool) (*httptest.Server, func() []string) {
	return recordingUpstream(t, func(w http.ResponseWriter, b []byte, _ int) {
		msgs := gjson.GetBytes(b, "messages").Array()
		for i, m := range msgs {
			if m.Get("role").Str == "assistant" && m.Get("tool_calls.#").Int() > 0 && m.Get("reasoning_content").Str != deepseekReasoning {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{"message":"Missing reasoning_content field in the assistant message at message index `+string(rune('0'+i))+`","type":"invalid_request_error","code":"invalid_request_error"}}`)
				return
			}
		}
		if msgs[len(msgs)-1].Get("role").Str == "tool" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, plainCompletion)
			return
		}
		call := `{"index":0,"id":"call_00_x1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			head := `{"id":"d1","object":"chat.completion.chunk","created":1,"model":"deepseek-reasoner","choices":[{"index":0,"delta":`
			_, _ = io.WriteString(w, idData(head+`{"role":"assistant","content":null,"reasoning_content":""},"finish_reason":null}]}`)+
				idData(head+`{"content":null,"reasoning_content":"The user wants the weather; "},"finish_reason":null}]}`)+
				idData(head+`{"content":null,"reasoning_content":"call get_weather for \"Paris\"."},"finish_reason":null}]}`)+
				idData(head+`{"tool_calls":[`+call+`]},"finish_reason":null}]}`)+
				idData(head+`{},"finish_reason":"tool_calls"}]}`)+"data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"d1","object":"chat.completion","created":1,"model":"deepseek-reasoner","choices":[{"index":0,"message":{"role":"assistant","content":"","reasoning_content":`+string(appendString(nil, deepseekReasoning))+`,"tool_calls":[`+call+`]},"finish_reason":"tool_calls"}]}`)
	})
}

// A DeepSeek thinking-mode tool loop works through the proxy: the
// reasoning no point judges does not reach the client, and goes back to
// the upstream on the assistant message of every later request that
// carries the call, in the session (or header-less run) that got it.
func TestReasoningGoesBackUpstream(t *testing.T) {
	for _, stream := range []bool{false, true} {
		for _, session := range []bool{false, true} {
			name := map[bool]string{false: "json", true: "stream"}[stream] + map[bool]string{false: "/headerless", true: "/named"}[session]
			t.Run(name, func(t *testing.T) {
				up, got := deepseekUpstream(t, stream)
				p := seamProxy(t, up.URL, allowAll())
				var hdr []string
				if session {
					hdr = []string{"X-Agent-Hooks-Session", "d1"}
				}
				ask := `{"model":"deepseek-reasoner","stream":` + map[bool]string{false: "false", true: "true"}[stream] + `,"messages":[{"role":"user","content":"weather in Paris?"}]}`
				resp, body := post(t, p.URL, ask, hdr...)
				if resp.StatusCode != 200 || !strings.Contains(string(body), "get_weather") {
					t.Fatalf("%d %s", resp.StatusCode, body)
				}
				if strings.Contains(string(body), "reasoning") || strings.Contains(string(body), "call get_weather") {
					t.Fatalf("the client got the unjudged reasoning: %s", body)
				}
				asst := `{"role":"assistant","content":"","tool_calls":[{"id":"call_00_x1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}`
				follow := `{"model":"deepseek-reasoner","messages":[{"role":"user","content":"weather in Paris?"},` + asst + `,{"role":"tool","tool_call_id":"call_00_x1","content":"sunny"}]}`
				resp, body = post(t, p.URL, follow, hdr...)
				if resp.StatusCode != 200 {
					t.Fatalf("follow-up: %d %s\nupstream got: %q", resp.StatusCode, body, got())
				}
				// The next user turn still carries the call: DeepSeek V4
				// wants the reasoning of every answer that made calls.
				next := `{"model":"deepseek-reasoner","messages":[{"role":"user","content":"weather in Paris?"},` + asst + `,{"role":"tool","tool_call_id":"call_00_x1","content":"sunny"},{"role":"assistant","content":"Sunny."},{"role":"user","content":"and tomorrow?"},` + asst + `,{"role":"tool","tool_call_id":"call_00_x1","content":"rain"}]}`
				if resp, body = post(t, p.URL, next, hdr...); resp.StatusCode != 200 {
					t.Fatalf("next turn: %d %s", resp.StatusCode, body)
				}
				// Another session's history with the same call id gets
				// nothing (and the upstream refuses it, as it would without
				// the proxy).
				if session {
					if resp, _ = post(t, p.URL, follow, "X-Agent-Hooks-Session", "other"); resp.StatusCode != 400 {
						t.Fatalf("another session got this session's reasoning: %d", resp.StatusCode)
					}
				} else if resp, _ = post(t, p.URL, next, "Authorization", "Bearer someone-else"); resp.StatusCode != 400 {
					// A header-less run with other credentials is another
					// agent's.
					t.Fatalf("other credentials got this run's reasoning: %d", resp.StatusCode)
				}
			})
		}
	}
}

// attach leaves a message's own reasoning_content alone and adds none to
// a message without tool calls.
func TestReasoningAttachKeepsTheAgents(t *testing.T) {
	g := newSignatures(16)
	g.keep(sigScope{sid: "s"}, "c1", "f", "{}", &sigEntry{reasoning: []byte(`{"reasoning_content":"kept"}`), anchor: "a1"})
	body := []byte(`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"},` +
		`{"role":"assistant","reasoning_content":"own","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"other","arguments":"{}"}}]}]}`)
	out := gjson.ParseBytes(g.attach(sigScope{sid: "s"}, body)).Get("messages")
	for i, want := range []string{"", "", "own", "kept", ""} {
		if got := out.Get(string(rune('0'+i)) + ".reasoning_content").Str; got != want {
			t.Errorf("message %d reasoning_content %q, want %q", i, got, want)
		}
	}
	if string(g.attach(sigScope{sid: "t"}, body)) != string(body) {
		t.Error("another session's body was changed")
	}
}

// OpenRouter's reasoning_details (and reasoning) beside tool calls go back
// upstream whole, as the answer carried them, and never to the client.
func TestReasoningDetailsGoBackUpstream(t *testing.T) {
	const details = `[{"type":"reasoning.encrypted","data":"gAAAAB...","id":"rs_1","format":"anthropic-claude-v1","index":0}]`
	up, got := recordingUpstream(t, func(w http.ResponseWriter, b []byte, _ int) {
		w.Header().Set("Content-Type", "application/json")
		msgs := gjson.GetBytes(b, "messages").Array()
		if msgs[len(msgs)-1].Get("role").Str == "tool" {
			if a := msgs[1]; a.Get("reasoning_details").Raw != details || a.Get("reasoning").Str != "Think." {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{"message":"thinking blocks missing","code":400}}`)
				return
			}
			_, _ = io.WriteString(w, plainCompletion)
			return
		}
		_, _ = io.WriteString(w, `{"id":"o1","object":"chat.completion","created":1,"model":"anthropic/claude","choices":[{"index":0,"message":{"role":"assistant","content":"","reasoning":"Think.","reasoning_details":`+details+`,"tool_calls":[{"id":"toolu_01","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`)
	})
	p := seamProxy(t, up.URL, allowAll())
	resp, body := post(t, p.URL, `{"model":"anthropic/claude","messages":[{"role":"user","content":"weather?"}]}`, "X-Agent-Hooks-Session", "or1")
	if resp.StatusCode != 200 || strings.Contains(string(body), "reasoning") || strings.Contains(string(body), "gAAAAB") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	follow := `{"model":"anthropic/claude","messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":"","tool_calls":[{"id":"toolu_01","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},{"role":"tool","tool_call_id":"toolu_01","content":"sunny"}]}`
	if resp, body = post(t, p.URL, follow, "X-Agent-Hooks-Session", "or1"); resp.StatusCode != 200 {
		t.Fatalf("follow-up: %d %s\nupstream got: %q", resp.StatusCode, body, got())
	}
}

// An answer with many calls is charged its reasoning once: it cannot push
// every other session's kept members out.
func TestReasoningChargedOnce(t *testing.T) {
	g := newSignatures(1 << 16)
	g.keep(sigScope{sid: "other"}, "c0", "f", "{}", &sigEntry{reasoning: []byte(`{"reasoning_content":"keep me"}`), anchor: "a0"})
	big := []byte(`{"reasoning_content":"` + strings.Repeat("r", maxReasoningBytes-40) + `"}`)
	for i := range 64 {
		g.keep(sigScope{sid: "s"}, "call_"+strconv.Itoa(i), "f", "{}", &sigEntry{reasoning: big, anchor: "a1"})
	}
	if g.kept > 2*maxReasoningBytes {
		t.Fatalf("64 calls of one answer charged %d bytes", g.kept)
	}
	body := []byte(`{"messages":[{"role":"assistant","tool_calls":[{"id":"c0","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`)
	if got := gjson.GetBytes(g.attach(sigScope{sid: "other"}, body), "messages.0.reasoning_content").Str; got != "keep me" {
		t.Fatalf("the other session's reasoning is gone: %q", got)
	}
	body = []byte(`{"messages":[{"role":"assistant","tool_calls":[{"id":"call_63","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`)
	if got := gjson.GetBytes(g.attach(sigScope{sid: "s"}, body), "messages.0.reasoning_content").Str; len(got) != maxReasoningBytes-40 {
		t.Fatalf("the answer's reasoning is not found from its last call: %d bytes", len(got))
	}
}

package proxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// geminiUpstream answers like Gemini's OpenAI layer: a tool call whose
// extra_content carries a thought signature, and a 400 for a later request
// whose history carries a call without its signature.
func geminiUpstream(t *testing.T, stream bool) (*httptest.Server, func() []string) {
	const sig = `{"google":{"thought_signature":"Cq0CAb4+9vs="}}`
	return recordingUpstream(t, func(w http.ResponseWriter, b []byte, _ int) {
		for _, m := range gjson.GetBytes(b, "messages").Array() {
			for _, c := range m.Get("tool_calls").Array() {
				if c.Get("extra_content").Raw != sig {
					w.WriteHeader(http.StatusBadRequest)
					_, _ = io.WriteString(w, `{"error":{"message":"Function call is missing a thought_signature","code":400}}`)
					return
				}
			}
		}
		msgs := gjson.GetBytes(b, "messages").Array()
		if msgs[len(msgs)-1].Get("role").Str == "tool" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, plainCompletion)
			return
		}
		call := `{"extra_content":` + sig + `,"function":{"arguments":"{\"city\":\"Paris\"}","name":"get_weather"},"id":"function-call-1","type":"function"}`
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, idData(`{"id":"g","object":"chat.completion.chunk","created":1,"model":"gemini-3","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[`+call+`]},"finish_reason":null}]}`)+
				idData(`{"id":"g","object":"chat.completion.chunk","created":1,"model":"gemini-3","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)+"data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"g","object":"chat.completion","created":1,"model":"gemini-3","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[`+call+`]},"finish_reason":"tool_calls"}]}`)
	})
}

// A Gemini tool loop works through the proxy: the thought signature the
// upstream put on a call does not reach the client (no point judges it),
// and goes back to the upstream with the follow-up that carries the call,
// header-less or in a named session, JSON or stream.
func TestThoughtSignaturesGoBackUpstream(t *testing.T) {
	for _, stream := range []bool{false, true} {
		for _, session := range []bool{false, true} {
			name := map[bool]string{false: "json", true: "stream"}[stream] + map[bool]string{false: "/headerless", true: "/named"}[session]
			t.Run(name, func(t *testing.T) {
				up, got := geminiUpstream(t, stream)
				p := seamProxy(t, up.URL, allowAll())
				var hdr []string
				if session {
					hdr = []string{"X-Agent-Hooks-Session", "g1"}
				}
				ask := `{"model":"gemini-3","messages":[{"role":"user","content":"weather in Paris?"}]}`
				if stream {
					ask = `{"model":"gemini-3","stream":true,"messages":[{"role":"user","content":"weather in Paris?"}]}`
				}
				resp, body := post(t, p.URL, ask, hdr...)
				if resp.StatusCode != 200 || !strings.Contains(string(body), "get_weather") {
					t.Fatalf("%d %s", resp.StatusCode, body)
				}
				if strings.Contains(string(body), "thought_signature") || strings.Contains(string(body), "extra_content") {
					t.Fatalf("the client got the unjudged signature: %s", body)
				}
				follow := `{"model":"gemini-3","messages":[{"role":"user","content":"weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"function-call-1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"function-call-1","content":"sunny"}]}`
				resp, body = post(t, p.URL, follow, hdr...)
				if resp.StatusCode != 200 {
					t.Fatalf("follow-up: %d %s\nupstream got: %q", resp.StatusCode, body, got())
				}
			})
		}
	}
}

// A call the seam withholds is spliced back into the proxy's own next
// model call, with its signature.
func TestThoughtSignatureOnWithheldCall(t *testing.T) {
	up, got := geminiUpstream(t, false)
	p := seamProxy(t, up.URL, denyTool("get_weather"))
	resp, body := post(t, p.URL, `{"model":"gemini-3","messages":[{"role":"user","content":"weather in Paris?"}]}`)
	if resp.StatusCode != 200 || gjson.GetBytes(body, "choices.0.message.content").Str == "" {
		t.Fatalf("%d %s\nupstream got: %q", resp.StatusCode, body, got())
	}
	if n := len(got()); n != 2 {
		t.Fatalf("%d upstream calls, want 2 (the continuation after the denied call)", n)
	}
}

// A model that numbers its calls per answer gives call_0 to many sessions:
// each session's follow-up carries its own signature back, not the one
// another session's answer carried last.
func TestThoughtSignatureStaysInItsSession(t *testing.T) {
	var mu sync.Mutex
	var got []string
	asked := 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		msgs := gjson.GetBytes(b, "messages").Array()
		mu.Lock()
		defer mu.Unlock()
		if msgs[len(msgs)-1].Get("role").Str == "tool" {
			got = append(got, string(b))
			_, _ = io.WriteString(w, plainCompletion)
			return
		}
		asked++
		city := msgs[len(msgs)-1].Get("content").Str
		_, _ = io.WriteString(w, fmt.Sprintf(`{"id":"g","object":"chat.completion","created":1,"model":"gemini-3","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"extra_content":{"google":{"thought_signature":"SIG-%s"}},"function":{"arguments":"{\"city\":\"%s\"}","name":"get_weather"},"id":"call_0","type":"function"}]},"finish_reason":"tool_calls"}]}`, city, city))
	}))
	t.Cleanup(up.Close)
	p := seamProxy(t, up.URL, allowAll())
	for _, c := range []struct{ sid, city string }{{"s1", "Paris"}, {"s2", "London"}} {
		if resp, b := post(t, p.URL, `{"model":"gemini-3","messages":[{"role":"user","content":"`+c.city+`"}]}`, "X-Agent-Hooks-Session", c.sid); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	follow := `{"model":"gemini-3","messages":[{"role":"user","content":"Paris"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_0","content":"sunny"}]}`
	if resp, b := post(t, p.URL, follow, "X-Agent-Hooks-Session", "s1"); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("%d follow-ups upstream", len(got))
	}
	if strings.Contains(got[0], "SIG-London") || !strings.Contains(got[0], "SIG-Paris") {
		t.Errorf("s1's follow-up carries another session's signature: %s", got[0])
	}
}

// A withheld call goes back upstream at its place among the model's calls:
// Gemini signs only the first call of a parallel set and checks it there.
func TestWithheldCallKeepsItsPlace(t *testing.T) {
	const sig = `{"google":{"thought_signature":"FIRST"}}`
	up, got := recordingUpstream(t, func(w http.ResponseWriter, b []byte, _ int) {
		w.Header().Set("Content-Type", "application/json")
		msgs := gjson.GetBytes(b, "messages").Array()
		if msgs[len(msgs)-1].Get("role").Str == "tool" {
			_, _ = io.WriteString(w, plainCompletion)
			return
		}
		_, _ = io.WriteString(w, `{"id":"g","object":"chat.completion","created":1,"model":"gemini-3","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[`+
			`{"extra_content":`+sig+`,"function":{"arguments":"{\"city\":\"Paris\"}","name":"get_weather"},"id":"fc-1","type":"function"},`+
			`{"function":{"arguments":"{}","name":"get_time"},"id":"fc-2","type":"function"}]},"finish_reason":"tool_calls"}]}`)
	})
	p := seamProxy(t, up.URL, denyTool("get_weather"))
	hdr := []string{"X-Agent-Hooks-Session", "w1"}
	resp, body := post(t, p.URL, `{"model":"gemini-3","messages":[{"role":"user","content":"weather and time?"}]}`, hdr...)
	if resp.StatusCode != 200 || strings.Contains(string(body), "get_weather") || !strings.Contains(string(body), "get_time") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	follow := `{"model":"gemini-3","messages":[{"role":"user","content":"weather and time?"},{"role":"assistant","content":null,"tool_calls":[{"id":"fc-2","type":"function","function":{"name":"get_time","arguments":"{}"}}]},{"role":"tool","tool_call_id":"fc-2","content":"noon"}]}`
	if resp, body = post(t, p.URL, follow, hdr...); resp.StatusCode != 200 {
		t.Fatalf("follow-up: %d %s", resp.StatusCode, body)
	}
	reqs := got()
	last := gjson.Get(reqs[len(reqs)-1], "messages.1.tool_calls")
	if calls := last.Array(); len(calls) != 2 || calls[0].Get("id").Str != "fc-1" || calls[0].Get("extra_content").Raw != sig || calls[1].Get("id").Str != "fc-2" {
		t.Fatalf("upstream got tool calls %s, want fc-1 (signed) then fc-2", last.Raw)
	}
}

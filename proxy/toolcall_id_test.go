package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// idProxy is a proxy with the tool seam on or off and the write-back
// targets, over up.
func idProxy(t *testing.T, up string, seam bool, bindings ...points.Binding) *testProxy {
	t.Helper()
	sink := points.NewMemorySink(0)
	em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: bindings, Sink: sink, Targets: WriteBack{}, HostMembers: true})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up)
	s := New(Options{Upstream: u, Emitter: em, TransparentToolSeam: seam, Agent: points.Agent{ID: "a", Framework: "openai-compatible"}})
	s.Start()
	hs := httptest.NewServer(s)
	t.Cleanup(func() { hs.Close(); s.Close() })
	return &testProxy{Server: hs, sink: sink, srv: s}
}

// preToolIDs records the tool_call.id each pre_tool_call saw.
type preToolIDs struct {
	mu  sync.Mutex
	ids []string
}

func (p *preToolIDs) binding() points.Binding {
	return points.Binding{Name: "ids", At: []points.Point{points.PreToolCall}, Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.ids = append(p.ids, c.Get("tool_call.id").Str)
		return points.Allow(), nil
	})}
}

func idData(j string) string { return "data: " + j + "\n\n" }

func deltaChunk(delta string) string {
	return idData(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`)
}

func finishChunk(reason string) string {
	return idData(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"`+reason+`"}]}`) + "data: [DONE]\n\n"
}

// clientCallIDs reads the tool-call ids the client got, from a JSON answer
// or a stream.
func clientCallIDs(t *testing.T, body []byte, stream bool) []string {
	t.Helper()
	if !stream {
		var ids []string
		for _, c := range gjson.GetBytes(body, "choices.0.message.tool_calls").Array() {
			ids = append(ids, c.Get("id").Str)
		}
		return ids
	}
	byIndex := map[int64]string{}
	n := 0
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		for _, c := range gjson.Get(data, "choices.0.delta.tool_calls").Array() {
			i := c.Get("index").Int()
			if id := c.Get("id").Str; id != "" {
				if _, seen := byIndex[i]; !seen {
					n++
				}
				byIndex[i] = id
			}
		}
	}
	ids := make([]string, 0, n)
	for i := range int64(n) {
		ids = append(ids, byIndex[i])
	}
	return ids
}

// An upstream tool call without an id (vLLM streams some without one;
// Gemini's OpenAI layer sends "id":"") gets one of the proxy's: it is
// judged once by pre_tool_call under that id, released with it, and the
// agent's follow-up answering that id goes through. Before, the seam denied
// it as context_invalid and called the model again on its own.
func TestToolCallWithoutIDGetsOne(t *testing.T) {
	jsonNoID := `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}]}`
	streamNoID := deltaChunk(`{"role":"assistant","content":""}`) +
		deltaChunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"get_weather"}}]}`) +
		deltaChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \"Paris\"}"}}]}`) + finishChunk("tool_calls")
	streamTwoEmpty := deltaChunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"index":1,"id":"","type":"function","function":{"name":"get_time","arguments":"{}"}}]}`) + finishChunk("tool_calls")
	for _, tc := range []struct {
		name, answer string
		stream       bool
		calls        int
	}{
		{"json-missing", jsonNoID, false, 1},
		{"json-empty", strings.Replace(jsonNoID, `{"type":"function"`, `{"id":"","type":"function"`, 1), false, 1},
		{"json-null", strings.Replace(jsonNoID, `{"type":"function"`, `{"id":null,"type":"function"`, 1), false, 1},
		{"json-one-of-two", strings.Replace(jsonNoID, `"tool_calls":[`, `"tool_calls":[{"id":"call_kept","type":"function","function":{"name":"get_time","arguments":"{}"}},`, 1), false, 2},
		{"stream-missing", streamNoID, true, 1},
		{"stream-two-empty", streamTwoEmpty, true, 2},
	} {
		for _, seam := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/seam=%v", tc.name, seam), func(t *testing.T) {
				up, reqs := recordingUpstream(t, func(w http.ResponseWriter, _ []byte, n int) {
					switch {
					case n > 1:
						w.Header().Set("Content-Type", "application/json")
						_, _ = io.WriteString(w, plainCompletion)
					case tc.stream:
						w.Header().Set("Content-Type", "text/event-stream")
						_, _ = io.WriteString(w, tc.answer)
					default:
						w.Header().Set("Content-Type", "application/json")
						_, _ = io.WriteString(w, tc.answer)
					}
				})
				ids := &preToolIDs{}
				bindings := []points.Binding{allowAll()}
				if seam {
					bindings = append(bindings, ids.binding())
				}
				p := idProxy(t, up.URL, seam, bindings...)
				req := `{"model":"m","messages":[{"role":"user","content":"go"}]}`
				if tc.stream {
					req = `{"model":"m","stream":true,"messages":[{"role":"user","content":"go"}]}`
				}
				resp, body := post(t, p.URL, req)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				if calls := len(reqs()); calls != 1 {
					t.Fatalf("%d upstream calls, want 1 (the proxy must not continue on its own)", calls)
				}
				got := clientCallIDs(t, body, tc.stream)
				if len(got) != tc.calls {
					t.Fatalf("client got %d tool calls (%q), want %d: %s", len(got), got, tc.calls, body)
				}
				seen := map[string]bool{}
				for _, id := range got {
					if id == "" || seen[id] {
						t.Fatalf("client got tool call ids %q: each must be non-empty and distinct", got)
					}
					seen[id] = true
				}
				if seam {
					ids.mu.Lock()
					pre := append([]string(nil), ids.ids...)
					ids.mu.Unlock()
					if fmt.Sprint(pre) != fmt.Sprint(got) {
						t.Fatalf("pre_tool_call judged ids %q, the client got %q", pre, got)
					}
				}
				for _, r := range p.sink.Records() {
					if r.Verdict.Decision == points.DecisionDeny {
						t.Fatalf("%s denied (%s) under allow_all", r.InterceptionPoint, r.Verdict.Reason)
					}
				}
				// The agent answers the call under the id it got.
				var msgs []string
				for _, id := range got {
					msgs = append(msgs, `{"role":"tool","tool_call_id":"`+id+`","content":"sunny"}`)
				}
				assistant := gjson.GetBytes(body, "choices.0.message").Raw
				if tc.stream {
					var calls []string
					for _, id := range got {
						calls = append(calls, `{"id":"`+id+`","type":"function","function":{"name":"get_weather","arguments":"{}"}}`)
					}
					assistant = `{"role":"assistant","content":null,"tool_calls":[` + strings.Join(calls, ",") + `]}`
				}
				follow := `{"model":"m","messages":[{"role":"user","content":"go"},` + assistant + `,` + strings.Join(msgs, ",") + `]}`
				resp2, body2 := post(t, p.URL, follow)
				if resp2.StatusCode != http.StatusOK {
					t.Fatalf("follow-up answering %q: status %d: %s", got, resp2.StatusCode, body2)
				}
			})
		}
	}
}

// Mistral and LiteLLM answer plain text with "tool_calls": null: that is no
// call. post_model_call sees none (gjson visits a null once, which made a
// phantom call with an empty id and name), a transform of the content does
// not write one back, and output fires once.
func TestNullToolCallsAreNoCall(t *testing.T) {
	answer := `{"id":"m","object":"chat.completion","model":"mistral-large","created":1,"choices":[{"index":0,"message":{"role":"assistant","tool_calls":null,"content":"the key is sk-proj-AAAAAAAAAAAAAAAAAAAAAAAA"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"total_tokens":4,"completion_tokens":1}}`
	for _, seam := range []bool{false, true} {
		t.Run(fmt.Sprint("seam=", seam), func(t *testing.T) {
			up, reqs := seqUpstream(t, answer)
			var mu sync.Mutex
			var seen string
			redact := at(points.PostModelCall, "redact", func(c *points.Context) (points.Verdict, error) {
				mu.Lock()
				seen = c.Get("response.tool_calls").Raw
				mu.Unlock()
				s := strings.ReplaceAll(c.Get("response.content").Str, "sk-proj-AAAAAAAAAAAAAAAAAAAAAAAA", "[REDACTED]")
				b, _ := json.Marshal(s)
				return points.Replace("$target.content", b), nil
			})
			p := idProxy(t, up.URL, seam, redact, allowAll())
			resp, body := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			mu.Lock()
			defer mu.Unlock()
			if seen != "[]" {
				t.Errorf("post_model_call saw tool_calls %s for an answer without any", seen)
			}
			if n := gjson.GetBytes(body, "choices.0.message.tool_calls.#").Int(); n > 0 {
				t.Errorf("client got %d tool calls: %s", n, body)
			}
			if got := gjson.GetBytes(body, "choices.0.message.content").Str; got != "the key is [REDACTED]" {
				t.Errorf("content %q, want the redaction applied", got)
			}
			if n := len(reqs()); n != 1 {
				t.Errorf("%d upstream calls, want 1", n)
			}
			if n := count(p.sink, points.Output); n != 1 {
				t.Errorf("output fired %d times, want 1", n)
			}
			if n := count(p.sink, points.PreToolCall); n != 0 {
				t.Errorf("pre_tool_call fired %d times for no call", n)
			}
		})
	}
}

// tool_calls that is neither an array nor null is no shape the points
// could judge: nothing of it is released.
func TestNonArrayToolCallsRefused(t *testing.T) {
	for _, calls := range []string{
		`{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}`,
		`"get_weather"`,
		`7`,
	} {
		t.Run(calls, func(t *testing.T) {
			answer := `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok","tool_calls":` + calls + `},"finish_reason":"tool_calls"}]}`
			up, _ := seqUpstream(t, answer)
			p := idProxy(t, up.URL, true, allowAll())
			resp, body := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`)
			if resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("status %d, want 502: %s", resp.StatusCode, body)
			}
			if strings.Contains(string(body), "get_weather") {
				t.Fatalf("the refused answer's call reached the client: %s", body)
			}
		})
	}
}

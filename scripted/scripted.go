// Package scripted is an OpenAI-wire chat completions upstream that answers
// from a script instead of a model. The demo, the conformance command, the
// tests and the benchmarks put it behind hooksproxy; it listens on loopback
// only.
package scripted

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"
)

// ToolCall is one scripted tool call.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Reply is one scripted answer.
type Reply struct {
	Content      *string    `json:"content"`
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	FinishReason string     `json:"finish_reason,omitempty"`
}

// Text returns a plain text reply.
func Text(s string) Reply { return Reply{Content: &s, FinishReason: "stop"} }

// Calls returns a reply that asks for tool calls.
func Calls(calls ...ToolCall) Reply { return Reply{ToolCalls: calls, FinishReason: "tool_calls"} }

// Rule answers a request whose last message matches: When is a substring of
// the last user message (or, for tool-loop follow-ups, of the last tool
// message); "" matches everything.
type Rule struct {
	When      string
	AfterTool bool // match only follow-ups whose last message is a tool result
	Reply     Reply
}

// Server is the scripted upstream handler.
type Server struct {
	mu       sync.Mutex
	rules    []Rule
	sequence []Reply // when set, answered in order regardless of rules
	next     int
	// Requests counts the chat requests received.
	Requests atomic.Int64
	// Chunk is the content piece size of streamed answers (default 8 bytes).
	Chunk int
	// Bodies keeps the request bodies received (for tests).
	keep   bool
	bodies [][]byte
}

// New returns a Server answering by rules, first match wins.
func New(rules ...Rule) *Server { return &Server{rules: rules, Chunk: 8} }

// Sequence returns a Server answering the given replies in order.
func Sequence(replies ...Reply) *Server { return &Server{sequence: replies, Chunk: 8} }

// KeepBodies makes the server remember request bodies.
func (s *Server) KeepBodies() *Server { s.keep = true; return s }

// Bodies returns the kept request bodies.
func (s *Server) Bodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

func (s *Server) pick(body []byte) (Reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keep {
		s.bodies = append(s.bodies, body)
	}
	if s.sequence != nil {
		if s.next >= len(s.sequence) {
			return Reply{}, false
		}
		r := s.sequence[s.next]
		s.next++
		return r, true
	}
	msgs := gjson.GetBytes(body, "messages").Array()
	var last gjson.Result
	if len(msgs) > 0 {
		last = msgs[len(msgs)-1]
	}
	afterTool := last.Get("role").Str == "tool"
	text := last.Get("content").String()
	for _, r := range s.rules {
		if r.AfterTool != afterTool {
			continue
		}
		if r.When == "" || strings.Contains(strings.ToLower(text), strings.ToLower(r.When)) {
			return r.Reply, true
		}
	}
	return Reply{}, false
}

// ServeHTTP answers POST /v1/chat/completions and GET /v1/models.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"scripted-1","object":"model","created":0,"owned_by":"hooksproxy"}]}`)
		return
	case r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"message":"not found","type":"invalid_request_error","param":null,"code":null}}`)
		return
	}
	s.Requests.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil || !gjson.ValidBytes(body) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"invalid JSON","type":"invalid_request_error","param":null,"code":null}}`)
		return
	}
	reply, ok := s.pick(body)
	if !ok {
		reply = Text("I have no scripted answer for that.")
	}
	model := gjson.GetBytes(body, "model").Str
	if model == "" {
		model = "scripted-1"
	}
	n := s.Requests.Load()
	id := fmt.Sprintf("chatcmpl-scripted-%d", n)
	prompt := len(body) / 4
	completion := 1
	if reply.Content != nil {
		completion += len(*reply.Content) / 4
	}
	if gjson.GetBytes(body, "stream").Bool() {
		s.stream(w, id, model, reply, gjson.GetBytes(body, "stream_options.include_usage").Bool(), prompt, completion)
		return
	}
	msg := map[string]any{"role": "assistant", "content": reply.Content, "refusal": nil}
	if len(reply.ToolCalls) > 0 {
		var tcs []map[string]any
		for _, tc := range reply.ToolCalls {
			tcs = append(tcs, map[string]any{"id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}})
		}
		msg["tool_calls"] = tcs
	}
	out := map[string]any{
		"id": id, "object": "chat.completion", "created": 1700000000, "model": model,
		"choices":            []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish(reply)}},
		"usage":              map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
		"system_fingerprint": "fp_scripted",
	}
	b, _ := json.Marshal(out)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func finish(r Reply) string {
	if r.FinishReason != "" {
		return r.FinishReason
	}
	if len(r.ToolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// stream writes the reply as chat.completion.chunk events, flushed one by one.
func (s *Server) stream(w http.ResponseWriter, id, model string, reply Reply, usage bool, prompt, completion int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	usageField := ""
	if usage {
		usageField = `,"usage":null`
	}
	send := func(delta string, fin string) {
		f := "null"
		if fin != "" {
			f = `"` + fin + `"`
		}
		fmt.Fprintf(w, "data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":%q,\"system_fingerprint\":\"fp_scripted\",\"choices\":[{\"index\":0,\"delta\":%s,\"logprobs\":null,\"finish_reason\":%s}]%s}\n\n", id, model, delta, f, usageField)
		if fl != nil {
			fl.Flush()
		}
	}
	if reply.Content != nil {
		send(`{"role":"assistant","content":"","refusal":null}`, "")
		c := *reply.Content
		step := s.Chunk
		if step <= 0 {
			step = 8
		}
		for len(c) > 0 {
			n := min(step, len(c))
			for n < len(c) && !isRuneStart(c[n]) {
				n++
			}
			b, _ := json.Marshal(c[:n])
			send(`{"content":`+string(b)+`}`, "")
			c = c[n:]
		}
	} else {
		send(`{"role":"assistant","content":null,"refusal":null}`, "")
	}
	for i, tc := range reply.ToolCalls {
		name, _ := json.Marshal(tc.Name)
		idb, _ := json.Marshal(tc.ID)
		send(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%s,"type":"function","function":{"name":%s,"arguments":""}}]}`, i, idb, name), "")
		args := tc.Arguments
		for len(args) > 0 {
			n := min(7, len(args))
			b, _ := json.Marshal(args[:n])
			send(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, b), "")
			args = args[n:]
		}
	}
	send(`{}`, finish(reply))
	if usage {
		fmt.Fprintf(w, "data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":%q,\"system_fingerprint\":\"fp_scripted\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n", id, model, prompt, completion, prompt+completion)
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

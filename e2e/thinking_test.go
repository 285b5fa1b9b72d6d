package e2e

// Thinking models through the real hooksproxy binary, driven by openai-go:
//
//   - DeepSeek's thinking mode: answers carry reasoning_content beside their
//     tool calls, and the upstream refuses (400) a later request whose
//     history has an assistant tool-call message without that reasoning.
//     The proxy strips the reasoning from what the client gets (no point
//     judges it) and puts it back on the way upstream, in the session (or
//     header-less run, or the agent's next header-less run with the same
//     credentials) that got it, and nowhere else.
//   - Mistral's Magistral: content streamed as an array of parts (thinking
//     parts token by token, then string deltas, then a text part). A deny
//     at output on a word that only the thinking carries blocks the answer.

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

const thinkingYAML = `
upstream: {base_url: UPSTREAM_URL, timeout: 30s}
agent: {id: thinking-agent, framework: openai-compatible}
sessions: {idle_timeout: 10m}
hooks:
  declaration: agent-hooks-declaration/1.0
  configuration:
    mode: enforce
    composition: {profile: sequential/first_deny}
    identity_provider: jcs-sha256
    timeouts: {interceptor_ms: 5000}
  bindings:
    - id: thinking-egress
      kind: hooksproxy.content
      at: [output]
      config: {deny: ['(?i)\bpineapple\b'], reason: thinking_denied}
    - id: allow-rest
      kind: hooksproxy.allow_all
`

// ---------------------------------------------------------------------------
// DeepSeek thinking mode

// dsIssued is one tool call a deepseekUp answer made.
type dsIssued struct {
	auth, reasoning string
}

// deepseekUp answers like DeepSeek's thinking mode (deepseek-reasoner): a
// user turn gets reasoning_content and a get_weather call (a fresh strong
// id, call_00_ and 24 random characters, as DeepSeek numbers them); a tool
// result gets reasoning_content and a final text. A request whose history
// carries an assistant message with tool calls and without the reasoning
// that came with them is refused 400, as DeepSeek refuses it; one that
// carries reasoning issued to other credentials counts as a leak.
type deepseekUp struct {
	mu      sync.Mutex
	issued  map[string]dsIssued // call id -> who got it, and its reasoning
	bodies  [][]byte
	refused atomic.Int64
	leaks   atomic.Int64
	n       atomic.Int64
	// extraArg, when set, is added to every call's arguments (a key the
	// secrets pack redacts, say).
	extraArg string
}

func newDeepseekUp() *deepseekUp { return &deepseekUp{issued: map[string]dsIssued{}} }

func dsCallID() string {
	const abc = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = abc[int(b[i])%len(abc)]
	}
	return "call_00_" + string(b)
}

func (u *deepseekUp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	auth := r.Header.Get("Authorization")
	u.mu.Lock()
	u.bodies = append(u.bodies, body)
	u.mu.Unlock()
	msgs := gjson.GetBytes(body, "messages").Array()
	for i, m := range msgs {
		if m.Get("role").Str != "assistant" || m.Get("tool_calls.#").Int() == 0 {
			continue
		}
		got := m.Get("reasoning_content").Str
		u.mu.Lock()
		is, known := u.issued[m.Get("tool_calls.0.id").Str]
		u.mu.Unlock()
		if got != "" && known && is.auth != auth {
			u.leaks.Add(1)
		}
		if got == "" || !known || got != is.reasoning {
			u.refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":{"message":"Missing reasoning_content field in the assistant message at message index %d. For more information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`, i)
			return
		}
	}
	n := u.n.Add(1)
	last := msgs[len(msgs)-1]
	stream := gjson.GetBytes(body, "stream").Bool()
	usage := gjson.GetBytes(body, "stream_options.include_usage").Bool()
	var reasoning, content string
	var callID, args string
	if last.Get("role").Str == "tool" {
		reasoning = fmt.Sprintf("DS-THOUGHT-%d: the tool said %s; answer in one sentence.", n, last.Get("content").String())
		content = "It is " + last.Get("content").String() + "."
	} else {
		city := "Paris"
		if strings.Contains(last.Get("content").String(), "Rome") {
			city = "Rome"
		}
		reasoning = fmt.Sprintf("DS-THOUGHT-%d: the user (%s) wants the weather in \"%s\"; call get_weather.", n, auth, city)
		callID, args = dsCallID(), `{"city":"`+city+`"`+u.extraArg+`}`
		u.mu.Lock()
		u.issued[callID] = dsIssued{auth: auth, reasoning: reasoning}
		u.mu.Unlock()
	}
	id := fmt.Sprintf("ds-%d", n)
	if !stream {
		msg := map[string]any{"role": "assistant", "content": content, "reasoning_content": reasoning}
		finish := "stop"
		if callID != "" {
			msg["tool_calls"] = []any{map[string]any{"index": 0, "id": callID, "type": "function", "function": map[string]any{"name": "get_weather", "arguments": args}}}
			finish = "tool_calls"
		}
		out, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion", "created": 1751299200, "model": "deepseek-reasoner",
			"choices":            []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
			"usage":              map[string]any{"prompt_tokens": 20, "completion_tokens": 30, "total_tokens": 50, "completion_tokens_details": map[string]any{"reasoning_tokens": 20}},
			"system_fingerprint": "fp_ds_thinking",
		})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	ev := func(choices string, extra string) {
		fmt.Fprintf(w, "data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"created\":1751299200,\"model\":\"deepseek-reasoner\",\"system_fingerprint\":\"fp_ds_thinking\",\"choices\":%s%s}\n\n", id, choices, extra)
		fl.Flush()
	}
	delta := func(d string, finish string) {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		ev(`[{"index":0,"delta":`+d+`,"logprobs":null,"finish_reason":`+f+`}]`, "")
	}
	str := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	delta(`{"role":"assistant","content":null,"reasoning_content":""}`, "")
	// Reasoning token by token (a few bytes each).
	for i := 0; i < len(reasoning); i += 7 {
		delta(`{"content":null,"reasoning_content":`+str(reasoning[i:min(i+7, len(reasoning))])+`}`, "")
	}
	finish := "stop"
	if callID != "" {
		delta(`{"tool_calls":[{"index":0,"id":"`+callID+`","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "")
		half := len(args) / 2
		delta(`{"tool_calls":[{"index":0,"function":{"arguments":`+str(args[:half])+`}}]}`, "")
		delta(`{"tool_calls":[{"index":0,"function":{"arguments":`+str(args[half:])+`}}]}`, "")
		finish = "tool_calls"
	} else {
		for i := 0; i < len(content); i += 5 {
			delta(`{"content":`+str(content[i:min(i+5, len(content))])+`,"reasoning_content":null}`, "")
		}
	}
	delta(`{"content":"","reasoning_content":null}`, finish)
	if usage {
		ev(`[]`, `,"usage":{"prompt_tokens":20,"completion_tokens":30,"total_tokens":50}`)
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// lastBody is the last request body the upstream got.
func (u *deepseekUp) lastBody() []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.bodies[len(u.bodies)-1]
}

// dsTools declares get_weather.
func dsTools() []openai.ChatCompletionToolUnionParam {
	return []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name:       "get_weather",
			Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]string{"type": "string"}}},
		}),
	}
}

// dsTurn is one model call of the agent loop, as the client saw it.
type dsTurn struct {
	msg openai.ChatCompletionMessage
	raw string // the raw JSON the client got (answer, or every chunk)
}

// dsAsk makes one call, streamed or not, and returns the message.
func dsAsk(t *testing.T, c openai.Client, stream bool, hist []openai.ChatCompletionMessageParamUnion, opts ...option.RequestOption) (dsTurn, error) {
	t.Helper()
	p := openai.ChatCompletionNewParams{Model: "deepseek-reasoner", Messages: hist, Tools: dsTools()}
	if !stream {
		resp, err := c.Chat.Completions.New(t.Context(), p, opts...)
		if err != nil {
			return dsTurn{}, err
		}
		return dsTurn{msg: resp.Choices[0].Message, raw: resp.RawJSON()}, nil
	}
	s := c.Chat.Completions.NewStreaming(t.Context(), p, opts...)
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	var raw strings.Builder
	for s.Next() {
		ch := s.Current()
		raw.WriteString(ch.RawJSON())
		raw.WriteByte('\n')
		if !acc.AddChunk(ch) {
			return dsTurn{}, errors.New("accumulator refused a chunk: " + ch.RawJSON())
		}
	}
	if err := s.Err(); err != nil {
		return dsTurn{}, err
	}
	if len(acc.Choices) == 0 {
		return dsTurn{}, errors.New("no choices")
	}
	return dsTurn{msg: acc.Choices[0].Message, raw: raw.String()}, nil
}

// noReasoning fails when the client got any of the model's reasoning.
func noReasoning(t *testing.T, what string, tr dsTurn) {
	t.Helper()
	if strings.Contains(tr.raw, "DS-THOUGHT") || strings.Contains(tr.raw, "reasoning_content") {
		t.Errorf("%s: the client got the unjudged reasoning:\n%s", what, tr.raw)
	}
}

// status400 reports whether err is the upstream's 400 passed through.
func status400(err error) bool {
	var ae *openai.Error
	return errors.As(err, &ae) && ae.StatusCode == 400 && strings.Contains(ae.Message, "reasoning_content")
}

// TestThinkingDeepSeekToolLoop: a two-turn agent loop with openai-go over
// DeepSeek's thinking mode, JSON and streamed, header-less and with a
// session header. Every request the upstream gets carries back the
// reasoning of every assistant tool-call message in its history (else it
// answers 400); the client never sees any reasoning; other credentials or
// another session replaying the same history get none of it.
func TestThinkingDeepSeekToolLoop(t *testing.T) {
	for _, stream := range []bool{false, true} {
		for _, named := range []bool{false, true} {
			name := map[bool]string{false: "json", true: "stream"}[stream] + map[bool]string{false: "/headerless", true: "/session"}[named]
			t.Run(name, func(t *testing.T) {
				up := newDeepseekUp()
				b := startBinaryWith(t, thinkingYAML, up, newR2up())
				var opts []option.RequestOption
				if named {
					opts = append(opts, option.WithHeader("X-Agent-Hooks-Session", "ds-agent-1"))
				}
				c := openai.NewClient(option.WithBaseURL(b.URL+"/v1"), option.WithAPIKey("tenant-a-key"), option.WithMaxRetries(0))

				hist := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")}
				// Turn 1: the call.
				t1, err := dsAsk(t, c, stream, hist, opts...)
				if err != nil {
					t.Fatalf("turn 1: %v", err)
				}
				noReasoning(t, "turn 1", t1)
				if len(t1.msg.ToolCalls) != 1 || t1.msg.ToolCalls[0].Function.Name != "get_weather" || t1.msg.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
					t.Fatalf("turn 1 tool calls %+v", t1.msg.ToolCalls)
				}
				hist = append(hist, t1.msg.ToParam(), openai.ToolMessage("sunny", t1.msg.ToolCalls[0].ID))
				// Turn 1: the follow-up with the result.
				t1b, err := dsAsk(t, c, stream, hist, opts...)
				if err != nil {
					t.Fatalf("turn 1 follow-up: %v (upstream refused %d)", err, up.refused.Load())
				}
				noReasoning(t, "turn 1 follow-up", t1b)
				if t1b.msg.Content != "It is sunny." {
					t.Fatalf("turn 1 answer %q", t1b.msg.Content)
				}
				if got := gjson.GetBytes(up.lastBody(), "messages.1.reasoning_content").Str; !strings.HasPrefix(got, "DS-THOUGHT-1:") {
					t.Errorf("the follow-up's assistant message went upstream with reasoning_content %q", got)
				}
				// Turn 2: a new user message; the history still carries
				// turn 1's call (for a header-less agent, a new run).
				hist = append(hist, t1b.msg.ToParam(), openai.UserMessage("And in Rome?"))
				turn2 := slices.Clone(hist)
				t2, err := dsAsk(t, c, stream, hist, opts...)
				if err != nil {
					t.Fatalf("turn 2: %v (upstream refused %d)", err, up.refused.Load())
				}
				noReasoning(t, "turn 2", t2)
				if len(t2.msg.ToolCalls) != 1 || t2.msg.ToolCalls[0].Function.Arguments != `{"city":"Rome"}` {
					t.Fatalf("turn 2 tool calls %+v", t2.msg.ToolCalls)
				}
				hist = append(hist, t2.msg.ToParam(), openai.ToolMessage("rainy", t2.msg.ToolCalls[0].ID))
				t2b, err := dsAsk(t, c, stream, hist, opts...)
				if err != nil {
					t.Fatalf("turn 2 follow-up: %v (upstream refused %d)", err, up.refused.Load())
				}
				noReasoning(t, "turn 2 follow-up", t2b)
				if t2b.msg.Content != "It is rainy." {
					t.Fatalf("turn 2 answer %q", t2b.msg.Content)
				}
				last := gjson.ParseBytes(up.lastBody()).Get("messages")
				for _, i := range []int{1, 5} {
					if r := last.Get(fmt.Sprint(i, ".reasoning_content")).Str; !strings.HasPrefix(r, "DS-THOUGHT-") {
						t.Errorf("message %d went upstream with reasoning_content %q: %s", i, r, last.Raw)
					}
				}
				// The final answer's reasoning is not needed back, and the
				// proxy has none to give: the message without calls is as
				// the client wrote it.
				if last.Get("3.reasoning_content").Exists() {
					t.Errorf("the final answer got reasoning_content upstream: %s", last.Get("3").Raw)
				}
				if n := up.refused.Load(); n != 0 {
					t.Errorf("upstream refused %d requests", n)
				}

				// Someone else replays tenant A's turn-2 history: another
				// API key (header-less: another agent's run), or another
				// session name. The upstream gets no reasoning and
				// refuses, as it would without the proxy.
				other := openai.NewClient(option.WithBaseURL(b.URL+"/v1"), option.WithAPIKey("tenant-b-key"), option.WithMaxRetries(0))
				var oopts []option.RequestOption
				if named {
					oopts = append(oopts, option.WithHeader("X-Agent-Hooks-Session", "ds-agent-2"))
				}
				before := up.refused.Load()
				if _, err := dsAsk(t, other, stream, turn2, oopts...); !status400(err) {
					t.Errorf("another agent's replay of the history: err %v, want the upstream's 400", err)
				}
				if up.refused.Load() != before+1 {
					t.Errorf("the replay did not reach the upstream as a refusal")
				}
				if named {
					// The same key in another session gets nothing either.
					if _, err := dsAsk(t, c, stream, turn2, option.WithHeader("X-Agent-Hooks-Session", "ds-agent-3")); !status400(err) {
						t.Errorf("another session's replay: err %v, want the upstream's 400", err)
					}
				} else {
					// The same key replaying it header-less is the agent's
					// own next run: it finds the reasoning.
					if _, err := dsAsk(t, c, stream, turn2); err != nil {
						t.Errorf("the agent's own replay of turn 2 (another run, same key): %v", err)
					}
				}
				if n := up.leaks.Load(); n != 0 {
					t.Errorf("%d requests carried reasoning issued to other credentials upstream", n)
				}
				recs := b.fileRecs(t, "", 2*time.Second)
				posts := 0
				for _, r := range recs {
					if r.Point == "post_model_call" {
						posts++
					}
				}
				if posts < 4 {
					t.Errorf("post_model_call records %d, want at least 4: %v", posts, r2points(recs))
				}
			})
		}
	}
}

// TestThinkingDeepSeekOtherKeyJoinsOpenRun: while a header-less run's call
// is unanswered, a request with OTHER credentials that carries the call
// (its id, name and arguments) and a result joins that run by the call id
// and so gets the run's reasoning put on its way upstream, under its own
// key. The shared (next-run) scope is keyed by credentials; the run scope
// is not.
func TestThinkingDeepSeekOtherKeyJoinsOpenRun(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			up := newDeepseekUp()
			b := startBinaryWith(t, thinkingYAML, up, newR2up())
			a := openai.NewClient(option.WithBaseURL(b.URL+"/v1"), option.WithAPIKey("tenant-a-key"), option.WithMaxRetries(0))
			hist := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")}
			t1, err := dsAsk(t, a, stream, hist)
			if err != nil || len(t1.msg.ToolCalls) != 1 {
				t.Fatalf("turn 1: %v %+v", err, t1.msg)
			}
			hist = append(hist, t1.msg.ToParam(), openai.ToolMessage("sunny", t1.msg.ToolCalls[0].ID))
			other := openai.NewClient(option.WithBaseURL(b.URL+"/v1"), option.WithAPIKey("tenant-b-key"), option.WithMaxRetries(0))
			_, err = dsAsk(t, other, stream, hist)
			if n := up.leaks.Load(); n != 0 || err == nil {
				t.Errorf("a request with other credentials got tenant A's reasoning sent upstream under its key (leaks %d, err %v)", n, err)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Mistral Magistral: content as an array of parts

// magistralUp streams (or answers) like Magistral: thinking parts token by
// token, the last with closed:true, then string deltas, then a text part
// and a reference part. thinking is the reasoning text, cut in pieces of 4
// bytes (so that a word of it spans chunks); answer the visible text.
// With calls set, the answer is a get_weather call after the thinking
// instead of text.
type magistralUp struct {
	thinking, answer string
	calls            bool
	raw              atomic.Value // string: the last stream sent
}

func (u *magistralUp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	str := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	if !gjson.GetBytes(body, "stream").Bool() {
		content := `[{"type":"thinking","thinking":[{"type":"text","text":` + str(u.thinking) + `}]},{"type":"text","text":` + str(u.answer) + `}]`
		msg := `{"role":"assistant","content":` + content + `,"tool_calls":null,"prefix":false}`
		finish := "stop"
		if u.calls {
			msg = `{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":` + str(u.thinking) + `}]}],"tool_calls":[{"id":"D681PevKs","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"},"index":0}],"prefix":false}`
			finish = "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"a1b2c3","object":"chat.completion","created":1751299200,"model":"magistral-medium-2507","choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":10,"total_tokens":40,"completion_tokens":30}}`, msg, finish)
		return
	}
	var sb bytes.Buffer
	ev := func(delta, finish string, usage string) {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		fmt.Fprintf(&sb, "data: {\"id\":\"a1b2c3\",\"object\":\"chat.completion.chunk\",\"created\":1751299200,\"model\":\"magistral-medium-2507\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]%s}\n\n", delta, f, usage)
	}
	ev(`{"role":"assistant","content":""}`, "", "")
	for i := 0; i < len(u.thinking); i += 4 {
		ev(`{"content":[{"type":"thinking","thinking":[{"type":"text","text":`+str(u.thinking[i:min(i+4, len(u.thinking))])+`}]}]}`, "", "")
	}
	ev(`{"content":[{"type":"thinking","thinking":[{"type":"text","text":""}],"closed":true}]}`, "", "")
	if u.calls {
		ev(`{"tool_calls":[{"id":"D681PevKs","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"},"index":0}]}`, "", "")
		ev(`{"content":""}`, "tool_calls", `,"usage":{"prompt_tokens":10,"total_tokens":40,"completion_tokens":30}`)
	} else {
		words := strings.SplitAfter(u.answer, " ")
		for _, wd := range words[:len(words)-1] {
			ev(`{"content":`+str(wd)+`}`, "", "")
		}
		ev(`{"content":[{"type":"text","text":`+str(words[len(words)-1])+`},{"type":"reference","reference_ids":[1]}]}`, "", "")
		ev(`{"content":""}`, "stop", `,"usage":{"prompt_tokens":10,"total_tokens":40,"completion_tokens":30}`)
	}
	sb.WriteString("data: [DONE]\n\n")
	u.raw.Store(sb.String())
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	// Written an event at a time, as Mistral's API flushes them.
	for _, e := range strings.SplitAfter(sb.String(), "\n\n") {
		_, _ = io.WriteString(w, e)
		fl.Flush()
	}
}

// partsOf assembles content parts from raw chunks as Mistral's client
// does: a thinking or text part of plain text extends the previous
// chunk's part of its kind; a string delta is a text part.
func partsOf(chunks []string) (thinking, text string) {
	for _, c := range chunks {
		v := gjson.Get(c, "choices.0.delta.content")
		switch {
		case v.Type == gjson.String:
			text += v.Str
		case v.IsArray():
			for _, p := range v.Array() {
				switch p.Get("type").Str {
				case "thinking":
					thinking += p.Get("thinking.0.text").Str
				case "text":
					text += p.Get("text").Str
				}
			}
		}
	}
	return thinking, text
}

// TestThinkingMagistralParts: a Magistral parts stream (and JSON answer)
// through the binary with openai-go. Allowed, the client gets the stream
// as it came (openai-go reads array content as no string, so the raw
// chunks are assembled here); with a word only the thinking carries, split
// across thinking chunks, the deny at output blocks it: 403
// agent_hooks_denied, and no byte of the thinking reaches the client.
func TestThinkingMagistralParts(t *testing.T) {
	const allowedThinking = "The user asks for 2+2. Simple arithmetic: four."
	const deniedThinking = "The user asks for 2+2. I could mention a pineapple pizza, but no."
	const answer = "2 + 2 is **4**. Café ✓"
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream]+"/allowed", func(t *testing.T) {
			up := &magistralUp{thinking: allowedThinking, answer: answer}
			b := startBinaryWith(t, thinkingYAML, up, newR2up())
			c := openai.NewClient(option.WithBaseURL(b.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
			p := openai.ChatCompletionNewParams{Model: "magistral-medium-2507", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2+2?")}}
			if !stream {
				resp, err := c.Chat.Completions.New(t.Context(), p)
				if err != nil {
					t.Fatal(err)
				}
				content := gjson.Get(resp.RawJSON(), "choices.0.message.content")
				if content.Get("0.thinking.0.text").Str != allowedThinking || content.Get("1.text").Str != answer {
					t.Errorf("content %s", content.Raw)
				}
				return
			}
			r := runStream(t.Context(), c, p)
			if r.err != nil {
				t.Fatal(r.err)
			}
			th, tx := partsOf(r.chunks)
			if th != allowedThinking || tx != answer {
				t.Errorf("assembled thinking %q text %q", th, tx)
			}
			// Replayed as it came: the same chunks as the upstream sent
			// (the usage chunk the proxy asked for is left out, none here).
			var sent []string
			for _, e := range strings.Split(up.raw.Load().(string), "\n\n") {
				if d, ok := strings.CutPrefix(e, "data: "); ok && d != "[DONE]" {
					sent = append(sent, d)
				}
			}
			if len(sent) != len(r.chunks) {
				t.Errorf("client got %d chunks, upstream sent %d", len(r.chunks), len(sent))
			}
			recs := b.fileRecs(t, "", 2*time.Second)
			if got := r2points(recs); !slices.Contains(got, "output") || !slices.Contains(got, "post_model_call") {
				t.Errorf("records %v", got)
			}
		})
		t.Run(map[bool]string{false: "json", true: "stream"}[stream]+"/denied", func(t *testing.T) {
			up := &magistralUp{thinking: deniedThinking, answer: answer}
			b := startBinaryWith(t, thinkingYAML, up, newR2up())
			c := openai.NewClient(option.WithBaseURL(b.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
			p := openai.ChatCompletionNewParams{Model: "magistral-medium-2507", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2+2?")}}
			var err error
			var got string
			if stream {
				r := runStream(t.Context(), c, p)
				err, got = r.err, strings.Join(r.chunks, "\n")
			} else {
				var resp *openai.ChatCompletion
				resp, err = c.Chat.Completions.New(t.Context(), p)
				if resp != nil {
					got = resp.RawJSON()
				}
			}
			var ae *openai.Error
			if !errors.As(err, &ae) || ae.StatusCode != 403 || ae.Type != "agent_hooks_denied" || !strings.Contains(ae.RawJSON(), "thinking_denied") {
				t.Fatalf("err %v, got %s", err, got)
			}
			if strings.Contains(ae.RawJSON(), "pineapple") || strings.Contains(got, "pine") || strings.Contains(got, "**4**") {
				t.Errorf("payload reached the client: %s %s", ae.RawJSON(), got)
			}
			denied := false
			for _, r := range b.fileRecs(t, "", 2*time.Second) {
				denied = denied || r.Point == "output" && r.Verdict.Decision == "deny" && r.Verdict.Reason == "thinking_denied"
			}
			if !denied {
				t.Errorf("no output deny record: %v", r2points(b.fileRecs(t, "", 2*time.Second)))
			}
		})
	}
}

// TestThinkingMagistralPartsBesideToolCall: Magistral thinks, then calls a
// tool. The thinking is released to the client beside the call, so it must
// pass output like any text beside tool calls; a word only it carries is
// denied there.
func TestThinkingMagistralPartsBesideToolCall(t *testing.T) {
	const deniedThinking = "Weather lookup; the user likes pineapple, irrelevant. Call get_weather."
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			up := &magistralUp{thinking: deniedThinking, calls: true}
			b := startBinaryWith(t, thinkingYAML, up, newR2up())
			c := openai.NewClient(option.WithBaseURL(b.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
			p := openai.ChatCompletionNewParams{Model: "magistral-medium-2507", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")}, Tools: dsTools()}
			var err error
			var got string
			if stream {
				r := runStream(t.Context(), c, p)
				err, got = r.err, strings.Join(r.chunks, "\n")
			} else {
				var resp *openai.ChatCompletion
				resp, err = c.Chat.Completions.New(t.Context(), p)
				if resp != nil {
					got = resp.RawJSON()
				}
			}
			if strings.Contains(got, "pine") {
				t.Errorf("the thinking beside the tool call reached the client without output judging it (err %v; records %v):\n%s", err, r2points(b.fileRecs(t, "", 2*time.Second)), got)
			}
		})
	}
}

const thinkingRedactYAML = `
upstream: {base_url: UPSTREAM_URL, timeout: 30s}
agent: {id: thinking-agent, framework: openai-compatible}
sessions: {idle_timeout: 10m}
hooks:
  declaration: agent-hooks-declaration/1.0
  configuration:
    mode: enforce
    composition: {profile: sequential/first_deny}
    identity_provider: jcs-sha256
    timeouts: {interceptor_ms: 5000}
  bindings:
    - id: key-redaction
      kind: hooksproxy.content
      at: [post_model_call]
      config: {packs: {secrets: redact}}
    - id: allow-rest
      kind: hooksproxy.allow_all
`

// TestThinkingDeepSeekRedactedArgsNextRun: a header-less agent whose
// tool-call arguments a transform rewrote (a key redacted) gets them as
// rewritten, and replays them so in its next turn (a new run). The
// reasoning kept for the agent's next runs is keyed by the arguments the
// upstream sent, not the ones the agent got and replays, so the next turn
// finds none and DeepSeek refuses it.
func TestThinkingDeepSeekRedactedArgsNextRun(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			up := newDeepseekUp()
			up.extraArg = `,"api_key":"` + fakeKey + `"`
			b := startBinaryWith(t, thinkingRedactYAML, up, newR2up())
			c := openai.NewClient(option.WithBaseURL(b.URL+"/v1"), option.WithAPIKey("tenant-a-key"), option.WithMaxRetries(0))
			hist := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")}
			t1, err := dsAsk(t, c, stream, hist)
			if err != nil || len(t1.msg.ToolCalls) != 1 {
				t.Fatalf("turn 1: %v %+v", err, t1.msg)
			}
			if a := t1.msg.ToolCalls[0].Function.Arguments; strings.Contains(a, fakeKey) || !strings.Contains(a, "[REDACTED") {
				t.Fatalf("arguments not redacted: %s", a)
			}
			hist = append(hist, t1.msg.ToParam(), openai.ToolMessage("sunny", t1.msg.ToolCalls[0].ID))
			t1b, err := dsAsk(t, c, stream, hist)
			if err != nil {
				t.Fatalf("turn 1 follow-up (same run): %v", err)
			}
			hist = append(hist, t1b.msg.ToParam(), openai.UserMessage("And in Rome?"))
			if _, err := dsAsk(t, c, stream, hist); err != nil {
				t.Errorf("turn 2 (the agent's next run, same key, the call as the agent got it): %v", err)
			}
		})
	}
}

// TestThinkingMagistralToolCall: Magistral thinks (its last thinking
// chunk says closed:true), then calls a tool; nothing is denied. openai-go
// gets the call (and the thinking chunks as they came), the stream being an
// ordinary Magistral one.
func TestThinkingMagistralToolCall(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			up := &magistralUp{thinking: "Weather lookup for Paris. Call get_weather.", calls: true}
			b := startBinaryWith(t, thinkingYAML, up, newR2up())
			c := openai.NewClient(option.WithBaseURL(b.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
			p := openai.ChatCompletionNewParams{Model: "magistral-medium-2507", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")}, Tools: dsTools()}
			var calls []openai.ChatCompletionMessageToolCallUnion
			var raw []string
			if stream {
				r := runStream(t.Context(), c, p)
				if r.err != nil {
					t.Fatalf("%v; records %v", r.err, r2points(b.fileRecs(t, "", 2*time.Second)))
				}
				calls, raw = r.acc.Choices[0].Message.ToolCalls, r.chunks
			} else {
				resp, err := c.Chat.Completions.New(t.Context(), p)
				if err != nil {
					t.Fatalf("%v; records %v", err, r2points(b.fileRecs(t, "", 2*time.Second)))
				}
				calls, raw = resp.Choices[0].Message.ToolCalls, []string{strings.Replace(resp.RawJSON(), `"message"`, `"delta"`, 1)}
			}
			if len(calls) != 1 || calls[0].Function.Name != "get_weather" || calls[0].ID != "D681PevKs" {
				t.Errorf("tool calls %+v", calls)
			}
			if th, _ := partsOf(raw); th != up.thinking {
				t.Errorf("thinking %q", th)
			}
		})
	}
}

package e2e

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/scripted"
)

// goClient is an openai-go client pointed at the proxy. retries is the
// SDK's MaxRetries; tests that expect a block use 0 unless they test that
// the SDK does not retry.
func goClient(e *env, retries int, opts ...option.RequestOption) openai.Client {
	base := []option.RequestOption{
		option.WithBaseURL(e.URL + "/v1"),
		option.WithAPIKey("test-key"),
		option.WithMaxRetries(retries),
	}
	return openai.NewClient(append(base, opts...)...)
}

func chatParams(prompt string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
	}
}

// toolParams declares the tools the scripted tool-call answers use.
func toolParams(prompt string) openai.ChatCompletionNewParams {
	p := chatParams(prompt)
	obj := func(props ...string) openai.FunctionParameters {
		m := map[string]any{}
		for _, k := range props {
			m[k] = map[string]string{"type": "string"}
		}
		return openai.FunctionParameters{"type": "object", "properties": m}
	}
	p.Tools = []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather", Parameters: obj("city", "unit", "detail")}),
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_time", Parameters: obj("timezone", "format")}),
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "delete_files", Parameters: obj("path")}),
	}
	return p
}

// streamResult is what one openai-go stream delivered.
type streamResult struct {
	acc    openai.ChatCompletionAccumulator
	chunks []string // raw JSON of every chunk
	// finished lists the tool calls JustFinishedToolCall reported.
	finished []openai.FinishedChatCompletionToolCall
	err      error
}

func runStream(ctx context.Context, c openai.Client, p openai.ChatCompletionNewParams) *streamResult {
	s := c.Chat.Completions.NewStreaming(ctx, p)
	defer s.Close()
	r := &streamResult{}
	for s.Next() {
		ch := s.Current()
		r.chunks = append(r.chunks, ch.RawJSON())
		if !r.acc.AddChunk(ch) {
			r.err = errors.New("accumulator rejected a chunk: " + ch.RawJSON())
			return r
		}
		if tc, ok := r.acc.JustFinishedToolCall(); ok {
			r.finished = append(r.finished, tc)
		}
	}
	r.err = s.Err()
	return r
}

// onlySession returns the single session's records, failing otherwise.
func onlySession(t *testing.T, e *env) []string {
	t.Helper()
	ss := e.sessions()
	if len(ss) != 1 {
		t.Fatalf("sessions = %v, want exactly one", ss)
	}
	recs := e.records(ss[0])
	checkSequences(t, recs)
	return pointsOf(recs)
}

var wholeRun = []string{"agent_startup", "input", "pre_model_call", "post_model_call", "output", "agent_shutdown"}

func TestOpenAIGoPlain(t *testing.T) {
	e := start(t, policyYAML, scripted.New(rules()...))
	c := goClient(e, 0)
	resp, err := c.Chat.Completions.New(t.Context(), chatParams("hello there"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if got := resp.Choices[0].Message.Content; got != answerHello {
		t.Errorf("content = %q, want %q", got, answerHello)
	}
	if got := resp.Choices[0].FinishReason; got != "stop" {
		t.Errorf("finish_reason = %q, want stop", got)
	}
	if resp.Usage.TotalTokens == 0 {
		t.Errorf("usage not passed through: %+v", resp.Usage)
	}
	if n := e.Up.Requests.Load(); n != 1 {
		t.Errorf("upstream requests = %d, want 1", n)
	}
	if got := onlySession(t, e); !slices.Equal(got, wholeRun) {
		t.Errorf("points = %v, want %v", got, wholeRun)
	}
}

func TestOpenAIGoStreaming(t *testing.T) {
	for _, usage := range []bool{false, true} {
		name := "no_usage"
		if usage {
			name = "include_usage"
		}
		t.Run(name, func(t *testing.T) {
			e := start(t, policyYAML, scripted.New(rules()...))
			p := chatParams("stream please")
			if usage {
				p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			r := runStream(t.Context(), goClient(e, 0), p)
			if r.err != nil {
				t.Fatalf("stream: %v", r.err)
			}
			if got := r.acc.Choices[0].Message.Content; got != answerLong {
				t.Errorf("accumulated content = %q, want %q", got, answerLong)
			}
			if got := r.acc.Choices[0].FinishReason; got != "stop" {
				t.Errorf("finish_reason = %q", got)
			}
			// The scripted upstream cuts content into 8-byte pieces; an
			// untouched stream is replayed event for event.
			if min := len(answerLong) / 8; len(r.chunks) < min {
				t.Errorf("got %d chunks, want at least %d (stream was coalesced?)", len(r.chunks), min)
			}
			usageChunks := 0
			for _, ch := range r.chunks {
				if gjson.Get(ch, "error").Exists() {
					t.Errorf("chunk carries a top-level error key: %s", ch)
				}
				if len(gjson.Get(ch, "choices").Array()) == 0 {
					usageChunks++
				}
			}
			if usage {
				if usageChunks != 1 || r.acc.Usage.TotalTokens == 0 {
					t.Errorf("include_usage: %d usage chunks, total_tokens %d; want 1 and > 0", usageChunks, r.acc.Usage.TotalTokens)
				}
			} else if usageChunks != 0 {
				t.Errorf("usage chunk sent though the client did not ask for it")
			}
			if got := onlySession(t, e); !slices.Equal(got, wholeRun) {
				t.Errorf("points = %v, want %v", got, wholeRun)
			}
		})
	}
}

// TestOpenAIGoParallelToolCalls streams two tool calls whose arguments
// arrive in 7-byte fragments, checks the SDK accumulates them exactly, then
// answers them: the header-less follow-up joins the same session through
// its tool-call ids and ends it.
func TestOpenAIGoParallelToolCalls(t *testing.T) {
	for _, stream := range []bool{true, false} {
		name := "stream"
		if !stream {
			name = "plain"
		}
		t.Run(name, func(t *testing.T) {
			e := start(t, policyYAML, scripted.New(rules()...))
			c := goClient(e, 0)
			p := toolParams("what is the weather in Paris?")
			var msg openai.ChatCompletionMessage
			var finish string
			if stream {
				r := runStream(t.Context(), c, p)
				if r.err != nil {
					t.Fatalf("stream: %v", r.err)
				}
				msg, finish = r.acc.Choices[0].Message, r.acc.Choices[0].FinishReason
				frags := map[int64]int{}
				for _, ch := range r.chunks {
					for _, tc := range gjson.Get(ch, "choices.0.delta.tool_calls").Array() {
						if tc.Get("function.arguments").Str != "" {
							frags[tc.Get("index").Int()]++
						}
					}
				}
				if frags[0] < 2 || frags[1] < 2 {
					t.Errorf("argument fragments per call = %v, want >= 2 each", frags)
				}
				if len(r.finished) != 2 {
					t.Errorf("JustFinishedToolCall reported %d calls, want 2: %+v", len(r.finished), r.finished)
				} else if r.finished[0].Name != "get_weather" || r.finished[0].Arguments != weatherArgs ||
					r.finished[1].Name != "get_time" || r.finished[1].Arguments != timeArgs {
					t.Errorf("JustFinishedToolCall = %+v", r.finished)
				}
			} else {
				resp, err := c.Chat.Completions.New(t.Context(), p)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				msg, finish = resp.Choices[0].Message, resp.Choices[0].FinishReason
			}
			if finish != "tool_calls" {
				t.Errorf("finish_reason = %q, want tool_calls", finish)
			}
			want := []struct{ id, name, args string }{
				{"call_weather_1", "get_weather", weatherArgs},
				{"call_time_2", "get_time", timeArgs},
			}
			if len(msg.ToolCalls) != len(want) {
				t.Fatalf("tool calls = %+v, want %d", msg.ToolCalls, len(want))
			}
			for i, w := range want {
				tc := msg.ToolCalls[i]
				if tc.ID != w.id || tc.Function.Name != w.name || tc.Function.Arguments != w.args || tc.Type != "function" {
					t.Errorf("tool call %d = {%s %s %s %s}, want {%s %s %s}", i, tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments, w.id, w.name, w.args)
				}
			}
			// A tool-call response is not the turn's final answer: the run
			// stays open. The transparent tool seam fires pre_tool_call for
			// each call at release.
			want1 := []string{"agent_startup", "input", "pre_model_call", "post_model_call", "pre_tool_call", "pre_tool_call"}
			if got := onlySession(t, e); !slices.Equal(got, want1) {
				t.Errorf("points after the tool calls = %v, want %v", got, want1)
			}

			// Answer both calls, without a session header.
			follow := toolParams("")
			follow.Messages = []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage("what is the weather in Paris?"),
				msg.ToParam(),
				openai.ToolMessage(`{"temp_c":21}`, msg.ToolCalls[0].ID),
				openai.ToolMessage(`{"time":"12:00"}`, msg.ToolCalls[1].ID),
			}
			resp, err := c.Chat.Completions.New(t.Context(), follow)
			if err != nil {
				t.Fatalf("follow-up: %v", err)
			}
			if got := resp.Choices[0].Message.Content; got != "The tool said something else." {
				t.Errorf("follow-up content = %q", got)
			}
			// The follow-up joins the run by its tool-call ids; the seam
			// fires post_tool_call for each result it carries.
			want2 := append(want1, "post_tool_call", "post_tool_call", "pre_model_call", "post_model_call", "output", "agent_shutdown")
			if got := onlySession(t, e); !slices.Equal(got, want2) {
				t.Errorf("points of the whole run = %v, want %v", got, want2)
			}
		})
	}
}

// TestOpenAIGoDeny checks that every policy deny reaches the SDK as a
// 403 *openai.Error with our type and reason code, streams included, and
// that the body names the decision but not the payload.
func TestOpenAIGoDeny(t *testing.T) {
	cases := []struct {
		name, prompt  string
		tools, stream bool
		code, point   string
		upstream      int64
		secret        string // must not appear in the error body
	}{
		{"input", "please exfiltrate the database", false, false, "prompt_denied", "input", 0, "database"},
		{"input_stream", "please exfiltrate the database", false, true, "prompt_denied", "input", 0, "database"},
		{"output", "leak it", false, false, "secret_in_output", "output", 1, "hunter2"},
		{"output_stream", "leak it", false, true, "secret_in_output", "output", 1, "hunter2"},
		{"tool", "clean up the disk", true, false, "tool_denied", "post_model_call", 1, `"path"`},
		{"tool_stream", "clean up the disk", true, true, "tool_denied", "post_model_call", 1, `"path"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, policyYAML, scripted.New(rules()...))
			// Default retries: a 403 must not be retried anyway.
			c := goClient(e, 2)
			p := chatParams(tc.prompt)
			if tc.tools {
				p = toolParams(tc.prompt)
			}
			var err error
			if tc.stream {
				r := runStream(t.Context(), c, p)
				if len(r.chunks) != 0 {
					t.Errorf("denied stream delivered %d chunks", len(r.chunks))
				}
				err = r.err
			} else {
				_, err = c.Chat.Completions.New(t.Context(), p)
			}
			var aerr *openai.Error
			if !errors.As(err, &aerr) {
				t.Fatalf("err = %v (%T), want *openai.Error", err, err)
			}
			if aerr.StatusCode != http.StatusForbidden || aerr.Type != "agent_hooks_denied" || aerr.Code != tc.code {
				t.Errorf("error = {status %d type %q code %q}, want {403 agent_hooks_denied %q}", aerr.StatusCode, aerr.Type, aerr.Code, tc.code)
			}
			raw := aerr.RawJSON()
			if got := gjson.Get(raw, "agent_hooks.interception_point").Str; got != tc.point {
				t.Errorf("agent_hooks.interception_point = %q, want %q (body %s)", got, tc.point, raw)
			}
			if got := gjson.Get(raw, "agent_hooks.reason").Str; got != tc.code {
				t.Errorf("agent_hooks.reason = %q, want %q", got, tc.code)
			}
			if strings.Contains(raw, tc.secret) {
				t.Errorf("error body carries the denied payload %q: %s", tc.secret, raw)
			}
			if h := aerr.Response.Header.Get("X-Should-Retry"); h != "false" {
				t.Errorf("X-Should-Retry = %q, want false", h)
			}
			if n := e.Up.Requests.Load(); n != tc.upstream {
				t.Errorf("upstream requests = %d, want %d", n, tc.upstream)
			}
			if n := e.ProxyRequests.Load(); n != 1 {
				t.Errorf("proxy requests = %d, want 1 (the SDK retried a deny)", n)
			}
			// A header-less run ends with the block.
			recs := e.records(e.sessions()[0])
			pts := pointsOf(recs)
			if len(pts) < 2 || pts[len(pts)-1] != "agent_shutdown" || pts[len(pts)-2] != tc.point {
				t.Errorf("points = %v, want ... %s agent_shutdown", pts, tc.point)
			}
			if d := recs[len(recs)-2].Verdict; d.Decision != "deny" || d.Reason != tc.code {
				t.Errorf("record at %s = %+v, want deny %s", tc.point, d, tc.code)
			}
		})
	}
}

// TestOpenAIGoTransform checks that the secrets pack's redaction at
// post_model_call reaches the client, in a re-derived stream too.
func TestOpenAIGoTransform(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		e := start(t, policyYAML, scripted.New(rules()...))
		c := goClient(e, 0)
		resp, err := c.Chat.Completions.New(t.Context(), chatParams("what is my key?"))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if got := resp.Choices[0].Message.Content; got != answerRedacted {
			t.Errorf("content = %q, want %q", got, answerRedacted)
		}
	})
	for _, usage := range []bool{false, true} {
		name := "stream"
		if usage {
			name = "stream_include_usage"
		}
		t.Run(name, func(t *testing.T) {
			e := start(t, policyYAML, scripted.New(rules()...))
			p := chatParams("what is my key?")
			if usage {
				p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			r := runStream(t.Context(), goClient(e, 0), p)
			if r.err != nil {
				t.Fatalf("stream: %v", r.err)
			}
			if got := r.acc.Choices[0].Message.Content; got != answerRedacted {
				t.Errorf("accumulated content = %q, want %q", got, answerRedacted)
			}
			for _, ch := range r.chunks {
				if strings.Contains(ch, "ABCDEFGHIJ") {
					t.Errorf("a chunk still carries the key: %s", ch)
				}
			}
			if usage && r.acc.Usage.TotalTokens == 0 {
				t.Errorf("include_usage: usage chunk lost in the re-derived stream")
			}
			e.Close()
			recs := e.records(e.sessions()[0])
			var post []string
			for _, rec := range recs {
				if rec.InterceptionPoint == "post_model_call" {
					post = append(post, string(rec.Verdict.Decision), rec.Verdict.Reason)
				}
			}
			if !slices.Equal(post, []string{"transform", "content_redacted"}) {
				t.Errorf("post_model_call verdict = %v, want [transform content_redacted]", post)
			}
		})
	}
}

// TestOpenAIGoTransformToolCalls checks a redaction inside a tool call's
// arguments: the proxy re-derives the stream, and the SDK's accumulator
// still gets both parallel calls whole.
func TestOpenAIGoTransformToolCalls(t *testing.T) {
	e := start(t, policyYAML, scripted.New(rules()...))
	r := runStream(t.Context(), goClient(e, 0), toolParams("what is the weather with my key?"))
	if r.err != nil {
		t.Fatalf("stream: %v", r.err)
	}
	calls := r.acc.Choices[0].Message.ToolCalls
	got := make([]string, len(calls))
	for i, c := range calls {
		got[i] = c.ID + " " + c.Function.Name + " " + c.Function.Arguments
	}
	want := []string{"call_weather_k get_weather " + weatherKeyArgsRedacted, "call_time_k get_time " + timeArgs}
	if !slices.Equal(got, want) {
		t.Errorf("tool calls = %q, want %q", got, want)
	}
	if f := r.acc.Choices[0].FinishReason; f != "tool_calls" {
		t.Errorf("finish_reason = %q", f)
	}
	for _, ch := range r.chunks {
		if strings.Contains(ch, "ABCDEFGHIJ") {
			t.Errorf("a chunk still carries the key: %s", ch)
		}
	}
}

// hostErrorYAML sends post_model_call to a webhook that answers a
// malformed verdict: a fail-closed host error after the upstream call.
const hostErrorYAML = `
upstream: {base_url: UPSTREAM_URL, timeout: 30s}
agent: {id: e2e-agent, framework: openai-compatible}
hooks:
  declaration: agent-hooks-declaration/1.0
  configuration:
    mode: enforce
    composition: {profile: sequential/first_deny}
    identity_provider: jcs-sha256
  bindings:
    - id: broken-webhook
      kind: hooksproxy.webhook
      at: [post_model_call]
      config: {url: WEBHOOK_URL}
    - id: allow-rest
      kind: hooksproxy.allow_all
`

// TestOpenAIGoHostError checks a fail-closed host error: 503 with our type
// and code and X-Should-Retry: false, which the SDK honours although it
// retries 5xx by default. The upstream and the proxy each see one request.
func TestOpenAIGoHostError(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "plain"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			var hooks atomic.Int64
			wh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				hooks.Add(1)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"decision":"perhaps"}`))
			}))
			t.Cleanup(wh.Close)
			e := start(t, strings.ReplaceAll(hostErrorYAML, "WEBHOOK_URL", wh.URL), scripted.New(rules()...))
			c := goClient(e, 2) // the SDK default: 5xx would be retried twice
			var err error
			if stream {
				r := runStream(t.Context(), c, chatParams("hello"))
				if len(r.chunks) != 0 {
					t.Errorf("failed-closed stream delivered %d chunks", len(r.chunks))
				}
				err = r.err
			} else {
				_, err = c.Chat.Completions.New(t.Context(), chatParams("hello"))
			}
			var aerr *openai.Error
			if !errors.As(err, &aerr) {
				t.Fatalf("err = %v (%T), want *openai.Error", err, err)
			}
			if aerr.StatusCode != http.StatusServiceUnavailable || aerr.Type != "agent_hooks_host_error" || aerr.Code != "host_error:verdict_invalid" {
				t.Errorf("error = {status %d type %q code %q}, want {503 agent_hooks_host_error host_error:verdict_invalid}", aerr.StatusCode, aerr.Type, aerr.Code)
			}
			if h := aerr.Response.Header.Get("X-Should-Retry"); h != "false" {
				t.Errorf("X-Should-Retry = %q, want false", h)
			}
			if n := e.Up.Requests.Load(); n != 1 {
				t.Errorf("upstream requests = %d, want 1 (the SDK retried)", n)
			}
			if n := e.ProxyRequests.Load(); n != 1 {
				t.Errorf("proxy requests = %d, want 1 (the SDK retried)", n)
			}
			if n := hooks.Load(); n != 1 {
				t.Errorf("webhook calls = %d, want 1", n)
			}
		})
	}
}

package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	lcopenai "github.com/tmc/langchaingo/llms/openai"
	"github.com/tmc/langchaingo/tools"

	"github.com/hooksproxy/hooksproxy/scripted"
)

// headerDoer adds fixed headers to every request langchaingo sends.
type headerDoer struct {
	h http.Header
}

func (d headerDoer) Do(r *http.Request) (*http.Response, error) {
	for k, vs := range d.h {
		r.Header[k] = vs
	}
	return http.DefaultClient.Do(r)
}

// recordingTool wraps a real tool and remembers its inputs.
type recordingTool struct {
	tools.Tool
	mu     sync.Mutex
	inputs []string
}

func (t *recordingTool) Call(ctx context.Context, input string) (string, error) {
	t.mu.Lock()
	t.inputs = append(t.inputs, input)
	t.mu.Unlock()
	return t.Tool.Call(ctx, input)
}

func (t *recordingTool) calls() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.inputs)
}

// shellTool is a tool the policy forbids; it must never run.
type shellTool struct{}

func (shellTool) Name() string        { return "shell_exec" }
func (shellTool) Description() string { return "Runs a shell command." }
func (shellTool) Call(context.Context, string) (string, error) {
	return "", nil
}

// streamCounter counts the chunks langchaingo's streaming reader parsed.
type streamCounter struct {
	mu     sync.Mutex
	chunks int
}

func (s *streamCounter) fn(context.Context, []byte) error {
	s.mu.Lock()
	s.chunks++
	s.mu.Unlock()
	return nil
}

type lcRun struct {
	out   string
	err   error
	calc  *recordingTool
	shell *recordingTool
	sc    *streamCounter
}

// runAgent runs langchaingo's OpenAI functions agent with a calculator and
// a shell tool through the proxy, once, for question.
func runAgent(t *testing.T, e *env, question, session string, stream bool) *lcRun {
	t.Helper()
	h := http.Header{}
	if session != "" {
		h.Set("X-Agent-Hooks-Session", session)
	}
	llm, err := lcopenai.New(
		lcopenai.WithBaseURL(e.URL+"/v1"),
		lcopenai.WithToken("test-key"),
		lcopenai.WithModel("gpt-4o-mini"),
		lcopenai.WithHTTPClient(headerDoer{h: h}),
	)
	if err != nil {
		t.Fatalf("openai.New: %v", err)
	}
	r := &lcRun{calc: &recordingTool{Tool: tools.Calculator{}}, shell: &recordingTool{Tool: shellTool{}}}
	// The functions agent streams when the chain call carries a streaming
	// func (chains.GetLLMCallOptions overrides the agent's own).
	var opts []chains.ChainCallOption
	if stream {
		r.sc = &streamCounter{}
		opts = append(opts, chains.WithStreamingFunc(r.sc.fn))
	}
	agent := agents.NewOpenAIFunctionsAgent(llm, []tools.Tool{r.calc, r.shell})
	r.out, r.err = chains.Run(t.Context(), agents.NewExecutor(agent, agents.WithMaxIterations(3)), question, opts...)
	return r
}

// toolLoop is one agent run through the proxy with the transparent tool
// seam: the model asks for the calculator, the agent runs it and sends the
// result back, the model answers.
var toolLoop = []string{
	"agent_startup", "input", "pre_model_call", "post_model_call", "pre_tool_call",
	"post_tool_call", "pre_model_call", "post_model_call", "output",
}

func TestLangchaingoAgentToolLoop(t *testing.T) {
	for _, tc := range []struct {
		name    string
		session string
		stream  bool
	}{
		{"headerless", "", false},
		{"headerless_stream", "", true},
		{"session_header", "lc-session-1", false},
		{"session_header_stream", "lc-session-2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, policyYAML, scripted.New(rules()...).KeepBodies())
			r := runAgent(t, e, "What is 6*7?", tc.session, tc.stream)
			if r.err != nil {
				t.Fatalf("agent run: %v", r.err)
			}
			if r.out != answerAgent {
				t.Errorf("agent output = %q, want %q", r.out, answerAgent)
			}
			if got := r.calc.calls(); !slices.Equal(got, []string{"6*7"}) {
				t.Errorf("calculator inputs = %q, want [6*7]", got)
			}
			if n := e.Up.Requests.Load(); n != 2 {
				t.Errorf("upstream requests = %d, want 2", n)
			}
			if tc.stream {
				if r.sc.chunks == 0 {
					t.Errorf("streaming agent parsed no chunks")
				}
				for i, b := range e.Up.Bodies() {
					if !strings.Contains(string(b), `"stream":true`) {
						t.Errorf("upstream request %d did not stream: %s", i, b)
					}
				}
			}
			// The follow-up request carries the tool result under the
			// call id the model chose.
			bodies := e.Up.Bodies()
			if len(bodies) == 2 && !strings.Contains(string(bodies[1]), `"tool_call_id":"call_calc_1"`) {
				t.Errorf("follow-up lacks the tool result for call_calc_1: %s", bodies[1])
			}

			want := slices.Clone(toolLoop)
			if tc.session == "" {
				// A header-less run ends right after its final answer.
				want = append(want, "agent_shutdown")
			} else {
				if ss := e.sessions(); !slices.Equal(ss, []string{tc.session}) {
					t.Fatalf("sessions = %v, want [%s]", ss, tc.session)
				}
				if got := pointsOf(e.records(tc.session)); !slices.Equal(got, toolLoop) {
					t.Errorf("points before the session ends = %v, want %v", got, toolLoop)
				}
				endSession(t, e, tc.session)
				want = append(want, "agent_shutdown")
			}
			ss := e.sessions()
			if len(ss) != 1 {
				t.Fatalf("sessions = %v: the tool-loop follow-up did not join its run", ss)
			}
			recs := e.records(ss[0])
			checkSequences(t, recs)
			if got := pointsOf(recs); !slices.Equal(got, want) {
				t.Errorf("points = %v, want %v", got, want)
			}
			for _, rec := range recs {
				if !rec.Proceeds() {
					t.Errorf("%s did not proceed: %+v", rec.InterceptionPoint, rec.Verdict)
				}
			}
		})
	}
}

// endSession ends a named session through the host API.
func endSession(t *testing.T, e *env, sid string) {
	t.Helper()
	resp, err := http.Post(e.URL+"/agent-hooks/v1/sessions/"+sid+"/end", "application/json", strings.NewReader(`{"reason":"completed"}`))
	if err != nil {
		t.Fatalf("end session: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST /agent-hooks/v1/sessions/%s/end: status %d", sid, resp.StatusCode)
	}
}

// TestLangchaingoAgentDeniedTool checks that a tool call the policy denies
// at post_model_call stops the agent with langchaingo's error for a 403,
// and the tool never runs.
func TestLangchaingoAgentDeniedTool(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "plain"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			e := start(t, policyYAML, scripted.New(rules()...))
			r := runAgent(t, e, "please delete everything", "", stream)
			if r.err == nil {
				t.Fatalf("agent run succeeded with %q; want the deny", r.out)
			}
			msg := r.err.Error()
			if !strings.Contains(msg, "403") || !strings.Contains(msg, "post_model_call") {
				t.Errorf("error = %q, want langchaingo's status 403 error naming post_model_call", msg)
			}
			if strings.Contains(msg, "rm -rf") {
				t.Errorf("error carries the denied payload: %q", msg)
			}
			if got := r.shell.calls(); len(got) != 0 {
				t.Errorf("denied tool ran with %q", got)
			}
			recs := e.records(e.sessions()[0])
			checkSequences(t, recs)
			want := []string{"agent_startup", "input", "pre_model_call", "post_model_call", "agent_shutdown"}
			if got := pointsOf(recs); !slices.Equal(got, want) {
				t.Errorf("points = %v, want %v", got, want)
			}
			if len(recs) == len(want) {
				if v := recs[3].Verdict; v.Decision != "deny" || v.Reason != "tool_denied" {
					t.Errorf("post_model_call verdict = %+v, want deny tool_denied", v)
				}
			}
		})
	}
}

// TestLangchaingoStreamedToolCalls sends langchaingo's own client (not the
// agent) a request answered by two parallel tool calls, streamed and not,
// untouched (replayed event for event) and with a redaction in the first
// call's arguments (re-derived by the proxy). langchaingo merges tool-call
// deltas by a missing type rather than by index, so this checks the proxy
// re-emits continuation deltas without "type".
func TestLangchaingoStreamedToolCalls(t *testing.T) {
	for _, tc := range []struct {
		name, prompt string
		stream       bool
		want         []string
	}{
		{"replay_plain", "what is the weather in Paris?", false,
			[]string{"call_weather_1 get_weather " + weatherArgs, "call_time_2 get_time " + timeArgs}},
		{"replay_stream", "what is the weather in Paris?", true,
			[]string{"call_weather_1 get_weather " + weatherArgs, "call_time_2 get_time " + timeArgs}},
		{"rederived_plain", "what is the weather with my key?", false,
			[]string{"call_weather_k get_weather " + weatherKeyArgsRedacted, "call_time_k get_time " + timeArgs}},
		{"rederived_stream", "what is the weather with my key?", true,
			[]string{"call_weather_k get_weather " + weatherKeyArgsRedacted, "call_time_k get_time " + timeArgs}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, policyYAML, scripted.New(rules()...))
			llm, err := lcopenai.New(lcopenai.WithBaseURL(e.URL+"/v1"), lcopenai.WithToken("test-key"),
				lcopenai.WithModel("gpt-4o-mini"), lcopenai.WithHTTPClient(headerDoer{}))
			if err != nil {
				t.Fatal(err)
			}
			str := func(names ...string) map[string]any {
				props := map[string]any{}
				for _, n := range names {
					props[n] = map[string]any{"type": "string"}
				}
				return map[string]any{"type": "object", "properties": props}
			}
			opts := []llms.CallOption{llms.WithTools([]llms.Tool{
				{Type: "function", Function: &llms.FunctionDefinition{Name: "get_weather", Parameters: str("city", "unit", "detail", "api_key")}},
				{Type: "function", Function: &llms.FunctionDefinition{Name: "get_time", Parameters: str("timezone", "format")}},
			})}
			sc := &streamCounter{}
			if tc.stream {
				opts = append(opts, llms.WithStreamingFunc(sc.fn))
			}
			resp, err := llm.GenerateContent(t.Context(),
				[]llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, tc.prompt)}, opts...)
			if err != nil {
				t.Fatalf("GenerateContent: %v", err)
			}
			var got []string
			for _, c := range resp.Choices[0].ToolCalls {
				got = append(got, c.ID+" "+c.FunctionCall.Name+" "+c.FunctionCall.Arguments)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("tool calls = %q, want %q", got, tc.want)
			}
			if r := resp.Choices[0].StopReason; r != "tool_calls" {
				t.Errorf("stop reason = %q, want tool_calls", r)
			}
		})
	}
}

// seamPolicyYAML governs tools only at the transparent tool seam: the model
// may ask for a shell, but pre_tool_call denies it before the agent sees it.
const seamPolicyYAML = `
upstream:
  base_url: UPSTREAM_URL
  timeout: 30s
agent:
  id: e2e-agent
hooks:
  declaration: agent-hooks-declaration/1.0
  bindings:
    - id: tool-governance
      kind: hooksproxy.tools
      at: [pre_tool_call]
      config: {deny: ['shell_*']}
    - id: allow-rest
      kind: hooksproxy.allow_all
`

// TestLangchaingoAgentSeamDenyContinues: a tool call denied at
// pre_tool_call by the transparent seam never runs, the model gets the
// control error, and the agent still finishes with the model's answer;
// the records show the blocked pre without a post (§6.2).
func TestLangchaingoAgentSeamDenyContinues(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "plain"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			up := scripted.New(rules()...).KeepBodies()
			e := start(t, seamPolicyYAML, up)
			r := runAgent(t, e, "please delete everything", "", stream)
			if r.err != nil {
				t.Fatalf("agent run: %v", r.err)
			}
			if r.out != answerRefused {
				t.Errorf("agent answered %q, want %q", r.out, answerRefused)
			}
			if got := r.shell.calls(); len(got) != 0 {
				t.Errorf("denied tool ran with %q", got)
			}
			bodies := up.Bodies()
			if len(bodies) != 2 || !strings.Contains(string(bodies[1]), "Tool call blocked by agent-hooks at pre_tool_call.") {
				t.Fatalf("the model did not get the control error: %d upstream calls", len(bodies))
			}
			recs := e.records(e.sessions()[0])
			checkSequences(t, recs)
			want := []string{"agent_startup", "input", "pre_model_call", "post_model_call", "pre_tool_call",
				"pre_model_call", "post_model_call", "output", "agent_shutdown"}
			if got := pointsOf(recs); !slices.Equal(got, want) {
				t.Errorf("points = %v, want %v", got, want)
			}
			if len(recs) == len(want) {
				if v := recs[4].Verdict; v.Decision != "deny" || v.Reason == "" {
					t.Errorf("pre_tool_call verdict = %+v, want a deny", v)
				}
			}
		})
	}
}

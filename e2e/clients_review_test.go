package e2e

// Real clients (openai-go v3, langchaingo, npm openai) through
// hooksproxy served by a real http.Server (with the proxy's BaseContext, as
// cmd/hooksproxy serves it), the records read back over the admin records
// endpoint right after each answer.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	lcopenai "github.com/tmc/langchaingo/llms/openai"
	"github.com/tmc/langchaingo/tools"

	"github.com/hooksproxy/hooksproxy/app"
	"github.com/hooksproxy/hooksproxy/audit"
	"github.com/hooksproxy/hooksproxy/config"
	"github.com/hooksproxy/hooksproxy/points"
	"github.com/hooksproxy/hooksproxy/scripted"
)

const r2Token = "review2-admin-token"

// r2YAML: the e2e policies plus a spy at agent_shutdown, the admin API, and
// the tool seam's pre_tool_call deny and argument redaction. EXTRA is
// replaced by further bindings (before allow-rest).
const r2YAML = `
upstream: {base_url: UPSTREAM_URL, timeout: 30s}
agent: {id: r2-agent, framework: openai-compatible}
admin: {token_env: R2_ADMIN_TOKEN}
limits: {max_buffered_response_bytes: 64MiB, max_request_bytes: 16MiB}
sessions: {idle_timeout: 10m}
passthrough: [/v1/models]
hooks:
  declaration: agent-hooks-declaration/1.0
  configuration:
    mode: enforce
    composition: {profile: sequential/first_deny}
    identity_provider: jcs-sha256
    timeouts: {interceptor_ms: 30000}
  bindings:
    - id: spy
      kind: review2.spy
      at: [agent_shutdown]
    - id: prompt-guard
      kind: hooksproxy.content
      at: [input]
      config: {deny: ['(?i)\bexfiltrate\b'], reason: prompt_denied}
    - id: key-redaction
      kind: hooksproxy.content
      at: [KEY_AT]
      config: {packs: {secrets: redact}}
    - id: secret-egress
      kind: hooksproxy.content
      at: [output]
      config: {deny: ['(?i)\bsecret\b'], reason: secret_in_output}
    - id: tool-governance
      kind: hooksproxy.tools
      at: [pre_tool_call]
      config: {deny: [delete_files, 'shell_*']}
EXTRA
    - id: allow-rest
      kind: hooksproxy.allow_all
`

// r2spy records the agent_shutdown reason of every session.
type r2spy struct {
	mu      sync.Mutex
	reasons map[string][]string
}

func (s *r2spy) Intercept(_ context.Context, c *points.Context) (points.Verdict, error) {
	sid := c.Get("session.id").Str
	reason := c.Get("target.reason").Str
	if reason == "" {
		reason = c.Get("target.summary.reason").Str
	}
	s.mu.Lock()
	s.reasons[sid] = append(s.reasons[sid], reason)
	s.mu.Unlock()
	return points.Allow(), nil
}

func (s *r2spy) of(sid string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reasons[sid])
}

type r2env struct {
	URL       string
	App       *app.App
	Ring      *audit.Ring
	Up        *r2up
	hs        *http.Server
	spy       *r2spy
	ProxyReqs atomic.Int64
	inflight  atomic.Int64
	closeOnce sync.Once
}

// r2start serves hooksproxy (yaml with UPSTREAM_URL, KEY_AT and EXTRA
// replaced) on a real http.Server in front of up.
func r2start(t *testing.T, yaml, keyAt, extra string, up *r2up) *r2env {
	t.Helper()
	upSrv := httptest.NewServer(up) // R2_ADMIN_TOKEN is set by TestMain
	t.Cleanup(upSrv.Close)
	spy := &r2spy{reasons: map[string][]string{}}
	opts := app.Options{Extra: []app.Extra{func(r *config.MapRegistry) error {
		return r.RegisterKind("review2.spy", func(config.BindingSpec) (points.Interceptor, error) { return spy, nil })
	}}}
	y := strings.NewReplacer("UPSTREAM_URL", upSrv.URL, "KEY_AT", keyAt, "EXTRA", extra).Replace(yaml)
	cfg, err := app.Parse([]byte(y), "r2.yaml", opts)
	if err != nil {
		t.Fatalf("app.Parse: %v\n%s", err, y)
	}
	ring := audit.NewRing(10000)
	opts.Sink = ring
	a, err := app.New(cfg, "", opts)
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	a.Server.Router().Method(http.MethodGet, "/agent-hooks/v1/records", a.Server.AdminOnly(ring))
	a.Server.Start()
	e := &r2env{App: a, Ring: ring, Up: up, spy: spy}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.hs = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			e.ProxyReqs.Add(1)
		}
		e.inflight.Add(1)
		defer e.inflight.Add(-1)
		a.Server.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 30 * time.Second, BaseContext: a.Server.BaseContext}
	go func() { _ = e.hs.Serve(ln) }()
	e.URL = "http://" + ln.Addr().String()
	t.Cleanup(e.Close)
	return e
}

func (e *r2env) Close() {
	e.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.hs.Shutdown(ctx)
		e.App.Server.Close()
	})
}

// idle waits until no proxy handler runs (bounded).
func (e *r2env) idle(t *testing.T, d time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for e.inflight.Load() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

type r2rec struct {
	Session  string `json:"session_id"`
	Point    string `json:"interception_point"`
	Seq      int64  `json:"sequence"`
	Resolved string `json:"resolved_by"`
	Verdict  struct {
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
		Message  string `json:"message"`
	} `json:"verdict"`
}

// recs reads a session's records over the admin endpoint, as a client
// holding its answer would.
func (e *r2env) recs(t *testing.T, sid string) []r2rec {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.URL+"/agent-hooks/v1/records?session="+sid, nil)
	req.Header.Set("Authorization", "Bearer "+r2Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("records: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Records []r2rec `json:"records"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("records: %d %s", resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("records: %v: %s", err, b)
	}
	return out.Records
}

func r2points(rs []r2rec) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Point
		if r.Verdict.Decision != "allow" {
			out[i] += "/" + r.Verdict.Decision
			if r.Verdict.Reason != "" {
				out[i] += ":" + r.Verdict.Reason
			}
		}
	}
	return out
}

func r2seqOK(rs []r2rec) bool {
	for i, r := range rs {
		if i > 0 && r.Seq != rs[i-1].Seq+1 {
			return false
		}
	}
	return true
}

// r2up is the scripted upstream plus failure modes chosen by tags in the
// last message: [slow=MS] [slowfirst=MS] [big=N,chunk=C] [bigkey=N,chunk=C]
// [reset] [nonchunk] [nodone] [nofinish] [streamerror] [custom] [json500] [badjson].
type r2up struct {
	sc        *scripted.Server
	Requests  atomic.Int64
	Cancelled atomic.Int64
	mu        sync.Mutex
	seen      map[string]int
	bodies    [][]byte
}

func newR2up(extra ...scripted.Rule) *r2up {
	rs := append(extra, rules()...)
	return &r2up{sc: scripted.New(rs...), seen: map[string]int{}}
}

var r2tag = regexp.MustCompile(`\[(slow|slowfirst|big|bigkey|reset|nonchunk|extraevent|nodone|nofinish|streamerror|custom|json500|badjson|bigerr)(?:=([0-9,=a-z]+))?\]`)

func (u *r2up) Bodies() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.bodies)
}

func (u *r2up) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		u.sc.ServeHTTP(w, r)
		return
	}
	u.Requests.Add(1)
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, body)
	u.mu.Unlock()
	msgs := gjson.GetBytes(body, "messages").Array()
	last := ""
	if len(msgs) > 0 {
		last = msgs[len(msgs)-1].Get("content").String()
	}
	stream := gjson.GetBytes(body, "stream").Bool()
	r.Body = io.NopCloser(bytes.NewReader(body))
	for _, m := range r2tag.FindAllStringSubmatch(last, -1) {
		arg := m[2]
		switch m[1] {
		case "slow", "slowfirst":
			ms, _ := strconv.Atoi(arg)
			if m[1] == "slowfirst" {
				u.mu.Lock()
				u.seen[last]++
				n := u.seen[last]
				u.mu.Unlock()
				if n > 1 {
					continue
				}
			}
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
			case <-r.Context().Done():
				u.Cancelled.Add(1)
				return
			}
		case "big", "bigkey":
			var n, c int
			fmt.Sscanf(arg, "%d,chunk=%d", &n, &c)
			s := r2bigText(n, m[1] == "bigkey")
			sv := scripted.Sequence(scripted.Text(s))
			sv.Chunk = c
			sv.ServeHTTP(w, r)
			return
		case "reset":
			r2sse(w, stream, []string{r2chunk(`{"role":"assistant","content":"partial "}`, "")})
			hj, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				if tc, ok := hj.(*net.TCPConn); ok {
					_ = tc.SetLinger(0)
				}
				_ = hj.Close()
			}
			return
		case "nonchunk":
			r2sse(w, stream, []string{r2chunk(`{"role":"assistant","content":"hi"}`, ""), `not json at all`, "[DONE]"})
			return
		case "nodone":
			r2sse(w, stream, []string{r2chunk(`{"role":"assistant","content":"hi"}`, ""), r2chunk(`{}`, "stop")})
			return
		case "nofinish":
			r2sse(w, stream, []string{r2chunk(`{"role":"assistant","content":"hi"}`, "")})
			return
		case "streamerror":
			r2sse(w, stream, []string{r2chunk(`{"role":"assistant","content":"hi"}`, ""), `{"error":{"message":"the model is overloaded","type":"server_error","param":null,"code":"overloaded"}}`})
			return
		case "extraevent":
			r2sse(w, stream, []string{r2chunk(`{"role":"assistant","content":"hi"}`, ""), `{"hello":"world"}`, r2chunk(`{}`, "stop"), "[DONE]"})
			return
		case "custom":
			r2sse(w, stream, []string{
				r2chunk(`{"role":"assistant","content":null}`, ""),
				r2chunk(`{"tool_calls":[{"index":0,"id":"call_custom_1","type":"custom","custom":{"name":"run_sql","input":"select 1"}}]}`, ""),
				r2chunk(`{}`, "tool_calls"), "[DONE]"})
			return
		case "json500":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			_, _ = io.WriteString(w, `{"error":{"message":"upstream exploded","type":"server_error","param":null,"code":"boom"}}`)
			return
		case "bigerr":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"error":{"message":"`+strings.Repeat("x", 200<<10)+`","type":"invalid_request_error","param":null,"code":"too_big"}}`)
			return
		case "badjson":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"a","id":"b","object":"chat.completion","choices":[]}`)
			return
		}
	}
	u.sc.ServeHTTP(w, r)
}

func r2chunk(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = strconv.Quote(finish)
	}
	return `{"id":"chatcmpl-r2","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + f + `}]}`
}

func r2sse(w http.ResponseWriter, _ bool, events []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for _, ev := range events {
		fmt.Fprintf(w, "data: %s\n\n", ev)
		fl.Flush()
	}
}

// r2bigText is n bytes of text (with the fake key in the middle when key).
func r2bigText(n int, key bool) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %06d: the quick brown fox jumps over the lazy dog. ", i)
		if key && i == 500 {
			b.WriteString(fakeKey + " ")
		}
	}
	return b.String()
}

func r2bigExpect(n int, key bool) string {
	s := r2bigText(n, key)
	if key {
		s = strings.Replace(s, fakeKey, "[REDACTED:openai_key]", 1)
	}
	return s
}

// ---- clients ----

type r2call struct{ ID, Name, Args string }

type r2res struct {
	content string
	calls   []r2call
	finish  string
	session string
	chunks  int
	err     error
}

func r2go(e *r2env, retries int, opts ...option.RequestOption) openai.Client {
	base := []option.RequestOption{option.WithBaseURL(e.URL + "/v1"), option.WithAPIKey("test-key")}
	if retries >= 0 {
		base = append(base, option.WithMaxRetries(retries))
	}
	return openai.NewClient(append(base, opts...)...)
}

func r2goDo(ctx context.Context, c openai.Client, p openai.ChatCompletionNewParams, stream bool, opts ...option.RequestOption) (out r2res) {
	var resp *http.Response
	opts = append(opts, option.WithResponseInto(&resp))
	defer func() {
		if resp != nil {
			out.session = resp.Header.Get("X-Agent-Hooks-Session")
		}
	}()
	if stream {
		s := c.Chat.Completions.NewStreaming(ctx, p, opts...)
		defer s.Close()
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			out.chunks++
			acc.AddChunk(s.Current())
		}
		out.err = s.Err()
		if len(acc.Choices) > 0 {
			out.content = acc.Choices[0].Message.Content
			out.finish = acc.Choices[0].FinishReason
			for _, tc := range acc.Choices[0].Message.ToolCalls {
				out.calls = append(out.calls, r2call{tc.ID, tc.Function.Name, tc.Function.Arguments})
			}
		}
		return out
	}
	cc, err := c.Chat.Completions.New(ctx, p, opts...)
	out.err = err
	if err == nil {
		out.content = cc.Choices[0].Message.Content
		out.finish = cc.Choices[0].FinishReason
		for _, tc := range cc.Choices[0].Message.ToolCalls {
			out.calls = append(out.calls, r2call{tc.ID, tc.Function.Name, tc.Function.Arguments})
		}
	}
	return out
}

// r2doer is langchaingo's HTTP client: adds headers, remembers the last
// response's headers and counts attempts.
type r2doer struct {
	h    http.Header
	c    *http.Client
	mu   sync.Mutex
	last http.Header
	n    atomic.Int64
}

func (d *r2doer) Do(r *http.Request) (*http.Response, error) {
	d.n.Add(1)
	for k, vs := range d.h {
		r.Header[k] = vs
	}
	c := d.c
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(r)
	if resp != nil {
		d.mu.Lock()
		d.last = resp.Header.Clone()
		d.mu.Unlock()
	}
	return resp, err
}

func (d *r2doer) session() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last.Get("X-Agent-Hooks-Session")
}

func r2lc(t *testing.T, e *r2env, d *r2doer) *lcopenai.LLM {
	llm, err := lcopenai.New(lcopenai.WithBaseURL(e.URL+"/v1"), lcopenai.WithToken("test-key"), lcopenai.WithModel("gpt-4o-mini"), lcopenai.WithHTTPClient(d))
	if err != nil {
		t.Fatal(err)
	}
	return llm
}

var r2lcTools = []llms.Tool{
	{Type: "function", Function: &llms.FunctionDefinition{Name: "get_weather", Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}},
	{Type: "function", Function: &llms.FunctionDefinition{Name: "get_time", Parameters: map[string]any{"type": "object", "properties": map[string]any{"timezone": map[string]any{"type": "string"}}}}},
	{Type: "function", Function: &llms.FunctionDefinition{Name: "delete_files", Parameters: map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}},
}

func r2lcDo(ctx context.Context, llm *lcopenai.LLM, msgs []llms.MessageContent, stream, tools bool) (r2res, int) {
	var opts []llms.CallOption
	chunks := 0
	if stream {
		opts = append(opts, llms.WithStreamingFunc(func(context.Context, []byte) error { chunks++; return nil }))
	}
	if tools {
		opts = append(opts, llms.WithTools(r2lcTools))
	}
	resp, err := llm.GenerateContent(ctx, msgs, opts...)
	out := r2res{err: err}
	if err == nil && len(resp.Choices) > 0 {
		out.content = resp.Choices[0].Content
		out.finish = resp.Choices[0].StopReason
		for _, tc := range resp.Choices[0].ToolCalls {
			out.calls = append(out.calls, r2call{tc.ID, tc.FunctionCall.Name, tc.FunctionCall.Arguments})
		}
	}
	return out, chunks
}

// ---- node ----

type r2node struct {
	OK      bool     `json:"ok"`
	Session string   `json:"session"`
	Content *string  `json:"content"`
	Chunks  int      `json:"chunks"`
	Finish  string   `json:"finish"`
	Calls   []r2call `json:"calls"`
	Records []string `json:"records"`
	Elapsed int      `json:"elapsed"`
	Error   *struct {
		Name        string  `json:"name"`
		Status      int     `json:"status"`
		Type        string  `json:"type"`
		Code        any     `json:"code"`
		Message     string  `json:"message"`
		ShouldRetry *string `json:"shouldRetry"`
	} `json:"error"`
}

func (c *r2call) UnmarshalJSON(b []byte) error {
	var v struct{ ID, Name, Arguments string }
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = r2call{v.ID, v.Name, v.Arguments}
	return nil
}

func r2runNode(t *testing.T, e *r2env, spec map[string]any) r2node {
	t.Helper()
	spec["base"] = e.URL + "/v1"
	spec["records"] = e.URL + "/agent-hooks/v1/records"
	spec["token"] = r2Token
	var out r2node
	runNodeJSON(t, "r2.mjs", "R2_SPEC", spec, &out, false)
	return out
}

// runNodeJSON runs a node script of node/ with spec as JSON in the env
// var envName and decodes the first JSON line it prints into out (logged
// when logIt).
func runNodeJSON(t *testing.T, script, envName string, spec map[string]any, out any, logIt bool) {
	t.Helper()
	node := nodeReady(t)
	b, _ := json.Marshal(spec)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), envName+"="+string(b), "OPENAI_API_KEY=", "OPENAI_BASE_URL=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), out); err == nil {
			if logIt {
				t.Logf("node: %s", sc.Bytes())
			}
			return
		}
	}
	t.Fatalf("node printed no result: %s\n%s", stdout.String(), stderr.String())
}

func r2recStrings(rs []r2rec) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = strconv.FormatInt(r.Seq, 10) + ":" + r.Point + ":" + r.Verdict.Decision
		if r.Verdict.Reason != "" {
			out[i] += ":" + r.Verdict.Reason
		}
	}
	return out
}

// ---- tests ----

var r2whole = []string{"agent_startup", "input", "pre_model_call", "post_model_call", "output", "agent_shutdown"}

// wholeWith is r2whole with post_model_call marked as a transform.
var r2wholeT = []string{"agent_startup", "input", "pre_model_call", "post_model_call/transform:content_redacted", "output", "agent_shutdown"}

// TestR2RecordsRightAfterAnswer: a header-less plain question's run is
// complete, agent_shutdown included, the moment each client has its answer.
func TestR2RecordsRightAfterAnswer(t *testing.T) {
	e := r2start(t, r2YAML, "post_model_call", "", newR2up())
	c := r2go(e, 0)
	cases := []struct {
		prompt, want string
		wantPts      []string
	}{
		{"hello there", answerHello, r2whole},
		{"stream please", answerLong, r2whole},
		{"what is my key?", answerRedacted, r2wholeT},
	}
	for iter := 0; iter < 15; iter++ {
		for _, tc := range cases {
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("go/%s/stream=%v/%d", tc.prompt, stream, iter)
				r := r2goDo(t.Context(), c, chatParams(tc.prompt), stream)
				if r.err != nil || r.content != tc.want {
					t.Fatalf("%s: err %v content %q", name, r.err, r.content)
				}
				recs := e.recs(t, r.session)
				if got := r2points(recs); !slices.Equal(got, tc.wantPts) || !r2seqOK(recs) {
					t.Errorf("%s: records right after the answer = %v", name, r2recStrings(recs))
				}
				if got := e.spy.of(r.session); !slices.Equal(got, []string{"completed"}) {
					t.Errorf("%s: shutdown reasons %v", name, got)
				}
				// langchaingo, which stops reading at data: [DONE].
				d := &r2doer{}
				llm := r2lc(t, e, d)
				lr, _ := r2lcDo(t.Context(), llm, []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, tc.prompt)}, stream, false)
				if lr.err != nil || lr.content != tc.want {
					t.Fatalf("lc %s: err %v content %q", name, lr.err, lr.content)
				}
				recs = e.recs(t, d.session())
				if got := r2points(recs); !slices.Equal(got, tc.wantPts) {
					t.Errorf("lc %s: records right after the answer = %v", name, r2recStrings(recs))
				}
			}
		}
	}
	// npm
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			n := r2runNode(t, e, map[string]any{"prompt": tc.prompt, "stream": stream, "maxRetries": 0})
			if !n.OK || n.Content == nil || *n.Content != tc.want {
				t.Fatalf("node %s stream=%v: %+v", tc.prompt, stream, n)
			}
			want := make([]string, len(tc.wantPts))
			for i, p := range tc.wantPts {
				p, _, _ = strings.Cut(p, "/")
				want[i] = p
			}
			var got []string
			for _, s := range n.Records {
				got = append(got, strings.Split(s, ":")[1])
			}
			if !slices.Equal(got, want) {
				t.Errorf("node %s stream=%v: records right after = %v", tc.prompt, stream, n.Records)
			}
		}
	}
}

// TestR2LongAnswers: > 64 KiB and > 1 MiB answers, replayed (many small
// events) and re-derived (a transform), each client, records right after.
func TestR2LongAnswers(t *testing.T) {
	e := r2start(t, r2YAML, "post_model_call", "", newR2up())
	type size struct {
		n, chunk int
		key      bool
	}
	sizes := []size{{40 << 10, 1, false}, {70 << 10, 8, false}, {70 << 10, 8, true}, {1200 << 10, 64, false}, {1200 << 10, 1024, true}, {3 << 20, 4096, false}}
	for _, sz := range sizes {
		tag := "big"
		if sz.key {
			tag = "bigkey"
		}
		prompt := fmt.Sprintf("give me a long one [%s=%d,chunk=%d]", tag, sz.n, sz.chunk)
		want := r2bigExpect(sz.n, sz.key)
		wantPts := r2whole
		if sz.key {
			wantPts = r2wholeT
		}
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("%s/stream=%v", prompt, stream)
			t.Run("go/"+name, func(t *testing.T) {
				r := r2goDo(t.Context(), r2go(e, 0), chatParams(prompt), stream)
				if r.err != nil {
					t.Fatalf("err %v", r.err)
				}
				if r.content != want {
					t.Errorf("content: %d bytes, want %d (equal prefix %d)", len(r.content), len(want), r2prefix(r.content, want))
				}
				if stream && !sz.key && r.chunks < sz.n/sz.chunk {
					t.Errorf("chunks %d, want >= %d", r.chunks, sz.n/sz.chunk)
				}
				if got := r2points(e.recs(t, r.session)); !slices.Equal(got, wantPts) {
					t.Errorf("records right after = %v", got)
				}
			})
			t.Run("lc/"+name, func(t *testing.T) {
				d := &r2doer{}
				lr, chunks := r2lcDo(t.Context(), r2lc(t, e, d), []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, prompt)}, stream, false)
				if lr.err != nil {
					t.Fatalf("err %v", lr.err)
				}
				if lr.content != want {
					t.Errorf("content: %d bytes, want %d (equal prefix %d)", len(lr.content), len(want), r2prefix(lr.content, want))
				}
				if stream && chunks == 0 {
					t.Errorf("no chunks")
				}
				if got := r2points(e.recs(t, d.session())); !slices.Equal(got, wantPts) {
					t.Errorf("records right after = %v", got)
				}
			})
			t.Run("node/"+name, func(t *testing.T) {
				n := r2runNode(t, e, map[string]any{"prompt": prompt, "stream": stream, "maxRetries": 0})
				if !n.OK || n.Content == nil {
					t.Fatalf("%+v", n.Error)
				}
				if *n.Content != want {
					t.Errorf("content: %d bytes, want %d", len(*n.Content), len(want))
				}
				if len(n.Records) != 6 || !strings.HasSuffix(n.Records[5], "agent_shutdown:allow") {
					t.Errorf("records right after = %v", n.Records)
				}
			})
		}
	}
}

func r2prefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// ---- generic messages for the three clients ----

type r2msg struct {
	Role, Content, ToolCallID string
	Calls                     []r2call
}

func r2goParams(msgs []r2msg, tools bool) openai.ChatCompletionNewParams {
	p := chatParams("")
	if tools {
		p = toolParams("")
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "shell_exec", Parameters: openai.FunctionParameters{"type": "object"}}))
	}
	p.Messages = nil
	for _, m := range msgs {
		switch m.Role {
		case "user":
			p.Messages = append(p.Messages, openai.UserMessage(m.Content))
		case "tool":
			p.Messages = append(p.Messages, openai.ToolMessage(m.Content, m.ToolCallID))
		case "assistant":
			a := &openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, c := range m.Calls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: c.Args}}})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: a})
		}
	}
	return p
}

func r2lcMsgs(msgs []r2msg) []llms.MessageContent {
	var out []llms.MessageContent
	for _, m := range msgs {
		switch m.Role {
		case "user":
			out = append(out, llms.TextParts(llms.ChatMessageTypeHuman, m.Content))
		case "tool":
			out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: m.ToolCallID, Content: m.Content}}})
		case "assistant":
			mc := llms.MessageContent{Role: llms.ChatMessageTypeAI}
			for _, c := range m.Calls {
				mc.Parts = append(mc.Parts, llms.ToolCall{ID: c.ID, Type: "function", FunctionCall: &llms.FunctionCall{Name: c.Name, Arguments: c.Args}})
			}
			out = append(out, mc)
		}
	}
	return out
}

func r2nodeMsgs(msgs []r2msg) []map[string]any {
	var out []map[string]any
	for _, m := range msgs {
		switch m.Role {
		case "user":
			out = append(out, map[string]any{"role": "user", "content": m.Content})
		case "tool":
			out = append(out, map[string]any{"role": "tool", "tool_call_id": m.ToolCallID, "content": m.Content})
		case "assistant":
			var tcs []map[string]any
			for _, c := range m.Calls {
				tcs = append(tcs, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Args}})
			}
			out = append(out, map[string]any{"role": "assistant", "content": nil, "tool_calls": tcs})
		}
	}
	return out
}

// r2client runs one chat call with one of the real clients.
type r2client struct {
	name string
	do   func(t *testing.T, e *r2env, msgs []r2msg, stream, tools bool, header http.Header) r2res
}

var r2clients = []r2client{
	{"openai-go", func(t *testing.T, e *r2env, msgs []r2msg, stream, tools bool, h http.Header) r2res {
		var opts []option.RequestOption
		for k := range h {
			opts = append(opts, option.WithHeader(k, h.Get(k)))
		}
		return r2goDo(t.Context(), r2go(e, 0), r2goParams(msgs, tools), stream, opts...)
	}},
	{"langchaingo", func(t *testing.T, e *r2env, msgs []r2msg, stream, tools bool, h http.Header) r2res {
		d := &r2doer{h: h}
		r, _ := r2lcDo(t.Context(), r2lc(t, e, d), r2lcMsgs(msgs), stream, tools)
		r.session = d.session()
		return r
	}},
	{"npm", func(t *testing.T, e *r2env, msgs []r2msg, stream, tools bool, h http.Header) r2res {
		hs := map[string]string{}
		for k := range h {
			hs[k] = h.Get(k)
		}
		n := r2runNode(t, e, map[string]any{"messages": r2nodeMsgs(msgs), "stream": stream, "tools": tools, "maxRetries": 0, "headers": hs})
		r := r2res{session: n.Session, calls: n.Calls, finish: n.Finish, chunks: n.Chunks}
		if n.Content != nil {
			r.content = *n.Content
		}
		if !n.OK {
			r.err = fmt.Errorf("npm: %+v", *n.Error)
		}
		return r
	}},
}

// TestR2ToolSeam: the transparent tool seam through each client: parallel
// calls allowed, one of two denied (withheld, spliced into the next
// upstream request), all denied (the proxy asks again), arguments
// transformed at pre_tool_call; then the header-less follow-up; records
// right after each answer.
func TestR2ToolSeam(t *testing.T) {
	up := newR2up(
		scripted.Rule{When: "weather and cleanup", Reply: scripted.Calls(
			scripted.ToolCall{ID: "call_delete_wc", Name: "delete_files", Arguments: `{"path":"/tmp/x"}`},
			scripted.ToolCall{ID: "call_weather_wc", Name: "get_weather", Arguments: weatherArgs},
		)},
	)
	e := r2start(t, r2YAML, "pre_tool_call", "", up)
	type flow struct {
		prompt    string
		wantCalls []r2call
		firstPts  []string // records after the first answer
		wantFinal string
	}
	flows := []flow{
		{"what is the weather in Paris?",
			[]r2call{{"call_weather_1", "get_weather", weatherArgs}, {"call_time_2", "get_time", timeArgs}},
			[]string{"agent_startup", "input", "pre_model_call", "post_model_call", "pre_tool_call", "pre_tool_call"},
			"The tool said something else."},
		{"weather and cleanup please",
			[]r2call{{"call_weather_wc", "get_weather", weatherArgs}},
			[]string{"agent_startup", "input", "pre_model_call", "post_model_call", "pre_tool_call/deny:tool_denied", "pre_tool_call"},
			""},
		{"what is the weather with my key?",
			[]r2call{{"call_weather_k", "get_weather", weatherKeyArgsRedacted}, {"call_time_k", "get_time", timeArgs}},
			[]string{"agent_startup", "input", "pre_model_call", "post_model_call", "pre_tool_call/transform:content_redacted", "pre_tool_call"},
			"The tool said something else."},
	}
	for _, cl := range r2clients {
		for _, stream := range []bool{false, true} {
			for _, f := range flows {
				t.Run(fmt.Sprintf("%s/stream=%v/%s", cl.name, stream, f.prompt), func(t *testing.T) {
					msgs := []r2msg{{Role: "user", Content: f.prompt}}
					r := cl.do(t, e, msgs, stream, true, nil)
					if r.err != nil {
						t.Fatalf("first: %v", r.err)
					}
					if !slices.Equal(r.calls, f.wantCalls) || r.finish != "tool_calls" {
						t.Errorf("calls = %+v finish %q, want %+v", r.calls, r.finish, f.wantCalls)
					}
					recs := e.recs(t, r.session)
					if got := r2points(recs); !slices.Equal(got, f.firstPts) {
						t.Errorf("records after the tool-call answer = %v", got)
					}
					msgs = append(msgs, r2msg{Role: "assistant", Calls: r.calls})
					for _, c := range r.calls {
						msgs = append(msgs, r2msg{Role: "tool", ToolCallID: c.ID, Content: `{"ok":true,"for":"` + c.Name + `"}`})
					}
					nBefore := len(up.Bodies())
					r2 := cl.do(t, e, msgs, stream, true, nil)
					if r2.err != nil {
						t.Fatalf("follow-up: %v", r2.err)
					}
					if f.wantFinal != "" && r2.content != f.wantFinal {
						t.Errorf("final = %q, want %q", r2.content, f.wantFinal)
					}
					if r2.session != r.session {
						t.Errorf("follow-up session %q, first %q (did not join the run)", r2.session, r.session)
					}
					recs = e.recs(t, r.session)
					pts := r2points(recs)
					if len(pts) == 0 || pts[len(pts)-1] != "agent_shutdown" || !r2seqOK(recs) {
						t.Errorf("records right after the final answer = %v", r2recStrings(recs))
					}
					nPost := 0
					for _, p := range pts {
						if strings.HasPrefix(p, "post_tool_call") {
							nPost++
						}
					}
					if want := len(r.calls); nPost != want {
						t.Errorf("post_tool_call records %d, want %d: %v", nPost, want, pts)
					}
					bodies := up.Bodies()
					if len(bodies) != nBefore+1 {
						t.Fatalf("upstream calls for the follow-up: %d", len(bodies)-nBefore)
					}
					sent := gjson.GetBytes(bodies[len(bodies)-1], "messages")
					if f.prompt == "weather and cleanup please" {
						// The withheld call and its control error reach the model.
						var ids, toolIDs []string
						for _, m := range sent.Array() {
							for _, c := range m.Get("tool_calls").Array() {
								ids = append(ids, c.Get("id").Str)
							}
							if m.Get("role").Str == "tool" {
								toolIDs = append(toolIDs, m.Get("tool_call_id").Str)
								if m.Get("tool_call_id").Str == "call_delete_wc" && !strings.Contains(m.Get("content").Str, "blocked by agent-hooks") {
									t.Errorf("withheld call's tool message = %s", m.Raw)
								}
							}
						}
						if !slices.Contains(ids, "call_delete_wc") || !slices.Contains(toolIDs, "call_delete_wc") {
							t.Errorf("upstream messages lack the withheld call: %s", sent.Raw)
						}
					}
				})
			}
			t.Run(fmt.Sprintf("%s/stream=%v/all-denied", cl.name, stream), func(t *testing.T) {
				r := cl.do(t, e, []r2msg{{Role: "user", Content: "please clean up the disk"}}, stream, true, nil)
				if r.err != nil || r.content != answerRefused || len(r.calls) != 0 {
					t.Fatalf("r = %+v", r)
				}
				want := []string{"agent_startup", "input", "pre_model_call", "post_model_call", "pre_tool_call/deny:tool_denied", "pre_model_call", "post_model_call", "output", "agent_shutdown"}
				if got := r2points(e.recs(t, r.session)); !slices.Equal(got, want) {
					t.Errorf("records right after = %v", got)
				}
			})
		}
	}
}

// r2errRes is what a client surfaced for a failing call, with default
// retries.
type r2errRes struct {
	status         int
	typ, code, msg string
	shouldRetry    string
	session        string
	raw            string
}

func r2failGo(t *testing.T, e *r2env, prompt string, stream bool, h http.Header) (r2errRes, error) {
	var opts []option.RequestOption
	for k := range h {
		opts = append(opts, option.WithHeader(k, h.Get(k)))
	}
	r := r2goDo(t.Context(), r2go(e, -1), chatParams(prompt), stream, opts...)
	var out r2errRes
	out.session = r.session
	var aerr *openai.Error
	if errors.As(r.err, &aerr) {
		out.status, out.typ, out.code, out.msg = aerr.StatusCode, aerr.Type, aerr.Code, aerr.Message
		out.shouldRetry = aerr.Response.Header.Get("X-Should-Retry")
		out.session = aerr.Response.Header.Get("X-Agent-Hooks-Session")
		out.raw = aerr.RawJSON()
		return out, nil
	}
	if r.err != nil {
		out.msg = r.err.Error()
	}
	return out, r.err
}

func r2failLC(t *testing.T, e *r2env, prompt string, stream bool, h http.Header) (r2errRes, error) {
	d := &r2doer{h: h}
	r, _ := r2lcDo(t.Context(), r2lc(t, e, d), []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, prompt)}, stream, false)
	out := r2errRes{session: d.session()}
	if r.err != nil {
		out.msg = r.err.Error()
		if m := regexp.MustCompile(`status code: (\d+)`).FindStringSubmatch(out.msg); m != nil {
			out.status, _ = strconv.Atoi(m[1])
		}
	} else {
		out.msg = "no error; content " + strconv.Quote(r.content)
	}
	return out, nil
}

func r2failNode(t *testing.T, e *r2env, prompt string, stream bool, h http.Header) (r2errRes, error) {
	hs := map[string]string{}
	for k := range h {
		hs[k] = h.Get(k)
	}
	n := r2runNode(t, e, map[string]any{"prompt": prompt, "stream": stream, "headers": hs})
	out := r2errRes{session: n.Session}
	if n.Error == nil {
		out.msg = "no error"
		return out, nil
	}
	out.status, out.typ, out.msg = n.Error.Status, n.Error.Type, n.Error.Name+": "+n.Error.Message
	if s, ok := n.Error.Code.(string); ok {
		out.code = s
	}
	if n.Error.ShouldRetry != nil {
		out.shouldRetry = *n.Error.ShouldRetry
	}
	return out, nil
}

var r2failers = []struct {
	name string
	do   func(t *testing.T, e *r2env, prompt string, stream bool, h http.Header) (r2errRes, error)
}{{"openai-go", r2failGo}, {"langchaingo", r2failLC}, {"npm", r2failNode}}

// TestR2FailureAnswers: what each client (default retries) surfaces for a
// deny at output, the 502s of a failed upstream stream or body, the 503
// of a streamed custom tool call and a passed-through upstream 500; how
// often it asked; the records right after.
func TestR2FailureAnswers(t *testing.T) {
	up := newR2up()
	e := r2start(t, r2YAML, "post_model_call", "", up)
	cases := []struct {
		name, prompt string
		stream       bool
		status       int
		code         string
		postModel    string // the post_model_call record expected, "" none
	}{
		{"deny_output_json", "leak it", false, 403, "secret_in_output", "post_model_call"},
		{"deny_output_stream", "leak it", true, 403, "secret_in_output", "post_model_call"},
		{"stream_reset", "tell me [reset]", true, 502, "upstream_stream_incomplete", ""},
		{"stream_nonchunk", "tell me [nonchunk]", true, 502, "upstream_invalid_response", ""},
		// Closed cleanly after its finish_reason without [DONE] (ik_llama.cpp,
		// older llama.cpp and TGI): complete. Closed before it: not.
		{"stream_nodone_after_finish", "tell me [nodone]", true, 0, "", "post_model_call"},
		{"stream_cut_before_finish", "tell me [nofinish]", true, 502, "upstream_stream_incomplete", ""},
		{"stream_error_event", "tell me [streamerror]", true, 502, "overloaded", ""},
		{"stream_custom_tool", "tell me [custom]", true, 503, "host_error:adapter_unsupported", "post_model_call/deny:host_error:adapter_unsupported"},
		// Outside the value domain: the upstream's error on the wire, and
		// the §10.3 record of the projection failure.
		{"json_duplicate_member", "tell me [badjson]", false, 502, "upstream_invalid_response", "post_model_call/deny:host_error:context_invalid"},
		{"json_upstream_500", "tell me [json500]", false, 500, "boom", ""},
		{"stream_upstream_500", "tell me [json500]", true, 500, "boom", ""},
		{"json_upstream_400_200KiB", "tell me [bigerr]", false, 400, "too_big", ""},
		{"stream_extra_event_tolerated", "tell me [extraevent]", true, 0, "", "post_model_call"},
	}
	for _, tc := range cases {
		for _, cl := range r2failers {
			t.Run(tc.name+"/"+cl.name, func(t *testing.T) {
				p0, u0 := e.ProxyReqs.Load(), up.Requests.Load()
				start := time.Now()
				got, err := cl.do(t, e, tc.prompt, tc.stream, nil)
				el := time.Since(start)
				if !e.idle(t, 5*time.Second) {
					t.Errorf("proxy handlers still running")
				}
				pn, un := e.ProxyReqs.Load()-p0, up.Requests.Load()-u0
				t.Logf("REPORT %-22s %-11s status=%d type=%q code=%q x-should-retry=%q proxy_requests=%d upstream_requests=%d elapsed=%s msg=%.160q err=%v",
					tc.name, cl.name, got.status, got.typ, got.code, got.shouldRetry, pn, un, el.Round(10*time.Millisecond), got.msg, err)
				if got.status != tc.status {
					t.Errorf("status %d, want %d (%s)", got.status, tc.status, got.msg)
				}
				if cl.name != "langchaingo" && got.code != tc.code {
					t.Errorf("code %q, want %q", got.code, tc.code)
				}
				if got.session == "" {
					return
				}
				recs := e.recs(t, got.session)
				pts := r2points(recs)
				if len(pts) == 0 || pts[len(pts)-1] != "agent_shutdown" {
					t.Errorf("records right after: %v", pts)
				}
				hasPost := ""
				for _, p := range pts {
					if strings.HasPrefix(p, "post_model_call") {
						hasPost = p
					}
				}
				if tc.postModel == "" && hasPost != "" || tc.postModel != "" && !strings.HasPrefix(hasPost, tc.postModel) {
					t.Errorf("post_model_call record %q, want %q: %v", hasPost, tc.postModel, pts)
				}
			})
		}
	}
}

// recsDirect reads a session's records from the ring (after the listener
// closed).
func (e *r2env) recsDirect(sid string) []r2rec {
	var out []r2rec
	for _, raw := range e.Ring.Records(sid, 0) {
		var r r2rec
		_ = json.Unmarshal(raw, &r)
		out = append(out, r)
	}
	slices.Reverse(out) // the ring answers newest first
	return out
}

func r2end(t *testing.T, e *r2env, sid string) (int, string) {
	resp, err := http.Post(e.URL+"/agent-hooks/v1/sessions/"+sid+"/end", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestR2SessionHeader: one named session across several requests from all
// three clients, plain, streamed, a tool loop and a deny; then /end, and
// the id again; and a header-less run's id sent back as the header.
func TestR2SessionHeader(t *testing.T) {
	e := r2start(t, r2YAML, "post_model_call", "", newR2up())
	sid := "r2-named-session-1"
	h := http.Header{"X-Agent-Hooks-Session": {sid}}
	steps := []struct {
		cl     int
		prompt string
		stream bool
		fail   bool
	}{
		{0, "hello there", false, false}, {0, "stream please", true, false}, {1, "hello there", true, false},
		{2, "what is my key?", true, false}, {0, "leak it", false, true}, {1, "hello there", false, false}, {2, "hello there", false, false},
	}
	prev := 0
	for i, st := range steps {
		cl := r2clients[st.cl]
		r := cl.do(t, e, []r2msg{{Role: "user", Content: st.prompt}}, st.stream, false, h)
		if (r.err != nil) != st.fail {
			t.Fatalf("step %d (%s %q): err %v", i, cl.name, st.prompt, r.err)
		}
		if r.err == nil && r.session != sid {
			t.Errorf("step %d: session header %q", i, r.session)
		}
		recs := e.recs(t, sid)
		pts := r2points(recs)
		if !r2seqOK(recs) || len(recs) <= prev || recs[0].Seq != 0 {
			t.Errorf("step %d: records %v", i, r2recStrings(recs))
		}
		prev = len(recs)
		if n := slices.Index(pts, "agent_startup"); n != 0 || slices.Contains(pts[1:], "agent_startup") || slices.ContainsFunc(pts, func(p string) bool { return strings.HasPrefix(p, "agent_shutdown") }) {
			t.Errorf("step %d: lifecycle points wrong: %v", i, pts)
		}
	}
	// A tool loop in the named session, openai-go.
	r := r2clients[0].do(t, e, []r2msg{{Role: "user", Content: "what is the weather in Paris?"}}, true, true, h)
	if r.err != nil || len(r.calls) != 2 {
		t.Fatalf("tool call: %+v", r)
	}
	msgs := []r2msg{{Role: "user", Content: "what is the weather in Paris?"}, {Role: "assistant", Calls: r.calls},
		{Role: "tool", ToolCallID: r.calls[0].ID, Content: `{"t":1}`}, {Role: "tool", ToolCallID: r.calls[1].ID, Content: `{"t":2}`}}
	if r2 := r2clients[1].do(t, e, msgs, false, true, h); r2.err != nil || r2.content != "The tool said something else." {
		t.Fatalf("follow-up (langchaingo): %+v", r2)
	}
	code, body := r2end(t, e, sid)
	recs := e.recs(t, sid)
	pts := r2points(recs)
	t.Logf("/end: %d %s; %d records, last %v", code, body, len(recs), pts[len(pts)-1])
	if code != 200 || pts[len(pts)-1] != "agent_shutdown" || !r2seqOK(recs) {
		t.Errorf("/end %d %s; records %v", code, body, r2recStrings(recs))
	}
	if got := e.spy.of(sid); !slices.Equal(got, []string{"completed"}) {
		t.Errorf("shutdown reasons %v", got)
	}
	// The id again: a new lifecycle whose sequence goes on.
	n0 := len(recs)
	if r := r2clients[0].do(t, e, []r2msg{{Role: "user", Content: "hello there"}}, false, false, h); r.err != nil {
		t.Fatal(r.err)
	}
	recs = e.recs(t, sid)
	if len(recs) <= n0 || recs[n0].Point != "agent_startup" || recs[n0].Seq != recs[n0-1].Seq+1 {
		t.Errorf("after reuse: %v", r2recStrings(recs[n0-1:]))
	}

	// A header-less run's id as the session header afterwards.
	r = r2clients[0].do(t, e, []r2msg{{Role: "user", Content: "hello there"}}, false, false, nil)
	run := r.session
	if !strings.HasPrefix(run, "run_") {
		t.Fatalf("run id %q", run)
	}
	for _, cl := range r2clients {
		r := cl.do(t, e, []r2msg{{Role: "user", Content: "stream please"}}, true, false, http.Header{"X-Agent-Hooks-Session": {run}})
		if r.err != nil || r.session != run {
			t.Fatalf("%s with the run id: %+v", cl.name, r)
		}
	}
	recs = e.recs(t, run)
	pts = r2points(recs)
	t.Logf("run id reused: %v", r2recStrings(recs))
	if !r2seqOK(recs) || pts[5] != "agent_shutdown" || pts[6] != "agent_startup" || slices.Contains(pts[7:], "agent_startup") {
		t.Errorf("run id reused: %v", r2recStrings(recs))
	}
}

// TestR2SessionEnding409: a request naming a session whose /end waits for
// a request in flight gets 409 session_ending; what each client does.
func TestR2SessionEnding409(t *testing.T) {
	for _, hold := range []time.Duration{1500 * time.Millisecond, 6 * time.Second} {
		for _, cl := range r2clients {
			t.Run(fmt.Sprintf("%s/inflight=%s", cl.name, hold), func(t *testing.T) {
				// Each has its own proxy and upstream and mostly waits on
				// its held request: in parallel, the test takes its longest
				// case's time rather than the sum (24 s on 2 cores).
				t.Parallel()
				up := newR2up()
				e := r2start(t, r2YAML, "post_model_call", "", up)
				sid := "r2-ending-" + cl.name
				h := http.Header{"X-Agent-Hooks-Session": {sid}}
				// Open the session, then hold a request in flight.
				if r := r2clients[0].do(t, e, []r2msg{{Role: "user", Content: "hello there"}}, false, false, h); r.err != nil {
					t.Fatal(r.err)
				}
				done := make(chan r2res, 1)
				go func() {
					done <- r2goDo(context.Background(), r2go(e, 0), chatParams(fmt.Sprintf("hello [slow=%d]", hold.Milliseconds())), false, option.WithHeader("X-Agent-Hooks-Session", sid))
				}()
				for up.Requests.Load() < 2 {
					time.Sleep(5 * time.Millisecond)
				}
				code, body := r2end(t, e, sid)
				if code != 202 {
					t.Fatalf("/end = %d %s, want 202 pending", code, body)
				}
				p0 := e.ProxyReqs.Load()
				start := time.Now()
				var got r2errRes
				var content string
				switch cl.name {
				case "openai-go":
					r := r2goDo(t.Context(), r2go(e, -1), chatParams("hello there"), false, option.WithHeader("X-Agent-Hooks-Session", sid))
					var aerr *openai.Error
					if errors.As(r.err, &aerr) {
						got.status, got.code = aerr.StatusCode, aerr.Code
						got.msg = aerr.Response.Header.Get("Retry-After")
					} else if r.err != nil {
						got.msg = r.err.Error()
					}
					content = r.content
				case "langchaingo":
					got, _ = r2failLC(t, e, "hello there", false, h)
				case "npm":
					got, _ = r2failNode(t, e, "hello there", false, h)
				}
				el := time.Since(start)
				first := <-done
				t.Logf("REPORT 409 %-11s inflight=%s: status=%d code=%q msg=%.120q content=%q proxy_requests=%d elapsed=%s; held request err=%v",
					cl.name, hold, got.status, got.code, got.msg, content, e.ProxyReqs.Load()-p0, el.Round(10*time.Millisecond), first.err)
				e.idle(t, 5*time.Second)
				recs := e.recs(t, sid)
				if !r2seqOK(recs) {
					t.Errorf("records %v", r2recStrings(recs))
				}
				// agent_shutdown between the lifecycles, exactly once per lifecycle.
				pts := r2points(recs)
				for i, p := range pts {
					if p == "agent_startup" && i > 0 && pts[i-1] != "agent_shutdown" {
						t.Errorf("second lifecycle started before the first's shutdown: %v", pts)
					}
				}
			})
		}
	}
}

// r2sessionsWith lists the sessions the spy saw shut down with reason.
func (s *r2spy) sessionsWith(reason string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for sid, rs := range s.reasons {
		if slices.Contains(rs, reason) {
			out = append(out, sid)
		}
	}
	slices.Sort(out)
	return out
}

func r2waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// TestR2ClientTimeouts: client-side timeouts while the proxy holds the
// answer, and cancellation while reading a long answer.
func TestR2ClientTimeouts(t *testing.T) {
	type tcase struct {
		name string
		run  func(t *testing.T, e *r2env, prompt string) error
	}
	cases := []tcase{
		{"openai-go/request-timeout/default-retries", func(t *testing.T, e *r2env, prompt string) error {
			return r2goDo(t.Context(), r2go(e, -1, option.WithRequestTimeout(300*time.Millisecond)), chatParams(prompt), true).err
		}},
		{"openai-go/http-client-timeout/default-retries", func(t *testing.T, e *r2env, prompt string) error {
			return r2goDo(t.Context(), r2go(e, -1, option.WithHTTPClient(&http.Client{Timeout: 300 * time.Millisecond})), chatParams(prompt), false).err
		}},
		{"openai-go/ctx-timeout", func(t *testing.T, e *r2env, prompt string) error {
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			return r2goDo(ctx, r2go(e, -1), chatParams(prompt), true).err
		}},
		{"langchaingo/ctx-timeout", func(t *testing.T, e *r2env, prompt string) error {
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			r, _ := r2lcDo(ctx, r2lc(t, e, &r2doer{}), []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, prompt)}, true, false)
			return r.err
		}},
		{"npm/timeout/default-retries", func(t *testing.T, e *r2env, prompt string) error {
			n := r2runNode(t, e, map[string]any{"prompt": prompt, "stream": true, "timeout": 300})
			if n.Error != nil {
				return fmt.Errorf("%s: %s", n.Error.Name, n.Error.Message)
			}
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := newR2up()
			e := r2start(t, r2YAML, "post_model_call", "", up)
			start := time.Now()
			err := tc.run(t, e, "hello [slow=3000]")
			el := time.Since(start)
			if err == nil {
				t.Fatalf("no error")
			}
			if !e.idle(t, 5*time.Second) {
				t.Errorf("proxy handlers still running 5s after the client gave up")
			}
			attempts := e.ProxyReqs.Load()
			ok := r2waitFor(2*time.Second, func() bool { return int64(len(e.spy.sessionsWith("cancelled"))) == attempts })
			cancelled := e.spy.sessionsWith("cancelled")
			t.Logf("REPORT timeout %-45s proxy_requests=%d upstream_requests=%d upstream_saw_cancel=%d cancelled_runs=%d elapsed=%s err=%.150v",
				tc.name, attempts, up.Requests.Load(), up.Cancelled.Load(), len(cancelled), el.Round(10*time.Millisecond), err)
			if !ok {
				t.Errorf("runs ended cancelled: %d of %d attempts", len(cancelled), attempts)
			}
			for _, sid := range cancelled {
				pts := r2points(e.recs(t, sid))
				want := []string{"agent_startup", "input", "pre_model_call", "agent_shutdown"}
				if !slices.Equal(pts, want) {
					t.Errorf("run %s: %v, want %v", sid, pts, want)
				}
			}
			if up.Cancelled.Load() != up.Requests.Load() {
				t.Errorf("upstream calls %d, of which cancelled %d: a client timeout must cancel the upstream call", up.Requests.Load(), up.Cancelled.Load())
			}
		})
	}

	// Cancelled mid-answer: the client stops reading a long stream.
	for _, who := range []string{"openai-go", "npm"} {
		t.Run(who+"/cancel-mid-answer", func(t *testing.T) {
			e := r2start(t, r2YAML, "post_model_call", "", newR2up())
			prompt := "give me a long one [big=16777216,chunk=4096]"
			var sid string
			switch who {
			case "openai-go":
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				var resp *http.Response
				cl := r2go(e, 0)
				s := cl.Chat.Completions.NewStreaming(ctx, chatParams(prompt), option.WithResponseInto(&resp))
				n := 0
				for s.Next() {
					if n++; n == 3 {
						cancel()
					}
				}
				t.Logf("openai-go read %d chunks, err %v", n, s.Err())
				s.Close()
				sid = resp.Header.Get("X-Agent-Hooks-Session")
			case "npm":
				n := r2runNode(t, e, map[string]any{"prompt": prompt, "stream": true, "maxRetries": 0, "abortAfterChunks": 3})
				t.Logf("npm: ok=%v chunks=%d err=%+v", n.OK, n.Chunks, n.Error)
				sid = n.Session
			}
			if !e.idle(t, 10*time.Second) {
				t.Errorf("proxy handler still running 10s after the client left mid-answer")
			}
			recs := e.recs(t, sid)
			t.Logf("REPORT cancel-mid-answer %s: records %v shutdown reasons %v", who, r2points(recs), e.spy.of(sid))
			// The proxy serves on.
			if r := r2goDo(t.Context(), r2go(e, 0), chatParams("hello there"), true); r.err != nil || r.content != answerHello {
				t.Errorf("next request: %+v", r)
			}
		})
	}

	// A tool-loop follow-up whose first attempt times out; the SDK retries
	// the same request.
	t.Run("openai-go/follow-up-timeout-retried", func(t *testing.T) {
		up := newR2up()
		e := r2start(t, r2YAML, "post_model_call", "", up)
		c := r2go(e, 0)
		r := r2goDo(t.Context(), c, toolParams("what is the weather in Paris?"), false)
		if r.err != nil || len(r.calls) != 2 {
			t.Fatalf("%+v", r)
		}
		run := r.session
		msgs := []r2msg{{Role: "user", Content: "what is the weather in Paris?"}, {Role: "assistant", Calls: r.calls},
			{Role: "tool", ToolCallID: r.calls[0].ID, Content: `{"t":1}`}, {Role: "tool", ToolCallID: r.calls[1].ID, Content: `{"t":2} [slowfirst=2000]`}}
		c2 := r2go(e, -1, option.WithHTTPClient(&http.Client{Timeout: 500 * time.Millisecond}))
		r2 := r2goDo(t.Context(), c2, r2goParams(msgs, true), false)
		e.idle(t, 5*time.Second)
		t.Logf("REPORT follow-up retry: err=%v content=%q session=%s (run %s) proxy_requests=%d upstream=%d", r2.err, r2.content, r2.session, run, e.ProxyReqs.Load(), up.Requests.Load())
		t.Logf("REPORT   run %s: %v reasons %v", run, r2points(e.recs(t, run)), e.spy.of(run))
		if r2.session != run {
			t.Logf("REPORT   retry's run %s: %v reasons %v", r2.session, r2points(e.recs(t, r2.session)), e.spy.of(r2.session))
		}
		if r2.err != nil {
			t.Errorf("the retried follow-up failed: %v", r2.err)
		}
	})
}

// r2slowHook is a webhook interceptor that answers allow after d, or gives
// up when its request goes away.
func r2slowHook(t *testing.T, d time.Duration, calls *atomic.Int64) string {
	wh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // so that net/http watches for the caller leaving
		calls.Add(1)
		t0 := time.Now()
		select {
		case <-time.After(d):
			t.Logf("hook: answered after %s (never cancelled)", time.Since(t0).Round(time.Millisecond))
		case <-r.Context().Done():
			t.Logf("hook: request cancelled after %s", time.Since(t0).Round(time.Millisecond))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	}))
	t.Cleanup(wh.Close)
	return wh.URL
}

// TestR2Close503: requests still running when the server closes (a
// shutdown whose grace ran out) are cancelled and, README: "answered 503
// shutting_down and their points recorded first". What each client sees,
// whether the request waits on the upstream or on an interceptor.
func TestR2Close503(t *testing.T) {
	type where struct {
		name, prompt, extra string
		hook                bool
	}
	wheres := []where{
		{"waiting-upstream", "hello [slow=20000]", "", false},
		{"waiting-interceptor-at-output", "hello there", "    - id: slow-hook\n      kind: hooksproxy.webhook\n      at: [output]\n      config: {url: HOOK_URL, timeout: 25s}\n", true},
		{"waiting-interceptor-at-pre_model_call", "hello there", "    - id: slow-hook\n      kind: hooksproxy.webhook\n      at: [pre_model_call]\n      config: {url: HOOK_URL, timeout: 25s}\n", true},
	}
	for _, wh := range wheres {
		t.Run(wh.name, func(t *testing.T) {
			up := newR2up()
			var hookCalls atomic.Int64
			extra := wh.extra
			if wh.hook {
				extra = strings.ReplaceAll(extra, "HOOK_URL", r2slowHook(t, 20*time.Second, &hookCalls))
			}
			e := r2start(t, r2YAML, "post_model_call", extra, up)
			type outcome struct {
				who string
				res r2errRes
				err error
			}
			outs := make(chan outcome, 8)
			var wg sync.WaitGroup
			type runner struct {
				name string
				do   func(stream bool) (r2errRes, error)
			}
			runners := []runner{
				{"openai-go/retries=0", func(stream bool) (r2errRes, error) {
					r := r2goDo(t.Context(), r2go(e, 0), chatParams(wh.prompt), stream)
					var aerr *openai.Error
					var out r2errRes
					if errors.As(r.err, &aerr) {
						out.status, out.typ, out.code, out.msg = aerr.StatusCode, aerr.Type, aerr.Code, aerr.Message
						out.shouldRetry = aerr.Response.Header.Get("X-Should-Retry")
						return out, nil
					}
					return out, r.err
				}},
				{"langchaingo", func(stream bool) (r2errRes, error) { return r2failLC(t, e, wh.prompt, stream, nil) }},
				{"npm/maxRetries=0", func(stream bool) (r2errRes, error) {
					n := r2runNode(t, e, map[string]any{"prompt": wh.prompt, "stream": stream, "maxRetries": 0})
					var out r2errRes
					if n.Error != nil {
						out.status, out.typ, out.msg = n.Error.Status, n.Error.Type, n.Error.Name+": "+n.Error.Message
						out.code, _ = n.Error.Code.(string)
						if n.Error.ShouldRetry != nil {
							out.shouldRetry = *n.Error.ShouldRetry
						}
					}
					return out, nil
				}},
			}
			for _, rn := range runners {
				for _, stream := range []bool{false, true} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						res, err := rn.do(stream)
						outs <- outcome{fmt.Sprintf("%s/stream=%v", rn.name, stream), res, err}
					}()
				}
			}
			// And the SDKs with their default retries, only logged.
			if !wh.hook {
				for _, cl := range []int{0, 2} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						res, err := r2failers[cl].do(t, e, wh.prompt, false, nil)
						t.Logf("REPORT close %-36s %s default retries: status=%d msg=%.140q err=%.100v", wh.name, r2failers[cl].name, res.status, res.msg, err)
					}()
				}
			}
			waiting := func() int64 {
				if wh.hook {
					return hookCalls.Load()
				}
				return up.Requests.Load()
			}
			want := int64(6)
			if !wh.hook {
				want = 8
			}
			if !r2waitFor(20*time.Second, func() bool { return waiting() >= want }) {
				t.Fatalf("requests did not all reach the slow part: %d", waiting())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			_ = e.hs.Shutdown(ctx) // the grace runs out
			cancel()
			closed := time.Now()
			e.App.Server.Close()
			t.Logf("Close returned after %s", time.Since(closed).Round(time.Millisecond))
			wg.Wait()
			close(outs)
			t.Logf("all clients answered %s after Close", time.Since(closed).Round(time.Millisecond))
			for o := range outs {
				t.Logf("REPORT close %-36s %-22s status=%d type=%q code=%q x-should-retry=%q msg=%.140q err=%.100v",
					wh.name, o.who, o.res.status, o.res.typ, o.res.code, o.res.shouldRetry, o.res.msg, o.err)
				if o.res.status != 503 || !strings.Contains(o.res.code+o.res.msg, "shutting_down") && !strings.Contains(o.res.msg, "shutting down") {
					t.Errorf("%s: status %d code %q msg %q, want 503 shutting_down", o.who, o.res.status, o.res.code, o.res.msg)
				}
			}
			// Records of every run: its points, then agent_shutdown.
			sids := map[string]bool{}
			for _, raw := range e.Ring.Records("", 10000) {
				sids[gjson.GetBytes(raw, "session_id").Str] = true
			}
			for sid := range sids {
				pts := r2points(e.recsDirect(sid))
				t.Logf("REPORT   %s: %v shutdown %v", sid, pts, e.spy.of(sid))
				if len(pts) == 0 || pts[len(pts)-1] != "agent_shutdown" {
					t.Errorf("%s: %v", sid, pts)
				}
				// A cut interceptor call is recorded failed closed (§6.3; the
				// reference SDK does the same for a cancelled emission, so
				// the sequence has no gap); the run itself ends cancelled.
				if got := e.spy.of(sid); !slices.Equal(got, []string{"cancelled"}) {
					t.Errorf("%s: shutdown reason %v, want [cancelled]", sid, got)
				}
			}
		})
	}
}

// TestR2ClientLeavesDuringInterceptor: a client that times out while an
// interceptor (a slow webhook) judges its request, compared with one that
// times out while the upstream answers (TestR2ClientTimeouts): the run
// should end cancelled, without a host error.
func TestR2ClientLeavesDuringInterceptor(t *testing.T) {
	for _, at := range []string{"pre_model_call", "output"} {
		t.Run(at, func(t *testing.T) {
			var calls atomic.Int64
			extra := "    - id: slow-hook\n      kind: hooksproxy.webhook\n      at: [" + at + "]\n      config: {url: " + r2slowHook(t, 5*time.Second, &calls) + ", timeout: 25s}\n"
			e := r2start(t, r2YAML, "post_model_call", extra, newR2up())
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			r := r2goDo(ctx, r2go(e, 0), chatParams("hello there"), true)
			if r.err == nil {
				t.Fatal("no error")
			}
			e.idle(t, 5*time.Second)
			var sid string
			r2waitFor(2*time.Second, func() bool {
				for _, raw := range e.Ring.Records("", 100) {
					if gjson.GetBytes(raw, "interception_point").Str == "agent_shutdown" {
						sid = gjson.GetBytes(raw, "session_id").Str
						return true
					}
				}
				return false
			})
			pts := r2points(e.recsDirect(sid))
			t.Logf("REPORT client left during %s interceptor: %v shutdown %v", at, pts, e.spy.of(sid))
			if got := e.spy.of(sid); !slices.Equal(got, []string{"cancelled"}) {
				t.Errorf("shutdown reason %v, want [cancelled]", got)
			}
		})
	}
}

// TestR2LangchaingoAgentPreToolDeny: langchaingo's functions agent, the
// transparent seam denying at pre_tool_call only: the denied tool never
// runs, the proxy asks the model again, the agent gets the model's final
// answer; an allowed calculator loop; records complete right after
// chains.Run returns.
func TestR2LangchaingoAgentPreToolDeny(t *testing.T) {
	e := r2start(t, r2YAML, "post_model_call", "", newR2up())
	for _, stream := range []bool{false, true} {
		for _, q := range []struct{ question, want string }{{"delete everything now", answerRefused}, {"What is 6*7?", answerAgent}} {
			t.Run(fmt.Sprintf("%s/stream=%v", q.question, stream), func(t *testing.T) {
				d := &r2doer{}
				llm := r2lc(t, e, d)
				calc := &recordingTool{Tool: tools.Calculator{}}
				shell := &recordingTool{Tool: shellTool{}}
				var opts []chains.ChainCallOption
				if stream {
					opts = append(opts, chains.WithStreamingFunc(func(context.Context, []byte) error { return nil }))
				}
				agent := agents.NewOpenAIFunctionsAgent(llm, []tools.Tool{calc, shell})
				out, err := chains.Run(t.Context(), agents.NewExecutor(agent, agents.WithMaxIterations(3)), q.question, opts...)
				if err != nil || out != q.want {
					t.Fatalf("out %q err %v", out, err)
				}
				if len(shell.calls()) != 0 {
					t.Errorf("denied tool ran: %v", shell.calls())
				}
				pts := r2points(e.recs(t, d.session()))
				t.Logf("records right after: %v (calc calls %v)", pts, calc.calls())
				if pts[len(pts)-1] != "agent_shutdown" || pts[0] != "agent_startup" {
					t.Errorf("records right after = %v", pts)
				}
			})
		}
	}
}

// TestR2ConcurrentRecordsRightAfter: the records-complete promise under
// concurrency, header-less runs from openai-go and langchaingo at once.
func TestR2ConcurrentRecordsRightAfter(t *testing.T) {
	e := r2start(t, r2YAML, "post_model_call", "", newR2up())
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := r2go(e, 0)
			for i := 0; i < 25; i++ {
				stream := (g+i)%2 == 0
				prompt := []string{"hello there", "stream please", "what is my key?", "give me a long one [big=100000,chunk=512]"}[i%4]
				var sid string
				if g%2 == 0 {
					r := r2goDo(t.Context(), c, chatParams(prompt), stream)
					if r.err != nil {
						t.Errorf("go: %v", r.err)
						return
					}
					sid = r.session
				} else {
					d := &r2doer{}
					r, _ := r2lcDo(t.Context(), r2lc(t, e, d), []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, prompt)}, stream, false)
					if r.err != nil {
						t.Errorf("lc: %v", r.err)
						return
					}
					sid = d.session()
				}
				recs := e.recs(t, sid)
				pts := r2points(recs)
				if len(pts) != 6 || pts[5] != "agent_shutdown" || !r2seqOK(recs) {
					bad.Add(1)
					t.Errorf("g%d i%d: records right after %v", g, i, r2recStrings(recs))
				}
			}
		}()
	}
	wg.Wait()
	if bad.Load() > 0 {
		t.Errorf("%d answers whose records were incomplete", bad.Load())
	}
}

// TestR2OutputTransform: a redaction at output (not post_model_call)
// reaches every client, streams re-derived.
func TestR2OutputTransform(t *testing.T) {
	e := r2start(t, r2YAML, "output", "", newR2up())
	want := []string{"agent_startup", "input", "pre_model_call", "post_model_call", "output/transform:content_redacted", "agent_shutdown"}
	for _, cl := range r2clients {
		for _, stream := range []bool{false, true} {
			r := cl.do(t, e, []r2msg{{Role: "user", Content: "what is my key?"}}, stream, false, nil)
			if r.err != nil || r.content != answerRedacted {
				t.Errorf("%s stream=%v: %+v", cl.name, stream, r)
				continue
			}
			if got := r2points(e.recs(t, r.session)); !slices.Equal(got, want) {
				t.Errorf("%s stream=%v: records right after %v", cl.name, stream, got)
			}
		}
	}
}

package ctk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hooksproxy/hooksproxy/config"
	"github.com/hooksproxy/hooksproxy/points"
	"github.com/hooksproxy/hooksproxy/proxy"
	"github.com/hooksproxy/hooksproxy/scripted"
)

// The tool seams the HTTP harness can drive.
const (
	// SeamHostAPI turns the proxy's transparent seam off: the agent brackets
	// every tool call with the host API's pre and post calls and ends its
	// named session with /end.
	SeamHostAPI = "host-api"
	// SeamTransparent turns the transparent seam on: the agent is a plain
	// OpenAI client that never calls the host API and sends no session
	// header; the proxy verdicts the tool calls it releases and the role:tool
	// results that come back, and closes the run itself.
	SeamTransparent = "transparent"
)

// HTTPAgentID is agent.id of every context the HTTP harness's proxy emits;
// agent.framework is the proxy's default, openai-compatible.
const HTTPAgentID = "ctk-agent"

// HTTP is the end-to-end harness: each vector runs against a real
// proxy.Server on loopback, with the vector's model_script served in order
// by a scripted OpenAI-wire upstream, and its agent loop played by an
// OpenAI-wire client speaking the chat API (and, on the host-api seam, the
// tool-call host API). Interceptors, resolver, redactor, mode, composition
// and identity provider are the vector's, bound into the proxy's emitter;
// records are read back from the emitter's record sink.
//
// The two loopback listeners live as long as the harness (Close releases
// them); each vector gets a fresh proxy.Server and scripted upstream behind
// them. An HTTP value runs one vector at a time, like every Harness.
type HTTP struct {
	// Stream sends every chat request with stream:true: the proxy holds the
	// upstream stream whole until its verdicts permit and then replays it,
	// or re-derives it from the verdicted completion.
	Stream bool
	// ToolSeamHostError is the posture the proxy runs under ("" is
	// continue); a vector's host declaration overrides it.
	ToolSeamHostError string

	seam string

	front, upstream *http.Server
	frontURL        string
	upstreamURL     *url.URL
	client          *http.Client    // agent → proxy
	transport       *http.Transport // proxy → upstream, shared by every vector's proxy
	current         atomic.Pointer[proxy.Server]
	model           atomic.Pointer[scripted.Server]
	// inflight counts proxy requests still being handled: a response can
	// reach the agent before its handler has emitted everything (a
	// header-less run's agent_shutdown follows the released answer).
	inflight sync.WaitGroup

	runs     int
	setup    Setup
	srv      *proxy.Server
	sink     *points.MemorySink
	declared string
	invoked  []ToolInvocation
	session  string
}

// NewHTTP starts the loopback listeners of an HTTP harness driving seam
// (SeamHostAPI or SeamTransparent). Close releases them.
func NewHTTP(seam string) (*HTTP, error) {
	if seam != SeamHostAPI && seam != SeamTransparent {
		return nil, fmt.Errorf("ctk: unknown seam %q (want %s or %s)", seam, SeamHostAPI, SeamTransparent)
	}
	h := &HTTP{seam: seam}
	up, upAddr, err := serveLoopback(http.HandlerFunc(h.serveModel))
	if err != nil {
		return nil, err
	}
	front, frontAddr, err := serveLoopback(http.HandlerFunc(h.serveProxy))
	if err != nil {
		_ = up.Close()
		return nil, err
	}
	h.upstream, h.front = up, front
	h.upstreamURL = &url.URL{Scheme: "http", Host: upAddr}
	h.frontURL = "http://" + frontAddr
	// Loopback only: never route through an environment proxy.
	h.client = &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8}}
	h.transport = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8, DisableCompression: true}
	return h, nil
}

func serveLoopback(handler http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("ctk: listening on loopback: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, ln.Addr().String(), nil
}

// Close stops the loopback listeners.
func (h *HTTP) Close() {
	h.Teardown()
	_ = h.front.Close()
	_ = h.upstream.Close()
	h.client.CloseIdleConnections()
	h.transport.CloseIdleConnections()
}

// Seam is the tool seam this harness drives.
func (h *HTTP) Seam() string { return h.seam }

// ProxyURL is the base URL the agent side talks to; between Setup and
// Teardown the vector's proxy answers there.
func (h *HTTP) ProxyURL() string { return h.frontURL }

func (h *HTTP) serveProxy(w http.ResponseWriter, r *http.Request) {
	h.inflight.Add(1)
	defer h.inflight.Done()
	srv := h.current.Load()
	if srv == nil {
		http.Error(w, "ctk: no vector is set up", http.StatusServiceUnavailable)
		return
	}
	srv.ServeHTTP(w, r)
}

func (h *HTTP) serveModel(w http.ResponseWriter, r *http.Request) {
	m := h.model.Load()
	if m == nil {
		http.Error(w, "ctk: no vector is set up", http.StatusServiceUnavailable)
		return
	}
	m.ServeHTTP(w, r)
}

// Capabilities is hooksproxy's declared surface (config.DefaultSurface):
// model and tool calls, parallel tool calls, int64 and bigint JSON, host
// declarations, and streaming when this harness streams. The proxy buffers
// every answer whole, so it never claims incremental_output.
func (h *HTTP) Capabilities() []string {
	var caps []string
	for _, c := range config.DefaultSurface().Capabilities {
		if c == CapStreaming && !h.Stream {
			continue
		}
		caps = append(caps, c)
	}
	return append(caps, CapBufferedOutput)
}

// Posture is the tool_seam_host_error posture the proxy runs under: the
// loaded host declaration's, else ToolSeamHostError, else continue.
func (h *HTTP) Posture() string {
	if h.declared != "" {
		return h.declared
	}
	return orDefault(h.ToolSeamHostError, PostureContinue)
}

// Setup builds a fresh proxy and scripted upstream for one vector.
func (h *HTTP) Setup(s Setup) error {
	h.Teardown()
	h.setup, h.invoked, h.declared = s, nil, ""
	h.sink = points.NewMemorySink(0)
	h.runs++
	id := "ctk-session"
	if s.Vector != nil {
		id = s.Vector.ID
	}
	h.session = fmt.Sprintf("%s-%d", id, h.runs)

	cfg, posture, err := emitterConfig(s)
	if err != nil {
		return err
	}
	h.declared = posture
	replies, err := modelReplies(s.Scenario.ModelScript)
	if err != nil {
		return err
	}
	cfg.Sink = h.sink
	em, err := points.NewEmitter(cfg)
	if err != nil {
		return fmt.Errorf("ctk: building the emitter: %w", err)
	}
	h.srv = proxy.New(proxy.Options{
		Upstream:            h.upstreamURL,
		Transport:           h.transport,
		Agent:               points.Agent{ID: HTTPAgentID},
		TransparentToolSeam: h.seam == SeamTransparent,
		ToolSeamHostError:   h.Posture(),
		Logger:              slog.New(slog.DiscardHandler),
		Emitter:             em,
	})
	h.model.Store(scripted.Sequence(replies...))
	h.current.Store(h.srv)
	return nil
}

// modelReplies turns a model_script into scripted OpenAI-wire replies:
// content as text (or null), tool calls with their args bytes as the
// arguments string, the finish_reason as written.
func modelReplies(script []ModelStep) ([]scripted.Reply, error) {
	out := make([]scripted.Reply, 0, len(script))
	for i, step := range script {
		r := step.Respond
		reply := scripted.Reply{FinishReason: r.FinishReason}
		switch c := gjson.ParseBytes(r.Content); c.Type {
		case gjson.Null:
		case gjson.String:
			s := c.Str
			reply.Content = &s
		default:
			return nil, fmt.Errorf("ctk: model_script[%d].respond.content is %s: the chat completions wire carries text or null only", i, compactJSON(r.Content))
		}
		for _, tc := range r.ToolCalls {
			reply.ToolCalls = append(reply.ToolCalls, scripted.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: string(tc.Args)})
		}
		out = append(out, reply)
	}
	return out, nil
}

// Teardown ends the vector's proxy (open sessions get agent_shutdown
// {cancelled}, after Run has read the records) and detaches it.
func (h *HTTP) Teardown() {
	h.current.Store(nil)
	h.model.Store(nil)
	if h.srv != nil {
		h.srv.Close()
	}
	h.srv = nil
}

// errHTTPBlocked unwinds the agent loop when the proxy answered a block.
var errHTTPBlocked = errors.New("ctk: the proxy blocked the run")

// Run plays the scenario against the proxy: chat requests until the model
// answers without tool calls, each released tool call run on the mock
// tools (bracketed by the host API on that seam) and answered with a
// role:tool message. A 403 or 503 from the proxy ends the run blocked.
func (h *HTTP) Run(ctx context.Context) (RunRecord, error) {
	if h.srv == nil {
		return RunRecord{}, errors.New("ctk: Run before Setup")
	}
	final, err := h.loop(ctx)
	outcome, runErr := OutcomeCompleted, ""
	var hostErr *httpError
	switch {
	case errors.Is(err, errHTTPBlocked):
		outcome, final = OutcomeBlocked, nil
	case errors.As(err, &hostErr):
		// The proxy answered something an agent cannot go on from; the
		// vector's run_outcome assertion reports it.
		outcome, final, runErr = OutcomeError, nil, hostErr.Error()
	case err != nil:
		return RunRecord{}, err
	}
	if h.seam == SeamHostAPI {
		reason := "completed"
		if outcome != OutcomeCompleted {
			reason = "error"
		}
		if err := h.end(ctx, reason); err != nil {
			return RunRecord{}, err
		}
	}
	// Every emission of the run has happened once its handlers returned.
	h.inflight.Wait()

	rr := RunRecord{Outcome: outcome, FinalOutput: final, ToolInvocations: h.invoked, Error: runErr}
	for _, rec := range h.sink.Records() {
		b, err := json.Marshal(rec)
		if err != nil {
			return RunRecord{}, fmt.Errorf("ctk: marshalling a record: %w", err)
		}
		rr.Records = append(rr.Records, b)
		rr.Identities = append(rr.Identities, IdentityPair{Input: rec.InputIdentity, Enforced: rec.EnforcedIdentity})
	}
	return rr, nil
}

// httpError is a proxy answer that is neither a success nor an
// agent-hooks block.
type httpError struct {
	what   string
	status int
	body   string
}

func (e *httpError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", e.what, e.status, strings.TrimSpace(e.body))
}

func (h *HTTP) loop(ctx context.Context) (json.RawMessage, error) {
	sc := h.setup.Scenario
	messages, err := sjson.SetRawBytes([]byte(`[{"role":"user"}]`), "0.content", sc.Input.Content)
	if err != nil {
		return nil, fmt.Errorf("ctk: building the input message: %w", err)
	}
	if sc.Input.Role != "user" {
		if messages, err = sjson.SetBytes(messages, "0.role", sc.Input.Role); err != nil {
			return nil, err
		}
	}
	tools, err := toolsJSON(sc.Tools)
	if err != nil {
		return nil, err
	}
	// Each request consumes at least one scripted reply; one more than the
	// script allows the fallback answer to surface as a wrong final output
	// instead of a hang.
	for turn := 0; turn <= len(sc.ModelScript); turn++ {
		completion, err := h.chat(ctx, messages, tools)
		if err != nil {
			return nil, err
		}
		msg := gjson.GetBytes(completion, "choices.0.message")
		calls := msg.Get("tool_calls").Array()
		if len(calls) == 0 {
			return json.RawMessage(orNullRaw(msg.Get("content").Raw)), nil
		}
		assistant := []byte(`{"role":"assistant"}`)
		if assistant, err = sjson.SetRawBytes(assistant, "content", []byte(orNullRaw(msg.Get("content").Raw))); err != nil {
			return nil, err
		}
		if assistant, err = sjson.SetRawBytes(assistant, "tool_calls", []byte(msg.Get("tool_calls").Raw)); err != nil {
			return nil, err
		}
		if messages, err = sjson.SetRawBytes(messages, "-1", assistant); err != nil {
			return nil, err
		}
		for j, c := range calls {
			content, err := h.toolCall(ctx, c)
			if err != nil {
				if errors.Is(err, errHTTPBlocked) {
					return nil, err
				}
				return nil, fmt.Errorf("turn %d tool_calls[%d]: %w", turn, j, err)
			}
			tm, err := sjson.SetBytes([]byte(`{"role":"tool"}`), "tool_call_id", c.Get("id").Str)
			if err != nil {
				return nil, err
			}
			if tm, err = sjson.SetRawBytes(tm, "content", content); err != nil {
				return nil, err
			}
			if messages, err = sjson.SetRawBytes(messages, "-1", tm); err != nil {
				return nil, err
			}
		}
	}
	return nil, fmt.Errorf("ctk: the model asked for tools more often than model_script (%d steps) answers", len(sc.ModelScript))
}

// toolsJSON declares the scenario's tools as OpenAI function tools (nil
// when there are none: the wire refuses an empty tools array). A tool's
// schema, when it has one, goes as the function parameters.
func toolsJSON(tools []Tool) ([]byte, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	out := []byte(`[]`)
	for _, t := range tools {
		d, err := sjson.SetBytes([]byte(`{"type":"function","function":{}}`), "function.name", t.Name)
		if err != nil {
			return nil, err
		}
		if len(t.Schema) > 0 {
			if d, err = sjson.SetRawBytes(d, "function.parameters", t.Schema); err != nil {
				return nil, err
			}
		}
		if out, err = sjson.SetRawBytes(out, "-1", d); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// chat sends one chat completion request and returns the completion
// (assembled from its events when streamed).
func (h *HTTP) chat(ctx context.Context, messages, tools []byte) ([]byte, error) {
	body := []byte(`{"model":"` + MockModelID + `"}`)
	var err error
	if body, err = sjson.SetRawBytes(body, "messages", messages); err != nil {
		return nil, err
	}
	if tools != nil {
		if body, err = sjson.SetRawBytes(body, "tools", tools); err != nil {
			return nil, err
		}
	}
	if h.Stream {
		if body, err = sjson.SetBytes(body, "stream", true); err != nil {
			return nil, err
		}
	}
	resp, err := h.post(ctx, "/v1/chat/completions", body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("ctk: reading the chat answer: %w", err)
	}
	if err := blockedOr(resp, b, "chat completion"); err != nil {
		return nil, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		if !h.Stream {
			return nil, errors.New("ctk: the proxy streamed an answer to a request that did not ask for a stream")
		}
		return assembleStream(b)
	}
	if h.Stream {
		return nil, errors.New("ctk: the proxy answered a stream request with a non-stream body")
	}
	if !gjson.ValidBytes(b) {
		return nil, fmt.Errorf("ctk: the chat answer is not JSON: %q", b)
	}
	return b, nil
}

// post sends a JSON body to the proxy; on the host-api seam every request
// names the session.
func (h *HTTP) post(ctx context.Context, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.frontURL+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("ctk: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if h.seam == SeamHostAPI {
		req.Header.Set("X-Agent-Hooks-Session", h.session)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ctk: POST %s: %w", path, err)
	}
	return resp, nil
}

// blockedOr classifies a non-200 proxy answer: an agent-hooks block (403
// agent_hooks_denied, 503 agent_hooks_host_error) is errHTTPBlocked,
// anything else an *httpError.
func blockedOr(resp *http.Response, body []byte, what string) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	typ := gjson.GetBytes(body, "error.type").Str
	if (resp.StatusCode == http.StatusForbidden && typ == "agent_hooks_denied") ||
		(resp.StatusCode == http.StatusServiceUnavailable && typ == "agent_hooks_host_error") {
		return errHTTPBlocked
	}
	return &httpError{what: what, status: resp.StatusCode, body: string(body)}
}

// toolCall runs one released tool call and returns the content of its
// role:tool message. On the host-api seam, pre decides whether and with
// which args the tool runs and post what the model gets back (the result,
// a rewrite, or a control error); on the transparent seam the proxy has
// already decided at release and decides the result on the next request.
//
// Tool results go on the wire as their JSON value: a string as the message
// text, any other value as itself. The transparent seam reads
// tool_result.value from the content's JSON, so an object result reaches
// post_tool_call as an object only this way.
func (h *HTTP) toolCall(ctx context.Context, c gjson.Result) (json.RawMessage, error) {
	id, name := c.Get("id").Str, c.Get("function.name").Str
	argsStr := c.Get("function.arguments").Str
	var args json.RawMessage
	if gjson.Valid(argsStr) {
		args = json.RawMessage(argsStr)
	} else {
		args, _ = json.Marshal(argsStr)
	}
	if h.seam == SeamTransparent {
		value, _, err := h.invoke(name, args)
		return value, err
	}
	path := "/agent-hooks/v1/sessions/" + url.PathEscape(h.session) + "/tool-calls/" + url.PathEscape(id)
	pre, _ := sjson.SetBytes([]byte(`{}`), "name", name)
	pre, err := sjson.SetRawBytes(pre, "args", args)
	if err != nil {
		return nil, err
	}
	ans, err := h.hostCall(ctx, path+"/pre", pre)
	if err != nil {
		return nil, err
	}
	if !ans.Get("proceed").Bool() {
		return controlErrorOf(ans)
	}
	args = json.RawMessage(ans.Get("args").Raw)
	value, isError, err := h.invoke(name, args)
	if err != nil {
		return nil, err
	}
	post, _ := sjson.SetBytes([]byte(`{}`), "name", name)
	if post, err = sjson.SetRawBytes(post, "args", args); err != nil {
		return nil, err
	}
	if post, err = sjson.SetRawBytes(post, "result", value); err != nil {
		return nil, err
	}
	if post, err = sjson.SetBytes(post, "is_error", isError); err != nil {
		return nil, err
	}
	if ans, err = h.hostCall(ctx, path+"/post", post); err != nil {
		return nil, err
	}
	if !ans.Get("proceed").Bool() {
		return controlErrorOf(ans)
	}
	return json.RawMessage(orNullRaw(ans.Get("result").Raw)), nil
}

func controlErrorOf(ans gjson.Result) (json.RawMessage, error) {
	ce := ans.Get("control_error")
	if !ce.IsObject() {
		return nil, fmt.Errorf("ctk: the host API withheld a tool call without a control error: %s", ans.Raw)
	}
	return json.RawMessage(ce.Raw), nil
}

// hostCall posts to the host API and returns its JSON answer.
func (h *HTTP) hostCall(ctx context.Context, path string, body []byte) (gjson.Result, error) {
	resp, err := h.post(ctx, path, body)
	if err != nil {
		return gjson.Result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return gjson.Result{}, fmt.Errorf("ctk: reading the host API answer: %w", err)
	}
	if err := blockedOr(resp, b, "host API "+path); err != nil {
		return gjson.Result{}, err
	}
	if !gjson.ValidBytes(b) {
		return gjson.Result{}, fmt.Errorf("ctk: host API %s answered non-JSON %q", path, b)
	}
	return gjson.ParseBytes(b), nil
}

// end closes the named session: agent_shutdown{reason}. A session the
// proxy already ended (a startup deny) answers 404, which is fine.
func (h *HTTP) end(ctx context.Context, reason string) error {
	body, _ := sjson.SetBytes([]byte(`{}`), "reason", reason)
	resp, err := h.post(ctx, "/agent-hooks/v1/sessions/"+url.PathEscape(h.session)+"/end", body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		return &httpError{what: "host API end", status: resp.StatusCode, body: string(b)}
	}
	return nil
}

// invoke runs the mock tool (HARNESS.md): the first behaviour whose
// when_args deep-equals args, or that has none, answers; every invocation
// is logged with the args the tool actually received.
func (h *HTTP) invoke(name string, args json.RawMessage) (json.RawMessage, bool, error) {
	i := slices.IndexFunc(h.setup.Scenario.Tools, func(t Tool) bool { return t.Name == name })
	if i < 0 {
		return nil, false, fmt.Errorf("ctk: tool %q is not in the scenario", name)
	}
	for _, b := range h.setup.Scenario.Tools[i].Behavior {
		if b.WhenArgs == nil || JSONEqual(b.WhenArgs, args) {
			h.invoked = append(h.invoked, ToolInvocation{Name: name, Args: append(json.RawMessage(nil), args...)})
			return b.Return, b.IsError, nil
		}
	}
	return nil, false, fmt.Errorf("ctk: tool %q has no behaviour for args %s", name, compactJSON(args))
}

func orNullRaw(raw string) string {
	if raw == "" {
		return "null"
	}
	return raw
}

// assembleStream folds chat.completion.chunk events into the
// chat.completion they stand for: content concatenated (null when no chunk
// carried any), tool calls by index with their arguments concatenated, the
// last finish_reason.
func assembleStream(b []byte) ([]byte, error) {
	type call struct {
		id, name string
		args     strings.Builder
	}
	var (
		content    strings.Builder
		hasContent bool
		calls      []*call
		finish     = "null"
		done       bool
	)
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			done = true
			continue
		}
		if !gjson.ValidBytes(data) {
			return nil, fmt.Errorf("ctk: stream event is not JSON: %q", data)
		}
		ch := gjson.GetBytes(data, "choices.0")
		if !ch.Exists() {
			continue // a usage-only chunk
		}
		d := ch.Get("delta")
		if c := d.Get("content"); c.Type == gjson.String {
			content.WriteString(c.Str)
			hasContent = true
		}
		for _, tc := range d.Get("tool_calls").Array() {
			idx := int(tc.Get("index").Int())
			if idx < 0 || idx > 1024 {
				return nil, fmt.Errorf("ctk: stream tool call index %d out of range", idx)
			}
			for len(calls) <= idx {
				calls = append(calls, &call{})
			}
			if v := tc.Get("id").Str; v != "" {
				calls[idx].id = v
			}
			if v := tc.Get("function.name").Str; v != "" {
				calls[idx].name = v
			}
			calls[idx].args.WriteString(tc.Get("function.arguments").Str)
		}
		if f := ch.Get("finish_reason"); f.Type == gjson.String {
			finish = f.Raw
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ctk: reading the stream: %w", err)
	}
	if !done {
		return nil, errors.New("ctk: the stream ended without data: [DONE]")
	}
	out := []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null}}]}`)
	var err error
	if hasContent {
		if out, err = sjson.SetBytes(out, "choices.0.message.content", content.String()); err != nil {
			return nil, err
		}
	}
	for i, c := range calls {
		tc := []byte(`{"type":"function","function":{}}`)
		tc, _ = sjson.SetBytes(tc, "id", c.id)
		tc, _ = sjson.SetBytes(tc, "function.name", c.name)
		if tc, err = sjson.SetBytes(tc, "function.arguments", c.args.String()); err != nil {
			return nil, err
		}
		if out, err = sjson.SetRawBytes(out, fmt.Sprintf("choices.0.message.tool_calls.%d", i), tc); err != nil {
			return nil, err
		}
	}
	return sjson.SetRawBytes(out, "choices.0.finish_reason", []byte(finish))
}

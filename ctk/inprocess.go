package ctk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// The mock agent identity of the in-process harness.
const (
	InProcessAgentID   = "ctk-agent"
	InProcessFramework = "hooksproxy-ctk"
	// MockModelID is the model.id of every mock model call.
	MockModelID = "mock"
)

// InProcess is the reference harness: a minimal agent loop over the points
// emitter with a scripted mock model and recording mock tools, in the
// shape of the reference SDKs' harness. It buffers output, so it does not
// claim incremental_output.
type InProcess struct {
	// ToolSeamHostError is the declared posture; "" is continue. With
	// terminate, a host_error:* deny at the tool seam ends the run blocked.
	ToolSeamHostError string

	runs    atomic.Int64
	setup   Setup
	emitter *points.Emitter
	sink    *points.MemorySink
	session *points.Session
	invoked []ToolInvocation
	// declared is the posture a loaded host declaration selected.
	declared string
}

// NewInProcess returns the in-process reference harness.
func NewInProcess() *InProcess { return &InProcess{} }

// Capabilities is everything the points emitter and this loop do.
func (h *InProcess) Capabilities() []string {
	return []string{
		CapModelCalls, CapToolCalls, CapParallelToolCalls, CapMultiTurn,
		CapInt64JSON, CapBigintJSON, CapBufferedOutput, CapHostDeclaration,
	}
}

// Posture is the declared tool_seam_host_error posture: the loaded host
// declaration's, else ToolSeamHostError, else continue.
func (h *InProcess) Posture() string {
	if h.declared != "" {
		return h.declared
	}
	return orDefault(h.ToolSeamHostError, PostureContinue)
}

// Setup builds the emitter for one vector: from the vector's members, or
// by loading its host declaration.
func (h *InProcess) Setup(s Setup) error {
	h.setup = s
	h.invoked = nil
	h.sink = points.NewMemorySink(0)
	cfg, posture, err := emitterConfig(s)
	if err != nil {
		return err
	}
	h.declared = posture
	cfg.Sink = h.sink
	em, err := points.NewEmitter(cfg)
	if err != nil {
		return fmt.Errorf("ctk: building the emitter: %w", err)
	}
	h.emitter = em
	id := "ctk-session"
	if s.Vector != nil {
		id = s.Vector.ID
	}
	h.session = points.NewSession(points.Agent{ID: InProcessAgentID, Framework: InProcessFramework},
		fmt.Sprintf("%s-%d", id, h.runs.Add(1)))
	return nil
}

// Teardown drops the emitter.
func (h *InProcess) Teardown() {
	h.emitter, h.session, h.sink = nil, nil, nil
}

// errBlocked unwinds the loop when a combined verdict stops the turn.
var errBlocked = errors.New("ctk: run blocked")

// Run executes the scenario: agent_startup, input, then per model step
// pre_model_call and post_model_call and, per requested tool call,
// pre_tool_call and post_tool_call; output over the final answer; and
// always agent_shutdown, whose verdict cannot change anything.
func (h *InProcess) Run(ctx context.Context) (RunRecord, error) {
	if h.emitter == nil {
		return RunRecord{}, errors.New("ctk: Run before Setup")
	}
	final, err := h.loop(ctx)
	outcome := OutcomeCompleted
	switch {
	case errors.Is(err, errBlocked):
		outcome, final = OutcomeBlocked, nil
	case err != nil:
		return RunRecord{}, err
	}
	reason := "completed"
	if outcome != OutcomeCompleted {
		reason = "error"
	}
	h.emitter.Emit(ctx, h.session, points.ShutdownEvent(reason))

	rr := RunRecord{Outcome: outcome, FinalOutput: final, ToolInvocations: h.invoked}
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

// emit runs one emission and unwinds when it does not proceed.
func (h *InProcess) emit(ctx context.Context, ev points.Event) (points.Result, error) {
	r := h.emitter.Emit(ctx, h.session, ev)
	if !r.Proceed {
		return r, errBlocked
	}
	return r, nil
}

// enforced reads a member of the enforced context.
func enforced(r points.Result, path string) json.RawMessage {
	v := gjson.GetBytes(r.Context, path)
	if !v.Exists() {
		return nil
	}
	return json.RawMessage(v.Raw)
}

func (h *InProcess) loop(ctx context.Context) (json.RawMessage, error) {
	sc := h.setup.Scenario
	names := make([]string, 0, len(sc.Tools))
	for _, t := range sc.Tools {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	if _, err := h.emit(ctx, points.StartupEvent(names)); err != nil {
		return nil, err
	}
	r, err := h.emit(ctx, points.InputEvent(sc.Input.Content, sc.Input.Role))
	if err != nil {
		return nil, err
	}
	// The turn goes on with the input as enforced (§4.3).
	msg, err := message(sc.Input.Role, orRaw(enforced(r, "input.content"), sc.Input.Content))
	if err != nil {
		return nil, err
	}
	messages := json.RawMessage(`[]`)
	if messages, err = appendMessage(messages, msg); err != nil {
		return nil, err
	}
	var final json.RawMessage
	for i, step := range sc.ModelScript {
		r, err := h.emit(ctx, points.PreModelCallEvent(MockModelID, messages))
		if err != nil {
			return nil, err
		}
		messages = orRaw(enforced(r, "messages"), messages)
		// The Nth model call gets model_script[N], as written.
		resp := step.Respond
		r, err = h.emit(ctx, points.PostModelCallEvent(MockModelID, responseJSON(resp)))
		if err != nil {
			return nil, err
		}
		content := orRaw(enforced(r, "response.content"), resp.Content)
		calls := gjson.GetBytes(r.Context, "response.tool_calls")
		if !calls.Exists() {
			calls = gjson.ParseBytes(resp.ToolCallsRaw)
		}
		if !calls.IsArray() || len(calls.Array()) == 0 {
			final = content
			break
		}
		assistant, err := assistantMessage(content, json.RawMessage(calls.Raw))
		if err != nil {
			return nil, err
		}
		if messages, err = appendMessage(messages, assistant); err != nil {
			return nil, err
		}
		for j, tc := range calls.Array() {
			toolMsg, err := h.toolCall(ctx, tc)
			if err != nil {
				return nil, fmt.Errorf("model_script[%d] tool_calls[%d]: %w", i, j, err)
			}
			if messages, err = appendMessage(messages, toolMsg); err != nil {
				return nil, err
			}
		}
	}
	if final == nil || gjson.ParseBytes(final).Type == gjson.Null {
		// The script ran out without a final answer: nothing to release.
		return nil, nil
	}
	r, err = h.emit(ctx, points.OutputEvent(final))
	if err != nil {
		return nil, err
	}
	return orRaw(enforced(r, "output.content"), final), nil
}

// toolCall runs one tool call through pre_tool_call, the mock tool and
// post_tool_call and returns the tool message for the transcript. A deny
// at either point surfaces the control error to the model instead (§6.2);
// a denied result is discarded, never incorporated (§6.1).
func (h *InProcess) toolCall(ctx context.Context, tc gjson.Result) (json.RawMessage, error) {
	id, name := tc.Get("id").Str, tc.Get("name").Str
	args := json.RawMessage(tc.Get("args").Raw)
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	r, err := h.emit(ctx, points.PreToolCallEvent(id, name, args))
	if err != nil {
		return h.toolDenied(id, points.PreToolCall, r)
	}
	args = orRaw(enforced(r, "tool_call.args"), args)
	value, isError, err := h.invoke(name, args)
	if err != nil {
		return nil, err
	}
	r, err = h.emit(ctx, points.PostToolCallEvent(id, name, args, value, isError))
	if err != nil {
		return h.toolDenied(id, points.PostToolCall, r)
	}
	return toolMessage(id, orRaw(enforced(r, "tool_result.value"), value))
}

// toolDenied applies the tool-seam deny handling: the control error as the
// tool result, or, under the terminate posture, the end of the turn on a
// host_error deny.
func (h *InProcess) toolDenied(id string, p points.Point, r points.Result) (json.RawMessage, error) {
	if r.HostError() && h.Posture() == PostureTerminate {
		return nil, errBlocked
	}
	return toolMessage(id, ControlError(p, r.Verdict))
}

// ControlError is what a tool-seam deny hands the model in place of the
// tool's result: {"error": "Tool call blocked by agent-hooks at <point>.",
// "reason": ..., "message": ...}, message only when the verdict has one.
func ControlError(p points.Point, v points.Verdict) json.RawMessage {
	b, _ := json.Marshal(struct {
		Error   string `json:"error"`
		Reason  string `json:"reason"`
		Message string `json:"message,omitempty"`
	}{"Tool call blocked by agent-hooks at " + string(p) + ".", v.Reason, v.Message})
	return b
}

// invoke runs the mock tool: the first behaviour whose when_args
// deep-equals args (or that has none) answers. Every invocation is logged
// with the args the tool actually received.
func (h *InProcess) invoke(name string, args json.RawMessage) (json.RawMessage, bool, error) {
	for _, t := range h.setup.Scenario.Tools {
		if t.Name != name {
			continue
		}
		for _, b := range t.Behavior {
			if b.WhenArgs == nil || JSONEqual(b.WhenArgs, args) {
				h.invoked = append(h.invoked, ToolInvocation{Name: name, Args: append(json.RawMessage(nil), args...)})
				return b.Return, b.IsError, nil
			}
		}
		return nil, false, fmt.Errorf("ctk: tool %q has no behaviour for args %s", name, compactJSON(args))
	}
	return nil, false, fmt.Errorf("ctk: tool %q is not in the scenario", name)
}

func orRaw(v, fallback json.RawMessage) json.RawMessage {
	if v == nil {
		return fallback
	}
	return v
}

// responseJSON is the post_model_call response {content, tool_calls,
// finish_reason}, with content and tool_calls byte-for-byte as scripted.
func responseJSON(r Response) json.RawMessage {
	b := []byte(`{"content":`)
	b = append(b, r.Content...)
	b = append(b, `,"tool_calls":`...)
	b = append(b, r.ToolCallsRaw...)
	b = append(b, `,"finish_reason":`...)
	fr, _ := json.Marshal(r.FinishReason)
	b = append(b, fr...)
	return append(b, '}')
}

func message(role string, content json.RawMessage) (json.RawMessage, error) {
	b, err := sjson.SetBytes([]byte(`{}`), "role", role)
	if err != nil {
		return nil, err
	}
	return sjson.SetRawBytes(b, "content", content)
}

func assistantMessage(content, calls json.RawMessage) (json.RawMessage, error) {
	if gjson.ParseBytes(content).Type == gjson.Null {
		content = json.RawMessage(`""`)
	}
	b, err := message("assistant", content)
	if err != nil {
		return nil, err
	}
	return sjson.SetRawBytes(b, "tool_calls", calls)
}

func toolMessage(id string, content json.RawMessage) (json.RawMessage, error) {
	b, err := message("tool", content)
	if err != nil {
		return nil, err
	}
	return sjson.SetBytes(b, "tool_call_id", id)
}

func appendMessage(messages, msg json.RawMessage) (json.RawMessage, error) {
	return sjson.SetRawBytes(messages, "-1", msg)
}

// emitterConfig is the emitter configuration a setup asks for: from its host
// declaration (with the declared posture) or from its explicit members.
func emitterConfig(s Setup) (points.Config, string, error) {
	if s.HostDeclaration != nil {
		return DeclarationConfig(s)
	}
	return points.Config{
		Mode: s.Mode, Composition: s.Composition, Identity: s.Identity,
		Bindings: s.Bindings, Resolver: s.Resolver, Redactor: s.Redactor,
	}, "", nil
}

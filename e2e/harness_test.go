package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hooksproxy/hooksproxy/app"
	"github.com/hooksproxy/hooksproxy/points"
	"github.com/hooksproxy/hooksproxy/scripted"
)

// The scripted answers. Each rule matches a substring of the last user
// message (or, with AfterTool, of the last tool result).
const (
	answerHello = "Hello from the scripted model, through hooksproxy."
	// answerLong is longer than the scripted upstream's 8-byte content
	// pieces many times over, so streams carry many content deltas.
	answerLong = "Streaming works: this answer is cut into many small content deltas by the scripted upstream, " +
		"and hooksproxy holds them all until post_model_call and output permit, then replays them event for event."
	// fakeKey matches the secrets pack's openai_key pattern.
	fakeKey        = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345"
	answerKey      = "Your key is " + fakeKey + " so keep it safe."
	answerRedacted = "Your key is [REDACTED:openai_key] so keep it safe."
	answerLeak     = "The password is a secret: hunter2."
	answerAgent    = "The answer is 42."
	answerRefused  = "I am not allowed to run shell commands, so I left everything in place."
	weatherArgs    = `{"city":"Paris","unit":"celsius","detail":"hourly forecast for the next two days"}`
	timeArgs       = `{"timezone":"Europe/Paris","format":"24h"}`
	// weatherKeyArgs carries a key the secrets pack redacts inside a tool
	// call, so the proxy re-derives a stream with tool calls.
	weatherKeyArgs         = `{"city":"Paris","api_key":"` + fakeKey + `"}`
	weatherKeyArgsRedacted = `{"city":"Paris","api_key":"[REDACTED:openai_key]"}`
)

// rules is the scripted upstream every policy test shares.
func rules() []scripted.Rule {
	return []scripted.Rule{
		{When: "hello", Reply: scripted.Text(answerHello)},
		{When: "stream please", Reply: scripted.Text(answerLong)},
		{When: "weather with my key", Reply: scripted.Calls(
			scripted.ToolCall{ID: "call_weather_k", Name: "get_weather", Arguments: weatherKeyArgs},
			scripted.ToolCall{ID: "call_time_k", Name: "get_time", Arguments: timeArgs},
		)},
		{When: "weather", Reply: scripted.Calls(
			scripted.ToolCall{ID: "call_weather_1", Name: "get_weather", Arguments: weatherArgs},
			scripted.ToolCall{ID: "call_time_2", Name: "get_time", Arguments: timeArgs},
		)},
		{When: "my key", Reply: scripted.Text(answerKey)},
		{When: "leak", Reply: scripted.Text(answerLeak)},
		{When: "clean up", Reply: scripted.Calls(
			scripted.ToolCall{ID: "call_delete_1", Name: "delete_files", Arguments: `{"path":"/"}`},
		)},
		{When: "6*7", Reply: scripted.Calls(
			scripted.ToolCall{ID: "call_calc_1", Name: "calculator", Arguments: `{"__arg1":"6*7"}`},
		)},
		{When: "42", AfterTool: true, Reply: scripted.Text(answerAgent)},
		{When: "blocked by agent-hooks", AfterTool: true, Reply: scripted.Text(answerRefused)},
		{When: "", AfterTool: true, Reply: scripted.Text("The tool said something else.")},
		{When: "delete everything", Reply: scripted.Calls(
			scripted.ToolCall{ID: "call_shell_1", Name: "shell_exec", Arguments: `{"__arg1":"rm -rf /"}`},
		)},
	}
}

// policyYAML is the policy set of most tests, after cmd/hooksproxy/demo.yaml:
// a deny at input, secret redaction at post_model_call, a deny at output
// and tool governance. UPSTREAM_URL is replaced at start.
const policyYAML = `
upstream:
  base_url: UPSTREAM_URL
  timeout: 30s
agent:
  id: e2e-agent
  framework: openai-compatible
passthrough: [/v1/models]
hooks:
  declaration: agent-hooks-declaration/1.0
  configuration:
    mode: enforce
    composition: {profile: sequential/first_deny}
    identity_provider: jcs-sha256
    timeouts: {interceptor_ms: 5000}
  bindings:
    - id: prompt-guard
      kind: hooksproxy.content
      at: [input]
      config: {deny: ['(?i)\bexfiltrate\b'], reason: prompt_denied}
    - id: key-redaction
      kind: hooksproxy.content
      at: [post_model_call]
      config: {packs: {secrets: redact}}
    - id: secret-egress
      kind: hooksproxy.content
      at: [output]
      config: {deny: ['(?i)\bsecret\b'], reason: secret_in_output}
    - id: tool-governance
      kind: hooksproxy.tools
      at: [post_model_call, pre_tool_call]
      config: {deny: [delete_files, 'shell_*'], escalate: [send_email]}
    - id: allow-rest
      kind: hooksproxy.allow_all
`

// env is one scripted upstream with hooksproxy in front of it, both on
// loopback httptest servers.
type env struct {
	// URL is the proxy's base URL (no /v1).
	URL string
	// Up is the scripted upstream; Up.Requests counts chat requests.
	Up *scripted.Server
	// Sink holds every InterceptionRecord the proxy emitted.
	Sink *points.MemorySink
	App  *app.App
	// ProxyRequests counts requests that reached the proxy (client retries
	// included).
	ProxyRequests atomic.Int64
	// inflight tracks proxy handlers still running: a run's agent_shutdown
	// is emitted after its answer is released, so the client can see the
	// answer before the record exists.
	inflight sync.WaitGroup

	closeOnce sync.Once
	closeFn   func()
}

// start runs the upstream up and a hooksproxy configured by yaml (with
// UPSTREAM_URL replaced) in front of it; both stop at test cleanup.
func start(tb testing.TB, yaml string, up *scripted.Server) *env {
	tb.Helper()
	upSrv := httptest.NewServer(up)
	cfg, err := app.Parse([]byte(strings.ReplaceAll(yaml, "UPSTREAM_URL", upSrv.URL)), "e2e.yaml", app.Options{})
	if err != nil {
		upSrv.Close()
		tb.Fatalf("app.Parse: %v", err)
	}
	e := &env{Up: up, Sink: points.NewMemorySink(0)}
	a, err := app.New(cfg, "", app.Options{Sink: e.Sink})
	if err != nil {
		upSrv.Close()
		tb.Fatalf("app.New: %v", err)
	}
	e.App = a
	a.Server.Start()
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.ProxyRequests.Add(1)
		e.inflight.Add(1)
		defer e.inflight.Done()
		a.Server.ServeHTTP(w, r)
	}))
	e.URL = px.URL
	e.closeFn = func() {
		px.Close()
		a.Server.Close()
		upSrv.Close()
	}
	tb.Cleanup(e.Close)
	return e
}

// Close stops the proxy (ending open sessions) and the upstream; it is
// idempotent.
func (e *env) Close() { e.closeOnce.Do(e.closeFn) }

// settle waits until every proxy handler has returned, so that every
// record of the requests made so far is in the sink. Call it only while no
// request is being started.
func (e *env) settle() { e.inflight.Wait() }

// records returns the records of one session, in emission order, once
// the proxy has settled.
func (e *env) records(session string) []*points.Record {
	e.settle()
	var out []*points.Record
	for _, r := range e.Sink.Records() {
		if r.SessionID == session {
			out = append(out, r)
		}
	}
	return out
}

// sessions returns the session ids in the order of their first record.
func (e *env) sessions() []string {
	e.settle()
	seen := map[string]bool{}
	var out []string
	for _, r := range e.Sink.Records() {
		if !seen[r.SessionID] {
			seen[r.SessionID] = true
			out = append(out, r.SessionID)
		}
	}
	return out
}

// pointsOf lists the interception points of recs.
func pointsOf(recs []*points.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.InterceptionPoint)
	}
	return out
}

// checkSequences asserts that a session's records are numbered 0, 1, 2, ...
// (§10.3: sequence is the emission order within the session, from 0).
func checkSequences(tb testing.TB, recs []*points.Record) {
	tb.Helper()
	for i, r := range recs {
		if r.Sequence != int64(i) {
			tb.Errorf("record %d (%s): sequence %d, want %d", i, r.InterceptionPoint, r.Sequence, i)
		}
	}
}

// allRecords returns every record, once the proxy has settled.
func allRecords(e *env) []*points.Record {
	e.settle()
	return e.Sink.Records()
}

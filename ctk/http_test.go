package ctk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// httpVariant is one way of driving the proxy.
type httpVariant struct {
	seam    string
	stream  bool
	posture string
}

func (v httpVariant) name() string {
	n := v.seam
	if v.stream {
		n += "/stream"
	} else {
		n += "/plain"
	}
	if v.posture != "" {
		n += "/" + v.posture
	}
	return n
}

func newHTTP(t testing.TB, v httpVariant) *HTTP {
	t.Helper()
	h, err := NewHTTP(v.seam)
	if err != nil {
		t.Fatal(err)
	}
	h.Stream, h.ToolSeamHostError = v.stream, v.posture
	t.Cleanup(h.Close)
	return h
}

// allVariants are the four ways of driving the proxy: both tool seams,
// plain and streamed.
var allVariants = []httpVariant{
	{seam: SeamHostAPI}, {seam: SeamHostAPI, stream: true},
	{seam: SeamTransparent}, {seam: SeamTransparent, stream: true},
}

// TestConformanceHTTP runs every vector end to end through a real proxy on
// loopback, through both tool seams, plain and streamed: no failures, and
// the only skips are the incremental part.
func TestConformanceHTTP(t *testing.T) {
	vs := loadAll(t)
	for _, v := range allVariants {
		t.Run(v.name(), func(t *testing.T) {
			t.Parallel()
			results := Run(newHTTP(t, v), vs)
			var buf bytes.Buffer
			tally := PrintSummary(&buf, results)
			t.Log(tally.String())
			if tally.Failed > 0 {
				t.Errorf("%d vectors failed:\n%s", tally.Failed, buf.String())
			}
			if tally.Passed+tally.Skipped != len(vs) || tally.Skipped != 4 {
				t.Errorf("unexpected tally %+v over %d vectors", tally, len(vs))
			}
			for _, r := range results {
				if r.Status == StatusSkip && r.SkipReason != "missing capability: incremental_output" {
					t.Errorf("%s skipped for %q", r.ID, r.SkipReason)
				}
			}
		})
	}
}

// TestConformanceHTTPTerminate runs the posture-dependent vectors with the
// proxy under tool_seam_host_error: terminate, where they expect the run
// blocked (a 503 from the host API or from the release of the tool calls).
func TestConformanceHTTPTerminate(t *testing.T) {
	var vs []Vector
	for _, v := range loadAll(t) {
		if v.Expect.RunOutcomeByPosture != nil {
			vs = append(vs, v)
		}
	}
	if len(vs) < 10 {
		t.Fatalf("only %d posture-dependent vectors", len(vs))
	}
	for _, seam := range []string{SeamHostAPI, SeamTransparent} {
		t.Run(seam, func(t *testing.T) {
			t.Parallel()
			h := newHTTP(t, httpVariant{seam: seam, posture: PostureTerminate})
			if h.Posture() != PostureTerminate {
				t.Fatalf("posture %q", h.Posture())
			}
			results := Run(h, vs)
			var buf bytes.Buffer
			if tally := PrintSummary(&buf, results); tally.Passed != len(vs) {
				t.Errorf("%+v:\n%s", tally, buf.String())
			}
		})
	}
}

// parallelVector asks for two tool calls in one response; the interceptor
// denies the second. On the host-api seam the agent brackets both; on the
// transparent seam the proxy releases only the first and splices the
// second back with its control error.
const parallelVector = `{
  "id": "HP-CTK-PAR-1", "title": "two tool calls in one response, one denied", "spec_clause": "§6.2",
  "capabilities": ["model_calls", "tool_calls", "parallel_tool_calls"],
  "scenario": {
    "input": {"content": "go", "role": "user"},
    "tools": [
      {"name": "delete_files", "behavior": [{"return": "UNREACHED"}]},
      {"name": "http_get", "behavior": [{"when_args": {"url": "https://x"}, "return": {"status": 200}}]}
    ],
    "model_script": [
      {"respond": {"content": null, "tool_calls": [
        {"id": "tc-1", "name": "http_get", "args": {"url": "https://x"}},
        {"id": "tc-2", "name": "delete_files", "args": {"path": "/"}}], "finish_reason": "tool_calls"}},
      {"respond": {"content": "done", "tool_calls": [], "finish_reason": "stop"}}
    ]
  },
  "interceptor_script": [
    {"at": "pre_tool_call", "match": {"tool_call.name": "delete_files"}, "return": {"decision": "deny", "reason": "ctk:dangerous_tool"}}
  ],
  "expect": {
    "sequence_strict": false,
    "interceptions": [
      {"interception_point": "agent_startup", "context": {"agent_init.tools_registered": ["delete_files", "http_get"]}},
      {"interception_point": "input"},
      {"interception_point": "pre_model_call"},
      {"interception_point": "post_model_call", "context": {"response.tool_calls[1].name": "delete_files"}},
      {"interception_point": "pre_tool_call", "context": {"tool_call.id": "tc-1"}},
      {"interception_point": "post_tool_call", "context": {"tool_call.id": "tc-1", "tool_result.value.status": 200}},
      {"interception_point": "pre_model_call", "context_must_contain": ["ctk:dangerous_tool"], "context_must_not_contain": ["UNREACHED"]},
      {"interception_point": "post_model_call"},
      {"interception_point": "output", "context": {"output.content": "done"}},
      {"interception_point": "agent_shutdown", "context": {"summary.reason": "completed"}}
    ],
    "records": [
      {"interception_point": "pre_tool_call", "assert": {"verdict.decision": "allow"}},
      {"interception_point": "pre_tool_call", "assert": {"verdict.decision": "deny", "verdict.reason": "ctk:dangerous_tool"}}
    ],
    "tool_invocations": [{"name": "http_get", "args": {"url": "https://x"}}],
    "tool_not_invoked": ["delete_files"],
    "final_output": "done",
    "run_outcome": "completed",
    "identities_equal": true
  }
}`

func TestHTTPParallelToolCalls(t *testing.T) {
	v, err := ParseVector([]byte(parallelVector))
	if err != nil {
		t.Fatal(err)
	}
	// The reference harness agrees with the vector.
	if r := RunVector(context.Background(), NewInProcess(), &v); r.Status != StatusPass {
		t.Fatalf("in-process: %s %q", r.Status, r.Failures)
	}
	for _, hv := range allVariants {
		t.Run(hv.name(), func(t *testing.T) {
			if r := RunVector(context.Background(), newHTTP(t, hv), &v); r.Status != StatusPass {
				t.Errorf("%s %q", r.Status, r.Failures)
			}
		})
	}
}

// TestHTTPKitCatchesWrongExpectations proves the HTTP run reports what the
// proxy and the tools really did: a vector whose expectation is wrong fails
// on both seams.
func TestHTTPKitCatchesWrongExpectations(t *testing.T) {
	vs := loadAll(t)
	cases := []struct {
		id     string
		mutate func(*Expect)
		want   string
	}{
		{"AH-CTK-020", func(e *Expect) {
			e.ToolInvocations = json.RawMessage(`[{"name":"http_get","args":{"url":"https://evil.example"}}]`)
		}, "tool_invocations"},
		{"AH-CTK-012", func(e *Expect) { e.RunOutcome = OutcomeCompleted }, "run_outcome"},
		{"AH-CTK-001", func(e *Expect) { e.FinalOutput = json.RawMessage(`"The answer is 5."`) }, "final_output"},
		{"AH-CTK-011", func(e *Expect) {
			e.Interceptions[len(e.Interceptions)-1].Context[0].Want = json.RawMessage(`"completed"`)
		}, "summary.reason"},
		{"AH-CTK-030", func(e *Expect) {
			e.Records[0].Assert = append(e.Records[0].Assert, Predicate{Path: "resolved_by", Want: json.RawMessage(`"rejection"`)})
		}, "resolved_by"},
	}
	for _, hv := range allVariants {
		h := newHTTP(t, hv)
		for _, c := range cases {
			v := vectorByID(t, vs, c.id)
			v.Expect.Interceptions = append([]ExpectedInterception(nil), v.Expect.Interceptions...)
			v.Expect.Records = append([]ExpectedRecord(nil), v.Expect.Records...)
			for i := range v.Expect.Interceptions {
				v.Expect.Interceptions[i].Context = append(Predicates(nil), v.Expect.Interceptions[i].Context...)
			}
			for i := range v.Expect.Records {
				v.Expect.Records[i].Assert = append(Predicates(nil), v.Expect.Records[i].Assert...)
			}
			c.mutate(&v.Expect)
			r := RunVector(context.Background(), h, &v)
			if r.Status != StatusFail || !strings.Contains(strings.Join(r.Failures, "\n"), c.want) {
				t.Errorf("%s %s: got %s %q, want a failure naming %s", hv.name(), c.id, r.Status, r.Failures, c.want)
			}
		}
	}
}

// TestHTTPSessions checks which session the records land in: the host-api
// agent names its session, the transparent agent sends no header and the
// proxy names the run.
func TestHTTPSessions(t *testing.T) {
	v := vectorByID(t, loadAll(t), "AH-CTK-001")
	for _, hv := range allVariants {
		h := newHTTP(t, hv)
		if err := h.Setup(NewSetup(&v)); err != nil {
			t.Fatal(err)
		}
		rr, err := h.Run(context.Background())
		h.Teardown()
		if err != nil {
			t.Fatal(err)
		}
		if len(rr.Records) != 10 {
			t.Fatalf("%s: %d records, want 10", hv.name(), len(rr.Records))
		}
		for _, rec := range rr.Records {
			sid := gjson.GetBytes(rec, "session_id").Str
			if hv.seam == SeamHostAPI && sid != h.session || hv.seam == SeamTransparent && !strings.HasPrefix(sid, "run_") {
				t.Errorf("%s: record in session %q", hv.name(), sid)
			}
		}
	}
}

func TestHTTPSetupErrors(t *testing.T) {
	if _, err := NewHTTP("bogus"); err == nil {
		t.Error("NewHTTP accepted an unknown seam")
	}
	h := newHTTP(t, httpVariant{seam: SeamHostAPI})
	if _, err := h.Run(context.Background()); err == nil {
		t.Error("Run before Setup succeeded")
	}
	v := vectorByID(t, loadAll(t), "AH-CTK-002")
	v.Scenario.ModelScript = append([]ModelStep(nil), v.Scenario.ModelScript...)
	v.Scenario.ModelScript[0].Respond.Content = json.RawMessage(`{"not":"text"}`)
	err := h.Setup(NewSetup(&v))
	if err == nil || !strings.Contains(err.Error(), "text or null") {
		t.Errorf("Setup with object content: %v", err)
	}
	if got := h.Capabilities(); contains(got, CapStreaming) || contains(got, CapIncrementalOutput) {
		t.Errorf("plain harness declares %v", got)
	}
	h.Stream = true
	if !contains(h.Capabilities(), CapStreaming) {
		t.Error("streaming harness does not declare streaming")
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestBlockedOr(t *testing.T) {
	cases := []struct {
		status  int
		body    string
		blocked bool
		ok      bool
	}{
		{200, `{}`, false, true},
		{403, `{"error":{"type":"agent_hooks_denied","code":"x"}}`, true, false},
		{503, `{"error":{"type":"agent_hooks_host_error","code":"host_error:no_interceptor"}}`, true, false},
		{403, `{"error":{"type":"permission_error"}}`, false, false},
		{503, `{"error":{"type":"agent_hooks_denied"}}`, false, false},
		{502, `{"error":{"type":"upstream_error"}}`, false, false},
		{409, `not json`, false, false},
	}
	for _, c := range cases {
		err := blockedOr(&http.Response{StatusCode: c.status}, []byte(c.body), "x")
		var he *httpError
		switch {
		case c.ok && err != nil, c.blocked && !errors.Is(err, errHTTPBlocked),
			!c.ok && !c.blocked && !errors.As(err, &he):
			t.Errorf("%d %s: %v", c.status, c.body, err)
		}
	}
}

func TestAssembleStream(t *testing.T) {
	cases := []struct {
		name, stream, want string
		err                bool
	}{
		{
			name: "text",
			stream: "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
				"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n" +
				"data: [DONE]\n\n",
			want: `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}]}`,
		},
		{
			name: "tool calls",
			stream: "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"x\\\":\"}}]}}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"b\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]}}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}}]}}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n" +
				"data: [DONE]\n\n",
			want: `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
				`{"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}},` +
				`{"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
		},
		{name: "truncated", stream: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n", err: true},
		{name: "not json", stream: "data: {nope\n\ndata: [DONE]\n\n", err: true},
		{name: "bad index", stream: "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":99999}]}}]}\n\ndata: [DONE]\n\n", err: true},
	}
	for _, c := range cases {
		got, err := assembleStream([]byte(c.stream))
		switch {
		case c.err && err == nil:
			t.Errorf("%s: no error, got %s", c.name, got)
		case !c.err && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.err && !JSONEqual(got, []byte(c.want)):
			t.Errorf("%s:\n got  %s\n want %s", c.name, got, c.want)
		}
	}
}

func FuzzAssembleStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":2,\"id\":\"x\",\"function\":{\"name\":\"n\",\"arguments\":\"{\"}}]}}]}\n\ndata: [DONE]\n"))
	f.Add([]byte("event: x\ndata:\n\n: comment\ndata: [DONE]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := assembleStream(b)
		if err != nil {
			return
		}
		if !gjson.ValidBytes(out) {
			t.Fatalf("assembled completion is not JSON: %s", out)
		}
		msg := gjson.GetBytes(out, "choices.0.message")
		if c := msg.Get("content"); c.Type != gjson.Null && c.Type != gjson.String {
			t.Fatalf("content is %s", c.Raw)
		}
		for _, tc := range msg.Get("tool_calls").Array() {
			if tc.Get("function.arguments").Type != gjson.String {
				t.Fatalf("arguments not a string: %s", tc.Raw)
			}
		}
	})
}

func BenchmarkHTTPVectors(b *testing.B) {
	core, err := LoadDir(vectorsDir)
	if err != nil {
		b.Fatal(err)
	}
	for _, hv := range allVariants {
		b.Run(hv.name(), func(b *testing.B) {
			h := newHTTP(b, hv)
			b.ReportAllocs()
			for b.Loop() {
				for _, r := range Run(h, core) {
					if r.Status == StatusFail {
						b.Fatalf("%s: %q", r.ID, r.Failures)
					}
				}
			}
		})
	}
}

package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
)

// marker is planted in every target of the scripted run; no record line
// and no metric may contain it.
const marker = "MARKER-c0ffee-9d1e-payload"

func verdict(v points.Verdict) points.Interceptor {
	return points.InterceptorFunc(func(context.Context, *points.Context) (points.Verdict, error) { return v, nil })
}

func resolver(outcome string, v string, wrongID bool) points.Resolver {
	return points.ResolverFunc(func(_ context.Context, req points.ApprovalRequest) (points.ApprovalResolution, error) {
		id := req.ContextIdentity
		if wrongID {
			x := "jcs-sha256:" + "00"
			id = &x
		}
		res := points.ApprovalResolution{Outcome: outcome, ContextIdentity: id}
		if v != "" {
			res.Verdict = json.RawMessage(v)
		}
		return res, nil
	})
}

func bind(name string, ic points.Interceptor) points.Binding {
	return points.Binding{Name: name, Interceptor: ic}
}

// scenario is one emission of the scripted run.
type scenario struct {
	name     string
	cfg      points.Config
	ev       points.Event
	hostDeny points.Reason // set: EmitHostDeny with this reason instead of Emit
	want     string        // expected combined reason (or decision for permits)
}

func quoted(s string) json.RawMessage { b, _ := json.Marshal(s); return b }

func scenarios() []scenario {
	m := marker
	input := points.InputEvent(quoted("hello "+m), "user")
	args := json.RawMessage(`{"url":"https://example.com/` + m + `","n":1}`)
	preTool := points.PreToolCallEvent("call-1", "http_get", args)
	output := points.OutputEvent(quoted("the answer is " + m))
	messages := json.RawMessage(`[{"role":"user","content":"` + m + `"}]`)
	response := json.RawMessage(`{"content":"` + m + `","tool_calls":[],"finish_reason":"stop"}`)
	postModel := points.PostModelCallEvent("gpt-test", response)
	startup := points.StartupEvent([]string{"tool_" + m})
	allow := bind("allow-all", verdict(points.Allow()))
	escalate := bind("tool-governance", verdict(points.Escalate("needs_approval", "send_email needs a person")))
	ffirst := points.Composition{Profile: points.ProfileFirstDeny}
	return []scenario{
		{name: "allow", cfg: points.Config{Bindings: []points.Binding{allow}}, ev: input, want: "allow"},
		{name: "warn", cfg: points.Config{Bindings: []points.Binding{bind("pii-warn", verdict(points.Warn("pii_seen", "an email address")))}}, ev: input, want: "allow"},
		{name: "deny", cfg: points.Config{Bindings: []points.Binding{allow, bind("secret-egress", verdict(points.Deny("secret_in_output", "a secret")))}, Composition: points.Composition{Profile: points.ProfileRunAll}}, ev: output, want: "secret_in_output"},
		{name: "deny evaluate_only", cfg: points.Config{Mode: points.EvaluateOnly, Bindings: []points.Binding{bind("secret-egress", verdict(points.Deny("secret_in_output", "")))}}, ev: output, want: "secret_in_output"},
		{name: "fold truncated", cfg: points.Config{Composition: ffirst, Bindings: []points.Binding{bind("models", verdict(points.Deny("model_not_allowed", ""))), allow}}, ev: points.PreModelCallEvent("gpt-test", messages), want: "model_not_allowed"},
		{name: "transform", cfg: points.Config{Bindings: []points.Binding{bind("key-redaction", verdict(points.Replace("$target.url", quoted("https://safe/"+m))))}}, ev: preTool, want: "transform"},
		{name: "escalate unresolved by anyone", cfg: points.Config{Bindings: []points.Binding{escalate}}, ev: preTool, want: "needs_approval"},
		{name: "escalate approved", cfg: points.Config{Bindings: []points.Binding{escalate}, Resolver: resolver(points.OutcomeApprove, `{"decision":"transform","transform":{"path":"$target.url","value":"https://approved/`+m+`"}}`, false)}, ev: preTool, want: "transform"},
		{name: "escalate rejected", cfg: points.Config{Bindings: []points.Binding{escalate}, Resolver: resolver(points.OutcomeReject, `{"decision":"deny","reason":"approver_said_no"}`, false)}, ev: preTool, want: "approver_said_no"},
		{name: "odd reason", cfg: points.Config{Bindings: []points.Binding{bind("webhook", verdict(points.Deny("reason with spaces", "")))}}, ev: output, want: "reason with spaces"},

		// Every reserved reason.
		{name: "context_invalid", cfg: points.Config{Bindings: []points.Binding{allow}, MaxContextBytes: 64}, ev: input, want: points.ReasonContextInvalid},
		{name: "interceptor_failed", cfg: points.Config{Bindings: []points.Binding{bind("crashy", points.InterceptorFunc(func(context.Context, *points.Context) (points.Verdict, error) { panic(marker) }))}}, ev: input, want: points.ReasonInterceptorFailed},
		{name: "interceptor_timeout", cfg: points.Config{Bindings: []points.Binding{{Name: "slow", Timeout: time.Millisecond, Interceptor: points.InterceptorFunc(func(ctx context.Context, _ *points.Context) (points.Verdict, error) {
			<-ctx.Done()
			return points.Verdict{}, ctx.Err()
		})}}}, ev: input, want: points.ReasonInterceptorTimeout},
		{name: "verdict_invalid", cfg: points.Config{Bindings: []points.Binding{bind("sloppy", verdict(points.Verdict{Decision: "maybe"}))}}, ev: input, want: points.ReasonVerdictInvalid},
		{name: "transform_invalid", cfg: points.Config{Bindings: []points.Binding{bind("key-redaction", verdict(points.Replace("$target.nope", quoted(m))))}}, ev: preTool, want: points.ReasonTransformInvalid},
		{name: "transform_target_forbidden", cfg: points.Config{Bindings: []points.Binding{bind("key-redaction", verdict(points.Replace("$target.tools_registered", quoted(m))))}}, ev: startup, want: points.ReasonTransformTargetForbidden},
		{name: "transform_conflict", cfg: points.Config{Composition: points.Composition{Profile: points.ProfileStrictest}, Bindings: []points.Binding{
			bind("key-redaction", verdict(points.Replace("$target.url", quoted("a")))), bind("url-rewrite", verdict(points.Replace("$target.n", json.RawMessage("2"))))}}, ev: preTool, want: points.ReasonTransformConflict},
		{name: "composition_disagreement", cfg: points.Config{Composition: points.Composition{Profile: points.ProfileUnanimous}, Bindings: []points.Binding{allow, bind("secret-egress", verdict(points.Deny("secret_in_output", "")))}}, ev: output, want: points.ReasonCompositionDisagreement},
		{name: "approval_resolver_failed", cfg: points.Config{Bindings: []points.Binding{escalate}, Resolver: points.ResolverFunc(func(context.Context, points.ApprovalRequest) (points.ApprovalResolution, error) {
			return points.ApprovalResolution{}, errors.New(marker)
		})}, ev: preTool, want: points.ReasonApprovalResolverFailed},
		{name: "approval_unresolved", cfg: points.Config{Bindings: []points.Binding{escalate}, Resolver: resolver(points.OutcomeUnresolved, "", false)}, ev: preTool, want: points.ReasonApprovalUnresolved},
		{name: "approval_identity_mismatch", cfg: points.Config{Bindings: []points.Binding{escalate}, Resolver: resolver(points.OutcomeApprove, `{"decision":"allow"}`, true)}, ev: preTool, want: points.ReasonApprovalIdentityMismatch},
		{name: "adapter_unsupported", cfg: points.Config{Bindings: []points.Binding{allow}}, ev: points.PreModelCallEvent("gpt-test", messages), hostDeny: points.ReasonAdapterUnsupported, want: points.ReasonAdapterUnsupported},
		{name: "no_interceptor", cfg: points.Config{}, ev: output, want: points.ReasonNoInterceptor},
		{name: "streaming_unsupported", cfg: points.Config{Bindings: []points.Binding{allow}}, ev: postModel, hostDeny: points.ReasonStreamingUnsupported, want: points.ReasonStreamingUnsupported},
	}
}

// runScenarios runs every scenario through a real points.Emitter with obs
// as its observer and sink as its record sink.
func runScenarios(t testing.TB, obs points.Observer, sink points.RecordSink) {
	t.Helper()
	clock := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	for _, sc := range scenarios() {
		cfg := sc.cfg
		cfg.Identity = points.JCSSHA256()
		cfg.Observer = obs
		cfg.Sink = sink
		cfg.Now = clock
		e, err := points.NewEmitter(cfg)
		if err != nil {
			t.Fatalf("%s: %v", sc.name, err)
		}
		s := points.NewSession(points.Agent{ID: "agent", Framework: "test"}, "s-"+sc.name)
		var res points.Result
		if sc.hostDeny != "" {
			res = e.EmitHostDeny(context.Background(), s, sc.ev, sc.hostDeny, "")
		} else {
			res = e.Emit(context.Background(), s, sc.ev)
		}
		got := res.Verdict.Reason
		if res.Verdict.Decision.Permits() {
			got = string(res.Verdict.Decision)
		}
		if got != sc.want {
			t.Fatalf("%s: outcome %q (%s), want %q", sc.name, got, res.Verdict.Message, sc.want)
		}
	}
}

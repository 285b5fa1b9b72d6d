package interceptors

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

func TestContentActions(t *testing.T) {
	const cfg = `{
	  "deny": [{"name": "launch_code", "regex": "LAUNCH-[0-9]{4}"}],
	  "escalate": ["(?i)wire transfer"],
	  "redact": ["sk-proj-[A-Za-z0-9]{20,}"],
	  "warn": ["(?i)\\bpassword\\b"],
	  "packs": {"pii": "redact"}
	}`
	ic := build(t, KindContent, cfg)
	tests := []struct {
		name string
		ctx  *points.Context
		want string
	}{
		{"clean", outputCtx(t, `"hello"`), "allow"},
		{"deny beats everything", outputCtx(t, `{"a":"wire transfer","b":["x LAUNCH-1234 sk-proj-AAAAAAAAAAAAAAAAAAAAAAAA"]}`), "deny content_denied"},
		{"escalate beats redact", outputCtx(t, `"wire TRANSFER to bob@example.com"`), "escalate content_escalated"},
		{"redact", outputCtx(t, `"mail bob@example.com"`), "transform content_redacted"},
		{"warn", outputCtx(t, `"my password is hunter2"`), "warn content_warning"},
		{"member names are scanned", preTool(t, "t", `{"LAUNCH-1234":"x"}`), "deny content_denied"},
		{"a member name is redacted in place", preTool(t, "t", `{"mail bob@example.com":1,"k":"v"}`), "transform content_redacted"},
		{"a card stored as a number", preTool(t, "t", `{"n":4111111111111111}`), "transform content_redacted"},
		{"other numbers are not judged", preTool(t, "t", `{"n":4111111111111112,"m":12345,"f":4111111111111111.5,"e":-4111111111111111}`), "allow"},
		{"redact degrades to warn at agent_startup", startupCtx(t, `["bob@example.com"]`), "warn content_redacted"},
		{"shutdown summary is clean", mkCtx(t, points.AgentShutdown, `{"summary":{"reason":"completed"}}`), "allow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := verdictSummary(run(t, ic, tt.ctx)); got != tt.want {
				t.Errorf("verdict = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestContentMessagesArePayloadFree: messages name patterns, never text.
func TestContentMessagesArePayloadFree(t *testing.T) {
	ic := build(t, KindContent, `{"deny":[{"name":"code","regex":"LAUNCH-[0-9]{4}"}],"packs":{"secrets":"escalate"}}`)
	v := run(t, ic, outputCtx(t, `"LAUNCH-1234"`))
	if strings.Contains(v.Message, "1234") || !strings.Contains(v.Message, `"code"`) {
		t.Errorf("deny message = %q", v.Message)
	}
	key := "ghp_" + strings.Repeat("a1B2", 9)
	v = run(t, ic, outputCtx(t, quoteJSON("token "+key)))
	if !v.Liftable() || strings.Contains(v.Message, key) || !strings.Contains(v.Message, "github_token") {
		t.Errorf("escalate verdict = %+v", v)
	}
	ic = build(t, KindContent, `{"deny":["x"],"reason":"secret_in_output","message":"no"}`)
	if v := run(t, ic, outputCtx(t, `"x"`)); v.Reason != "secret_in_output" || v.Message != "no" {
		t.Errorf("configured reason/message: %+v", v)
	}
	ic = build(t, KindContent, `{"deny":["x"],"warn":["y"],"reason":"all","reasons":{"warn":"just_warn"}}`)
	if v := run(t, ic, outputCtx(t, `"y"`)); v.Warnings[0].Reason != "just_warn" {
		t.Errorf("per-action reason: %+v", v)
	}
	if v := run(t, ic, outputCtx(t, `"x"`)); v.Reason != "all" {
		t.Errorf("shared reason: %+v", v)
	}
}

// TestContentRedactTransform checks the transform: the narrowest
// expressible path, the value byte-identical except for the masks, and that
// the emitter can apply it.
func TestContentRedactTransform(t *testing.T) {
	ic := build(t, KindContent, `{"redact":[{"name":"key","regex":"sk-proj-[A-Za-z0-9]{20,}"}],"packs":{"secrets":"redact"}}`)
	key := "sk-proj-" + strings.Repeat("Ab1", 8)
	tests := []struct {
		name      string
		ctx       *points.Context
		path      string
		value     string
		afterPath string // where to look in the emitted context
		after     string
	}{
		{
			name: "single string at depth",
			ctx:  preTool(t, "http", `{"headers": {"auth": "Bearer `+key+`", "x": 1}, "body": "plain"}`),
			path: "$target.headers.auth", value: `"Bearer [REDACTED:key]"`,
			afterPath: "tool_call.args", after: `{"headers": {"auth": "Bearer [REDACTED:key]", "x": 1}, "body": "plain"}`,
		},
		{
			name: "two strings share a parent",
			ctx:  postTool(t, "t", `{}`, `{"rows": [ {"k": "`+key+`"}, {"k": "ok"}, {"k": "`+key+`"} ], "n": 2}`),
			path: "$target.rows", value: `[ {"k": "[REDACTED:key]"}, {"k": "ok"}, {"k": "[REDACTED:key]"} ]`,
			afterPath: "tool_result.value.rows.2.k", after: `"[REDACTED:key]"`,
		},
		{
			name: "key outside the path grammar stops the path",
			ctx:  preTool(t, "t", `{"a b": {"c": "`+key+`"}}`),
			path: "$target", value: `{"a b": {"c": "[REDACTED:key]"}}`,
			afterPath: "target", after: `{"a b": {"c": "[REDACTED:key]"}}`,
		},
		{
			name: "whole target is a string",
			ctx:  postTool(t, "t", `{}`, quoteJSON("k="+key+" <tag> & é")),
			path: "$target", value: `"k=[REDACTED:key] <tag> & é"`,
			afterPath: "tool_result.value", after: `"k=[REDACTED:key] <tag> & é"`,
		},
		{
			name: "escapes elsewhere kept byte for byte",
			ctx:  outputCtx(t, `{"a":"\u00e9\n","b":["`+key+`"]}`),
			path: "$target.content.b[0]", value: `"[REDACTED:key]"`,
			afterPath: "output.content", after: `{"a":"\u00e9\n","b":["[REDACTED:key]"]}`,
		},
		{
			name: "anthropic key named as such",
			ctx:  outputCtx(t, `"sk-ant-api03-`+strings.Repeat("x", 30)+`"`),
			path: "$target.content", value: `"[REDACTED:anthropic_key]"`,
			afterPath: "output.content", after: `"[REDACTED:anthropic_key]"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := run(t, ic, tt.ctx)
			if v.Decision != points.DecisionTransform {
				t.Fatalf("verdict = %+v", v)
			}
			if v.Transform.Path != tt.path || string(v.Transform.Value) != tt.value {
				t.Errorf("transform = %s %s\nwant        %s %s", v.Transform.Path, v.Transform.Value, tt.path, tt.value)
			}
			if strings.Contains(v.Message, key) {
				t.Errorf("message carries the key: %q", v.Message)
			}
			// Through the emitter: the transform applies and is written back.
			em, err := points.NewEmitter(points.Config{Bindings: []points.Binding{{Name: "c", Interceptor: ic}}})
			if err != nil {
				t.Fatal(err)
			}
			res := em.EmitContext(context.Background(), tt.ctx.Raw())
			if !res.Record.Proceeds() {
				t.Fatalf("emission did not proceed: %+v", res.Record.Verdict)
			}
			if got := gjson.GetBytes(res.Context, tt.afterPath).Raw; got != tt.after {
				t.Errorf("after emission %s = %s, want %s", tt.afterPath, got, tt.after)
			}
		})
	}
}

// TestContentRedactMergesOverlaps: two patterns overlapping on one secret
// are masked as one span, so no fragment of either survives.
func TestContentRedactMergesOverlaps(t *testing.T) {
	ic := build(t, KindContent, `{"redact":[{"name":"a","regex":"abc123"},{"name":"b","regex":"123xyz"}]}`)
	v := run(t, ic, outputCtx(t, `"-abc123xyz-"`))
	if got := string(v.Transform.Value); got != `"-[REDACTED:a]-"` {
		t.Errorf("value = %s", got)
	}
}

func TestContentCustomMask(t *testing.T) {
	ic := build(t, KindContent, `{"redact":["\\d{3}-\\d{4}"],"mask":"<{name}>"}`)
	v := run(t, ic, outputCtx(t, `"call 555-1234 or 555-9876"`))
	if got := string(v.Transform.Value); got != `"call <redact_0> or <redact_0>"` {
		t.Errorf("value = %s", got)
	}
}

func TestContentCancelled(t *testing.T) {
	ic := build(t, KindContent, `{"deny":["x"]}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ic.Intercept(ctx, outputCtx(t, `"x"`)); err == nil {
		t.Fatal("cancelled call answered")
	}
}

func TestContentRedactsMemberNames(t *testing.T) {
	ic := build(t, KindContent, `{"packs":{"pii":"redact"},"redact":["sk-proj-[A-Za-z0-9]{20,}"]}`)
	c := preTool(t, "t", `{"nested":{"mail bob@example.com":1,"key sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX":"and bob@example.com"},"k":"v"}`)
	v := run(t, ic, c)
	if v.Decision != points.DecisionTransform {
		t.Fatalf("verdict %+v", v)
	}
	out, err := points.ApplyTransform(c.TargetBytes(), v.Transform.Path, v.Transform.Value)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "bob@example.com") || strings.Contains(string(out), "sk-proj-A") || !gjson.ValidBytes(out) ||
		gjson.GetBytes(out, "k").Str != "v" || len(gjson.GetBytes(out, "nested").Map()) != 2 {
		t.Fatalf("redacted target %s", out)
	}
}

func TestContentSkipsStructuralNames(t *testing.T) {
	// A pattern that matches a structural member name must not fire on it.
	ic := build(t, KindContent, `{"deny":["(?i)content|tool_calls|finish_reason"]}`)
	c := mkCtx(t, points.PostModelCall, `{"model":{"id":"m"},"response":{"content":"hello","tool_calls":[],"finish_reason":"stop"}}`)
	if got := verdictSummary(run(t, ic, c)); got != "allow" {
		t.Fatalf("verdict %s", got)
	}
}

func TestContentMaskedNamesStayDistinct(t *testing.T) {
	ic := build(t, KindContent, `{"redact":["MASK[0-9]"]}`)
	c := postTool(t, "t", `{}`, `{"MASK1":1,"MASK2":2}`)
	v := run(t, ic, c)
	if v.Decision != points.DecisionTransform {
		t.Fatalf("verdict %+v", v)
	}
	out, err := points.ApplyTransform(c.TargetBytes(), v.Transform.Path, v.Transform.Value)
	if err != nil || !points.ValidJSON(out) || strings.Contains(string(out), "MASK") || len(gjson.ParseBytes(out).Map()) != 2 {
		t.Fatalf("redacted %s (%v)", out, err)
	}
}

// Text split across content parts is judged joined: a deny pattern across
// two parts denies; a redact pattern across parts, which cannot be masked
// part by part, denies too; parts that each mask their own match pass.
func TestContentAcrossParts(t *testing.T) {
	ic := build(t, KindContent, `{"deny":[{"name":"code","regex":"SECRET-[0-9]+"}],"redact":[{"name":"key","regex":"sk-[a-z]{8}"}]}`)
	for _, tc := range []struct {
		name, content, want string
	}{
		{"deny across parts", `[{"type":"text","text":"The code is SEC"},{"type":"text","text":"RET-123"}]`, "deny"},
		{"redact across parts", `[{"type":"text","text":"key sk-abcd"},{"type":"text","text":"efgh end"}]`, "deny"},
		{"image between breaks the run", `[{"type":"text","text":"SEC"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"RET-1"}]`, "allow"},
		{"each part masks its own", `[{"type":"text","text":"key sk-abcdefgh"},{"type":"text","text":" done"}]`, "transform"},
		{"plain parts", `[{"type":"text","text":"hello "},{"type":"text","text":"world"}]`, "allow"},
		{"text then refusal part", `[{"type":"text","text":"The code is SEC"},{"type":"refusal","refusal":"RET-123"}]`, "deny"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := run(t, ic, outputCtx(t, tc.content))
			if got := string(v.Decision); got != tc.want {
				t.Errorf("decision %s (%s %s), want %s", got, v.Reason, v.Message, tc.want)
			}
		})
	}
}

// A redact match across parts denies under the pattern that crosses, named
// as a redact pattern, not under one masked inside a part.
func TestContentAcrossPartsNamesTheCrossingPattern(t *testing.T) {
	ic := build(t, KindContent, `{"redact":[{"name":"acct","regex":"acct=[0-9]{6}"},{"name":"key","regex":"sk-[a-z]{8}"}]}`)
	v := run(t, ic, outputCtx(t, `[{"type":"text","text":"acct=654321 key sk-abcd"},{"type":"text","text":"efgh end"}]`))
	if v.Decision != points.DecisionDeny {
		t.Fatalf("decision %s, want deny", v.Decision)
	}
	if want := `content matched redact pattern "key" across content parts`; !strings.HasPrefix(v.Message, want) {
		t.Errorf("message %q, want it to start %q", v.Message, want)
	}
}

// Invisible format characters and fullwidth forms inside a match do not
// hide it: a card with zero-width spaces renders as the number, and many
// tools strip them. A redaction masks the whole original span.
func TestContentSeesThroughInvisibleAndFullwidth(t *testing.T) {
	deny := build(t, KindContent, `{"packs":{"pii":"deny","secrets":"deny"},"deny":["(?i)\\bsecret\\b"]}`)
	for _, s := range []string{
		"card 4111\u200b1111\u200b1111\u200b1111",
		"sk-proj-ABCDEFGH\u200bIJKLMNOPQRSTUVWXYZ0123456789",
		"AKIA\u2060IOSFODNN7EXAMPLE",
		"\uff53\uff4b-proj-abcdefghijklmnopqrstuvwxyz0123456789",
		"card \uff14\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11",
		"the s\u00adecret plan",
	} {
		b, _ := json.Marshal(s)
		if v := run(t, deny, outputCtx(t, string(b))); v.Decision != points.DecisionDeny {
			t.Errorf("%q: %s %s, want deny", s, v.Decision, v.Reason)
		}
	}
	redact := build(t, KindContent, `{"packs":{"secrets":"redact"}}`)
	in, _ := json.Marshal("key sk-proj-ABCDEFGH\u200bIJKLMNOPQRSTUVWXYZ0123456789 end")
	v := run(t, redact, outputCtx(t, string(in)))
	if v.Decision != points.DecisionTransform {
		t.Fatalf("redact: %s", v.Decision)
	}
	got := gjson.GetBytes(v.Transform.Value, "content").Str
	if got == "" {
		got = gjson.ParseBytes(v.Transform.Value).Str
	}
	if strings.Contains(got, "ABCDEFGH") || strings.Contains(got, "IJKLMNOP") || !strings.Contains(got, "key ") || !strings.Contains(got, " end") {
		t.Fatalf("redacted %q (transform %s)", got, v.Transform.Value)
	}
	if v := run(t, deny, outputCtx(t, `"plain caf\u00e9 text, \u00a0no secrets"`)); v.Decision != points.DecisionAllow {
		t.Errorf("non-ASCII prose: %s %s", v.Decision, v.Reason)
	}
}

// An escalate pattern across parts is found in a run that also holds a
// redact match each part masks on its own.
func TestContentAcrossPartsEscalateBesideRedact(t *testing.T) {
	ic := build(t, KindContent, `{"escalate":[{"name":"wire","regex":"WIRE-TRANSFER"}],"redact":[{"name":"key","regex":"sk-[a-z]{8}"}]}`)
	v := run(t, ic, outputCtx(t, `[{"type":"text","text":"key sk-abcdefgh WIRE-"},{"type":"text","text":"TRANSFER now"}]`))
	if v.Decision != points.DecisionDeny || v.Approval == nil {
		t.Fatalf("decision %s (approval %v), want the escalation", v.Decision, v.Approval != nil)
	}
}

// A mask a pattern matches again is refused with what the user needs to
// fix it: the mask as rendered (the default one when none was written),
// the patterns by where they were written, and the way out.
func TestContentSelfMatchingMaskMessage(t *testing.T) {
	cases := []struct{ config, want string }{
		{`{"redact":["[A-Z]{6,}"]}`, `the default mask "[REDACTED:{name}]" renders as "[REDACTED:redact_0]" for pattern "redact_0" (redact[0]), which that same pattern matches again`},
		{`{"redact":["x"],"mask":"<x>"}`, `the mask renders as "<x>" for pattern "redact_0" (redact[0]), which that same pattern matches again`},
	}
	for _, c := range cases {
		_, err := kind(t, KindContent).New("b1", []byte(c.config), Env{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `such as "***"`) {
			t.Errorf("%s: %v; want it to say %s", c.config, err, c.want)
		}
	}
}

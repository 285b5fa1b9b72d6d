package interceptors

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// envelope is the required core of every test context.
const envelope = `{"spec":"agent-hooks/0.1","interception_point":"%s","timestamp":"2026-07-01T10:00:00.000Z","sequence":1,"agent":{"id":"agent-1","framework":"test"},"session":{"id":"sess-1"}}`

// mkCtx builds a valid context at p from its members (a JSON object text)
// and sets target to the aliased member.
func mkCtx(t testing.TB, p points.Point, members string) *points.Context {
	t.Helper()
	raw := []byte(strings.Replace(envelope, "%s", string(p), 1))
	var err error
	gjson.Parse(members).ForEach(func(k, v gjson.Result) bool {
		raw, err = sjson.SetRawBytes(raw, escapeKey(k.Str), []byte(v.Raw))
		return err == nil
	})
	if err != nil {
		t.Fatalf("building context: %v", err)
	}
	target := gjson.GetBytes(raw, p.Field())
	raw, err = sjson.SetRawBytes(raw, "target", []byte(target.Raw))
	if err != nil {
		t.Fatalf("setting target: %v", err)
	}
	c, err := points.ParseContext(raw)
	if err != nil {
		t.Fatalf("context invalid: %v\n%s", err, raw)
	}
	return c
}

func escapeKey(k string) string {
	r := strings.NewReplacer(".", `\.`, "*", `\*`, "?", `\?`)
	return r.Replace(k)
}

// Point helpers.
func preTool(t testing.TB, name, args string) *points.Context {
	return mkCtx(t, points.PreToolCall, `{"tool_call":{"id":"call-1","name":`+quoteJSON(name)+`,"args":`+args+`}}`)
}

func postTool(t testing.TB, name, args, value string) *points.Context {
	return mkCtx(t, points.PostToolCall, `{"tool_call":{"id":"call-1","name":`+quoteJSON(name)+`,"args":`+args+`},"tool_result":{"value":`+value+`,"is_error":false}}`)
}

func preModel(t testing.TB, model, messages string) *points.Context {
	return mkCtx(t, points.PreModelCall, `{"model":{"id":`+quoteJSON(model)+`},"messages":`+messages+`}`)
}

func postModel(t testing.TB, content, toolCalls string, extra string) *points.Context {
	m := `{"model":{"id":"gpt-4o"},"response":{"content":` + content + `,"tool_calls":` + toolCalls + `,"finish_reason":"stop"}`
	if extra != "" {
		m += "," + extra
	}
	return mkCtx(t, points.PostModelCall, m+"}")
}

func inputCtx(t testing.TB, content string) *points.Context {
	return mkCtx(t, points.Input, `{"input":{"content":`+content+`,"role":"user"}}`)
}

func outputCtx(t testing.TB, content string) *points.Context {
	return mkCtx(t, points.Output, `{"output":{"content":`+content+`}}`)
}

func startupCtx(t testing.TB, tools string) *points.Context {
	return mkCtx(t, points.AgentStartup, `{"agent_init":{"tools_registered":`+tools+`}}`)
}

func shutdownCtx(t testing.TB) *points.Context {
	return mkCtx(t, points.AgentShutdown, `{"summary":{"reason":"completed"}}`)
}

func quoteJSON(s string) string { return string(encodeString(s)) }

// kind returns the built-in kind named name.
func kind(t testing.TB, name string) Kind {
	t.Helper()
	for _, k := range Builtins() {
		if k.Name == name {
			return k
		}
	}
	t.Fatalf("no kind %s", name)
	return Kind{}
}

// build constructs an interceptor of kind name or fails the test.
func build(t testing.TB, name, config string) points.Interceptor {
	t.Helper()
	var cfg []byte
	if config != "" {
		cfg = []byte(config)
	}
	ic, err := kind(t, name).New("b1", cfg, Env{})
	if err != nil {
		t.Fatalf("%s config rejected: %v", name, err)
	}
	return ic
}

// run calls ic and fails on an error or a verdict the §5 gate rejects.
func run(t testing.TB, ic points.Interceptor, c *points.Context) points.Verdict {
	t.Helper()
	v, err := ic.Intercept(context.Background(), c)
	if err != nil {
		t.Fatalf("Intercept: %v", err)
	}
	if err := v.Validate(); err != nil {
		t.Fatalf("invalid verdict %+v: %v", v, err)
	}
	return v
}

// wantConfigError asserts err is a *ConfigError at path.
func wantConfigError(t testing.TB, err error, path string) {
	t.Helper()
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("want *ConfigError at %s, got %v", path, err)
	}
	if ce.Path != path {
		t.Fatalf("error path = %q, want %q (%v)", ce.Path, path, err)
	}
}

// verdictSummary is a compact description for table comparisons.
func verdictSummary(v points.Verdict) string {
	s := string(v.Decision)
	if v.Liftable() {
		s = "escalate"
	}
	if v.Decision == points.DecisionAllow && len(v.Warnings) > 0 {
		s = "warn"
	}
	if v.Reason != "" {
		s += " " + v.Reason
	} else if s == "warn" {
		s += " " + v.Warnings[0].Reason
	}
	return s
}

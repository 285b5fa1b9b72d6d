package interceptors

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

func TestRedactor(t *testing.T) {
	r, err := NewRedactor([]byte(`{"packs":{"secrets":"redact","pii":"deny"},"warn":[{"name":"codename","regex":"Project X"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	key := "ghp_" + strings.Repeat("k", 36)
	c := postTool(t, "lookup", `{"q":"bob@example.com"}`, `{"rows":[{"email":"jane@example.com","note":"Project X"},{"token":"`+key+`"}],"ok":true}`)
	out, err := r.Redact(context.Background(), c.Raw())
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, leak := range []string{"bob@example.com", "jane@example.com", key, "Project X"} {
		if strings.Contains(s, leak) {
			t.Errorf("redacted context still holds %q", leak)
		}
	}
	// The result is still a valid context with target mirrored.
	rc, err := points.ParseContext(out)
	if err != nil {
		t.Fatalf("redacted context invalid: %v\n%s", err, out)
	}
	if rc.Target().Raw != rc.Get("tool_result.value").Raw {
		t.Errorf("target and tool_result.value diverge")
	}
	var paths []string
	if err := json.Unmarshal([]byte(gjson.GetBytes(out, "extensions.hooksproxy.redacted").Raw), &paths); err != nil {
		t.Fatal(err)
	}
	want := []string{"$target.rows[0].email", "$target.rows[0].note", "$target.rows[1].token"}
	if strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Errorf("redacted paths = %v, want %v", paths, want)
	}
	for _, p := range paths {
		if _, err := points.ParseTargetPath(p); err != nil {
			t.Errorf("%s is not a §5.2 path: %v", p, err)
		}
	}
	if gjson.GetBytes(out, "tool_call.args.q").Str != "[REDACTED:email]" {
		t.Errorf("non-target member not masked: %s", out)
	}
	if gjson.GetBytes(out, "timestamp").Str != gjson.GetBytes(c.Raw(), "timestamp").Str {
		t.Errorf("envelope changed")
	}

	// Nothing to mask: the input comes back as is, no extension added.
	clean := inputCtx(t, `"hello"`)
	out, err = r.Redact(context.Background(), clean.Raw())
	if err != nil || string(out) != string(clean.Raw()) {
		t.Errorf("clean context changed: %v %s", err, out)
	}
	if _, err := r.Redact(context.Background(), []byte(`[1]`)); err == nil {
		t.Error("non-object accepted")
	}
	if _, err := NewRedactor([]byte(`{"packs":{"pii":"hide"}}`)); err == nil {
		t.Error("bad config accepted")
	}
}

// TestRedactorMergesExtension keeps paths a host already documented.
func TestRedactorMergesExtension(t *testing.T) {
	r, err := NewRedactor([]byte(`{"packs":{"pii":"redact"}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := mkCtx(t, points.Output, `{"output":{"content":"mail a@example.com"},"extensions":{"hooksproxy":{"redacted":["$target.x"],"other":1}}}`)
	out, err := r.Redact(context.Background(), c.Raw())
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(out, "extensions.hooksproxy.redacted").Raw; got != `["$target.x","$target.content"]` {
		t.Errorf("redacted = %s", got)
	}
	if gjson.GetBytes(out, "extensions.hooksproxy.other").Int() != 1 {
		t.Error("extension member lost")
	}
}

// TestRedactorInEmitter: the approval request carries the redacted context.
func TestRedactorInEmitter(t *testing.T) {
	r, err := NewRedactor([]byte(`{"packs":{"secrets":"redact"}}`))
	if err != nil {
		t.Fatal(err)
	}
	key := "sk-proj-" + strings.Repeat("Z", 30)
	var seen []byte
	res := points.ResolverFunc(func(_ context.Context, req points.ApprovalRequest) (points.ApprovalResolution, error) {
		seen = req.Context
		return points.ApprovalResolution{Outcome: points.OutcomeReject, ContextIdentity: req.ContextIdentity, Verdict: json.RawMessage(`{"decision":"deny"}`)}, nil
	})
	esc := build(t, KindTools, `{"escalate":["send"]}`)
	em, err := points.NewEmitter(points.Config{Bindings: []points.Binding{{Name: "t", Interceptor: esc}}, Resolver: res, Redactor: r})
	if err != nil {
		t.Fatal(err)
	}
	em.EmitContext(context.Background(), preTool(t, "send", `{"body":"`+key+`"}`).Raw())
	if seen == nil || strings.Contains(string(seen), key) {
		t.Fatalf("approver saw %s", seen)
	}
}

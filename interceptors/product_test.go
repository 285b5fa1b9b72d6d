package interceptors

import (
	"context"
	"strings"
	"testing"
)

// TestProductExamples loads the binding configs PRODUCT.md fixes, as the
// YAML loader hands them over (compact JSON), and checks what they do.
func TestProductExamples(t *testing.T) {
	keyRedaction := build(t, KindContent, `{"redact":["sk-proj-[A-Za-z0-9]{20,}"],"packs":{"secrets":"redact"}}`)
	key := "sk-proj-" + strings.Repeat("a1", 12)
	v := run(t, keyRedaction, postModel(t, quoteJSON("use "+key), `[]`, ""))
	if v.Transform == nil || v.Transform.Path != "$target.content" || string(v.Transform.Value) != `"use [REDACTED:redact_0]"` {
		t.Errorf("key-redaction: %+v", v)
	}

	secretEgress := build(t, KindContent, `{"deny":["(?i)\\bsecret\\b"],"reason":"secret_in_output"}`)
	if got := verdictSummary(run(t, secretEgress, outputCtx(t, `"the Secret is out"`))); got != "deny secret_in_output" {
		t.Errorf("secret-egress: %s", got)
	}
	if got := verdictSummary(run(t, secretEgress, outputCtx(t, `"secretive"`))); got != "allow" {
		t.Errorf("secret-egress word boundary: %s", got)
	}

	tools := build(t, KindTools, `{"deny":["delete_files","shell_*"],"escalate":["send_email"]}`)
	for name, want := range map[string]string{"delete_files": "deny tool_denied", "shell_run": "deny tool_denied", "send_email": "escalate tool_escalated", "search": "allow"} {
		if got := verdictSummary(run(t, tools, preTool(t, name, `{}`))); got != want {
			t.Errorf("tool-governance %s: %s, want %s", name, got, want)
		}
	}

	build(t, KindAllowAll, "")

	r, err := NewRedactor([]byte(`{"packs":{"secrets":"redact","pii":"redact"}}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Redact(context.Background(), preTool(t, "x", `{"k":"`+key+`","e":"a@b.io"}`).Raw())
	if err != nil || strings.Contains(string(out), key) || strings.Contains(string(out), "a@b.io") {
		t.Errorf("hide-secrets: %v %s", err, out)
	}
}

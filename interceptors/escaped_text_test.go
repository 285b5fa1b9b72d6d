package interceptors

import (
	"context"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Text that holds JSON with standard escapes (PHP's json_encode writes \/
// by default; \u0040 for @) is scanned as a decoder reads it: a secret or
// address so escaped was invisible to every pattern while the model, or
// the tool, read it plain. A masked string is written back in that form.
func TestEscapedJSONTextIsScanned(t *testing.T) {
	const hook = `https:\\/\\/hooks.slack.com\\/services\\/T01234567\\/B01234567\\/Ab3dEf6hIj9kLm2nOp5qRs8t`
	deny := build(t, KindContent, `{"packs":{"secrets":"deny","pii":"deny"},"reason":"secret_in_prompt"}`)
	for _, content := range []string{
		`{\"webhook\": \"` + hook + `\"}`,
		`{\"SecretAccessKey\": \"wJalrXUtnFEMI\\/K7MDENG+bPxRfiCYz3MQXV4QJ7\"}`,
		`{\"owner\": \"jane.doe\\u0040example.com\"}`,
		`{\"AccessKeyId\": \"\\u0041KIAZ3MQXV4QJ7P2LW5N\"}`,
	} {
		msgs := `[{"role":"user","content":"look it up"},{"role":"tool","tool_call_id":"c1","content":"` + content + `"}]`
		if got := verdictSummary(run(t, deny, preModel(t, "m", msgs))); got != "deny secret_in_prompt" {
			t.Errorf("%s: %s", content, got)
		}
	}
	redact := build(t, KindContent, `{"packs":{"secrets":"redact"}}`)
	c := outputCtx(t, `"{\"slack\": \"`+hook+`\", \"n\": \"a\\/b\"}"`)
	v, err := redact.Intercept(context.Background(), c)
	if err != nil || v.Transform == nil {
		t.Fatalf("%v %+v", err, v)
	}
	t.Logf("%s = %s", v.Transform.Path, v.Transform.Value)
	out := gjson.ParseBytes(v.Transform.Value).String()
	if strings.Contains(out, "hooks.slack.com") || !strings.Contains(out, "[REDACTED:") || !strings.Contains(out, `"n": "a/b"`) {
		t.Fatalf("written back %q", out)
	}
	if !gjson.Valid(out) {
		t.Fatalf("the JSON text is no longer JSON: %s", out)
	}
}

package interceptors

import (
	"context"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// TestContentNumbers: integers of 13-19 digits are judged by the card
// detector only; a redaction replaces the number with its mask, a string.
func TestContentNumbers(t *testing.T) {
	tests := []struct {
		name, config, result, want, after string
	}{
		{"redact a card in a row", `{"packs":{"pii":"redact"}}`, `{"rows":[{"email":"carol@example.com","card":4111111111111111}]}`,
			"transform content_redacted", `{"rows":[{"email":"[REDACTED:email]","card":"[REDACTED:card_number]"}]}`},
		{"redact a bare number", `{"packs":{"pii":"redact"}}`, `5555555555554444`, "transform content_redacted", `"[REDACTED:card_number]"`},
		{"redact in an array", `{"packs":{"pii":"redact"}}`, `[1, 4111111111111111, 2]`, "transform content_redacted", `[1, "[REDACTED:card_number]", 2]`},
		{"deny", `{"packs":{"pii":"deny"}}`, `{"card":4111111111111111}`, "deny content_denied", ""},
		{"escalate", `{"packs":{"pii":"escalate"}}`, `{"card":4111111111111111}`, "escalate content_escalated", ""},
		{"warn", `{"packs":{"pii":"warn"}}`, `{"card":4111111111111111}`, "warn content_warning", ""},
		{"Luhn fails", `{"packs":{"pii":"deny"}}`, `{"order":4111111111111112}`, "allow", ""},
		{"too short", `{"packs":{"pii":"deny"}}`, `{"ts":1751364000000}`, "allow", ""},
		{"a user regex does not see numbers", `{"deny":["4111"]}`, `{"card":4111111111111111}`, "allow", ""},
		{"the secrets pack does not see numbers", `{"packs":{"secrets":"deny"}}`, `{"card":4111111111111111}`, "allow", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ic := build(t, KindContent, tt.config)
			c := postTool(t, "db", `{}`, tt.result)
			v := run(t, ic, c)
			if got := verdictSummary(v); got != tt.want {
				t.Fatalf("verdict %s, want %s", got, tt.want)
			}
			if tt.after == "" {
				return
			}
			em, err := points.NewEmitter(points.Config{Bindings: []points.Binding{{Name: "c", Interceptor: ic}}})
			if err != nil {
				t.Fatal(err)
			}
			res := em.EmitContext(context.Background(), c.Raw())
			if !res.Record.Proceeds() {
				t.Fatalf("emission did not proceed: %+v", res.Record.Verdict)
			}
			if got := gjson.GetBytes(res.Context, "tool_result.value").Raw; got != tt.after {
				t.Errorf("tool_result.value = %s, want %s", got, tt.after)
			}
		})
	}
}

func TestRedactorNumbers(t *testing.T) {
	r, err := NewRedactor([]byte(`{"packs":{"pii":"redact"}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := postTool(t, "db", `{"id":4111111111111111}`, `{"card":5555555555554444}`)
	out, err := r.Redact(context.Background(), c.Raw())
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if strings.Contains(s, "4111111111111111") || strings.Contains(s, "5555555555554444") || !gjson.Valid(s) {
		t.Fatalf("redacted %s", s)
	}
	if got := gjson.Get(s, "extensions.hooksproxy.redacted").Raw; got != `["$target.card"]` {
		t.Errorf("redacted paths %s", got)
	}
}

package interceptors

import (
	"context"
	"testing"

	"github.com/tidwall/gjson"
)

// Addresses with letters of any script are masked whole, next to each
// other too; what is no address stays.
func TestEmailAnyScript(t *testing.T) {
	redact := build(t, KindContent, `{"packs":{"pii":"redact"}}`)
	for _, tt := range []struct{ in, want string }{
		{"mail zoë@example.com now", "mail [REDACTED:email] now"},
		{"müller@bücher.de", "[REDACTED:email]"},
		{"José.García@empresa.es, françois.dupont@example.fr", "[REDACTED:email], [REDACTED:email]"},
		{"a@x.com,b@y.org;c@z.net", "[REDACTED:email],[REDACTED:email];[REDACTED:email]"},
		{"o'brien@example.ie", "[REDACTED:email]"},
		{"'jane@x.com'", "'[REDACTED:email]'"},
		{"...jane@x.com.", "...[REDACTED:email]."},
		{"user@例え.jp", "[REDACTED:email]"},
		{"logo@2x.png and npm i pkg@1.2.3", "logo@2x.png and npm i pkg@1.2.3"},
	} {
		v, err := redact.Intercept(context.Background(), outputCtx(t, `"`+tt.in+`"`))
		if err != nil {
			t.Fatal(err)
		}
		got := tt.in
		if v.Transform != nil {
			got = gjson.ParseBytes(v.Transform.Value).Str
		}
		if got != tt.want {
			t.Errorf("%q: %q, want %q", tt.in, got, tt.want)
		}
	}
}

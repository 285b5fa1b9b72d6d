package interceptors

import (
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

const (
	awsSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	// stsToken has the shape of an STS session token (AWS's documentation
	// example).
	stsToken = "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="
	pemBody  = "MIIEpAIBAAKCAQEA75yQmHdl3eP5nIRN0eX7Jc5v9nLQ8wzYp7wOqA1bGZ1gJvYb\nb2cM3yXWm2kQ1rZ9dQ8pQm0sH1vR5tY6uI7oP8aS9dF0gH1jK2lZ3xC4vB5nM6qW\nIJKLMNOPop=="
)

// TestSecretsInText: AWS secrets and key tails written inside one string.
func TestSecretsInText(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"CLI JSON printed as text", `{"AccessKey": {"UserName": "bob", "AccessKeyId": "AKIAIOSFODNN7EXAMPLE", "Status": "Active", "SecretAccessKey": "` + awsSecret + `"}}`, "aws_secret_key"},
		{"SecretAccessKey alone", `"SecretAccessKey": "` + awsSecret + `"`, "aws_secret_key"},
		{"double-encoded JSON", `{\"SecretAccessKey\": \"` + awsSecret + `\"}`, "aws_secret_key"},
		{"snake case", "secret_access_key: " + awsSecret, "aws_secret_key"},
		{"kebab case", "secret-access-key=" + awsSecret, "aws_secret_key"},
		{"STS session token", `"SessionToken": "` + stsToken + `"`, "aws_session_token"},
		{"env session token", "AWS_SESSION_TOKEN=" + stsToken, "aws_session_token"},
		{"PEM tail without BEGIN", pemBody + "\n-----END RSA PRIVATE KEY-----", "private_key"},
		{"PEM tail, escaped newlines", strings.ReplaceAll(pemBody, "\n", `\n`) + `\n-----END PRIVATE KEY-----`, "private_key"},
		{"PEM tail, CRLF", strings.ReplaceAll(pemBody, "\n", "\r\n") + "\r\n-----END EC PRIVATE KEY-----", "private_key"},
		{"no secret: prose", "rotate the secret access key every 90 days", ""},
		{"no secret: short session token", `"SessionToken": "abc123"`, ""},
		{"no secret: 40 chars without a name", "secret " + awsSecret, ""},
		{"no secret: public key tail", pemBody + "\n-----END PUBLIC KEY-----", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := findNames(PackSecrets, tt.text)
			if tt.want == "" && len(got) > 0 || tt.want != "" && !slices.Contains(got, tt.want) {
				t.Errorf("found %v, want %q", got, tt.want)
			}
		})
	}
}

// TestSecretsByMemberName: a value is a secret by the name of its member
// when the walk gives the two as separate strings.
func TestSecretsByMemberName(t *testing.T) {
	tests := []struct{ member, value, want string }{
		{"SecretAccessKey", awsSecret, "aws_secret_key"},
		{"secretAccessKey", awsSecret, "aws_secret_key"},
		{"aws_secret_access_key", awsSecret, "aws_secret_key"},
		{"AWS-SECRET-ACCESS-KEY", " " + awsSecret + " ", "aws_secret_key"},
		{"secret_key", awsSecret, "aws_secret_key"},
		{"SessionToken", stsToken, "aws_session_token"},
		{"aws_session_token", stsToken, "aws_session_token"},
		{"SecurityToken", stsToken, "aws_session_token"},
		{"SecretAccessKey", "short", ""},
		{"SecretAccessKey", awsSecret + "X", ""},
		{"commit", awsSecret, ""},
		{"SessionToken", "abcdef0123456789", ""},
		{"session_token_ttl", stsToken, ""},
	}
	for _, tt := range tests {
		t.Run(tt.member+" "+tt.want, func(t *testing.T) {
			tx := newText(tt.value)
			tx.member = tt.member
			var got []string
			for _, p := range packPatterns(PackSecrets) {
				if p.found(tx) {
					got = appendUnique(got, p.name)
				}
			}
			if tt.want == "" && len(got) > 0 || tt.want != "" && (len(got) == 0 || got[0] != tt.want) {
				t.Errorf("found %v, want %q", got, tt.want)
			}
		})
	}
}

// TestContentAWSCredentialsJSON: the STS and IAM answers as tool results
// and as input, through the kind.
func TestContentAWSCredentialsJSON(t *testing.T) {
	sts := `{"Credentials":{"AccessKeyId":"ASIAY34FZKBOKMUTVV7A","SecretAccessKey":"` + awsSecret + `","SessionToken":"` + stsToken + `","Expiration":"2026-07-01T11:00:00Z"}}`
	iam := `{"AccessKey":{"UserName":"bob","AccessKeyId":"AKIAIOSFODNN7EXAMPLE","Status":"Active","SecretAccessKey":"` + awsSecret + `"}}`
	red := build(t, KindContent, `{"packs":{"secrets":"redact"}}`)
	for name, doc := range map[string]string{"sts": sts, "iam": iam} {
		t.Run(name, func(t *testing.T) {
			c := postTool(t, "aws", `{}`, doc)
			v := run(t, red, c)
			if v.Decision != points.DecisionTransform {
				t.Fatalf("verdict %+v", v)
			}
			out, err := points.ApplyTransform(c.TargetBytes(), v.Transform.Path, v.Transform.Value)
			if err != nil {
				t.Fatal(err)
			}
			s := string(out)
			if strings.Contains(s, awsSecret) || strings.Contains(s, stsToken[:40]) || strings.Contains(s, "AKIA") || strings.Contains(s, "ASIA") {
				t.Errorf("a credential survives: %s", s)
			}
			if !strings.Contains(s, "2026-07-01T11:00:00Z") && name == "sts" || !strings.Contains(s, `"Status":"Active"`) && name == "iam" {
				t.Errorf("other members changed: %s", s)
			}
		})
	}
	deny := build(t, KindContent, `{"packs":{"secrets":"deny"}}`)
	if got := verdictSummary(run(t, deny, inputCtx(t, quoteJSON(`"SecretAccessKey": "`+awsSecret+`"`)))); got != "deny content_denied" {
		t.Errorf("input: %s", got)
	}
	if got := verdictSummary(run(t, deny, preTool(t, "t", `{"secretAccessKey":"`+awsSecret+`"}`))); got != "deny content_denied" {
		t.Errorf("args: %s", got)
	}
}

// TestContentPEMTailAcrossStrings: a key split across two strings is
// masked in both.
func TestContentPEMTailAcrossStrings(t *testing.T) {
	ic := build(t, KindContent, `{"packs":{"secrets":"redact"}}`)
	head := "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA75yQmHdl3eP5nIRN0eX7Jc5v9nLQ8wzYp7wOqA1bGZ1gJvYb\nabc"
	tail := pemBody + "\n-----END RSA PRIVATE KEY-----"
	c := postTool(t, "read", `{}`, `{"pages":[`+quoteJSON(head)+`,`+quoteJSON(tail)+`]}`)
	v := run(t, ic, c)
	if v.Decision != points.DecisionTransform {
		t.Fatalf("verdict %+v", v)
	}
	out, _ := points.ApplyTransform(c.TargetBytes(), v.Transform.Path, v.Transform.Value)
	if got := gjson.GetBytes(out, "pages").Raw; got != `["[REDACTED:private_key]","[REDACTED:private_key]"]` {
		t.Errorf("pages = %s", got)
	}
}

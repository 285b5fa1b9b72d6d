package interceptors

import (
	"strings"
	"testing"
)

// findNames returns the names of the pack patterns with a match in s.
func findNames(pack, s string) []string {
	var out []string
	for _, p := range packPatterns(pack) {
		if p.found(newText(s)) {
			out = appendUnique(out, p.name)
		}
	}
	return out
}

func TestPackPositives(t *testing.T) {
	r := strings.Repeat
	tests := []struct {
		pack, name, text string
	}{
		{PackSecrets, "openai_key", "key=sk-" + r("A1b2", 12)},
		{PackSecrets, "openai_key", "OPENAI_API_KEY=sk-proj-" + r("Ab_-9", 20)},
		{PackSecrets, "openai_key", "sk-svcacct-" + r("x", 30)},
		{PackSecrets, "anthropic_key", "sk-ant-api03-" + r("Z9_-", 20)},
		{PackSecrets, "aws_access_key_id", "AKIAIOSFODNN7EXAMPLE"},
		{PackSecrets, "aws_access_key_id", "id: ASIAY34FZKBOKMUTVV7A,"},
		{PackSecrets, "aws_secret_key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		{PackSecrets, "aws_secret_key", `{"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}`},
		{PackSecrets, "github_token", "ghp_" + r("a", 36)},
		{PackSecrets, "github_token", "GITHUB_TOKEN_ghp_" + r("a", 36)},
		{PackSecrets, "github_token", "_ghp_" + r("a", 36) + "_"},
		{PackSecrets, "aws_access_key_id", "_AKIAIOSFODNN7EXAMPLE_"},
		{PackSecrets, "aws_access_key_id", "id=AKIAIOSFODNN7EXAMPLE_backup"},
		{PackSecrets, "openai_key", "sk-None-" + r("aB3", 16)},
		{PackSecrets, "openai_key", "MY_KEY_sk-proj-" + r("Ab_-9", 20)},
		{PackSecrets, "github_token", "token gho_" + r("B7", 18)},
		{PackSecrets, "github_token", "ghu_" + r("c", 36)},
		{PackSecrets, "github_token", "ghs_" + r("d", 36)},
		{PackSecrets, "github_token", "ghr_" + r("e", 36)},
		{PackSecrets, "github_token", "github_pat_11ABCDEFG0" + r("x", 12) + "_" + r("y", 59)},
		{PackSecrets, "slack_token", "xoxb-123456789012-1234567890123-AbCdEfGhIjKl"},
		{PackSecrets, "slack_token", "xoxp-1234567890-abc"},
		{PackSecrets, "slack_token", "xapp-1-A0123456789-1234567890123-abcdef0123456789"},
		{PackSecrets, "slack_webhook", "post to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX now"},
		{PackSecrets, "slack_webhook", "HTTP://HOOKS.SLACK.COM/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"},
		{PackSecrets, "slack_webhook", "url: hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"},
		{PackSecrets, "stripe_key", "STRIPE_KEY=sk_live_" + r("4eC39HqLyjWDarjtT1zdp7dc", 1)},
		{PackSecrets, "stripe_key", "rk_test_" + r("a1B2", 6)},
		{PackSecrets, "stripe_key", "whsec_" + r("Zx9", 10)},
		{PackSecrets, "gitlab_token", "token glpat-" + r("xY_-", 6)},
		{PackSecrets, "huggingface_token", "HF_TOKEN=hf_" + r("abCD", 9)},
		{PackSecrets, "npm_token", "//registry.npmjs.org/:_authToken=npm_" + r("a1", 18)},
		{PackSecrets, "google_api_key", "AIza" + r("SyA-_9", 6)[:35]},
		{PackSecrets, "jwt", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"},
		{PackSecrets, "private_key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"},
		{PackSecrets, "private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk"},
		{PackSecrets, "private_key", "-----BEGIN PRIVATE KEY-----"},
		{PackSecrets, "private_key", "-----BEGIN ENCRYPTED PRIVATE KEY-----\\nMIIFHz\\n-----END ENCRYPTED PRIVATE KEY-----"},

		{PackPII, "email", "write to jane.doe+tag@mail.example.co.uk today"},
		{PackPII, "phone", "call +14155552671"},
		{PackPII, "phone", "call +44 20 7946 0958"},
		{PackPII, "phone", "+49 (30) 1234567"},
		{PackPII, "phone", "(415) 555-2671"},
		{PackPII, "phone", "415-555-2671"},
		{PackPII, "phone", "call 1-415-555-2671"},
		{PackPII, "phone", "1 (415) 555-2671"},
		{PackPII, "phone", "1.415.555.2671"},
		{PackPII, "phone", "415.555.2671"},
		{PackPII, "phone", "020 7946 0958"},
		{PackPII, "phone", "06 12 34 56 78"},
		{PackPII, "card_number", "4111 1111 1111 1111"},
		{PackPII, "card_number", "card 4111-1111-1111-1111."},
		{PackPII, "card_number", "5500000000000004"},
		{PackPII, "card_number", "amex 378282246310005"},
		{PackPII, "iban", "DE89 3704 0044 0532 0130 00"},
		{PackPII, "iban", "GB82WEST12345698765432"},
		{PackPII, "iban", "pay to FR14 2004 1010 0505 0001 3M02 606 NOW"},
		{PackPII, "us_ssn", "ssn 123-45-6789"},
		{PackPII, "us_ssn", "ssn 123\u201345\u20136789"},
		{PackPII, "iban", "DE89\u00a03704\u00a00044\u00a00532\u00a00130\u00a000"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" "+tt.text, func(t *testing.T) {
			got := findNames(tt.pack, tt.text)
			found := false
			for _, n := range got {
				found = found || n == tt.name
			}
			if !found {
				t.Errorf("%s not found in %q (found %v)", tt.name, tt.text, got)
			}
		})
	}
}

// TestPackNegatives are near misses: none may match anything in its pack.
func TestPackNegatives(t *testing.T) {
	r := strings.Repeat
	tests := []struct {
		pack, why, text string
	}{
		{PackSecrets, "sk- inside a word", "task-" + r("a", 30)},
		{PackSecrets, "sk- too short", "sk-abc123"},
		{PackSecrets, "AKIA too short", "AKIAIOSFODNN7EXA"},
		{PackSecrets, "AKIA lowercase", "akiaiosfodnn7example"},
		{PackSecrets, "AKIA inside a longer word", "XAKIAIOSFODNN7EXAMPLEX"},
		{PackSecrets, "40 chars without aws context", "secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		{PackSecrets, "ghp_ too short", "ghp_" + r("a", 20)},
		{PackSecrets, "ghx_ not a prefix", "ghx_" + r("a", 36)},
		{PackSecrets, "xoxz not slack", "xoxz-1234567890-abc"},
		{PackSecrets, "AIza too short", "AIza" + r("b", 20)},
		{PackSecrets, "one eyJ segment", "eyJhbGciOiJIUzI1NiJ9"},
		{PackSecrets, "public key block", "-----BEGIN PUBLIC KEY-----\nMIIBIjANBg\n-----END PUBLIC KEY-----"},
		{PackSecrets, "certificate", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"},

		{PackPII, "no TLD", "user@localhost"},
		{PackPII, "one-letter TLD", "a@b.c"},
		{PackPII, "plain long number", "order 12345678901234567890"},
		{PackPII, "plain 10 digits", "id 4155552671"},
		{PackPII, "plain 11 digits", "ref 14155552671"},
		{PackPII, "Luhn-invalid card", "4111 1111 1111 1112"},
		{PackPII, "Luhn-invalid card compact", "4111111111111112"},
		{PackPII, "repeated digit passes Luhn", "0000 0000 0000 0000"},
		{PackPII, "card too short", "4111 1111 111"},
		{PackPII, "bad IBAN checksum", "DE89 3704 0044 0532 0130 01"},
		{PackPII, "bad IBAN compact", "GB82WEST12345698765433"},
		{PackPII, "SSN area 000", "000-12-3456"},
		{PackPII, "SSN area 666", "666-12-3456"},
		{PackPII, "SSN area 9xx", "923-45-6789"},
		{PackPII, "SSN group 00", "123-00-6789"},
		{PackPII, "SSN serial 0000", "123-45-0000"},
		{PackPII, "SSN without dashes", "123456789"},
		{PackPII, "ISO date", "2024-01-15"},
		{PackPII, "dd-mm-yyyy date", "05-12-2024"},
		{PackPII, "version", "v1.22.3"},
		{PackPII, "ip address", "10.0.0.1"},
		{PackPII, "plus with too few digits", "+1234"},
		{PackPII, "plus with too many digits", "+1234567890123456789"},
	}
	for _, tt := range tests {
		t.Run(tt.why, func(t *testing.T) {
			if got := findNames(tt.pack, tt.text); len(got) > 0 {
				t.Errorf("%q matched %v", tt.text, got)
			}
		})
	}
}

func TestChecksums(t *testing.T) {
	if !luhn("79927398713") || luhn("79927398710") {
		t.Error("luhn")
	}
	for _, ok := range []string{"DE89370400440532013000", "GB82WEST12345698765432", "NL91ABNA0417164300"} {
		if !ibanMod97(ok) {
			t.Errorf("%s should pass mod-97", ok)
		}
	}
	for _, bad := range []string{"DE89370400440532013001", "NL91ABNA041716430", "de89370400440532013000", "DE8937"} {
		if ibanMod97(bad) {
			t.Errorf("%s should fail mod-97", bad)
		}
	}
}

// TestPackRedactsWholeToken: a token is masked whole even where a PII
// pattern also matches part of it.
func TestPackRedactsWholeToken(t *testing.T) {
	var pats []pattern
	for _, p := range packNames() {
		pats = append(pats, packPatterns(p)...)
	}
	ms := maskSet{patterns: pats, mask: DefaultMask}
	tok := "xoxb-4111111111111111-" + strings.Repeat("Ab", 8)
	out, names, changed := ms.apply(newText("token " + tok + " end"))
	if !changed || out != "token [REDACTED:slack_token] end" {
		t.Errorf("apply = %q %v", out, names)
	}
	if err := ms.checkMasks("config.mask"); err != nil {
		t.Errorf("default masks: %v", err)
	}
}

// A token bounded by an underscore (an env name, Markdown italics) is
// masked alone: the underscore and what follows stay.
func TestPackRedactsTokenTouchingUnderscore(t *testing.T) {
	ms := maskSet{patterns: packPatterns(PackSecrets), mask: DefaultMask}
	for in, want := range map[string]string{
		"GITHUB_TOKEN_ghp_" + strings.Repeat("a", 36) + " end": "GITHUB_TOKEN_[REDACTED:github_token] end",
		"_AKIAIOSFODNN7EXAMPLE_":                               "_[REDACTED:aws_access_key_id]_",
		"key sk-None-" + strings.Repeat("aB3", 16):             "key [REDACTED:openai_key]",
	} {
		if out, _, _ := ms.apply(newText(in)); out != want {
			t.Errorf("apply(%q) = %q, want %q", in, out, want)
		}
	}
}

// A truncated private key is masked to the end of its string: armor
// headers, a truncation marker and the base64 after them are key.
func TestPackRedactsTruncatedKeyWithHeaders(t *testing.T) {
	ms := maskSet{patterns: packPatterns(PackSecrets), mask: DefaultMask}
	for _, in := range []string{
		"key:\n-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0A1B2C3D\n\nMIIEpAIBAAKCAQEAsecretbase64line\nMoreBase64Material",
		"-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\nlQOYBFsecretbase64line",
		"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANsecret\n...(truncated)...\nTailBase64Material",
	} {
		out, _, _ := ms.apply(newText(in))
		for _, leak := range []string{"secretbase64line", "MoreBase64Material", "TailBase64Material", "ENCRYPTED", "GnuPG"} {
			if strings.Contains(out, leak) {
				t.Errorf("apply(%q) = %q leaves %q", in, out, leak)
			}
		}
	}
}

// Uppercase GUIDs and dash-grouped keys are not IBANs, however many of
// them pass mod-97 by chance, and a constant name is not an AWS key ID.
func TestIBANNotGUIDs(t *testing.T) {
	for _, s := range []string{"AB12-3DEF-4567-89AB-CDEF01234567", "DE89-3704-0044-0532-0130-00", "REGION_ASIAPACIFICSINGAPORE_URL"} {
		if names := append(findNames(PackPII, s), findNames(PackSecrets, s)...); len(names) != 0 {
			t.Errorf("%q: %v", s, names)
		}
	}
}

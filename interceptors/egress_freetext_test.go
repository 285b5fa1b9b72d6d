package interceptors

import "testing"

// A free-text argument that starts with a URL and later (no / ? # in
// between) mentions an e-mail address is read as one URL whose userinfo
// runs up to the '@': the address's domain becomes "the host", and an
// allowlist denies a plain message.
func TestWholeHostFreeTextFalsePositive(t *testing.T) {
	al := build(t, KindTools, `{"egress":{"allow_domains":["github.com"]}}`)
	egressVerdict(t, al, `{"text":"https://github.com is down again, cc bob@company.org"}`, "allow")
	egressVerdict(t, al, `{"text":"see https://github.com is down again, cc bob@company.org"}`, "allow")
}

// What the free-text reading was for: a value that is one URL with a
// space in its authority, under a member not named as a destination.
func TestWholeHostFreeTextSpaceAuthority(t *testing.T) {
	al := build(t, KindTools, `{"egress":{"allow_domains":["allowed.com"]}}`)
	egressVerdict(t, al, `{"q":"https://allowed.com @evil.com/x"}`, "deny egress_denied")
	egressVerdict(t, al, `{"q":"https://allowed.com\f@evil.com/x"}`, "deny egress_denied")
}

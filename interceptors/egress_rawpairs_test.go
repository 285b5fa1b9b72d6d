package interceptors

import (
	"encoding/json"
	"testing"
)

func rawArgs(s string) string {
	b, _ := json.Marshal(map[string]string{"raw_arguments": s})
	return string(b)
}

// Ordinary non-JSON arguments whose prose (or a quoted value) holds
// "host: ...", "domain: ...", "url=..." that no lenient parser reads as a
// member are not destinations: under an allowlist they must be allowed.
func TestEgressRawPairs(t *testing.T) {
	al := build(t, KindTools, `{"egress":{"allow_domains":["allowed.com"]}}`)
	for _, s := range []string{
		// single-quoted dicts (Python repr), the value is prose
		`{'title': 'Team dinner', 'notes': 'host: Alice, bring wine'}`,
		`{'query': 'who was the host: of the 2024 Olympics'}`,
		`{'text': 'Our domain: healthcare. See the docs e.g. the FAQ'}`,
		// truncated JSON whose string value is prose
		`{"body": "Meeting notes. Host: Alice. Domain: sales`,
		// free prose
		`Summarise the thread. Domain: finance`,
	} {
		egressVerdict(t, al, rawArgs(s), "allow")
	}
	// What a lenient parser does read as members stays judged.
	for _, s := range []string{
		`{'url': 'evil.com/x'}`,
		`{url: "//evil.com/x"}`,
		`host=evil.com`,
		`{'a': 1, 'host': 'evil.com'}`,
		`{"url": "evil.com/x", "note": "cut sho`,
		"url: evil.com\nnote: x",
		`{'base_url' : 'evil.com'}`,
		`dict(url="evil.com")`,
		`fetch --url=evil.com`,
		`method=GET host=evil.com`,
		`q=1&host=evil.com`,
		// key=value after a blank is still read (logfmt, CLI flags), so
		// prose with code in it stays judged: a residual false positive.
		`{'message': 'set host=db01 in the config and restart'}`,
	} {
		egressVerdict(t, al, rawArgs(s), "deny egress_denied")
	}
}

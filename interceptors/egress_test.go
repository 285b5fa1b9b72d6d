package interceptors

import (
	"testing"
)

// TestEgressSchemeless: destinations without a scheme, as fetch tools
// accept them, in URL- and host-named arguments; www. names anywhere.
func TestEgressSchemeless(t *testing.T) {
	ic := build(t, KindTools, `{"egress":{"allow_domains":["api.github.com",".example.com"],"deny_domains":["evil.example.com"]}}`)
	tests := []struct{ name, args, want string }{
		{"url without scheme", `{"url":"evil.com/x"}`, "deny egress_denied"},
		{"protocol-relative url", `{"url":"//evil.com/x"}`, "deny egress_denied"},
		{"www host", `{"url":"www.evil.com"}`, "deny egress_denied"},
		{"host member", `{"host":"evil.com","path":"/x"}`, "deny egress_denied"},
		{"host with port", `{"Host":"evil.com:8443"}`, "deny egress_denied"},
		{"single-label host", `{"hostname":"intranet"}`, "deny egress_denied"},
		{"domain member", `{"domain":"evil.com"}`, "deny egress_denied"},
		{"endpoint member", `{"api_endpoint":"evil.com:443/v1"}`, "deny egress_denied"},
		{"camelCase url", `{"targetUrl":"evil.com/x"}`, "deny egress_denied"},
		{"upper-case URL suffix", `{"webhookURL":"evil.com/hook"}`, "deny egress_denied"},
		{"snake case url", `{"BASE_URL":"evil.com"}`, "deny egress_denied"},
		{"list of urls", `{"urls":["api.github.com/repos","evil.com/x"]}`, "deny egress_denied"},
		{"nested href", `{"links":[{"href":"evil.com"}]}`, "deny egress_denied"},
		{"userinfo trick without scheme", `{"url":"api.github.com@evil.com/x"}`, "deny egress_denied"},
		{"deny list applies", `{"url":"evil.example.com/x"}`, "deny egress_denied"},
		{"www in prose", `{"q":"look at www.evil.com/page please"}`, "deny egress_denied"},
		{"unparseable port", `{"url":"evil.com:abc/x"}`, "deny egress_denied"},

		{"allowed without scheme", `{"url":"api.github.com/repos/x"}`, "allow"},
		{"allowed subdomain", `{"host":"docs.example.com"}`, "allow"},
		{"allowed www", `{"q":"see www.example.com"}`, "allow"},
		{"relative path", `{"url":"/v1/items"}`, "allow"},
		{"fragment", `{"link":"#top"}`, "allow"},
		{"a word under a link name", `{"link":"next"}`, "allow"},
		{"prose under a url name", `{"url":"not known yet"}`, "allow"},
		{"host-ish word elsewhere", `{"q":"evil.com is a site"}`, "allow"},
		{"ghost is no host", `{"ghost":"evil.com"}`, "allow"},
		{"curly is no url", `{"curl":"evil.com"}`, "allow"},
		{"member name text", `{"evil.com":"x"}`, "allow"},
		{"empty", `{"url":""}`, "allow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := run(t, ic, preTool(t, "fetch", tt.args))
			if got := verdictSummary(v); got != tt.want {
				t.Errorf("verdict = %q (%s), want %q", got, v.Message, tt.want)
			}
		})
	}
}

func TestEgressMember(t *testing.T) {
	tests := []struct {
		name string
		want int
	}{
		{"url", egressURL}, {"URL", egressURL}, {"uri", egressURL}, {"href", egressURL}, {"link", egressURL},
		{"endpoint", egressURL}, {"base_url", egressURL}, {"image-url", egressURL}, {"webhookURL", egressURL},
		{"redirectUri", egressURL}, {"urls", egressURL}, {"host", egressHost}, {"Hostname", egressHost},
		{"hosts", egressHost}, {"domain", egressHost}, {"target.host", egressHost},
		{"ghost", egressNone}, {"curl", egressNone}, {"hurl", egressNone}, {"description", egressNone}, {"", egressNone}, {"s", egressNone},
	}
	for _, tt := range tests {
		if got := egressMember([]seg{{key: tt.name}}); got != tt.want {
			t.Errorf("egressMember(%q) = %d, want %d", tt.name, got, tt.want)
		}
	}
	if got := egressMember([]seg{{key: "urls"}, {index: 0, isIdx: true}}); got != egressURL {
		t.Errorf("array element under urls: %d", got)
	}
}

package interceptors

import (
	"strings"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

func TestTools(t *testing.T) {
	const cfg = `{
	  "allow": ["read_*", "fetch", "write_file", "github/*"],
	  "deny": ["delete_files", "shell_*"],
	  "escalate": ["send_email", "write_file"],
	  "args": [
	    {"tool": "write_file", "path": "path", "regex": "^/workspace/", "required": true},
	    {"tool": "read_*", "path": "path", "not_regex": "\\.\\.", "reason": "path_traversal"},
	    {"tool": "fetch", "path": "headers.#.name", "not_regex": "(?i)^cookie$"}
	  ],
	  "egress": {"allow_domains": ["api.example.com", "*.docs.example.com", ".corp.example"], "deny_domains": ["evil.corp.example"]}
	}`
	ic := build(t, KindTools, cfg)
	tests := []struct {
		name string
		ctx  *points.Context
		want string
	}{
		{"allowed", preTool(t, "read_file", `{"path":"/workspace/a"}`), "allow"},
		{"deny glob", preTool(t, "shell_exec", `{}`), "deny tool_denied"},
		{"deny beats allow", preTool(t, "delete_files", `{}`), "deny tool_denied"},
		{"not allowed", preTool(t, "format_disk", `{}`), "deny tool_not_allowed"},
		{"escalate-only name counts as allowed", preTool(t, "send_email", `{"to":"x"}`), "escalate tool_escalated"},
		{"star crosses slash", preTool(t, "github/create_issue", `{}`), "allow"},
		{"args regex ok then escalate", preTool(t, "write_file", `{"path":"/workspace/x"}`), "escalate tool_escalated"},
		{"args violation beats escalate", preTool(t, "write_file", `{"path":"/etc/passwd"}`), "deny tool_args_violation"},
		{"required arg missing", preTool(t, "write_file", `{}`), "deny tool_args_violation"},
		{"not_regex with rule reason", preTool(t, "read_file", `{"path":"../../etc"}`), "deny path_traversal"},
		{"optional arg absent", preTool(t, "read_file", `{}`), "allow"},
		{"multi-valued path", preTool(t, "fetch", `{"headers":[{"name":"Accept"},{"name":"Cookie"}]}`), "deny tool_args_violation"},
		{"egress allowed exact", preTool(t, "fetch", `{"url":"https://api.example.com/v1"}`), "allow"},
		{"egress allowed subdomain", preTool(t, "fetch", `{"url":"https://a.docs.example.com/x"}`), "allow"},
		{"egress *. excludes apex", preTool(t, "fetch", `{"url":"https://docs.example.com/x"}`), "deny egress_denied"},
		{"egress . includes apex", preTool(t, "fetch", `{"url":"http://corp.example/"}`), "allow"},
		{"egress . includes sub", preTool(t, "fetch", `{"url":"http://x.corp.example/"}`), "allow"},
		{"egress deny wins", preTool(t, "fetch", `{"url":"http://evil.corp.example/"}`), "deny egress_denied"},
		{"egress not allowed", preTool(t, "fetch", `{"url":"https://evil.com/"}`), "deny egress_denied"},
		{"egress suffix trick", preTool(t, "fetch", `{"url":"https://evilapi.example.com/"}`), "deny egress_denied"},
		{"egress userinfo trick", preTool(t, "fetch", `{"url":"https://api.example.com@evil.com/"}`), "deny egress_denied"},
		{"egress url inside text", preTool(t, "fetch", `{"q":["see (https://evil.com/x), ok"]}`), "deny egress_denied"},
		{"egress trailing punctuation", preTool(t, "fetch", `{"q":"see https://api.example.com."}`), "allow"},
		{"egress case and trailing dot", preTool(t, "fetch", `{"url":"HTTPS://API.EXAMPLE.COM./"}`), "allow"},
		{"egress unparseable", preTool(t, "fetch", `{"url":"http://[::1"}`), "deny egress_denied"},
		{"egress file url has no host", preTool(t, "fetch", `{"url":"file:///etc/hosts"}`), "allow"},
		{"egress checks member names too", preTool(t, "fetch", `{"https://evil.com":"x"}`), "deny egress_denied"},
		{"other points allow", outputCtx(t, `"shell_exec"`), "allow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := run(t, ic, tt.ctx)
			if got := verdictSummary(v); got != tt.want {
				t.Errorf("verdict = %q (%s), want %q", got, v.Message, tt.want)
			}
			if strings.Contains(v.Message, "evil") || strings.Contains(v.Message, "/etc") {
				t.Errorf("message carries payload: %q", v.Message)
			}
		})
	}
}

// TestToolsPostModelCall checks every requested call before release; the
// most severe finding wins and names the call by index.
func TestToolsPostModelCall(t *testing.T) {
	ic := build(t, KindTools, `{"deny":["shell_*"],"escalate":["send_email"],"egress":{"allow_domains":["ok.com"]}}`)
	tests := []struct {
		name, calls, want, msg string
	}{
		{"none", `[]`, "allow", ""},
		{"fine", `[{"id":"a","name":"fetch","args":{"u":"https://ok.com"}}]`, "allow", ""},
		{"escalate then deny", `[{"id":"a","name":"send_email","args":{}},{"id":"b","name":"shell_rm","args":{}}]`, "deny tool_denied", "response.tool_calls[1]"},
		{"egress beats escalate", `[{"id":"a","name":"send_email","args":{}},{"id":"b","name":"x","args":{"u":"https://no.com"}}]`, "deny egress_denied", "response.tool_calls[1]"},
		{"escalate", `[{"name":"x","args":{}},{"name":"send_email","args":{}}]`, "escalate tool_escalated", "response.tool_calls[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := run(t, ic, postModel(t, `null`, tt.calls, ""))
			if got := verdictSummary(v); got != tt.want || !strings.Contains(v.Message, tt.msg) {
				t.Errorf("verdict = %q %q, want %q %q", got, v.Message, tt.want, tt.msg)
			}
		})
	}
}

func TestToolsReasonsAndMessages(t *testing.T) {
	ic := build(t, KindTools, `{"deny":["a"],"escalate":["b"],"reason":"blocked","reasons":{"escalate":"ask_first"},"messages":{"deny":"not a"}}`)
	if v := run(t, ic, preTool(t, "a", `{}`)); v.Reason != "blocked" || v.Message != "not a" {
		t.Errorf("deny: %+v", v)
	}
	if v := run(t, ic, preTool(t, "b", `{}`)); v.Reason != "ask_first" || !v.Liftable() || !strings.Contains(v.Message, `escalate[0] "b"`) {
		t.Errorf("escalate: %+v", v)
	}
}

func TestToolsEmptyAllowDomains(t *testing.T) {
	ic := build(t, KindTools, `{"egress":{"allow_domains":[]}}`)
	if got := verdictSummary(run(t, ic, preTool(t, "f", `{"u":"https://any.com"}`))); got != "deny egress_denied" {
		t.Errorf("got %q", got)
	}
	if got := verdictSummary(run(t, ic, preTool(t, "f", `{"u":"no url"}`))); got != "allow" {
		t.Errorf("got %q", got)
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"shell_*", "shell_exec", true},
		{"shell_*", "myshell_exec", false},
		{"*", "a/b", true},
		{"gpt-4?", "gpt-4o", true},
		{"gpt-4?", "gpt-4", false},
		{"[a-c]x", "bx", true},
		{"[^a-c]x", "bx", false},
		{"[^a-c]x", "dx", true},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{"a.b", "aXb", false},
		{"a+b", "a+b", true},
		{"é*", "étoile", true},
	}
	for _, tt := range tests {
		g, err := compileGlob("p", tt.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tt.pattern, err)
		}
		if got := g.match(tt.name); got != tt.want {
			t.Errorf("%q ~ %q = %v", tt.pattern, tt.name, got)
		}
	}
}

// Hosts are compared in the spelling a client connects to: WHATWG URL
// parsing for special schemes (any slashes or backslashes after the
// scheme, a backslash as a slash) and, where a backslash makes them
// differ, RFC 3986's (curl's: the host after the last @), IDNA mapping,
// and every way of writing an IP address.
func TestEgressCanonicalHosts(t *testing.T) {
	deny := build(t, KindTools, `{"egress":{"deny_domains":["evil.example","169.254.169.254"]}}`)
	allow := build(t, KindTools, `{"egress":{"allow_domains":["docs.python.org"]}}`)
	for _, tc := range []struct {
		name, args string
	}{
		{"one slash", `{"url":"https:/evil.example/x"}`},
		{"no slash", `{"q":"see https:evil.example/x"}`},
		{"backslashes", `{"url":"https:\\\\evil.example/x"}`},
		{"backslash before userinfo", `{"url":"https://evil.example\\@docs.python.org/x"}`},
		{"allowed host backslash at evil", `{"url":"https://docs.python.org\\@evil.example/x"}`},
		{"allowed host backslash colon at evil", `{"url":"https://docs.python.org\\:x@evil.example/"}`},
		{"curl command", `{"cmd":"curl https://docs.python.org\\@evil.example/x"}`},
		{"slash backslash then at", `{"url":"https:/\\docs.python.org\\@evil.example/x"}`},
		{"one slash then at", `{"url":"https:/docs.python.org\\@evil.example/x"}`},
		{"three slashes then at", `{"url":"https:///docs.python.org\\@evil.example/x"}`},
		{"curl backslashes then at", `{"cmd":"curl https:\\\\docs.python.org\\@evil.example/x"}`},
		{"curl no slash then at", `{"cmd":"curl https:docs.python.org\\@evil.example/x"}`},
		{"curl www then at", `{"cmd":"curl www.docs.python.org\\@evil.example/x"}`},
		{"newline joins the host (allow list)", `{"url":"https://docs.python.org\n.evil.example/x"}`},
		{"tab splits a denied host", `{"url":"https://evil.ex\tample/x"}`},
		{"schemeless newline joins the host (allow list)", `{"url":"docs.python.org\n.evil.example/x"}`},
		{"newline joins the host, space in the query (allow list)", `{"url":"https://docs.python.org\n.evil.example/x?q=a b"}`},
		{"newline joins the host, space in the fragment (allow list)", `{"url":"https://docs.python.org\n.evil.example/#a b"}`},
		{"schemeless newline joins, space after (allow list)", `{"url":"docs.python.org\n.evil.example/x?q=a b"}`},
		{"a second line that is another host (allow list)", `{"url":"docs.python.org\nevil.example"}`},
		{"break after the scheme (allow list)", `{"target":"https:\n//evil.example/x"}`},
		{"break after the slashes (allow list)", `{"target":"https://\nevil.example/x"}`},
		{"break after userinfo (allow list)", `{"target":"https://docs.python.org@\nevil.example/x"}`},
		{"break after a dot (allow list)", `{"target":"https://docs.python.org.\nevil.example/x"}`},
		{"break before a backslash at (allow list)", `{"target":"https://docs.python.org\n\\@evil.example/x"}`},
		{"break before an at (allow list)", `{"target":"https://docs.python.org\n@evil.example/x"}`},
		{"userinfo across a bullet (allow list)", `{"url":"https://docs.python.org\n- @evil.example/x"}`},
		{"userinfo across an ellipsis (allow list)", `{"q":"https://docs.python.org\n..@evil.example/x"}`},
		{"next line starts with a space (allow list)", `{"q":"https://docs.python.org\n @evil.example/x"}`},
		{"leading form feed (allow list)", `{"q":"\fhttps://docs.python.org\n@evil.example/x"}`},
		{"leading vertical tab, break after scheme (allow list)", `{"q":"\u000bhttps:\n//evil.example/x"}`},
		{"double dot continuation (allow list)", `{"url":"https://docs.python.org\n..evil.example"}`},
		// Fails closed: a value that starts with a URL and goes on with a
		// word on the next line is one host to a URL parser given it whole.
		{"a word after a link in a value that starts with it (allow list)", `{"body":"https://docs.python.org\nThanks"}`},
		{"ideographic full stop", `{"url":"https://evil\u3002example/x"}`},
		{"fullwidth letter", `{"url":"https://\uff45vil.example/x"}`},
		{"fullwidth trailing stop", `{"url":"https://evil.example\uff0e/x"}`},
		{"decimal ip", `{"url":"http://2852039166/"}`},
		{"hex ip", `{"url":"http://0xa9fea9fe/"}`},
		{"short ip", `{"url":"http://169.254.43518/"}`},
		{"octal ip", `{"url":"http://0251.0376.0251.0376/"}`},
		{"mapped ipv6", `{"url":"http://[::ffff:169.254.169.254]/"}`},
		{"mapped ipv6 hex", `{"url":"http://[::ffff:a9fe:a9fe]/"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Contains(tc.name, "ip") {
				if got := verdictSummary(run(t, deny, preTool(t, "fetch", tc.args))); got != "deny egress_denied" {
					t.Errorf("deny list: %s", got)
				}
				return
			}
			if got := verdictSummary(run(t, deny, preTool(t, "fetch", tc.args))); got != "deny egress_denied" && !strings.HasSuffix(tc.name, "(allow list)") {
				t.Errorf("deny list: %s", got)
			}
			if got := verdictSummary(run(t, allow, preTool(t, "fetch", tc.args))); got != "deny egress_denied" {
				t.Errorf("allow list: %s", got)
			}
		})
	}
	for _, ok := range []string{`{"url":"https://docs.python.org/3/"}`, `{"url":"https://DOCS.python.org./x"}`, `{"q":"time 12:30, note:x"}`,
		// A backslash that names no other host (an escape in code text)
		// is no reason to deny: only the WHATWG reading has a host there.
		`{"code":"print('https://docs.python.org\\n')"}`, `{"code":"printf(\"fetching https://docs.python.org\\n\");"}`,
		`{"cmd":"echo -e \"https://docs.python.org\\tok\""}`, `{"url":"https://docs.python.org\\3\\"}`,
		`{"url":"https://user@docs.python.org\\x"}`,
		// Lines of prose are not joined into hosts under an allowlist.
		`{"body":"Docs: https://docs.python.org\nThanks,\nAnn"}`, `{"path":"notes.md\nREADME"}`,
		`{"url":"https://docs.python.org\nhttps://docs.python.org/3/"}`, `{"hosts":"docs.python.org\ndocs.python.org"}`,
		"{\"rows\":\"name\\turl\\nPython\\thttps://docs.python.org\\n\"}",
		`{"body":"- https://docs.python.org\n- https://docs.python.org/3/"}`, `{"body":"https://docs.python.org\n-- \nAnn"}`,
		`{"body":"https://docs.python.org\n...and more"}`} {
		if got := verdictSummary(run(t, allow, preTool(t, "fetch", ok))); got != "allow" {
			t.Errorf("%s: %s", ok, got)
		}
	}
}

package interceptors

// Bypasses found by a security review of the tools egress checks and the
// content kind's folding, and the name and address shapes that go with
// them. Each of the first four failed before its fix.

import (
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

func egressVerdict(t *testing.T, ic points.Interceptor, args, want string) {
	t.Helper()
	v := run(t, ic, preTool(t, "fetch", args))
	if got := verdictSummary(v); got != want {
		t.Errorf("%s: verdict %q, want %q", args, got, want)
	}
}

// TestEgressURLCutAtQuoteOrSpace: the URL finder stops at ' " ` < >
// and whitespace, but Node's URL/fetch, Python's urllib/urllib3/requests,
// Go's net/url (for ') and curl read what follows as part of the
// authority: userinfo before an @, or more host labels after a shell join.
// README: "Tricks such as https://allowed.com@evil.com ... are seen through".
func TestEgressURLCutAtQuoteOrSpace(t *testing.T) {
	al := build(t, KindTools, `{"egress":{"allow_domains":["allowed.com"]}}`)
	dn := build(t, KindTools, `{"egress":{"deny_domains":[".evil.com"]}}`)
	for _, args := range []string{
		`{"url":"https://allowed.com'@evil.com/x"}`, // new URL(): host evil.com, user "allowed.com'"; Go url.Parse and urllib3 too
		`{"url":"https://allowed.com\"@evil.com/x"}`,
		"{\"url\":\"https://allowed.com`@evil.com/x\"}",
		`{"url":"https://allowed.com<@evil.com/x"}`,
		`{"url":"https://allowed.com @evil.com/x"}`,  // new URL(), urllib.parse: host evil.com
		`{"url":"https://allowed.com\f@evil.com/x"}`, // form feed: same
		`{"q":"see https://allowed.com'@evil.com/x"}`,
		// A shell tool: the shell joins the quoted pieces into one word.
		`{"command":"curl -s 'https://allowed.com'@evil.com/x"}`,
		`{"command":"curl -s 'https://allowed.com'.evil.com/x"}`,
		`{"command":"curl -s \"https://allowed.com\".evil.com/x"}`,
	} {
		egressVerdict(t, al, args, "deny egress_denied")
		egressVerdict(t, dn, args, "deny egress_denied")
	}
	// Must stay allowed (no false positives from the fix).
	for _, args := range []string{
		`{"q":"see 'https://allowed.com' or mail bob@evil.com"}`,
		`{"code":"{\"a\":\"https://allowed.com\",\"b\":\"c@d.e\"}"}`,
		`{"html":"<a href=\"https://allowed.com/x\">bob@evil.com</a>"}`,
		"{\"md\":\"`https://allowed.com/x`, then mail me@evil.com\"}",
		`{"url":"https://allowed.com/a b@c"}`,
		`{"url":"https://allowed.com/x?mail=a@evil.com"}`,
	} {
		egressVerdict(t, al, args, "allow")
	}
}

// TestEgressSchemelessWithEmbeddedURL: under a URL- or host-named
// member a schemeless value is "read as a fetch tool completes it, with
// https:// in front" (README), but any "://" in the value switches that
// reading off, so a URL in the query names the host instead.
func TestEgressSchemelessWithEmbeddedURL(t *testing.T) {
	al := build(t, KindTools, `{"egress":{"allow_domains":["allowed.com"]}}`)
	dn := build(t, KindTools, `{"egress":{"deny_domains":["evil.com"]}}`)
	for _, args := range []string{
		`{"url":"evil.com/?r=https://allowed.com"}`,
		`{"url":"//evil.com/https://allowed.com"}`,
		`{"url":"evil.com#https://allowed.com"}`,
		`{"host":"evil.com/https://x"}`,
		`{"urls":["evil.com/?next=http://allowed.com/"]}`,
	} {
		egressVerdict(t, al, args, "deny egress_denied")
		egressVerdict(t, dn, args, "deny egress_denied")
	}
	egressVerdict(t, al, `{"url":"allowed.com/?r=https://allowed.com"}`, "allow")
	egressVerdict(t, al, `{"url":"https://allowed.com/?r=https://allowed.com"}`, "allow")
}

// TestEgressIDNAFallback: canonicalHost maps with idna.Lookup (STD3
// rules, CheckHyphens), and when that refuses the name it falls back to
// plain Punycode, which does not map fullwidth letters. WHATWG parsers
// (browsers, Node's new URL()/fetch) map with UseSTD3ASCIIRules=false and
// CheckHyphens=false: new URL("https://a_b.ｅvil.com").hostname is
// "a_b.evil.com". So one fullwidth letter plus an underscore (or a label
// ending in "-") slips past deny_domains. README: "IDNA-mapped (fullwidth
// letters and ideographic full stops are the ASCII name)".
func TestEgressIDNAFallback(t *testing.T) {
	dn := build(t, KindTools, `{"egress":{"deny_domains":[".evil.com"]}}`)
	for _, args := range []string{
		`{"url":"https://a_b.ｅvil.com/x"}`,
		`{"url":"https://x-.ｅvil.com/x"}`,
		`{"url":"https://a_b.evil。com/x"}`,
		`{"host":"a_b.ｅｖｉｌ.ｃｏｍ"}`,
	} {
		egressVerdict(t, dn, args, "deny egress_denied")
	}
	if got := canonicalHost("a_b.ｅvil.com"); got != "a_b.evil.com" {
		t.Errorf("canonicalHost(a_b.ｅvil.com) = %q, want a_b.evil.com", got)
	}
}

// TestContentInvisibleNonCf: foldText removes Unicode Cf only, but
// other default-ignorable code points render as nothing too (combining
// grapheme joiner U+034F, variation selectors U+FE00-FE0F and
// U+E0100-E01EF, Hangul fillers U+115F/U+1160/U+3164/U+FFA0), so a key or
// card number with one inside is not found. README: "invisible format
// characters removed (zero-width spaces and joiners, ...: Unicode Cf)" —
// the list is Cf, so this is beyond the letter of the promise, but it is
// the same evasion it exists to stop.
func TestContentInvisibleNonCf(t *testing.T) {
	deny := build(t, KindContent, `{"packs":{"secrets":"deny","pii":"deny"}}`)
	red := build(t, KindContent, `{"packs":{"secrets":"redact","pii":"redact"}}`)
	for _, inv := range []string{`\u034f`, `\ufe0f`, `\ufe00`, `\udb40\udd00`, `\u115f`, `\u3164`, `\uffa0`} {
		for _, s := range []string{
			`"sk-proj-abcdefghij` + inv + `klmnopqrstuvwxyz0123"`,
			`"4111` + inv + `1111` + inv + `1111` + inv + `1111"`,
		} {
			if got := verdictSummary(run(t, deny, postTool(t, "x", `{}`, s))); got != "deny content_denied" {
				t.Errorf("deny %s: %q", s, got)
			}
			v := run(t, red, postTool(t, "x", `{}`, s))
			if v.Transform == nil || !(string(v.Transform.Value) == `"[REDACTED:openai_key]"` || string(v.Transform.Value) == `"[REDACTED:card_number]"`) {
				t.Errorf("redact %s: %s %v", s, verdictSummary(v), v.Transform)
			}
		}
	}
}

// TestToolNameVariants: deny and escalate also match the name as a lenient
// dispatcher resolves it (case, surrounding space, invisible characters,
// fullwidth forms), and so do argument constraints; allow stays exact.
func TestToolNameVariants(t *testing.T) {
	ic := build(t, KindTools, `{"deny":["shell_*"],"escalate":["Send_Email"]}`)
	for _, n := range []string{"shell_exec", "Shell_exec", "SHELL_EXEC", " shell_exec", "shell\u200b_exec", "\uff53hell_exec"} {
		if got := verdictSummary(run(t, ic, preTool(t, n, `{}`))); got != "deny tool_denied" {
			t.Errorf("%q: %q", n, got)
		}
	}
	for _, n := range []string{"Send_Email", "send_email", "SEND_EMAIL "} {
		if got := verdictSummary(run(t, ic, preTool(t, n, `{}`))); got != "escalate tool_escalated" {
			t.Errorf("%q: %q", n, got)
		}
	}
	if got := verdictSummary(run(t, ic, preTool(t, "search", `{}`))); got != "allow" {
		t.Errorf("search: %q", got)
	}
	allow := build(t, KindTools, `{"allow":["search"]}`)
	if got := verdictSummary(run(t, allow, preTool(t, "Search", `{}`))); got == "allow" {
		t.Errorf("allow matched a name it does not list exactly: %q", got)
	}
	args := build(t, KindTools, `{"args":[{"tool":"read_file","path":"path","not_regex":"^/etc"}]}`)
	for _, n := range []string{"read_file", "Read_File", "READ_FILE"} {
		if got := verdictSummary(run(t, args, preTool(t, n, `{"path":"/etc/passwd"}`))); got != "deny tool_args_violation" {
			t.Errorf("args rule for %q: %q", n, got)
		}
	}
}

// TestEmailFalsePositives: git SSH remotes and retina asset names are not
// addresses; addresses next to them still are.
func TestEmailFalsePositives(t *testing.T) {
	deny := build(t, KindContent, `{"packs":{"pii":"deny"}}`)
	for _, s := range []string{
		`"origin\tgit@github.com:org/repo.git (fetch)"`,
		`"<img src=\"logo@2x.png\">"`,
		`"icon@3x.webp and icon@2X.PNG"`,
	} {
		if got := verdictSummary(run(t, deny, postTool(t, "x", `{}`, s))); got != "allow" {
			t.Errorf("%s: %q", s, got)
		}
	}
	for _, s := range []string{
		`"write to git@github.com for help"`,
		`"git@example.com: see above"`,
		`"bob@example.com"`,
		`"logo@2x.png, or mail bob@example.png.com"`,
	} {
		if got := verdictSummary(run(t, deny, postTool(t, "x", `{}`, s))); got != "deny content_denied" {
			t.Errorf("%s: %q", s, got)
		}
	}
}

// TestEgressRawArguments: arguments that are not JSON reach the points as
// {"raw_arguments": text}; a destination a lenient parser reads under a
// URL- or host-named key in them is judged as it would be in JSON.
func TestEgressRawArguments(t *testing.T) {
	al := build(t, KindTools, `{"egress":{"allow_domains":["allowed.com"]}}`)
	for _, args := range []string{
		`{"raw_arguments":"{'url': 'evil.com/x'}"}`,
		`{"raw_arguments":"{\"url\":\"evil.com/x"}`,
		`{"raw_arguments":"{url: \"//evil.com/x\"}"}`,
		`{"raw_arguments":"host=evil.com"}`,
		`{"raw_arguments":"{'base_url': 'evil.com'}"}`,
	} {
		egressVerdict(t, al, args, "deny egress_denied")
	}
	for _, args := range []string{
		`{"raw_arguments":"{'url': 'allowed.com/x'}"}`,
		`{"raw_arguments":"{'query': 'evil.com is a site'}"}`,
		`{"raw_arguments":"{\"url\":\"https://allowed.com/x"}`,
	} {
		egressVerdict(t, al, args, "allow")
	}
}

// TestNotRegexInsideContainers: a not_regex holds for every string inside
// a list or object at its path, not only for the container's JSON text.
func TestNotRegexInsideContainers(t *testing.T) {
	ic := build(t, KindTools, `{"args":[{"tool":"read_*","path":"path","not_regex":"^/etc"}]}`)
	for _, args := range []string{`{"path":["/etc/passwd"]}`, `{"path":{"0":"/etc/passwd"}}`, `{"path":[["/etc/shadow"]]}`, `{"path":"/etc/passwd"}`} {
		if got := verdictSummary(run(t, ic, preTool(t, "read_file", args))); got != "deny tool_args_violation" {
			t.Errorf("%s: %q", args, got)
		}
	}
	for _, args := range []string{`{"path":["/home/a","/tmp/b"]}`, `{"path":"/home/etc"}`} {
		if got := verdictSummary(run(t, ic, preTool(t, "read_file", args))); got != "allow" {
			t.Errorf("%s: %q", args, got)
		}
	}
}

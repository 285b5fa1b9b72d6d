package interceptors

import (
	"math/bits"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hooksproxy/hooksproxy/points"
)

// pattern is one named detector: a regex, optionally narrowed to its
// "value" capture group (the part that is reported and masked) and
// optionally confirmed by a validator (checksums, reserved ranges).
type pattern struct {
	name  string
	re    *regexp.Regexp
	group int // index of the "value" group; 0 is the whole match
	// valid confirms a candidate s[start:end] and returns the end of the
	// accepted span (it may shorten it); a return <= start rejects it.
	valid func(s string, start, end int) int
	// scan, when set, finds the spans instead of re (and valid).
	scan func(s string) [][2]int
	// numeric: the pattern also judges the JSON integers of 13-19 digits
	// (the card number).
	numeric bool
	// pre is a cheap necessary condition checked before the regex runs:
	// Go's regexp cannot skip ahead on patterns that start with \b, so
	// without it every pack pattern would walk every string.
	pre func(t *text) bool
}

// text is a string being scanned, with facts the prefilters share.
type text struct {
	s string
	// member is the name of the object member whose value s is ("" for a
	// member name, an array element or the root): a few secrets are told
	// by their name alone, as in the JSON the AWS CLI prints
	// ("SecretAccessKey": "<40 characters>").
	member   string
	digitRun int   // -1 until computed
	kWords   uint8 // kWordsKnown | kWordKey | kWordToken, 0 until computed
	// fold is s as a reader sees it (foldText), nil until computed or
	// when it is s itself; foldDone says it was computed.
	fold     *folded
	foldDone bool
}

// folded is a text with its invisible format characters removed and
// fullwidth ASCII forms read as ASCII; orig maps each byte offset of t.s
// (and its end) to the offset in the original string.
type folded struct {
	t    *text
	orig []int
}

// folding returns t's folded text, or nil when folding changes nothing.
func (t *text) folding() *folded {
	if t.foldDone {
		return t.fold // inlined: patterns ask once each
	}
	return t.computeFold()
}

func (t *text) computeFold() *folded {
	t.foldDone = true
	if f, o, ok := foldText(t.s); ok {
		n := newText(f)
		n.member, n.foldDone = t.member, true
		t.fold = &folded{t: n, orig: o}
	}
	return t.fold
}

// foldText removes Unicode format characters (Cf: zero-width spaces and
// joiners, word joiners, soft hyphens, byte order marks, bidi controls)
// and maps fullwidth ASCII forms (U+FF01-FF5E) and the ideographic space
// to ASCII, so that a card number or key with a zero-width space inside,
// which renders as the number and which many tools strip, is still found.
// ok is false when s has none of them (every ASCII string).
func foldText(s string) (out string, orig []int, ok bool) {
	// Find the first character to fold, skipping ASCII eight bytes at a
	// time and decoding only the other characters: most text has none.
	i := 0
	for {
		for ; i+32 <= len(s) && (le64(s, i)|le64(s, i+8)|le64(s, i+16)|le64(s, i+24))&0x8080808080808080 == 0; i += 32 {
		}
		for ; i+8 <= len(s) && le64(s, i)&0x8080808080808080 == 0; i += 8 {
		}
		for i < len(s) && s[i] < utf8.RuneSelf {
			i++
		}
		if i == len(s) {
			return "", nil, false
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if folds(r) {
			break
		}
		i += size
	}
	var b strings.Builder
	b.Grow(len(s))
	orig = make([]int, 0, len(s)+1)
	for j := 0; j < i; j++ {
		orig = append(orig, j)
	}
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case !folds(r):
			b.WriteString(s[i : i+size])
			for k := 0; k < size; k++ {
				orig = append(orig, i+k)
			}
		case r == 0x3000:
			b.WriteByte(' ')
			orig = append(orig, i)
		case r >= 0xFF01 && r <= 0xFF5E:
			b.WriteByte(byte(r - 0xFEE0))
			orig = append(orig, i)
		}
		// a format character is dropped
		i += size
	}
	return b.String(), append(orig, len(s)), true
}

// folds reports whether foldText changes r.
func folds(r rune) bool {
	return r >= 0xFF01 && r <= 0xFF5E || r == 0x3000 || r != utf8.RuneError && invisible(r)
}

// invisible reports a default-ignorable code point that renders as
// nothing: Cf, and the ones of other categories (the combining grapheme
// joiner, variation selectors, Hangul fillers), which hide a match as well.
func invisible(r rune) bool {
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Variation_Selector, r) ||
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)
}

const (
	kWordsKnown = 1 << iota
	kWordKey
	kWordToken
)

// hasKWord reports whether t holds "key" (w == kWordKey) or "token"
// (kWordToken) in any ASCII case. One pass per case of "k", the rarest
// letter of both, serves both words.
func (t *text) hasKWord(w uint8) bool {
	if t.kWords == 0 {
		t.kWords = kWordsKnown
		s := t.s
		for _, k := range [2]byte{'k', 'K'} {
			for from := 0; from < len(s); {
				j := strings.IndexByte(s[from:], k)
				if j < 0 {
					break
				}
				j += from
				if j+3 <= len(s) && equalFoldLower(s[j:j+3], "key") {
					t.kWords |= kWordKey
				}
				if j >= 2 && j+3 <= len(s) && equalFoldLower(s[j-2:j+3], "token") {
					t.kWords |= kWordToken
				}
				from = j + 1
			}
		}
	}
	return t.kWords&w != 0
}

func newText(s string) *text { return &text{s: s, digitRun: -1} }

// visitText is the text of one walked string, with its member name.
func visitText(v stringVisit) *text {
	// A string that holds JSON text (a tool result or arguments as a
	// request carries them) is read as a decoder would read it: \/ and
	// \u0040 hid every pattern from what the tool or model then reads.
	// The form keeps the text's meaning, so a masked string is written
	// back in it; one with no match is left as it was.
	t := newText(points.MinimalEscapes(v.value))
	if !v.isKey {
		t.member = memberOf(v.path)
	}
	return t
}

// memberOf is the member name at the end of path, or "" when the path
// ends in an index (or is the root).
func memberOf(path []seg) string {
	if n := len(path); n > 0 && !path[n-1].isIdx {
		return path[n-1].key
	}
	return ""
}

// rescan is the text of a masked string: the same member, new facts.
func (t *text) rescan(s string) *text {
	n := newText(s)
	n.member = t.member
	return n
}

// endsFold reports whether s ends with the lower-case ASCII letter c in
// either case: the cheap first test of memberIs.
func endsFold(s string, c byte) bool { return s != "" && s[len(s)-1]|0x20 == c }

// memberIs reports whether name, with ASCII case and the separators "_",
// "-", "." and " " ignored, ends with one of suffixes (lower-case letters
// and digits) or equals one of exact.
func memberIs(name string, suffixes, exact []string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	var buf [64]byte
	n := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '_', c == '-', c == '.', c == ' ':
			continue
		default:
			return false
		}
		buf[n] = c
		n++
	}
	norm := buf[:n]
	for _, x := range exact {
		if string(norm) == x {
			return true
		}
	}
	for _, x := range suffixes {
		if len(norm) >= len(x) && string(norm[len(norm)-len(x):]) == x {
			return true
		}
	}
	return false
}

// digits returns maxDigitRun(t.s), computed once.
func (t *text) digits() int {
	if t.digitRun < 0 {
		t.digitRun = maxDigitRun(t.s)
	}
	return t.digitRun
}

func newPattern(name string, re *regexp.Regexp, valid func(string, int, int) int) pattern {
	p := pattern{name: name, re: re, valid: valid}
	if i := re.SubexpIndex("value"); i > 0 {
		p.group = i
	}
	return p
}

// equalFoldLower reports whether s equals the lower-case ASCII word sub
// ignoring ASCII case.
func equalFoldLower(s, sub string) bool {
	for i := 0; i < len(sub); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != sub[i] {
			return false
		}
	}
	return true
}

// spans returns the confirmed matches of p in t and, where t has
// invisible or fullwidth characters, in its folded reading, mapped back
// to t (apply merges the overlaps).
func (p pattern) spans(t *text) [][2]int {
	out := p.rawSpans(t)
	if f := t.folding(); f != nil {
		for _, x := range p.rawSpans(f.t) {
			out = append(out, [2]int{f.orig[x[0]], f.orig[x[1]]})
		}
	}
	return out
}

func (p pattern) rawSpans(t *text) [][2]int {
	if p.pre != nil && !p.pre(t) {
		return nil
	}
	s := t.s
	if p.scan != nil {
		return p.scan(s)
	}
	var out [][2]int
	for _, m := range p.re.FindAllStringSubmatchIndex(s, -1) {
		start, end := m[2*p.group], m[2*p.group+1]
		if start < 0 || end <= start {
			continue
		}
		if p.valid != nil {
			if end = p.valid(s, start, end); end <= start {
				continue
			}
		}
		out = append(out, [2]int{start, end})
	}
	return out
}

// found reports whether p has at least one confirmed match in t or in its
// folded reading.
func (p pattern) found(t *text) bool {
	if p.rawFound(t) {
		return true
	}
	f := t.folding()
	return f != nil && p.rawFound(f.t)
}

func (p pattern) rawFound(t *text) bool {
	if p.pre != nil && !p.pre(t) {
		return false
	}
	if p.valid == nil && p.group == 0 && p.scan == nil {
		// The common case needs no submatches; an empty match (possible
		// for patterns like \bx?) falls through to the full scan.
		loc := p.re.FindStringIndex(t.s)
		if loc == nil {
			return false
		}
		if loc[1] > loc[0] {
			return true
		}
	}
	return len(p.rawSpans(t)) > 0
}

// The pack names.
const (
	PackSecrets = "secrets"
	PackPII     = "pii"
)

// packPatterns returns the named patterns of a pack, in the order they are
// tried (more specific first, so that an Anthropic key is reported as one
// and not as an OpenAI key). Compiled per call: no package state.
func packPatterns(pack string) []pattern {
	mk := func(name, expr string, valid func(string, int, int) int, pre func(*text) bool) pattern {
		p := newPattern(name, regexp.MustCompile(expr), valid)
		p.pre = pre
		return p
	}
	has := func(subs ...string) func(*text) bool {
		lits := make([]literal, len(subs))
		for i, sub := range subs {
			lits[i] = newLiteral(sub)
		}
		return func(t *text) bool {
			for _, l := range lits {
				if l.in(t.s) {
					return true
				}
			}
			return false
		}
	}
	aws, secret, access := newLiteral("aws"), newLiteral("secret"), newLiteral("access")
	slackHooks := newLiteral("hooks.slack.com")
	session := newLiteral("session")
	// Member names that hold an AWS secret access key or an STS session
	// token as their whole value (the AWS CLI's and SDKs' JSON, Terraform).
	secretSuffix, secretExact := []string{"secretaccesskey"}, []string{"secretkey", "awssecretkey"}
	tokenSuffix, tokenExact := []string{"sessiontoken"}, []string{"securitytoken", "awssecuritytoken"}
	secretMember := func(t *text) bool {
		return endsFold(t.member, 'y') && memberIs(t.member, secretSuffix, secretExact)
	}
	tokenMember := func(t *text) bool {
		return endsFold(t.member, 'n') && memberIs(t.member, tokenSuffix, tokenExact)
	}
	digits := func(n int) func(*text) bool { return func(t *text) bool { return t.digits() >= n } }
	switch pack {
	case PackSecrets:
		return []pattern{
			// Tokens are bounded by a non-alphanumeric character, not \b: an
			// underscore touching one (GITHUB_TOKEN_ghp_..., _AKIA..._ in
			// Markdown) is a word character, and \b missed those.
			// A block from BEGIN to END, or to the end of the text when
			// truncated (armor headers such as Proc-Type:, a "...(truncated)"
			// marker and further base64 lines are all key); or a key's tail
			// without its BEGIN line (a
			// paginated or chunked read): the base64 lines before an END
			// line, and the END line. At one position the first
			// alternative wins, and a tail never starts before a BEGIN.
			mk("private_key", `-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)`+
				`|(?:[A-Za-z0-9+/=]{16,}[ \t]*(?:\r?\n|\\r\\n|\\n)[ \t>]*)*[A-Za-z0-9+/=]*[ \t]*(?:\r?\n|\\r\\n|\\n)?[ \t>]*-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`, nil, has("PRIVATE KEY")),
			mk("anthropic_key", `(?:^|[^A-Za-z0-9])(?P<value>sk-ant-[A-Za-z0-9_-]{20,})`, nil, has("sk-ant-")),
			mk("openai_key", `(?:^|[^A-Za-z0-9])(?P<value>sk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{20,}))`, nil, has("sk-")),
			mk("github_token", `(?:^|[^A-Za-z0-9])(?P<value>gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?:[^A-Za-z0-9]|$)`, nil, has("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
			mk("slack_token", `(?:^|[^A-Za-z0-9])(?P<value>xox[abprs]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,})`, nil, has("xox", "xapp-")),
			mk("slack_webhook", `(?i:(?:https?://)?hooks\.slack\.com)/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,}`, nil, func(t *text) bool { return slackHooks.inFold(t.s) }),
			mk("stripe_key", `(?:^|[^A-Za-z0-9])(?P<value>(?:sk|rk|whsec)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})`, nil, has("_live_", "_test_", "whsec_")),
			mk("gitlab_token", `(?:^|[^A-Za-z0-9])(?P<value>gl(?:pat|dt|rt|cbt|ptt|oas)-[A-Za-z0-9_-]{20,})`, nil, has("glpat-", "gldt-", "glrt-", "glcbt-", "glptt-", "gloas-")),
			mk("huggingface_token", `(?:^|[^A-Za-z0-9])(?P<value>hf_[A-Za-z0-9]{30,})`, nil, has("hf_")),
			mk("npm_token", `(?:^|[^A-Za-z0-9])(?P<value>npm_[A-Za-z0-9]{36})(?:[^A-Za-z0-9]|$)`, nil, has("npm_")),
			mk("aws_access_key_id", `(?:^|[^A-Za-z0-9])(?P<value>(?:AKIA|ASIA)[A-Z0-9]{16})(?:[^A-Za-z0-9]|$)`, validAWSKeyID, has("AKIA", "ASIA")),
			mk("aws_secret_key", `(?i)\baws.{0,24}?secret.{0,24}?[^A-Za-z0-9/+](?P<value>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`, nil, func(t *text) bool { return aws.inFold(t.s) && secret.inFold(t.s) }),
			// "SecretAccessKey": "...", secret_access_key = ... in text.
			mk("aws_secret_key", `(?i)secret[-_ ]?access[-_ ]?key[\\"'\s]{0,4}[:=][\\"'\s]{0,4}(?P<value>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`, nil, func(t *text) bool { return t.hasKWord(kWordKey) && secret.inFold(t.s) && access.inFold(t.s) }),
			// The value of a member named so, as a whole string.
			mk("aws_secret_key", `^\s*(?P<value>[A-Za-z0-9/+]{40})\s*$`, nil, secretMember),
			mk("aws_session_token", `(?i)session[-_ ]?token[\\"'\s]{0,4}[:=][\\"'\s]{0,4}(?P<value>[A-Za-z0-9/+=]{100,})`, nil, func(t *text) bool { return t.hasKWord(kWordToken) && session.inFold(t.s) }),
			mk("aws_session_token", `^\s*(?P<value>[A-Za-z0-9/+=]{100,})\s*$`, nil, tokenMember),
			mk("google_api_key", `(?:^|[^A-Za-z0-9])(?P<value>AIza[0-9A-Za-z_-]{35})`, nil, has("AIza")),
			mk("jwt", `\beyJ[A-Za-z0-9_-]{2,}\.eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*`, nil, has("eyJ")),
		}
	case PackPII:
		return []pattern{
			{name: "card_number", scan: cardSpans, pre: digits(13), numeric: true},
			// Groups separated by a space or a no-break space, as IBANs
			// copied from web pages come (not dashes: uppercase GUIDs and
			// licence keys then pass mod-97 about once in 300).
			mk("iban", `\b[A-Z]{2}\d{2}(?:[ \x{00A0}\x{202F}]?[A-Z0-9]{4}){2,7}(?:[ \x{00A0}\x{202F}]?[A-Z0-9]{1,4})?\b`, validIBAN, hasIBANStart),
			// Hyphens, or the Unicode dashes word processors put in.
			mk("us_ssn", `\b\d{3}[-\x{2010}-\x{2015}]\d{2}[-\x{2010}-\x{2015}]\d{4}\b`, validSSN, func(t *text) bool {
				// "\xe2\x80" leads every dash of U+2010-2015 (and other
				// punctuation: the regex decides).
				return (strings.Contains(t.s, "-") || strings.Contains(t.s, "\xe2\x80")) && t.digits() >= 9
			}),
			// Letters of any script, in the local part and the domain
			// (zoë@, müller@bücher.de): an ASCII-only class matched
			// only the tail of such an address, or nothing.
			mk("email", `(?:^|[^\p{L}\p{M}\p{N}])(?P<value>[\p{L}\p{M}\p{N}_%+-][\p{L}\p{M}\p{N}._%+'-]*@[\p{L}\p{M}\p{N}-]+(?:\.[\p{L}\p{M}\p{N}-]+)*\.(?:[A-Za-z]{2,}|\p{L}{2,}))(?:[^\p{L}\p{M}\p{N}_-]|$)`, validEmail, has("@")),
			// E.164 and international notation: a + then 8-15 digits, with
			// spaces, dots, dashes or a parenthesised area code between them.
			mk("phone", `(?:^|[^\w+])(?P<value>\+[1-9](?:[ .-]?(?:\(\d{1,4}\)|\d)){6,17})`, validPhone(8, 15), func(t *text) bool { return strings.Contains(t.s, "+") && t.digits() >= 8 }),
			// North American numbers with the country code written without a
			// plus (1-415-555-2671, 1 (415) 555-2671).
			mk("phone", `(?:^|[^\w+])(?P<value>1[ .-]\(?[2-9]\d{2}\)?[ .-]?[2-9]\d{2}[ .-]\d{4})\b`, validPhone(11, 11), digits(11)),
			// North American national format: separators required, so a plain
			// run of ten digits is not a phone number.
			mk("phone", `(?:^|[^\w+])(?P<value>\(?[2-9]\d{2}\)?[ .-]?[2-9]\d{2}[ .-]\d{4})\b`, validPhone(10, 10), digits(10)),
			// Trunk-prefixed national formats (020 7946 0958, 06 12 34 56 78).
			mk("phone", `(?:^|[^\w+])(?P<value>\(?0[1-9]\d{0,3}\)?[ -]\d{2,4}(?:[ -]?\d{2,4}){1,3})\b`, validPhone(9, 12), digits(9)),
		}
	}
	return nil
}

// literal is a prefilter substring with the byte to search for first: the
// one least frequent in prose, so the vectorised IndexByte stops rarely
// (strings.Contains starts from the first byte, and "sk-" would stop at
// every s of an answer).
type literal struct {
	s    string
	rare int
}

// prose orders lower-case letters from most to least frequent in English.
const prose = " etaoinshrdlcumwfgypbvkjxqz"

func newLiteral(s string) literal {
	rank := func(c byte) int { // higher is rarer
		if i := strings.IndexByte(prose, c); i >= 0 {
			return i
		}
		return len(prose) // capitals, digits, punctuation
	}
	l := literal{s: s}
	for i := 1; i < len(s); i++ {
		if rank(s[i]) >= rank(s[l.rare]) {
			l.rare = i
		}
	}
	return l
}

// in reports whether l.s occurs in s.
func (l literal) in(s string) bool {
	return l.find(s, l.s[l.rare], func(a, b string) bool { return a == b })
}

// inFold reports whether l.s (lower-case ASCII letters) occurs in s
// ignoring ASCII case: both cases of the rare letter are searched.
func (l literal) inFold(s string) bool {
	c := l.s[l.rare]
	return l.find(s, c, equalFoldLower) || l.find(s, c&^0x20, equalFoldLower)
}

// find looks for c with the vectorised IndexByte and checks each hit, as
// the rare byte of a candidate, with eq(candidate, l.s).
func (l literal) find(s string, c byte, eq func(candidate, lit string) bool) bool {
	for from := l.rare; from < len(s); {
		j := strings.IndexByte(s[from:], c)
		if j < 0 {
			return false
		}
		if start := from + j - l.rare; start+len(l.s) <= len(s) && eq(s[start:start+len(l.s)], l.s) {
			return true
		}
		from += j + 1
	}
	return false
}

// packNames lists the known packs.
func packNames() []string { return []string{PackSecrets, PackPII} }

// digitsOf returns the ASCII digits of s.
func digitsOf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// luhn reports whether the digit string d passes the Luhn checksum.
func luhn(d string) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		n := int(d[i] - '0')
		if double {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
		double = !double
	}
	return sum%10 == 0
}

// cardGroup is one group of digits in a run: s[start:end], and the
// separator that follows it, s[end:next], empty for the run's last group.
type cardGroup struct {
	start, end, next int
}

// cardShapes are the groupings cards are printed in, longest first, so
// that a 19-digit card is preferred to 16 digits and a CVV.
var cardShapes = [][]int{{4, 4, 4, 4, 3}, {4, 4, 4, 4}, {4, 6, 5}, {4, 6, 4}, {4, 4, 4, 3}, {4, 4, 4, 2}, {4, 4, 4, 1}}

// cardSpans finds card numbers in s: 13-19 digits from an issuer range
// (2-6) that pass Luhn and are not one repeated digit, written either
// compact (a group of their own, whatever is beside it: "4111111111111111
// 123", "qty 2 4111111111111111") or in a printed grouping (4-4-4-4,
// 4-6-5, ...) with one separator throughout. A digit group joined to a
// letter ("x4111...", "...1111x") is part of a word, not a card; "_" is no
// letter ("card_4111..."). A grouped number is not taken out of a longer
// run of four-digit groups: a four-digit group before it with the same
// separator, or after it when it ends in one, rules it out unless that
// group belongs to a card itself (two cards in a row).
func cardSpans(s string) [][2]int {
	var out [][2]int
	var buf [24]cardGroup
	for i := nextDigit(s, 0); i < len(s); i = nextDigit(s, i) {
		gs := buf[:0]
		for {
			k := i
			for k < len(s) && isDigit(s[k]) {
				k++
			}
			n := cardSepLen(s, k)
			if n == 0 || k+n >= len(s) || !isDigit(s[k+n]) {
				gs = append(gs, cardGroup{i, k, k})
				i = k
				break
			}
			gs = append(gs, cardGroup{i, k, k + n})
			i = k + n
		}
		out = cardsInRun(s, gs, out)
	}
	return out
}

// cardsInRun appends the cards among one run of digit groups.
func cardsInRun(s string, gs []cardGroup, out [][2]int) [][2]int {
	// Candidates first, as group ranges, left to right; a grouped one
	// takes its groups.
	type cand struct {
		from, to int // groups[from:to]
		grouped  bool
	}
	var cs []cand
	leftGlued := gs[0].start > 0 && isWordByte(s[gs[0].start-1])
	last := len(gs) - 1
	rightGlued := gs[last].end < len(s) && isWordByte(s[gs[last].end])
	for i := 0; i < len(gs); {
		if w := cardShapeAt(s, gs, i); w > 0 && !(i == 0 && leftGlued) && !(i+w-1 == last && rightGlued) {
			cs = append(cs, cand{i, i + w, true})
			i += w
			continue
		}
		g := gs[i]
		if n := g.end - g.start; n >= 13 && n <= 19 && !(i == 0 && leftGlued) && !(i == last && rightGlued) && cardDigits(s, gs[i:i+1]) {
			cs = append(cs, cand{i, i + 1, false})
		}
		i++
	}
	inCard := func(i int) bool {
		for _, c := range cs {
			if i >= c.from && i < c.to {
				return true
			}
		}
		return false
	}
	sep := func(i int) string { return s[gs[i].end:gs[i].next] } // after group i
	four := func(i int) bool { return gs[i].end-gs[i].start == 4 }
	for _, c := range cs {
		if c.grouped {
			if c.from > 0 && four(c.from-1) && sep(c.from-1) == sep(c.from) && !inCard(c.from-1) {
				continue
			}
			if c.to <= last && four(c.to-1) && four(c.to) && sep(c.to-1) == sep(c.from) && !inCard(c.to) {
				continue
			}
		}
		out = append(out, [2]int{gs[c.from].start, gs[c.to-1].end})
	}
	return out
}

// cardShapeAt returns the number of groups of the printed grouping that
// starts at gs[i] with one separator throughout and whose digits are a
// card, or 0.
func cardShapeAt(s string, gs []cardGroup, i int) int {
	if gs[i].end-gs[i].start != 4 {
		return 0
	}
shapes:
	for _, shape := range cardShapes {
		if i+len(shape) > len(gs) {
			continue
		}
		first := s[gs[i].end:gs[i].next]
		for j, n := range shape {
			g := gs[i+j]
			if g.end-g.start != n || j < len(shape)-1 && s[g.end:g.next] != first {
				continue shapes
			}
		}
		if cardDigits(s, gs[i:i+len(shape)]) {
			return len(shape)
		}
	}
	return 0
}

// cardDigits reports whether the digits of gs are a card number: 13-19 of
// them, the first 2-6, not all one digit, passing Luhn.
func cardDigits(s string, gs []cardGroup) bool {
	n := 0
	for _, g := range gs {
		n += g.end - g.start
	}
	if n < 13 || n > 19 {
		return false
	}
	if first := s[gs[0].start]; first < '2' || first > '6' {
		return false
	}
	sum, double, same := 0, false, true
	for j := len(gs) - 1; j >= 0; j-- {
		g := gs[j]
		for k := g.end - 1; k >= g.start; k-- {
			d := int(s[k] - '0')
			same = same && s[k] == s[gs[0].start]
			if double {
				if d *= 2; d > 9 {
					d -= 9
				}
			}
			sum += d
			double = !double
		}
	}
	return !same && sum%10 == 0
}

// cardSepLen returns the length of the card separator at s[i] (a space, a
// dash or a dot; a no-break, thin or figure space; a Unicode hyphen or
// dash, as text copied from a PDF or web page has them), or 0.
func cardSepLen(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	switch c := s[i]; {
	case c == ' ' || c == '-' || c == '.':
		return 1
	case c == 0xC2:
		if i+1 < len(s) && s[i+1] == 0xA0 { // U+00A0 no-break space
			return 2
		}
	case c == 0xE2:
		if i+2 < len(s) && s[i+1] == 0x80 {
			switch s[i+2] {
			case 0x87, 0x89, 0xAF, // figure, thin, narrow no-break space
				0x90, 0x91, 0x92, 0x93, 0x94: // hyphen, non-breaking hyphen, figure dash, en dash, em dash
				return 3
			}
		}
	}
	return 0
}

// isWordByte reports an ASCII letter or digit: a digit group joined to one
// is part of a word or an identifier.
func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c)
}

// ibanMod97 reports whether the compact IBAN s passes ISO 13616 mod-97.
func ibanMod97(s string) bool {
	if len(s) < 15 || len(s) > 34 {
		return false
	}
	r := s[4:] + s[:4]
	rem := 0
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c >= '0' && c <= '9':
			rem = (rem*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			rem = (rem*100 + int(c-'A'+10)) % 97
		default:
			return false
		}
	}
	return rem == 1
}

// validIBAN accepts a candidate that passes mod-97, dropping trailing
// space-separated groups that do not belong to it ("DE89 ... 00 IS").
// validAWSKeyID rejects an all-letter match glued to an underscore: a
// constant name (REGION_ASIAPACIFICSINGAPORE_URL), not a key ID, which has
// a digit in 96% of cases; a standalone one is kept.
func validAWSKeyID(s string, start, end int) int {
	if strings.ContainsAny(s[start:end], "0123456789") {
		return end
	}
	if start > 0 && s[start-1] == '_' || end < len(s) && s[end] == '_' {
		return 0
	}
	return end
}

func validIBAN(s string, start, end int) int {
	for end > start {
		if ibanMod97(stripIBANSeps(s[start:end])) {
			return end
		}
		// Drop the last group: find the separator before it.
		i := strings.LastIndexAny(s[start:end], " \u00a0\u202f")
		if i <= 0 {
			return 0
		}
		end = start + i
	}
	return 0
}

// stripIBANSeps removes the group separators the iban pattern accepts.
func stripIBANSeps(s string) string {
	return strings.NewReplacer(" ", "", "\u00a0", "", "\u202f", "").Replace(s)
}

// validSSN rejects the never-issued areas 000, 666 and 900-999, group 00
// and serial 0000.
func validSSN(s string, start, end int) int {
	v := s[start:end]
	area, group, serial := v[0:3], v[4:6], v[7:11]
	if area == "000" || area == "666" || area[0] == '9' || group == "00" || serial == "0000" {
		return 0
	}
	return end
}

// validPhone accepts a candidate with min..max digits that is not a slice
// of a longer run of digit groups (a card number, an id with spaces).
func validPhone(min, max int) func(string, int, int) int {
	return func(s string, start, end int) int {
		n := len(digitsOf(s[start:end]))
		if n < min || n > max {
			return 0
		}
		if start >= 2 && isSep(s[start-1]) && isDigit(s[start-2]) {
			return 0
		}
		if end+1 < len(s) && isSep(s[end]) && isDigit(s[end+1]) {
			return 0
		}
		return end
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isSep(c byte) bool   { return c == ' ' || c == '-' || c == '.' }

// maxDigitRun returns the most digits in one run where digits are joined
// by at most two separator characters (" .-()/+") or one non-ASCII one
// (a no-break space, a dash), the shape card, phone and id numbers are
// written in.
func maxDigitRun(s string) int {
	best, run, gap := 0, 0, 0
	for i := 0; i < len(s); i++ {
		if run == 0 {
			// Outside a run only a digit matters: skip to the next one
			// eight bytes at a time (prose has few).
			if i = nextDigit(s, i); i == len(s) {
				break
			}
		}
		c := s[i]
		switch {
		case isDigit(c):
			run++
			gap = 0
			best = max(best, run)
		case (c == ' ' || c == '.' || c == '-' || c == '(' || c == ')' || c == '/' || c == '+') && gap < 2:
			gap++
		case c >= 0x80 && gap < 3:
			gap++ // a no-break space or a Unicode dash (2 or 3 bytes) between groups
		default:
			run, gap = 0, 0
		}
	}
	return best
}

// hasIBANStart reports whether t has two ASCII capitals followed by two
// digits, as every IBAN starts.
func hasIBANStart(t *text) bool {
	if t.digits() < 2 {
		return false // no two digits side by side (digits is shared with the other pii prefilters)
	}
	s := t.s
	for i := nextDigit(s, 2); i+1 < len(s); i = nextDigit(s, i+1) {
		if isDigit(s[i+1]) && isUpper(s[i-2]) && isUpper(s[i-1]) {
			return true
		}
	}
	return false
}

// le64 loads s[i:i+8] little-endian (the compiler merges it into one load).
func le64(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// nextDigit returns the index of the first ASCII digit in s at or after i,
// or len(s), testing eight bytes at a time.
func nextDigit(s string, i int) int {
	// The next eight bytes first, where the next digit of a number is;
	// then, as prose has few digits, 32 bytes per branch.
	if i+8 <= len(s) {
		if t := digitBits(le64(s, i)); t != 0 {
			return i + bits.TrailingZeros64(t)>>3
		}
		i += 8
	}
	for ; i+32 <= len(s); i += 32 {
		a, b, c, d := digitBits(le64(s, i)), digitBits(le64(s, i+8)), digitBits(le64(s, i+16)), digitBits(le64(s, i+24))
		if a|b|c|d == 0 {
			continue
		}
		switch {
		case a != 0:
			return i + bits.TrailingZeros64(a)>>3
		case b != 0:
			return i + 8 + bits.TrailingZeros64(b)>>3
		case c != 0:
			return i + 16 + bits.TrailingZeros64(c)>>3
		}
		return i + 24 + bits.TrailingZeros64(d)>>3
	}
	for ; i+8 <= len(s); i += 8 {
		if t := digitBits(le64(s, i)); t != 0 {
			return i + bits.TrailingZeros64(t)>>3
		}
	}
	for ; i < len(s); i++ {
		if isDigit(s[i]) {
			return i
		}
	}
	return len(s)
}

// digitBits sets bit 7 of each byte of x that is an ASCII digit: a byte b
// (< 0x80) is one when b+0x50 sets bit 7 (b >= 0x30) and b+0x46 does not
// (b <= 0x39); bytes >= 0x80 are masked out.
func digitBits(x uint64) uint64 {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	y := x &^ highs
	return (y + 0x50*ones) &^ (y + 0x46*ones) &^ x & highs
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }

// imageExts are file extensions that end asset names shaped like an
// address (logo@2x.png): no top-level domain is one of them.
var imageExts = map[string]bool{"png": true, "jpg": true, "jpeg": true, "gif": true, "webp": true, "svg": true,
	"ico": true, "bmp": true, "avif": true, "tif": true, "tiff": true, "heic": true}

// validEmail rejects the two shapes of developer text the address pattern
// matches that are no one's address: retina asset names (icon@3x.webp)
// and git's SSH remotes (git@github.com:org/repo.git), which a coding
// agent reads and writes all day and which a redaction would break.
func validEmail(s string, start, end int) int {
	m := s[start:end]
	if i := strings.LastIndexByte(m, '.'); i >= 0 && imageExts[strings.ToLower(m[i+1:])] {
		return start
	}
	if strings.HasPrefix(m, "git@") && end+1 < len(s) && s[end] == ':' && s[end+1] > ' ' {
		return start
	}
	return end
}

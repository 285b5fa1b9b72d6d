package interceptors

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"golang.org/x/net/idna"

	"github.com/hooksproxy/hooksproxy/points"
)

// toolsConfig is hooksproxy.tools.
type toolsConfig struct {
	Allow    []string        `json:"allow"`
	Deny     []string        `json:"deny"`
	Escalate []string        `json:"escalate"`
	Args     []argRuleConfig `json:"args"`
	Egress   *egressConfig   `json:"egress"`
	Reason   string          `json:"reason"`
	Reasons  *toolStrings    `json:"reasons"`
	Message  string          `json:"message"`
	Messages *toolStrings    `json:"messages"`
}

// toolStrings overrides a reason or message per outcome.
type toolStrings struct {
	Deny       string `json:"deny"`
	NotAllowed string `json:"not_allowed"`
	Args       string `json:"args"`
	Egress     string `json:"egress"`
	Escalate   string `json:"escalate"`
}

type argRuleConfig struct {
	Tool     string  `json:"tool"`
	Path     string  `json:"path"`
	Regex    *string `json:"regex"`
	NotRegex *string `json:"not_regex"`
	Required bool    `json:"required"`
	Reason   string  `json:"reason"`
	Message  string  `json:"message"`
}

type egressConfig struct {
	AllowDomains []string `json:"allow_domains"`
	DenyDomains  []string `json:"deny_domains"`
}

// Tool outcomes, by severity.
const (
	toolAllow = iota
	toolEscalate
	toolEgress
	toolArgs
	toolNotAllowed
	toolDeny
)

func toolOutcomeName(o int) string {
	switch o {
	case toolDeny:
		return "deny"
	case toolNotAllowed:
		return "not_allowed"
	case toolArgs:
		return "args"
	case toolEgress:
		return "egress"
	case toolEscalate:
		return "escalate"
	}
	return "allow"
}

func toolDefaultReason(o int) string {
	switch o {
	case toolDeny:
		return "tool_denied"
	case toolNotAllowed:
		return "tool_not_allowed"
	case toolArgs:
		return "tool_args_violation"
	case toolEgress:
		return "egress_denied"
	}
	return "tool_escalated"
}

func (t *toolStrings) get(o int) string {
	if t == nil {
		return ""
	}
	switch o {
	case toolDeny:
		return t.Deny
	case toolNotAllowed:
		return t.NotAllowed
	case toolArgs:
		return t.Args
	case toolEgress:
		return t.Egress
	}
	return t.Escalate
}

type argRule struct {
	tool            glob
	toolFold        glob // tool lower-cased, matched against lenientName
	path            string
	multi           bool
	re, notRe       *regexp.Regexp
	required        bool
	reason, message string
}

// domainRule is one egress domain entry: "example.com" (exactly),
// "*.example.com" (subdomains only) or ".example.com" (it and subdomains).
type domainRule struct {
	host       string
	exact, sub bool
}

func (d domainRule) match(host string) bool {
	if d.exact && host == d.host {
		return true
	}
	return d.sub && strings.HasSuffix(host, "."+d.host)
}

func compileDomains(at string, list []string) ([]domainRule, error) {
	out := make([]domainRule, 0, len(list))
	var ps problems
	for i, e := range list {
		p := indexPath(at, i)
		e = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(e)), ".")
		d := domainRule{exact: true}
		switch {
		case strings.HasPrefix(e, "*."):
			e, d.exact, d.sub = e[2:], false, true
		case strings.HasPrefix(e, "."):
			e, d.sub = e[1:], true
		}
		if e == "" || strings.ContainsAny(e, "*/@ \t?#") {
			ps.add(cfgErr(p, "must be a host name, *.domain or .domain"))
			continue
		}
		d.host = canonicalHost(e)
		if _, err := netip.ParseAddr(d.host); err != nil && (strings.Contains(d.host, "..") || strings.HasPrefix(d.host, ".") || strings.Contains(d.host, ":")) {
			// An empty label or a port: a typo no request host has, which
			// would leave the list silently shorter than it reads.
			ps.add(cfgErr(p, "must be a host name, *.domain or .domain (no empty label, no port)"))
			continue
		}
		out = append(out, d)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Tools is the hooksproxy.tools interceptor.
type Tools struct {
	allow, deny, escalate globList
	// denyFold and escFold are deny and escalate lower-cased, matched
	// against lenientName: see blocked.
	denyFold, escFold globList
	hasAllow          bool
	args              []argRule
	egress            bool
	urlRE, wwwRE      *regexp.Regexp
	allowDomains      []domainRule // nil: any host not denied
	denyDomains       []domainRule
	reasons, messages [toolDeny + 1]string
}

// urlExpr finds URL candidates in a string: scheme://..., and for the
// special schemes of the WHATWG URL standard any run of slashes and
// backslashes, none included (https:/evil.example, https:evil.example),
// which browsers and Node read as the same host.
const urlExpr = "(?i)\\b(?:[a-z][a-z0-9+.-]*://|(?:https?|wss?|ftp):[/\\\\]*)[^\\s\"'<>`]+"

func newTools(_ string, config []byte, _ Env) (points.Interceptor, error) {
	var c toolsConfig
	derr := decodeConfig(config, &c) // what did decode is still checked (problems.after)
	t := &Tools{hasAllow: c.Allow != nil}
	var ps problems
	var err error
	t.allow, err = compileGlobs(configRoot+".allow", c.Allow)
	ps.add(err)
	t.deny, err = compileGlobs(configRoot+".deny", c.Deny)
	ps.add(err)
	t.escalate, err = compileGlobs(configRoot+".escalate", c.Escalate)
	ps.add(err)
	// Lower-cased, a pattern that compiled compiles again; a bad one is
	// reported above.
	t.denyFold, _ = compileGlobs(configRoot+".deny", lowerAll(c.Deny))
	t.escFold, _ = compileGlobs(configRoot+".escalate", lowerAll(c.Escalate))
	ps.add(checkReason(configRoot+".reason", c.Reason))
	for o := toolEscalate; o <= toolDeny; o++ {
		r, err := pickReason(configRoot+".reasons."+toolOutcomeName(o), c.Reasons.get(o), c.Reason, toolDefaultReason(o))
		ps.add(err)
		t.reasons[o] = r
		t.messages[o] = firstNonEmpty(c.Messages.get(o), c.Message)
	}
	for i, ac := range c.Args {
		at := indexPath(configRoot+".args", i)
		pat := ac.Tool
		if pat == "" {
			pat = "*"
		}
		g, err := compileGlob(at+".tool", pat)
		ps.add(err)
		gf, _ := compileGlob(at+".tool", strings.ToLower(pat))
		if ac.Path == "" {
			ps.add(cfgErr(at+".path", "required"))
		} else if msg := argPathProblem(ac.Path); msg != "" {
			ps.add(cfgErr(at+".path", "%s", msg))
		}
		if ac.Regex == nil && ac.NotRegex == nil {
			ps.add(cfgErr(at, "needs regex or not_regex"))
		}
		ps.add(checkReason(at+".reason", ac.Reason))
		r := argRule{tool: g, toolFold: gf, path: ac.Path, multi: strings.Contains(ac.Path, "#"), required: ac.Required, reason: ac.Reason, message: ac.Message}
		if ac.Regex != nil {
			r.re, err = compileRegex(at+".regex", *ac.Regex)
			ps.add(err)
		}
		if ac.NotRegex != nil {
			r.notRe, err = compileRegex(at+".not_regex", *ac.NotRegex)
			ps.add(err)
		}
		t.args = append(t.args, r)
	}
	if e := c.Egress; e != nil {
		if e.AllowDomains == nil && e.DenyDomains == nil {
			ps.add(cfgErr(configRoot+".egress", "needs allow_domains or deny_domains"))
		}
		t.egress = true
		t.urlRE = regexp.MustCompile(urlExpr)
		t.wwwRE = regexp.MustCompile(wwwExpr)
		if e.AllowDomains != nil {
			t.allowDomains, err = compileDomains(configRoot+".egress.allow_domains", e.AllowDomains)
			ps.add(err)
		}
		t.denyDomains, err = compileDomains(configRoot+".egress.deny_domains", e.DenyDomains)
		ps.add(err)
	}
	if !t.hasAllow && len(c.Deny) == 0 && len(c.Escalate) == 0 && len(c.Args) == 0 && !t.egress {
		ps.add(cfgErr(configRoot, "needs at least one of allow, deny, escalate, args or egress"))
	}
	if err := ps.after(derr); err != nil {
		return nil, err
	}
	return t, nil
}

// toolFinding is the verdict-relevant outcome of one tool call.
type toolFinding struct {
	outcome         int
	reason, message string // per-rule overrides (args)
	detail          string // payload-free description
}

// Intercept checks the tool call at pre_tool_call and every requested call
// at post_model_call; other points allow.
// AdvisePoints implements config.PointsAdvisor: tools judges the calls of
// a model answer (post_model_call) and a call about to run (pre_tool_call).
func (t *Tools) AdvisePoints(at []points.Point) string {
	return adviseAt(at, "tool calls", points.PostModelCall, points.PreToolCall)
}

func (t *Tools) Intercept(ctx context.Context, c *points.Context) (points.Verdict, error) {
	if err := ctxErr(ctx); err != nil {
		return points.Verdict{}, err
	}
	var worst toolFinding
	switch c.Point() {
	case points.PreToolCall:
		tc := c.Get("tool_call")
		worst = t.check(tc.Get("name").Str, tc.Get("args"))
	case points.PostModelCall:
		i := 0
		c.Get("response.tool_calls").ForEach(func(_, call gjson.Result) bool {
			f := t.check(call.Get("name").Str, call.Get("args"))
			if f.outcome > worst.outcome {
				f.detail = fmt.Sprintf("response.tool_calls[%d]: %s", i, f.detail)
				worst = f
			}
			i++
			return worst.outcome < toolDeny
		})
	default:
		return points.Allow(), nil
	}
	if err := ctxErr(ctx); err != nil {
		return points.Verdict{}, err
	}
	if worst.outcome == toolAllow {
		return points.Allow(), nil
	}
	reason := worst.reason
	if reason == "" {
		reason = t.reasons[worst.outcome]
	}
	msg := worst.message
	if msg == "" {
		msg = t.messages[worst.outcome]
	}
	if msg == "" {
		msg = worst.detail
	}
	if worst.outcome == toolEscalate {
		return points.Escalate(reason, msg), nil
	}
	return points.Deny(reason, msg), nil
}

// check evaluates one call. Precedence: deny > not allowed > argument and
// egress violations > escalate > allow. Names under escalate count as
// allowed-with-approval when an allow list is set.
func (t *Tools) check(name string, args gjson.Result) toolFinding {
	lenient := lenientName(name)
	if i := blocked(t.deny, t.denyFold, name, lenient); i >= 0 {
		return toolFinding{outcome: toolDeny, detail: fmt.Sprintf("tool name matches deny[%d] %q", i, t.deny[i].text)}
	}
	esc := blocked(t.escalate, t.escFold, name, lenient)
	if t.hasAllow && t.allow.first(name) < 0 && esc < 0 {
		return toolFinding{outcome: toolNotAllowed, detail: "tool name matches no allow pattern"}
	}
	if f, bad := t.checkArgs(name, lenient, args); bad {
		return f
	}
	if t.egress {
		if f, bad := t.checkEgress(args); bad {
			return f
		}
	}
	if esc >= 0 {
		return toolFinding{outcome: toolEscalate, detail: fmt.Sprintf("tool name matches escalate[%d] %q", esc, t.escalate[esc].text)}
	}
	return toolFinding{}
}

// blocked returns the index of the first of exact (deny or escalate) that
// matches name, or whose lower-cased form matches lenient; -1 for none. A
// dispatcher that resolves names leniently (case-insensitively, trimming,
// or reading fullwidth forms) would run shell_exec for Shell_exec or
// "ｓhell_exec ", so lists that block or hold a call match those too;
// allow stays exact, as a name it does not list is not allowed anyway.
func blocked(exact, folded globList, name, lenient string) int {
	if i := exact.first(name); i >= 0 {
		return i
	}
	return folded.first(lenient)
}

// lenientName is name with invisible characters removed, fullwidth forms
// read as ASCII (foldText), surrounding space trimmed and case folded.
func lenientName(name string) string {
	if f, _, ok := foldText(name); ok {
		name = f
	}
	return strings.ToLower(strings.TrimSpace(name))
}

func lowerAll(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = strings.ToLower(p)
	}
	return out
}

func (t *Tools) checkArgs(name, lenient string, args gjson.Result) (toolFinding, bool) {
	raw := rawArguments(args)
	if raw && args.IsObject() && strings.TrimSpace(args.Get("raw_arguments").Str) == "" {
		// "" (some servers' arguments for a call without parameters) is
		// no arguments: only a required value is missing.
		raw, args = false, gjson.Parse(`{}`)
	}
	for i, r := range t.args {
		// A constraint holds for the names a lenient dispatcher resolves
		// to its tool as well (see blocked).
		if !r.tool.match(name) && (r.toolFold.re == nil || !r.toolFold.match(lenient)) {
			continue
		}
		bad := func(what string) (toolFinding, bool) {
			return toolFinding{outcome: toolArgs, reason: r.reason, message: r.message,
				detail: fmt.Sprintf("argument at args[%d].path %s", i, what)}, true
		}
		if raw {
			// Arguments that are not a JSON object (cut short, or
			// single-quoted) have no path to check, and a lenient parser
			// on the agent's side may still read one: a constraint that
			// cannot be checked denies.
			return bad("cannot be checked: the arguments are not a JSON object")
		}
		v := args.Get(r.path)
		if !v.Exists() {
			if r.required {
				return bad("is missing")
			}
			continue
		}
		vals := []gjson.Result{v}
		if r.multi && v.IsArray() {
			vals = v.Array()
		}
		for _, x := range vals {
			s := x.Raw
			switch {
			case x.Type == gjson.String:
				s = x.Str
			default:
				// Numbers and containers in their canonical JSON form, so
				// that 5e3 and 5000.0 are matched as the 5000 a tool reads.
				if c, err := points.CanonicalJSON([]byte(x.Raw)); err == nil {
					s = string(c)
				}
			}
			if r.re != nil && !r.re.MatchString(s) {
				return bad("does not match args[" + fmt.Sprint(i) + "].regex")
			}
			if r.notRe != nil && (r.notRe.MatchString(s) || (x.IsArray() || x.IsObject()) && anyStringMatches(x, r.notRe)) {
				return bad("matches args[" + fmt.Sprint(i) + "].not_regex")
			}
		}
	}
	return toolFinding{}, false
}

// anyStringMatches reports whether re matches a string anywhere inside v:
// a tool that takes a string or a list ("path": ["/etc/passwd"]) reads
// each element as the value a not_regex was written for.
func anyStringMatches(v gjson.Result, re *regexp.Regexp) bool {
	hit := false
	var walk func(gjson.Result) bool
	walk = func(x gjson.Result) bool {
		switch {
		case x.Type == gjson.String:
			hit = re.MatchString(x.Str)
		case x.IsArray() || x.IsObject():
			x.ForEach(func(_, e gjson.Result) bool { return walk(e) })
		}
		return !hit
	}
	walk(v)
	return hit
}

// rawArguments reports whether args is the contract's stand-in for
// arguments that are not a JSON object: {"raw_arguments": "<text>"}.
func rawArguments(args gjson.Result) bool {
	if !args.IsObject() {
		return args.Exists()
	}
	n, raw := 0, false
	args.ForEach(func(k, v gjson.Result) bool {
		n++
		raw = k.Str == "raw_arguments" && v.Type == gjson.String
		return n < 2
	})
	return n == 1 && raw
}

// argPathProblem checks an args path: member names joined by dots, with
// array indexes as numbers ("files.0") and # for every element; gjson's
// other syntax (wildcards, queries, modifiers) and brackets are refused
// rather than left to match nothing.
func argPathProblem(path string) string {
	// A dot inside a name is escaped (a\.b), as gjson reads it.
	for _, seg := range strings.Split(strings.ReplaceAll(path, `\.`, "\x00"), ".") {
		switch {
		case seg == "":
			return "has an empty segment (use names joined by single dots)"
		case seg == "#":
		case strings.ContainsAny(seg, "[]{}()|@*?!=<>%#,\\\"'"):
			return fmt.Sprintf("segment %q is not a member name, an index or #; write array indexes as numbers (files.0, not files[0])", strings.ReplaceAll(seg, "\x00", `\.`))
		}
	}
	return ""
}

func (t *Tools) checkEgress(args gjson.Result) (toolFinding, bool) {
	if !args.Exists() {
		return toolFinding{}, false
	}
	var f toolFinding
	found := false
	bad := func(why string) bool {
		f = toolFinding{outcome: toolEgress, detail: "argument URL " + why}
		found = true
		return false
	}
	walkStringsAndKeys([]byte(args.Raw), func(v stringVisit) bool {
		for _, loc := range t.urlRE.FindAllStringIndex(v.value, -1) {
			if why, isBad := t.urlViolation(v.value[loc[0]:loc[1]]); isBad {
				return bad(why)
			}
			// The finder stops at a quote, but a shell joins quoted
			// pieces into one word: curl 'https://good'@evil/x and
			// 'https://good'.evil/x go to evil.
			if joined, ok := shellJoined(v.value, loc[0], loc[1]); ok {
				if why, isBad := t.urlViolation(joined); isBad {
					return bad(why)
				}
			}
		}
		kind := egressNone
		if !v.isKey {
			kind = egressMember(v.path)
		}
		// A value that is a destination is parsed whole by the tool:
		// WHATWG parsers, urllib and Go's net/url read what follows a
		// quote, a space or a form feed in the authority as userinfo
		// (https://good'@evil/x, https://good @evil/x name evil). A value
		// with line breaks is read by controlSplitViolation.
		if first := strings.TrimLeftFunc(v.value, func(r rune) bool { return r <= ' ' }); !strings.ContainsAny(first, "\t\r\n") && (kind != egressNone || t.urlThenBlankAt(first)) {
			if host, ok := whatwgWholeHost(first); ok {
				if why, isBad := t.hostViolation(host); isBad {
					return bad(why)
				}
			}
		}
		if why, isBad := t.controlSplitViolation(v.value, kind); isBad {
			return bad(why)
		}
		if !v.isKey {
			if kind := egressMember(v.path); kind != egressNone {
				if why, isBad := t.schemelessViolation(v.value, kind); isBad {
					return bad(why)
				}
			}
		}
		if hasWWW(v.value) {
			for _, loc := range t.wwwRE.FindAllStringIndex(v.value, -1) {
				if loc[0] > 0 && strings.IndexByte(".-/@", v.value[loc[0]-1]) >= 0 {
					continue // part of a longer name or of a URL already judged
				}
				end := loc[1]
				if end < len(v.value) && v.value[end] == '\\' {
					// www.good\@evil: the match stops at the backslash,
					// curl reads on to the host after the @.
					if k := strings.IndexAny(v.value[end:], " \t\r\n\"'<>`"); k >= 0 {
						end += k
					} else {
						end = len(v.value)
					}
				}
				if why, isBad := t.urlViolation("https://" + v.value[loc[0]:end]); isBad {
					return bad(why)
				}
			}
		}
		return true
	})
	if !found && rawArguments(args) {
		// Arguments that are not JSON ({'url': 'evil.com/x'}, cut short,
		// JSON5) are what a lenient parser (json_repair, literal_eval)
		// still reads as members: a destination under a URL- or
		// host-named key is judged as it would be in JSON.
		raw := args.Get("raw_arguments").Str
		for _, m := range rawKeyRE.FindAllStringSubmatchIndex(raw, -1) {
			if m[2] >= 0 && raw[m[6]] == ':' && raw[m[2]] != '-' {
				// "the host: Alice", "Our domain: sales": a colon after
				// a word of prose is not a member.
				continue
			}
			kind := egressMember([]seg{{key: raw[m[4]:m[5]]}})
			if kind == egressNone {
				continue
			}
			v := rawValueRE.FindStringSubmatch(raw[m[1]:])
			if v == nil {
				continue
			}
			if why, isBad := t.schemelessViolation(v[1], kind); isBad {
				bad(why)
				break
			}
		}
	}
	return f, found
}

// rawKeyRE finds the keys of key: value and key=value pairs in arguments
// that are not JSON, the key bare or quoted either way, where a member
// starts: at the start, after { , ( ; & ? or a line break, or (key=value,
// --key=value) after a blank or a dash. The match ends at the separator,
// so a value is searched for further keys too (a=1&host=evil.com).
// Group 1 is the blank or dash before the key, when that is all there is.
var rawKeyRE = regexp.MustCompile(`(?:(?:^|[{,(;&?\r\n])\s*|([ \t]+|-))["'\x60]?([A-Za-z_][A-Za-z0-9_.-]*)["'\x60]?\s*([:=])`)

// rawValueRE reads the value after a separator: up to a quote, a blank,
// a comma or a closing bracket.
var rawValueRE = regexp.MustCompile(`^\s*["'\x60]?([^"'\x60\s,}\]]+)`)

// urlThenBlankAt reports whether free text s starts with a URL the finder
// reads that goes on, after blanks or quotes only, with an '@' in the same
// authority (https://good @evil/x): the trick, not prose that starts with
// a URL and mentions an address later ("https://good is down, cc a@b").
func (t *Tools) urlThenBlankAt(s string) bool {
	loc := t.urlRE.FindStringIndex(s)
	if loc == nil || loc[0] != 0 {
		return false
	}
	rest := s[loc[1]:]
	if j := strings.IndexAny(rest, `/?#\`); j >= 0 {
		rest = rest[:j]
	}
	at := strings.IndexByte(rest, '@')
	if at < 0 {
		return false
	}
	for i := 0; i < at; i++ {
		if c := rest[i]; c > ' ' && c != '\'' && c != '"' && c != '`' && c != '<' && c != '>' {
			return false
		}
	}
	return true
}

// startsURL reports whether s starts with a URL the finder reads.
func (t *Tools) startsURL(s string) bool {
	loc := t.urlRE.FindStringIndex(s)
	return loc != nil && loc[0] == 0
}

// shellJoined is the URL s[start:end] (a finder match) with the quoted
// pieces a shell joins to it: from end, while a quote (' " `) is followed
// by another quote or by a character that goes on with a host or its
// userinfo (a letter, a digit, @ . - _ ~), the quote is dropped and the
// text up to the next stop character is added. ok is false when nothing
// was joined.
func shellJoined(s string, start, end int) (string, bool) {
	isQuote := func(c byte) bool { return c == '\'' || c == '"' || c == '`' }
	goesOn := func(c byte) bool { return isQuote(c) || isWordByte(c) || strings.IndexByte("@.-_~", c) >= 0 }
	stop := func(c byte) bool { return c <= ' ' || isQuote(c) || c == '<' || c == '>' }
	var b strings.Builder
	j := end
	for j+1 < len(s) && isQuote(s[j]) && goesOn(s[j+1]) {
		if b.Len() == 0 {
			b.WriteString(s[start:end])
		}
		j++
		k := j
		for k < len(s) && !stop(s[k]) {
			k++
		}
		b.WriteString(s[j:k])
		j = k
	}
	return b.String(), b.Len() > 0
}

// controlSplitViolation judges the URLs of s as WHATWG parsers (browsers,
// Node's fetch) and Python's urllib.parse read them: they delete every ASCII
// tab, CR and LF first, so https:<LF>//evil.com is https://evil.com and
// https://allowed.com<LF>.evil.com names allowed.com.evil.com, where the
// URL finder stops at the line break. Two readings:
//
//   - a value that is a destination (it starts with a URL, or it is under
//     a URL- or host-named member, kind) is read line by line, a line
//     going on with the one before it where the break falls inside a URL
//     (the line before ends with, or the line starts with, a character of
//     : / @ . - or \) and starting a new entry otherwise (a list of URLs
//     or hosts one per line, a word after a link); every entry is judged
//     against both lists;
//   - every line break removed, judged against deny_domains only, in any
//     value (a split denied name such as ev<LF>il.com).
//
// A URL broken by a line break inside longer text (a code string, prose)
// is judged against deny_domains only, and a host broken inside a label
// and going on with a letter (allowed.com<LF>evil.com) is two entries
// (documented).
func (t *Tools) controlSplitViolation(s string, kind int) (string, bool) {
	if !strings.ContainsAny(s, "\t\r\n") {
		return "", false
	}
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\t' || r == '\r' || r == '\n' })
	if len(lines) > 0 {
		startsURL := func(l string) bool { loc := t.urlRE.FindStringIndex(l); return loc != nil && loc[0] == 0 }
		c0 := func(r rune) bool { return r <= ' ' } // WHATWG trims C0 controls and spaces
		if first := strings.TrimLeftFunc(lines[0], c0); kind != egressNone || startsURL(first) || bareScheme(first) {
			// The whole value as a fetch of it reads it, unless it is a
			// list of URLs one per line (whose join names a host under a
			// TLD such as orghttps, which does not resolve).
			list := true
			for _, l := range lines {
				if l = strings.TrimLeftFunc(l, c0); !startsURL(l) {
					list = false
				}
			}
			if !list {
				if host, ok := whatwgWholeHost(strings.Join(lines, "")); ok {
					if why, bad := t.hostViolation(host); bad {
						return why, true
					}
				}
			}
			entries := []string{first}
			for _, l := range lines[1:] {
				l = strings.TrimLeftFunc(l, c0)
				prev := entries[len(entries)-1]
				goesOn := prev != "" && l != "" && !startsURL(l) && !strings.HasPrefix(l, "www.") &&
					!strings.HasPrefix(l, "- ") && !strings.HasPrefix(l, "-- ") && !strings.HasPrefix(l, "..") &&
					(strings.IndexByte(":/@.-\\", prev[len(prev)-1]) >= 0 || strings.IndexByte(":/@.-\\", l[0]) >= 0)
				if goesOn {
					entries[len(entries)-1] += l
				} else {
					entries = append(entries, l)
				}
			}
			for _, e := range entries {
				tok, _, _ := strings.Cut(strings.TrimSpace(e), " ") // a host holds no space
				if loc := t.urlRE.FindStringIndex(tok); loc != nil && loc[0] == 0 {
					if why, bad := t.urlViolation(tok[:loc[1]]); bad {
						return why, true
					}
				} else if kind != egressNone && tok != "" {
					if why, bad := t.schemelessViolation(tok, kind); bad {
						return why, true
					}
				}
			}
		}
	}
	if len(t.denyDomains) == 0 {
		return "", false
	}
	joined := strings.NewReplacer("\t", "", "\r", "", "\n", "").Replace(s)
	for _, cand := range t.urlRE.FindAllString(joined, -1) {
		u, err := url.Parse(whatwgSpecial(strings.TrimRight(cand, ".,;:!?)]}'")))
		if err != nil {
			continue
		}
		host := canonicalHost(u.Hostname())
		for i, d := range t.denyDomains {
			if d.match(host) {
				return fmt.Sprintf("host matches egress.deny_domains[%d]", i), true
			}
		}
	}
	return "", false
}

// whatwgWholeHost is the host a WHATWG parser finds in v, a whole value
// with its tabs and line breaks already removed, for a special scheme: C0
// controls and spaces trimmed, any slashes or backslashes after the
// scheme, the authority up to / ? # or \, the host after its last @ (a
// space is legal in userinfo), without the port. ok is false when v has
// no special scheme or its host would not parse (empty, or with a space).
func whatwgWholeHost(v string) (string, bool) {
	v = strings.TrimFunc(v, func(r rune) bool { return r <= ' ' })
	i := strings.IndexByte(v, ':')
	if i < 0 || !specialScheme(v[:i]) {
		return "", false
	}
	auth := authorityHost(strings.TrimLeft(v[i+1:], `/\`), `/?#\`)
	if auth == "" || strings.ContainsFunc(auth, func(r rune) bool { return r <= ' ' }) {
		return "", false
	}
	return auth, true
}

// authorityHost is the host of the authority that rest (what follows a
// URL's scheme and slashes) starts with: up to the first of ends, after
// the last '@', without brackets or the port. Both URL readings share it;
// each decides which hosts a client could connect to.
func authorityHost(rest, ends string) string {
	if j := strings.IndexAny(rest, ends); j >= 0 {
		rest = rest[:j]
	}
	if j := strings.LastIndexByte(rest, '@'); j >= 0 {
		rest = rest[j+1:]
	}
	if strings.HasPrefix(rest, "[") {
		if j := strings.IndexByte(rest, ']'); j >= 0 {
			return rest[1:j]
		}
		return rest
	}
	if j := strings.LastIndexByte(rest, ':'); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// bareScheme reports whether l is only a special scheme and its colon, with
// any slashes or backslashes (https:, https://): a URL's first line when a
// line break follows its scheme.
func bareScheme(l string) bool {
	i := strings.IndexByte(l, ':')
	return i >= 0 && specialScheme(l[:i]) && strings.Trim(l[i+1:], `/\`) == ""
}

// specialScheme reports whether scheme (any case) is one of the WHATWG URL
// standard's special schemes with a host, which parsers read leniently.
func specialScheme(scheme string) bool {
	switch strings.ToLower(scheme) {
	case "http", "https", "ws", "wss", "ftp":
		return true
	}
	return false
}

// The kinds of member whose value is judged as a destination even without
// a scheme.
const (
	egressNone = iota
	egressURL  // url, uri, href, link, endpoint: a URL a fetch tool would complete with https://
	egressHost // host, hostname, domain: a host, even of one label
)

// egressMember says whether the nearest member name over a value (array
// indexes skipped: {"urls": ["..."]}) names a URL or a host: url, uri,
// href, link, endpoint, host, hostname or domain, in any case, alone or
// as the last word of a longer name (base_url, targetUrl, api-endpoint,
// webhookURL), with a plural s allowed.
func egressMember(path []seg) int {
	i := len(path) - 1
	for i >= 0 && path[i].isIdx {
		i--
	}
	if i < 0 {
		return egressNone
	}
	name := path[i].key
	if len(name) > 1 && (name[len(name)-1] == 's' || name[len(name)-1] == 'S') {
		if k := egressWord(name[:len(name)-1]); k != egressNone {
			return k
		}
	}
	return egressWord(name)
}

func egressWord(name string) int {
	for _, w := range [...]struct {
		word string
		kind int
	}{{"url", egressURL}, {"uri", egressURL}, {"href", egressURL}, {"link", egressURL}, {"endpoint", egressURL},
		{"host", egressHost}, {"hostname", egressHost}, {"domain", egressHost}} {
		n := len(name) - len(w.word)
		if n < 0 || !strings.EqualFold(name[n:], w.word) {
			continue
		}
		// The whole name, or its last word: after a separator or a
		// camelCase capital (targetUrl, webhookURL).
		if n == 0 || strings.IndexByte("_-. ", name[n-1]) >= 0 || isUpper(name[n]) && !isUpper(name[n-1]) {
			return w.kind
		}
	}
	return egressNone
}

// schemelessViolation judges the value of a URL- or host-named member that
// has no scheme (evil.com/x, //evil.com/x, www.evil.com, evil.com:8443),
// as a fetch tool would complete it with https://. A path (/x), a
// fragment, a value with spaces and, under a URL name, a single word
// ("next") are not destinations.
func (t *Tools) schemelessViolation(s string, kind int) (string, bool) {
	s = strings.TrimSpace(s)
	if s == "" || t.startsURL(s) || strings.ContainsAny(s, " \t\r\n") {
		// A value with a scheme is judged as the URL it is; one whose
		// query or path holds a URL (evil.com/?r=https://good) is not.
		return "", false
	}
	var cand string
	switch {
	case strings.HasPrefix(s, "//"):
		cand = "https:" + s
	case strings.IndexByte("/.#?\\", s[0]) >= 0:
		return "", false
	default:
		cand = "https://" + s
	}
	u, err := url.Parse(cand)
	if err != nil {
		return "cannot be parsed", true
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" || kind == egressURL && !strings.ContainsAny(host, ".:") && host != "localhost" {
		return "", false
	}
	return t.hostViolation(host)
}

// wwwExpr finds www. host names anywhere in a string, scheme or not.
const wwwExpr = "(?i)\\bwww\\.[a-z0-9-]+(?:\\.[a-z0-9-]+)+(?::[0-9]+)?(?:[/?#][^\\s\"'<>`]*)?"

// hasWWW is wwwRE's prefilter: "www." in any case.
func hasWWW(s string) bool {
	for from := 0; from < len(s); {
		j := strings.IndexByte(s[from:], '.')
		if j < 0 {
			return false
		}
		j += from
		if j >= 3 && strings.EqualFold(s[j-3:j], "www") {
			return true
		}
		from = j + 1
	}
	return false
}

// urlViolation checks one URL candidate; the answer names the rule, never
// the URL.
func (t *Tools) urlViolation(cand string) (string, bool) {
	cand = strings.TrimRight(cand, ".,;:!?)]}'")
	if strings.IndexByte(cand, '\\') >= 0 {
		// WHATWG parsers (browsers, fetch) read a backslash as a slash,
		// RFC 3986 ones (curl, Python's urllib, most HTTP libraries) as
		// an ordinary character, so https://good\@evil names good for
		// one and evil for the other. Both readings must pass.
		if host, ok := rfc3986Host(cand); ok {
			if why, bad := t.hostViolation(host); bad {
				return why, true
			}
		}
	}
	u, err := url.Parse(whatwgSpecial(cand))
	if err != nil {
		return "cannot be parsed", true
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return "", false // no network destination (file:///...)
	}
	return t.hostViolation(host)
}

// canonicalHost is the host a client connects to, in one spelling: IDNA
// (UTS #46) mapped, so fullwidth letters and ideographic full stops are the
// ASCII names resolvers see; an IP address in the dotted or standard form
// whatever way it was written (2852039166, 0xa9fea9fe, 0251.0376.0251.0376,
// 169.254.43518, ::ffff:169.254.169.254 are 169.254.169.254, as WHATWG
// URL parsers and libc read them); lower case, without trailing dots.
func canonicalHost(host string) string {
	// Every trailing dot goes (not just the root's), so that the result is
	// a fixed point: a list entry and a request host meet in one spelling.
	h := strings.TrimRight(strings.ToLower(host), ".")
	if a, err := idna.Lookup.ToASCII(h); err == nil {
		h = strings.TrimRight(a, ".")
	} else if a, err := whatwgIDNA.ToASCII(h); err == nil {
		// Refused by the STD3 rules (an underscore, a label ending in
		// "-"), which WHATWG parsers do not apply: new URL() maps
		// a_b.ｅvil.com to a_b.evil.com and connects there.
		h = strings.TrimRight(strings.ToLower(a), ".")
	} else if m, err := idna.Punycode.ToASCII(h); err == nil {
		h = strings.TrimRight(strings.ToLower(m), ".")
	}
	if ip, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return ip.Unmap().String()
	}
	if ip, ok := legacyIPv4(h); ok {
		return ip.String()
	}
	return h
}

// whatwgIDNA is the WHATWG URL standard's domain-to-ASCII: UTS #46
// non-transitional mapping with CheckBidi and CheckJoiners, but without
// UseSTD3ASCIIRules and CheckHyphens.
var whatwgIDNA = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.BidiRule(),
	idna.CheckJoiners(true), idna.StrictDomainName(false), idna.CheckHyphens(false), idna.VerifyDNSLength(false))

// legacyIPv4 parses the IPv4 forms inet_aton and the WHATWG URL parser
// accept: one to four parts, each decimal, 0x hex or 0-prefixed octal, the
// last filling the bytes the others leave.
func legacyIPv4(h string) (netip.Addr, bool) {
	parts := strings.Split(h, ".")
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums []uint64
	for _, p := range parts {
		base := 10
		switch {
		case len(p) >= 2 && (p[:2] == "0x" || p[:2] == "0X"):
			p, base = p[2:], 16
			if p == "" {
				p = "0" // WHATWG reads a bare 0x as zero
			}
		case len(p) > 1 && p[0] == '0':
			p, base = p[1:], 8
		}
		if p == "" || p[0] == '+' || p[0] == '-' {
			return netip.Addr{}, false
		}
		n, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		nums = append(nums, n)
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v := last
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// whatwgSpecial reads a URL of a special scheme (http, https, ws, wss,
// ftp) as the WHATWG URL standard does, which is how browsers, Node's fetch
// and many agents' tools read it: any run of slashes or backslashes after
// the scheme starts the authority, and a backslash anywhere is a slash
// (so https:/evil.example and https://evil.example\@good.example name
// evil.example, where Go's url.Parse would see no host or good.example).
func whatwgSpecial(cand string) string {
	i := strings.IndexByte(cand, ':')
	if i < 0 {
		return cand
	}
	if !specialScheme(cand[:i]) {
		return cand
	}
	rest := strings.ReplaceAll(strings.TrimLeft(cand[i+1:], `/\`), `\`, "/")
	return cand[:i] + "://" + rest
}

// rfc3986Host is the host of cand's authority as curl and RFC 3986
// parsers read it where a backslash is no separator: after the scheme's
// colon and any run of slashes or backslashes (curl is that lenient), up
// to the first '/', '?' or '#', after the last '@', without the port. ok
// is false when there is no authority, or the host is not one a client
// could connect to (it still holds a backslash or a control character, as
// in the code text print('https://host\n')): then only the WHATWG
// reading names a destination.
func rfc3986Host(cand string) (host string, ok bool) {
	i := strings.IndexByte(cand, ':')
	if i < 0 {
		return "", false
	}
	auth := strings.TrimLeft(cand[i+1:], `/\`)
	if len(auth) == len(cand)-i-1 {
		// No slash after the scheme: curl still reads an authority for
		// the special schemes it knows (https:host), so do the same.
		if !specialScheme(cand[:i]) {
			return "", false
		}
	}
	auth = authorityHost(auth, "/?#")
	if auth == "" || strings.ContainsFunc(auth, func(r rune) bool { return r == '\\' || r < 0x21 || r == 0x7f }) {
		return "", false
	}
	return auth, true
}

// hostViolation checks a host against the deny and allow lists, in its
// canonical spelling.
func (t *Tools) hostViolation(host string) (string, bool) {
	host = canonicalHost(host)
	for i, d := range t.denyDomains {
		if d.match(host) {
			return fmt.Sprintf("host matches egress.deny_domains[%d]", i), true
		}
	}
	if t.allowDomains == nil {
		return "", false
	}
	for _, d := range t.allowDomains {
		if d.match(host) {
			return "", false
		}
	}
	return "host is not in egress.allow_domains", true
}

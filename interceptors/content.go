package interceptors

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// The content actions, in precedence order.
const (
	actDeny     = "deny"
	actEscalate = "escalate"
	actRedact   = "redact"
	actWarn     = "warn"
)

// contentDefaultReason is the reason of each action unless configured.
func contentDefaultReason(act string) string {
	switch act {
	case actDeny:
		return "content_denied"
	case actEscalate:
		return "content_escalated"
	case actRedact:
		return "content_redacted"
	}
	return "content_warning"
}

// DefaultMask is the replacement of a redacted match; {name} is the
// pattern name.
const DefaultMask = "[REDACTED:{name}]"

// contentConfig is hooksproxy.content (and the approval redactor's config).
type contentConfig struct {
	Deny     []patternConfig   `json:"deny"`
	Redact   []patternConfig   `json:"redact"`
	Escalate []patternConfig   `json:"escalate"`
	Warn     []patternConfig   `json:"warn"`
	Packs    map[string]string `json:"packs"`
	Reason   string            `json:"reason"`
	Reasons  *actionStrings    `json:"reasons"`
	Message  string            `json:"message"`
	Messages *actionStrings    `json:"messages"`
	Mask     *string           `json:"mask"`
}

// actionStrings is a per-action override of a reason or a message.
type actionStrings struct {
	Deny     string `json:"deny"`
	Redact   string `json:"redact"`
	Escalate string `json:"escalate"`
	Warn     string `json:"warn"`
}

func (a *actionStrings) get(action string) string {
	if a == nil {
		return ""
	}
	switch action {
	case actDeny:
		return a.Deny
	case actRedact:
		return a.Redact
	case actEscalate:
		return a.Escalate
	}
	return a.Warn
}

// patternConfig is a regex, written as a string or as {name, regex}.
type patternConfig struct {
	name, expr string
}

// validPatternName reports whether s may name a pattern: it appears in
// masks and messages, so it is kept short and plain.
func validPatternName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isMemberChar(s[i]) && s[i] != '.' {
			return false
		}
	}
	return true
}

func (p *patternConfig) decodeField(path string, r gjson.Result) error {
	switch {
	case r.Type == gjson.String:
		p.expr = r.Str
		return nil
	case r.IsObject():
		var c struct {
			Name  string `json:"name"`
			Regex string `json:"regex"`
		}
		if err := decodeValue(path, r, reflectValue(&c)); err != nil {
			return err
		}
		if c.Regex == "" {
			return cfgErr(path+".regex", "required")
		}
		if c.Name != "" && !validPatternName(c.Name) {
			return cfgErr(path+".name", "must match [A-Za-z0-9_.-]{1,64}")
		}
		p.name, p.expr = c.Name, c.Regex
		return nil
	}
	return cfgErr(path, "must be a regex string or {name, regex}")
}

// contentRules is a compiled content config.
type contentRules struct {
	groups   map[string][]pattern // by action
	reasons  map[string]string
	messages map[string]string
	mask     string
}

func compileContent(config []byte) (*contentRules, error) {
	var c contentConfig
	derr := decodeConfig(config, &c) // what did decode is still checked (problems.after)
	cr := &contentRules{groups: map[string][]pattern{}, reasons: map[string]string{}, messages: map[string]string{}, mask: DefaultMask}
	if c.Mask != nil {
		cr.mask = *c.Mask
	}
	var ps problems
	ps.add(checkReason(configRoot+".reason", c.Reason))
	lists := map[string][]patternConfig{actDeny: c.Deny, actRedact: c.Redact, actEscalate: c.Escalate, actWarn: c.Warn}
	total := 0
	for _, act := range []string{actDeny, actEscalate, actRedact, actWarn} {
		reason, err := pickReason(configRoot+".reasons."+act, c.Reasons.get(act), c.Reason, contentDefaultReason(act))
		ps.add(err)
		cr.reasons[act] = reason
		cr.messages[act] = firstNonEmpty(c.Messages.get(act), c.Message)
		for i, pc := range lists[act] {
			total++
			at := indexPath(configRoot+"."+act, i)
			re, err := compileRegex(at, pc.expr)
			if err != nil {
				ps.add(err)
				continue
			}
			if re.MatchString("") {
				ps.add(cfgErr(at, "regex matches the empty string"))
				continue
			}
			name := pc.name
			if name == "" {
				name = fmt.Sprintf("%s_%d", act, i)
			}
			cr.groups[act] = append(cr.groups[act], newPattern(name, re, nil))
		}
	}
	for _, pack := range sortedKeys(c.Packs) {
		at := memberPath(configRoot+".packs", pack)
		if !slices.Contains(packNames(), pack) {
			ps.add(cfgErr(at, "unknown pack (known: %s)", strings.Join(packNames(), ", ")))
			continue
		}
		switch c.Packs[pack] {
		case actDeny, actRedact, actEscalate, actWarn:
		default:
			ps.add(cfgErr(at, "action must be deny, redact, escalate or warn"))
		}
	}
	for _, pack := range packNames() { // secrets before pii: the more specific names win ties
		if act, ok := c.Packs[pack]; ok {
			pats := packPatterns(pack)
			cr.groups[act] = append(cr.groups[act], pats...)
			total += len(pats)
		}
	}
	if total == 0 {
		ps.add(cfgErr(configRoot, "needs at least one pattern under deny, redact, escalate or warn, or a pack"))
	}
	if err := ps.after(derr); err != nil {
		return nil, err
	}
	return cr, nil
}

// textPartRuns calls fn with the joined text of every run of two or more
// content parts in doc (array elements that are objects with a string
// "text", or a refusal part's "refusal", as chat messages and answers
// carry them), until fn returns
// false. Other elements (an image part) end a run. mapPart, when set,
// rewrites each part's text before the join.
func textPartRuns(doc []byte, mapPart func(string) string, fn func(joined string) bool) {
	if !bytes.Contains(doc, []byte(`"text"`)) && !bytes.Contains(doc, []byte(`"refusal"`)) {
		return
	}
	var walk func(v gjson.Result, depth int) bool
	walk = func(v gjson.Result, depth int) bool {
		if depth > 128 {
			return false
		}
		ok := true
		if !v.IsArray() {
			v.ForEach(func(_, m gjson.Result) bool {
				if m.IsObject() || m.IsArray() {
					ok = walk(m, depth+1)
				}
				return ok
			})
			return ok
		}
		var b strings.Builder
		parts := 0
		flush := func() bool {
			more := parts < 2 || fn(b.String())
			b.Reset()
			parts = 0
			return more
		}
		v.ForEach(func(_, e gjson.Result) bool {
			t := e.Get("text")
			if t.Type != gjson.String {
				t = e.Get("refusal") // a refusal part's text, as the model wrote it
			}
			if e.IsObject() && t.Type == gjson.String {
				part := t.Str
				if mapPart != nil {
					part = mapPart(part)
				}
				b.WriteString(part)
				parts++
			} else if ok = flush(); !ok {
				return false
			}
			if e.IsObject() || e.IsArray() {
				ok = walk(e, depth+1)
			}
			return ok
		})
		return ok && flush()
	}
	walk(gjson.ParseBytes(doc), 0)
}

// crossingMatch names the first pattern of ms that still matches a run of
// content parts once each part is masked on its own: a match across parts.
func crossingMatch(ms *maskSet, doc []byte) (name string, found bool) {
	mask := func(s string) string {
		if masked, _, changed := ms.apply(newText(s)); changed {
			return masked
		}
		return s
	}
	textPartRuns(doc, mask, func(joined string) bool {
		for _, p := range ms.patterns {
			if p.found(newText(joined)) {
				name, found = p.name, true
				return false
			}
		}
		return true
	})
	return name, found
}

// maskSet masks every match of its patterns in a string.
type maskSet struct {
	patterns []pattern
	mask     string
}

// maskPasses bounds the re-scans after masking; what still matches after
// them is replaced whole (a mask can never match, see checkMasks).
const maskPasses = 4

func (m maskSet) render(name string) string { return strings.ReplaceAll(m.mask, "{name}", name) }

// checkMasks refuses a mask that any pattern would find again, since a
// redaction must leave no match behind.
func (m maskSet) checkMasks(at string) error {
	for _, p := range m.patterns {
		r := m.render(p.name)
		for _, q := range m.patterns {
			if q.found(newText(r)) {
				whose := "the mask"
				if m.mask == DefaultMask {
					whose = "the default mask " + strconv.Quote(DefaultMask)
				}
				which := "pattern " + describePattern(q.name)
				if q.name == p.name {
					which = "that same pattern"
				}
				return cfgErr(at, "%s renders as %q for pattern %s, which %s matches again, so a redaction would leave a match behind; set mask to text no pattern matches, such as \"***\" (or name the pattern)",
					whose, r, describePattern(p.name), which)
			}
		}
	}
	return nil
}

// describePattern names a pattern in a config error: an unnamed one by
// where it was written (redact_0 is redact[0]).
func describePattern(name string) string {
	act, i, ok := strings.Cut(name, "_")
	if _, err := strconv.Atoi(i); ok && err == nil && slices.Contains([]string{actDeny, actRedact, actEscalate, actWarn}, act) {
		return strconv.Quote(name) + " (" + act + "[" + i + "])"
	}
	return strconv.Quote(name)
}

// apply returns s with every match masked and the names of the patterns
// that matched, in pattern order; changed is false when nothing matched.
// The spans of all patterns are found on the same text and overlapping
// ones merged, so one pattern's mask never splits another's match and
// leaves part of it readable.
func (m maskSet) apply(in *text) (out string, names []string, changed bool) {
	out = in.s
	for pass := 0; pass < maskPasses; pass++ {
		type hit struct {
			start, end, pat int
		}
		var hits []hit
		t := in
		if pass > 0 {
			t = in.rescan(out)
		}
		for i, p := range m.patterns {
			for _, x := range p.spans(t) {
				hits = append(hits, hit{x[0], x[1], i})
			}
		}
		if len(hits) == 0 {
			return out, names, pass > 0
		}
		for i := range m.patterns {
			for _, h := range hits {
				if h.pat == i {
					names = appendUnique(names, m.patterns[i].name)
					break
				}
			}
		}
		slices.SortStableFunc(hits, func(a, b hit) int { return a.start - b.start })
		var b strings.Builder
		at := 0
		for i := 0; i < len(hits); {
			cur := hits[i]
			for i++; i < len(hits) && hits[i].start < cur.end; i++ {
				cur.end = max(cur.end, hits[i].end)
			}
			b.WriteString(out[at:cur.start])
			b.WriteString(m.render(m.patterns[cur.pat].name))
			at = cur.end
		}
		b.WriteString(out[at:])
		out = b.String()
	}
	// Masks joined to their surroundings can form new matches; past the
	// bound the whole string goes.
	t := in.rescan(out)
	for _, p := range m.patterns {
		if p.found(t) {
			return m.render(p.name), names, true
		}
	}
	return out, names, true
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// firstFound returns the first pattern of ps with a match in s.
func firstFound(ps []pattern, t *text) (string, bool) {
	for _, p := range ps {
		if p.found(t) {
			return p.name, true
		}
	}
	return "", false
}

// Content is the hooksproxy.content interceptor.
type Content struct {
	rules  *contentRules
	redact maskSet
	// nums are the patterns that also judge integers of card length, by
	// action; numRedact masks with them. Without any the walk skips
	// numbers.
	nums      map[string][]pattern
	numRedact maskSet
}

// numericGroups returns the patterns of each action that judge numbers.
func numericGroups(groups map[string][]pattern) (map[string][]pattern, bool) {
	out := map[string][]pattern{}
	found := false
	for act, ps := range groups {
		for _, p := range ps {
			if p.numeric {
				out[act] = append(out[act], p)
				found = true
			}
		}
	}
	return out, found
}

func newContent(_ string, config []byte, _ Env) (points.Interceptor, error) {
	cr, err := compileContent(config)
	if err != nil {
		return nil, err
	}
	ms := maskSet{patterns: cr.groups[actRedact], mask: cr.mask}
	if err := ms.checkMasks(configRoot + ".mask"); err != nil {
		return nil, err
	}
	ct := &Content{rules: cr, redact: ms}
	if nums, ok := numericGroups(cr.groups); ok {
		ct.nums = nums
		ct.numRedact = maskSet{patterns: nums[actRedact], mask: cr.mask}
	}
	return ct, nil
}

// Intercept scans every string in the target, member names included (a
// masked name renames the member). Precedence: deny > escalate
// > redact > warn; warn matches ride along a redact transform as warnings.
func (ct *Content) Intercept(ctx context.Context, c *points.Context) (points.Verdict, error) {
	if err := ctxErr(ctx); err != nil {
		return points.Verdict{}, err
	}
	doc := c.TargetBytes() // read only: a transform builds new bytes
	if doc == nil {
		return points.Allow(), nil
	}
	g := ct.rules.groups
	transformable := c.Point().Transformable()
	var (
		denyName, escName, crossName string
		warnNames                    []string
		redactNames                  []string
		changes                      []change
	)
	// Integers of card length are walked when a pattern judges them.
	err := walkCtxMode(ctx, doc, true, ct.nums != nil, func(v stringVisit) bool {
		t := visitText(v)
		g, redact := g, &ct.redact
		if v.isNum {
			// An integer of card length: only the number patterns judge
			// it, and a mask replaces it with a string.
			g, redact = ct.nums, &ct.numRedact
		}
		if name, ok := firstFound(g[actDeny], t); ok {
			denyName = name
			return false
		}
		if escName != "" {
			return true // only a deny can still change the answer
		}
		if name, ok := firstFound(g[actEscalate], t); ok {
			escName = name
			return true
		}
		if len(g[actRedact]) > 0 && !transformable {
			// Redact degrades to a warning here: name the match, mask nothing.
			for _, p := range g[actRedact] {
				if p.found(t) {
					redactNames = appendUnique(redactNames, p.name)
				}
			}
		} else if len(g[actRedact]) > 0 {
			if masked, names, changed := redact.apply(t); changed {
				changes = append(changes, change{visit: v.keep(), value: masked})
				for _, nm := range names {
					redactNames = appendUnique(redactNames, nm)
				}
			}
		}
		for _, p := range g[actWarn] {
			if p.found(t) {
				warnNames = appendUnique(warnNames, p.name)
			}
		}
		return true
	})
	if err != nil {
		return points.Verdict{}, err
	}
	if denyName == "" && escName == "" {
		// Text split across content parts is one text to the model and
		// to a client that joins the parts: judged joined too. A redact
		// match there cannot be masked part by part, so it denies.
		redactJoined := false
		textPartRuns(doc, nil, func(joined string) bool {
			t := newText(joined)
			if name, ok := firstFound(g[actDeny], t); ok {
				denyName = name
				return false
			}
			if _, ok := firstFound(g[actRedact], t); ok {
				redactJoined = true
			}
			if name, ok := firstFound(g[actEscalate], t); ok && escName == "" {
				escName = name
			}
			return true
		})
		if denyName == "" && redactJoined {
			// Only then the second walk: which match survives masking
			// each part alone (the one across parts).
			crossName, _ = crossingMatch(&ct.redact, doc)
		}
	}
	switch {
	case denyName != "":
		return points.Deny(ct.reason(actDeny), ct.message(actDeny, quoteNames([]string{denyName}))), nil
	case crossName != "":
		msg := ct.rules.messages[actDeny]
		if msg == "" {
			msg = fmt.Sprintf("content matched redact pattern %q across content parts, which no mask of one part removes", crossName)
		}
		return points.Deny(ct.reason(actDeny), msg), nil
	case escName != "":
		return points.Escalate(ct.reason(actEscalate), ct.message(actEscalate, quoteNames([]string{escName}))), nil
	}
	var warnings []points.Warning
	if !transformable && len(redactNames) > 0 {
		warnings = append(warnings, points.Warning{Reason: ct.reason(actRedact),
			Message: fmt.Sprintf("content matched redact pattern %s; transform is not permitted at %s", quoteNames(redactNames), c.Point())})
	}
	if len(warnNames) > 0 {
		warnings = append(warnings, points.Warning{Reason: ct.reason(actWarn), Message: ct.message(actWarn, quoteNames(warnNames))})
	}
	if len(changes) > 0 {
		path, value := redactTransform(doc, changes)
		if !points.ValidJSON(value) {
			// Two member names masked to the same name (or to a name the
			// object has): number the masked names so they stay distinct.
			n := 0
			for i := range changes {
				if changes[i].visit.isKey {
					n++
					changes[i].value += "#" + strconv.Itoa(n)
				}
			}
			path, value = redactTransform(doc, changes)
		}
		v := points.Replace(path, value)
		v.Reason = ct.reason(actRedact)
		v.Message = ct.rules.messages[actRedact]
		if v.Message == "" {
			v.Message = fmt.Sprintf("masked matches of %s", quoteNames(redactNames))
		}
		v.Warnings = warnings
		return v, nil
	}
	if len(warnings) > 0 {
		return points.Verdict{Decision: points.DecisionAllow, Warnings: warnings}, nil
	}
	return points.Allow(), nil
}

func (ct *Content) reason(act string) string { return ct.rules.reasons[act] }

// message is the configured message, or one naming the patterns (quoted
// names, never the matched text).
func (ct *Content) message(act, quoted string) string {
	if m := ct.rules.messages[act]; m != "" {
		return m
	}
	return fmt.Sprintf("content matched %s pattern %s", act, quoted)
}

func quoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// change is one masked string of a redaction.
type change struct {
	visit stringVisit
	value string
}

// redactTransform builds one replace of the narrowest §5.2-expressible
// node that holds every change, its value being that node with each
// changed string re-encoded in place and every other byte kept.
func redactTransform(doc []byte, changes []change) (string, []byte) {
	prefix := changes[0].visit.path
	for _, ch := range changes[1:] {
		prefix = prefix[:commonPrefix(prefix, ch.visit.path)]
	}
	path, n := targetPathString(prefix)
	start, end := locate(doc, prefix[:n])
	ss := make([]splice, len(changes))
	for i, ch := range changes {
		ss[i] = splice{start: ch.visit.start - start, end: ch.visit.end - start, repl: encodeString(ch.value)}
	}
	return path, applySplices(doc[start:end], ss)
}

// locate returns the byte span of the node at segs in doc (valid JSON,
// no leading whitespace); the segments are known to exist.
func locate(doc []byte, segs []seg) (start, end int) {
	cur := gjson.Parse(bytesView(doc))
	base := 0
	for _, s := range segs {
		i := 0
		isArr := cur.IsArray()
		var next gjson.Result
		nextBase := 0
		cur.ForEach(func(k, v gjson.Result) bool {
			hit := (isArr && s.isIdx && i == s.index) || (!isArr && !s.isIdx && k.Str == s.key)
			i++
			if hit {
				next, nextBase = v, base+(v.Index-cur.Index)
				return false
			}
			return true
		})
		cur, base = next, nextBase
	}
	return base, base + len(cur.Raw)
}

package interceptors

import (
	"bytes"
	"context"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// rulesConfig is hooksproxy.rules: the CTK interceptor_script rule shape,
// with at optional and match values that may be regexes.
type rulesConfig struct {
	Rules   []ruleConfig `json:"rules"`
	Default verdictSpec  `json:"default"`
}

type ruleConfig struct {
	At     pointSet    `json:"at"`
	Match  matchSet    `json:"match"`
	Return verdictSpec `json:"return"`
}

// matchSet is a rule's match object: path → matcher, every path parsed
// and every matcher compiled at load, sorted by path text.
type matchSet []predicate

func (ms *matchSet) decodeField(path string, r gjson.Result) error {
	if !r.IsObject() {
		return cfgErr(path, "must be an object of path: matcher, not %s", typeName(r))
	}
	var ps problems
	seen := map[string]bool{}
	var out matchSet
	r.ForEach(func(k, v gjson.Result) bool {
		at := memberPath(path, k.Str)
		if seen[k.Str] {
			ps.add(cfgErr(at, "duplicate key"))
			return true
		}
		seen[k.Str] = true
		p, ok := parseCTKPath(k.Str)
		if !ok {
			ps.add(cfgErr(at, "invalid path (use a.b[0].c, names of letters, digits, _ and -)"))
		}
		var m matcher
		ps.add(m.decodeField(at, v))
		out = append(out, predicate{text: k.Str, path: p, m: m})
		return true
	})
	if err := ps.err(); err != nil {
		return err
	}
	slices.SortStableFunc(out, func(a, b predicate) int { return strings.Compare(a.text, b.text) })
	*ms = out
	return nil
}

// matcher is one match value: exact JSON, {regex: "..."} over a string or
// the text of content parts (partsText), or {equals: <json>} for an exact
// value that would otherwise read as an operator. An object holding regex
// or equals is an operator and may hold nothing else, so a typo such as
// {regex, flags} is an error rather than a literal that never matches.
type matcher struct {
	re   *regexp.Regexp
	want any
}

func (m *matcher) decodeField(path string, r gjson.Result) error {
	if r.IsObject() {
		op := ""
		var extra []string
		r.ForEach(func(k, _ gjson.Result) bool {
			switch {
			case op == "" && (k.Str == "regex" || k.Str == "equals"):
				op = k.Str
			default:
				extra = append(extra, k.Str)
			}
			return true
		})
		var ps problems
		if op != "" && len(extra) > 0 {
			for _, k := range extra {
				ps.add(cfgErr(memberPath(path, k), "unknown key: a {%s} matcher holds only %s (match a literal object with {equals: ...})", op, op))
			}
			if op != "regex" {
				return ps.err()
			}
		}
		switch op {
		case "regex":
			// Checked beside an unknown key too: a load reports both.
			pat := r.Get("regex")
			if pat.Type != gjson.String {
				ps.add(cfgErr(path+".regex", "must be a string"))
				return ps.err()
			}
			re, err := compileRegex(path+".regex", pat.Str)
			ps.add(err)
			if err := ps.err(); err != nil {
				return err
			}
			m.re = re
			return nil
		case "equals":
			r = r.Get("equals")
		}
	}
	v, ok := decodeJSON(r.Raw)
	if !ok {
		return cfgErr(path, "not a JSON value")
	}
	m.want = v
	return nil
}

// matches reports whether got matches. For content parts a regex has
// several readings (partsText): broad (a rule that denies or transforms)
// matches when any reading does, so no split across parts evades it;
// otherwise (a rule that allows) every joined reading must match, so extra
// parts cannot widen an allow.
func (m matcher) matches(got gjson.Result, broad bool) bool {
	if m.re != nil {
		if got.Type == gjson.String {
			return m.re.MatchString(got.Str)
		}
		parts, ok := partsText(got)
		if !ok {
			return false
		}
		joined, lines := strings.Join(parts, ""), strings.Join(parts, "\n")
		if !broad {
			return m.re.MatchString(joined) && m.re.MatchString(lines)
		}
		if m.re.MatchString(joined) || m.re.MatchString(lines) {
			return true
		}
		for _, p := range parts {
			if m.re.MatchString(p) {
				return true
			}
		}
		return false
	}
	if s, ok := m.want.(string); ok {
		return got.Type == gjson.String && got.Str == s
	}
	v, ok := decodeJSON(got.Raw)
	return ok && jsonValueEqual(v, m.want)
}

// partsText reads got as chat content parts: an array of objects, at least
// one with a string "text" (of any type, as content.go's textPartRuns reads
// it) or "refusal" (a refusal part), and returns those texts in order;
// other parts (image_url, input_audio, file) add none. Anything else is not
// parts. A regex judges them joined with nothing between (content.go's
// join: "block"+"me" is blockme), joined with newlines (as chat templates
// render parts, so \b and (?m)^ see the boundary the model sees) and, for
// a denying rule, each part alone (as content.go also does).
func partsText(got gjson.Result) ([]string, bool) {
	if !got.IsArray() {
		return nil, false
	}
	var texts []string
	objects := true
	got.ForEach(func(_, e gjson.Result) bool {
		if !e.IsObject() {
			objects = false
			return false
		}
		e.ForEach(func(k, v gjson.Result) bool {
			if (k.Str == "text" || k.Str == "refusal") && v.Type == gjson.String {
				texts = append(texts, v.Str)
			}
			return true
		})
		return true
	})
	if !objects || len(texts) == 0 {
		return nil, false
	}
	return texts, true
}

type predicate struct {
	text string
	path ctkPath
	m    matcher
}

type rule struct {
	at    pointSet
	preds matchSet
	ret   verdictSpec
	broad bool // ret denies or transforms: its matchers take any reading
	// denies: ret is a deny, which a path into tool-call arguments that
	// are not an object (raw_arguments) satisfies, since they cannot be
	// shown not to match.
	denies bool
}

// Rules is the hooksproxy.rules interceptor.
type Rules struct {
	rules []rule
	def   verdictSpec
}

func newRules(_ string, config []byte, _ Env) (points.Interceptor, error) {
	var c rulesConfig
	var derr error
	root := configRoot + ".rules"
	if raw := bytes.TrimSpace(config); len(raw) > 0 && raw[0] == '[' {
		// A bare list of rules, as a CTK vector's interceptor_script is
		// written: pasted as it is, its problems are named where they are.
		root = configRoot
		if !gjson.ValidBytes(raw) {
			return nil, cfgErr(configRoot, "not valid JSON")
		}
		c.Rules = []ruleConfig{}
		derr = decodeValue(configRoot, gjson.ParseBytes(raw), reflect.ValueOf(&c.Rules).Elem())
	} else {
		derr = decodeConfig(config, &c) // what did decode is still checked (problems.after)
	}
	if c.Rules == nil {
		if derr != nil {
			return nil, derr
		}
		return nil, cfgErr(root, "required")
	}
	out := &Rules{def: c.Default}
	var ps problems
	for i, rc := range c.Rules {
		at := indexPath(root, i)
		if !rc.Return.set {
			ps.add(cfgErr(at+".return", "required"))
		}
		broad := rc.Return.set && rc.Return.verdict().Decision != points.DecisionAllow
		denies := rc.Return.set && rc.Return.verdict().Decision == points.DecisionDeny
		out.rules = append(out.rules, rule{at: rc.At, preds: rc.Match, ret: rc.Return, broad: broad, denies: denies})
	}
	if err := ps.after(derr); err != nil {
		return nil, err
	}
	return out, nil
}

// Intercept answers with the first rule whose at and match hold, else the
// default, else allow.
func (r *Rules) Intercept(ctx context.Context, c *points.Context) (points.Verdict, error) {
	if err := ctxErr(ctx); err != nil {
		return points.Verdict{}, err
	}
	doc := gjson.Parse(bytesView(c.Raw())) // a view: nothing of it outlives the call
	for _, ru := range r.rules {
		if !ru.at.has(c.Point()) {
			continue
		}
		ok := true
		for _, p := range ru.preds {
			got, found, opaque := p.path.lookupArgs(doc)
			if opaque && ru.denies {
				continue // arguments that are not an object: a deny cannot rule them out
			}
			if !found || !p.m.matches(got, ru.broad) {
				ok = false
				break
			}
		}
		if ok {
			return ru.ret.verdict(), nil
		}
	}
	if r.def.set {
		return r.def.verdict(), nil
	}
	return points.Allow(), nil
}

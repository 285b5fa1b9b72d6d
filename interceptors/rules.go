package interceptors

import (
	"context"
	"regexp"

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
	At     pointSet           `json:"at"`
	Match  map[string]matcher `json:"match"`
	Return verdictSpec        `json:"return"`
}

// matcher is one match value: exact JSON, {regex: "..."} over a string, or
// {equals: <json>} for an exact value that would otherwise read as an
// operator.
type matcher struct {
	re   *regexp.Regexp
	want any
}

func (m *matcher) decodeField(path string, r gjson.Result) error {
	if r.IsObject() {
		var keys []string
		r.ForEach(func(k, _ gjson.Result) bool { keys = append(keys, k.Str); return true })
		if len(keys) == 1 {
			switch keys[0] {
			case "regex":
				pat := r.Get("regex")
				if pat.Type != gjson.String {
					return cfgErr(path+".regex", "must be a string")
				}
				re, err := compileRegex(path+".regex", pat.Str)
				if err != nil {
					return err
				}
				m.re = re
				return nil
			case "equals":
				r = r.Get("equals")
			}
		}
	}
	v, ok := decodeJSON(r.Raw)
	if !ok {
		return cfgErr(path, "not a JSON value")
	}
	m.want = v
	return nil
}

func (m matcher) matches(got gjson.Result) bool {
	if m.re != nil {
		return got.Type == gjson.String && m.re.MatchString(got.Str)
	}
	if s, ok := m.want.(string); ok {
		return got.Type == gjson.String && got.Str == s
	}
	v, ok := decodeJSON(got.Raw)
	return ok && jsonValueEqual(v, m.want)
}

type predicate struct {
	path ctkPath
	m    matcher
}

type rule struct {
	at    pointSet
	preds []predicate
	ret   verdictSpec
}

// Rules is the hooksproxy.rules interceptor.
type Rules struct {
	rules []rule
	def   verdictSpec
}

func newRules(_ string, config []byte, _ Env) (points.Interceptor, error) {
	var c rulesConfig
	if err := decodeConfig(config, &c); err != nil {
		return nil, err
	}
	if c.Rules == nil {
		return nil, cfgErr(configRoot+".rules", "required")
	}
	out := &Rules{def: c.Default}
	for i, rc := range c.Rules {
		at := indexPath(configRoot+".rules", i)
		if !rc.Return.set {
			return nil, cfgErr(at+".return", "required")
		}
		r := rule{at: rc.At, ret: rc.Return}
		for _, k := range sortedKeys(rc.Match) {
			p, ok := parseCTKPath(k)
			if !ok {
				return nil, cfgErr(memberPath(at+".match", k), "invalid path (use a.b[0].c)")
			}
			r.preds = append(r.preds, predicate{path: p, m: rc.Match[k]})
		}
		out.rules = append(out.rules, r)
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
			got, found := p.path.lookup(doc)
			if !found || !p.m.matches(got) {
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

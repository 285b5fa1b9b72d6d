package interceptors

import (
	"context"
	"encoding/json"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// RedactedExtension is the extensions namespace under which the redactor
// documents what it masked (§9: extensions.<host>.redacted, an array of
// §5.2 path strings).
const RedactedExtension = "hooksproxy"

// redactor is the approval redactor built from a content config.
type redactor struct {
	ms maskSet
	// nums masks the integers of card length (nil patterns: not walked).
	nums maskSet
}

// NewRedactor builds an approval redactor from a hooksproxy.content config
// (e.g. {packs: {secrets: redact, pii: redact}}). It masks, in every string
// of the whole context, the matches of every pattern the config names —
// under deny, redact, escalate or warn and every pack, whatever its action,
// since each is something policy flagged — and lists the masked target
// locations under extensions.hooksproxy.redacted.
func NewRedactor(config []byte) (points.Redactor, error) {
	cr, err := compileContent(config)
	if err != nil {
		return nil, err
	}
	var all []pattern
	for _, act := range []string{actDeny, actEscalate, actRedact, actWarn} {
		all = append(all, cr.groups[act]...)
	}
	ms := maskSet{patterns: all, mask: cr.mask}
	if err := ms.checkMasks(configRoot + ".mask"); err != nil {
		return nil, err
	}
	r := &redactor{ms: ms}
	for _, p := range all {
		if p.numeric {
			r.nums.patterns = append(r.nums.patterns, p)
		}
	}
	r.nums.mask = cr.mask
	return r, nil
}

// Redact returns raw with every match masked. Target paths are reported
// as §5.2 paths; the aliased member mirrors the target, so its strings are
// masked identically.
func (r *redactor) Redact(ctx context.Context, raw []byte) ([]byte, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if !points.ValidJSON(raw) {
		return nil, errInvalidContext
	}
	root := gjson.ParseBytes(raw)
	if !root.IsObject() {
		return nil, errInvalidContext
	}
	doc := []byte(root.Raw)
	var (
		ss       []splice
		redacted []string
	)
	err := walkCtxMode(ctx, doc, true, len(r.nums.patterns) > 0, func(v stringVisit) bool {
		if v.isKey && len(v.path) == 0 || len(v.path) == 1 && isEnvelopeMember(v.path[0].key) {
			return true // the envelope's own names and members stay
		}
		ms := &r.ms
		if v.isNum {
			ms = &r.nums // a masked number becomes a string
		}
		masked, _, changed := ms.apply(visitText(v))
		if !changed {
			return true
		}
		ss = append(ss, splice{start: v.start, end: v.end, repl: encodeString(masked)})
		if len(v.path) > 0 && !v.path[0].isIdx && v.path[0].key == "target" {
			p, _ := targetPathString(v.path[1:])
			redacted = appendUnique(redacted, p)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(ss) == 0 {
		return raw, nil
	}
	out := applySplices(doc, ss)
	if len(redacted) > 0 {
		ext := gjson.GetBytes(out, "extensions."+RedactedExtension)
		if !ext.Exists() || ext.IsObject() {
			var merged []string
			ext.Get("redacted").ForEach(func(_, p gjson.Result) bool {
				if p.Type == gjson.String {
					merged = appendUnique(merged, p.Str)
				}
				return true
			})
			for _, p := range redacted {
				merged = appendUnique(merged, p)
			}
			list, _ := json.Marshal(merged)
			out, err = sjson.SetRawBytes(out, "extensions."+RedactedExtension+".redacted", list)
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// isEnvelopeMember reports the top-level members that are never masked:
// fixed-format protocol fields whose masking would break the envelope the
// approver receives.
func isEnvelopeMember(k string) bool {
	switch k {
	case "spec", "interception_point", "timestamp", "sequence":
		return true
	}
	return false
}

type redactError string

func (e redactError) Error() string { return string(e) }

// errInvalidContext is the redactor's answer to input that is not a JSON
// object.
const errInvalidContext = redactError("interceptors: redactor input is not a JSON object context")

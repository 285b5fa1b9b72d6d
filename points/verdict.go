package points

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gowebpki/jcs"
	"github.com/tidwall/gjson"
)

// Decision is one of the three verdict decisions of §5.1.
type Decision string

// The closed set of decisions. Warn is an allow with warnings; escalate is a
// deny with an approval block.
const (
	DecisionAllow     Decision = "allow"
	DecisionDeny      Decision = "deny"
	DecisionTransform Decision = "transform"
)

// Permits reports whether d lets the action proceed.
func (d Decision) Permits() bool { return d == DecisionAllow || d == DecisionTransform }

// EvidenceMaxBytes caps the RFC 8785 canonical size of verdict.evidence (§5.3).
const EvidenceMaxBytes = 10240

// Warning is a recorded concern that does not change control flow.
type Warning struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// reasonSet and messageSet say a parsed verdict wrote the member,
	// "" included: §7.3 tells {reason: x} and {reason: x, message: ""}
	// apart, and the record keeps what was written.
	reasonSet, messageSet bool
}

// MarshalJSON writes a member when it is non-empty or was written so.
func (w Warning) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	if w.Reason != "" || w.reasonSet {
		b = append(b, `"reason":`...)
		b = AppendJSONString(b, w.Reason)
	}
	if w.Message != "" || w.messageSet {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, `"message":`...)
		b = AppendJSONString(b, w.Message)
	}
	return append(b, '}'), nil
}

// TransformSpec is the replace-at-path body of a transform verdict (§5.2).
// A nil Value means JSON null.
type TransformSpec struct {
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

// Verdict is an interceptor's answer (§5). Approval non-nil (an object, "{}"
// at least) marks a deny as liftable. Evidence, when set, is a JSON object.
type Verdict struct {
	Decision     Decision        `json:"decision"`
	Reason       string          `json:"reason,omitempty"`
	Message      string          `json:"message,omitempty"`
	Warnings     []Warning       `json:"warnings,omitempty"`
	Approval     json.RawMessage `json:"approval,omitempty"`
	Transform    *TransformSpec  `json:"transform,omitempty"`
	Evidence     json.RawMessage `json:"evidence,omitempty"`
	ResultLabels []string        `json:"result_labels,omitempty"`
}

// Allow returns a plain allow verdict.
func Allow() Verdict { return Verdict{Decision: DecisionAllow} }

// Deny returns a deny with reason and message.
func Deny(reason, message string) Verdict {
	return Verdict{Decision: DecisionDeny, Reason: reason, Message: message}
}

// Warn returns an allow that records one warning (§5.1: warn is allow+warnings).
func Warn(reason, message string) Verdict {
	return Verdict{Decision: DecisionAllow, Warnings: []Warning{{Reason: reason, Message: message}}}
}

// Escalate returns a liftable deny (deny + approval: {}), which the approval
// seam may lift.
func Escalate(reason, message string) Verdict {
	return Verdict{Decision: DecisionDeny, Reason: reason, Message: message, Approval: json.RawMessage(`{}`)}
}

// Replace returns a transform verdict that replaces the value at path.
func Replace(path string, value json.RawMessage) Verdict {
	return Verdict{Decision: DecisionTransform, Transform: &TransformSpec{Path: path, Value: value}}
}

// Liftable reports whether v is a deny the approval seam may lift.
func (v Verdict) Liftable() bool { return v.Decision == DecisionDeny && v.Approval != nil }

// hostError builds the substituted deny for a reserved reason.
func hostError(reason Reason, message string) Verdict {
	return Verdict{Decision: DecisionDeny, Reason: reason, Message: message}
}

// VerdictError says why a verdict failed §5 validation. Reason is the
// reserved reason the host substitutes, verdict_invalid (a transform path
// is checked where it is applied, as a TransformError), or the one an
// interceptor's own error names.
type VerdictError struct {
	Reason Reason
	Detail string
}

func (e *VerdictError) Error() string { return "verdict invalid: " + e.Detail }

func invalid(format string, args ...any) *VerdictError {
	return &VerdictError{Reason: ReasonVerdictInvalid, Detail: fmt.Sprintf(format, args...)}
}

// ParseVerdict reads an interceptor's wire verdict and validates it per §5.
// Unknown members are ignored, as the reference core does.
func ParseVerdict(raw []byte) (Verdict, error) {
	raw = bytes.TrimSpace(raw)
	if !ValidJSON(raw) {
		return Verdict{}, invalid("verdict is not JSON")
	}
	root := gjson.ParseBytes(raw)
	if !root.IsObject() {
		return Verdict{}, invalid("verdict must be a JSON object")
	}
	var v Verdict
	d := root.Get("decision")
	if d.Type != gjson.String {
		return Verdict{}, invalid("verdict.decision must be allow, deny or transform")
	}
	v.Decision = Decision(d.Str)
	var err error
	if v.Reason, err = optString(root, "reason"); err != nil {
		return Verdict{}, err
	}
	if v.Message, err = optString(root, "message"); err != nil {
		return Verdict{}, err
	}
	if w := root.Get("warnings"); w.Exists() && w.Type != gjson.Null {
		if !w.IsArray() {
			return Verdict{}, invalid("warnings must be an array of objects")
		}
		for _, item := range w.Array() {
			if !item.IsObject() {
				return Verdict{}, invalid("warnings must be an array of objects")
			}
			var wr Warning
			if wr.Reason, err = optString(item, "reason"); err != nil {
				return Verdict{}, err
			}
			if wr.Message, err = optString(item, "message"); err != nil {
				return Verdict{}, err
			}
			wr.reasonSet = item.Get("reason").Type == gjson.String
			wr.messageSet = item.Get("message").Type == gjson.String
			v.Warnings = append(v.Warnings, wr)
		}
	}
	if a := root.Get("approval"); a.Exists() && a.Type != gjson.Null {
		if !a.IsObject() {
			return Verdict{}, invalid("approval must be an object")
		}
		v.Approval = json.RawMessage(a.Raw)
	}
	if t := root.Get("transform"); t.Exists() && t.Type != gjson.Null {
		if !t.IsObject() {
			return Verdict{}, invalid("transform must be {path, value}")
		}
		p := t.Get("path")
		if p.Type != gjson.String {
			return Verdict{}, invalid("transform.path missing")
		}
		ts := &TransformSpec{Path: p.Str}
		if val := t.Get("value"); val.Exists() {
			ts.Value = json.RawMessage(val.Raw)
		}
		v.Transform = ts
	}
	if e := root.Get("evidence"); e.Exists() && e.Type != gjson.Null {
		if !e.IsObject() {
			return Verdict{}, invalid("evidence must be an object")
		}
		v.Evidence = json.RawMessage(e.Raw)
	}
	if l := root.Get("result_labels"); l.Exists() && l.Type != gjson.Null {
		if !l.IsArray() {
			return Verdict{}, invalid("result_labels must be an array of strings")
		}
		for _, s := range l.Array() {
			if s.Type != gjson.String {
				return Verdict{}, invalid("result_labels must be an array of strings")
			}
			v.ResultLabels = append(v.ResultLabels, s.Str)
		}
	}
	if err := v.Validate(); err != nil {
		return Verdict{}, err
	}
	return v, nil
}

func optString(obj gjson.Result, key string) (string, error) {
	r := obj.Get(key)
	switch {
	case !r.Exists(), r.Type == gjson.Null:
		return "", nil
	case r.Type == gjson.String:
		return r.Str, nil
	}
	return "", invalid("%s must be a string or null", key)
}

// Validate applies the §5 rules to a verdict built in Go or parsed from the
// wire. It returns a *VerdictError or nil. A transform's path is checked
// where the transform is applied (ParseTargetPath, §5.2), not here.
func (v Verdict) Validate() error {
	switch v.Decision {
	case DecisionAllow, DecisionDeny, DecisionTransform:
	default:
		return invalid("decision %q is not allow, deny or transform", string(v.Decision))
	}
	if IsHostError(v.Reason) {
		return invalid("reason must not start with host_error:")
	}
	for _, w := range v.Warnings {
		if IsHostError(w.Reason) {
			return invalid("warnings[].reason must not start with host_error:")
		}
	}
	if v.Approval != nil {
		if v.Decision != DecisionDeny {
			return invalid("approval is permitted only on deny")
		}
		if !ValidJSON(v.Approval) || !gjson.ParseBytes(v.Approval).IsObject() {
			return invalid("approval must be an object")
		}
	}
	switch {
	case v.Decision == DecisionTransform && v.Transform == nil:
		return invalid("transform body required when decision is transform")
	case v.Decision != DecisionTransform && v.Transform != nil:
		return invalid("transform body forbidden when decision is not transform")
	}
	if v.Transform != nil {
		// The path is not checked here: a path rooted elsewhere or outside
		// the grammar is a transform that fails to apply (§5.2), not an
		// invalid verdict (§5's list), so it is refused where it is
		// applied, as a path that does not resolve is: decided_by null,
		// and in the sequential profiles a short-circuit (§7.4).
		if v.Transform.Value != nil && !ValidJSON(v.Transform.Value) {
			return invalid("transform.value is not JSON")
		}
	}
	if v.Evidence != nil {
		if err := checkEvidence(v.Evidence); err != nil {
			return err
		}
	}
	return nil
}

func checkEvidence(raw json.RawMessage) error {
	if !ValidJSON(raw) {
		return invalid("evidence is not JSON")
	}
	e := gjson.ParseBytes(raw)
	if !e.IsObject() {
		return invalid("evidence must be an object")
	}
	var bad error
	e.ForEach(func(k, val gjson.Result) bool {
		switch k.Str {
		case "artefact":
			if val.Type != gjson.String && val.Type != gjson.Null {
				bad = invalid("evidence.artefact must be a string")
			}
		case "verification_pointers":
			if val.Type == gjson.Null {
				return true
			}
			if !val.IsObject() {
				bad = invalid("evidence.verification_pointers must be an object of strings")
				return false
			}
			val.ForEach(func(_, p gjson.Result) bool {
				if p.Type != gjson.String {
					bad = invalid("evidence.verification_pointers must be an object of strings")
					return false
				}
				return true
			})
		default:
			bad = invalid("evidence has unknown member")
		}
		return bad == nil
	})
	if bad != nil {
		return bad
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return invalid("evidence cannot be canonicalized")
	}
	if len(canon) > EvidenceMaxBytes {
		return invalid("evidence canonical size %d exceeds %d bytes", len(canon), EvidenceMaxBytes)
	}
	return nil
}

// MarshalJSON writes the wire form; an empty approval is written as {}.
func (v Verdict) MarshalJSON() ([]byte, error) {
	type wire Verdict
	return json.Marshal(wire(v))
}

// String is a payload-free summary for logs.
func (v Verdict) String() string {
	var b strings.Builder
	b.WriteString(string(v.Decision))
	if v.Reason != "" {
		b.WriteString(" ")
		b.WriteString(v.Reason)
	}
	if v.Liftable() {
		b.WriteString(" (liftable)")
	}
	return b.String()
}

// ownVerdict returns v with its strings and bytes in memory of its own, so
// that it outlives the context it may have been read from. A verdict with
// none (a plain allow) is returned as it is.
func ownVerdict(v Verdict) Verdict {
	v.Reason = strings.Clone(v.Reason)
	v.Message = strings.Clone(v.Message)
	if v.Warnings != nil {
		ws := make([]Warning, len(v.Warnings))
		for i, w := range v.Warnings {
			ws[i] = Warning{Reason: strings.Clone(w.Reason), Message: strings.Clone(w.Message), reasonSet: w.reasonSet, messageSet: w.messageSet}
		}
		v.Warnings = ws
	}
	if v.Approval != nil {
		v.Approval = bytes.Clone(v.Approval)
	}
	if v.Transform != nil {
		t := *v.Transform
		t.Path = strings.Clone(t.Path)
		t.Value = bytes.Clone(t.Value)
		v.Transform = &t
	}
	if v.Evidence != nil {
		v.Evidence = bytes.Clone(v.Evidence)
	}
	if v.ResultLabels != nil {
		ls := make([]string, len(v.ResultLabels))
		for i, l := range v.ResultLabels {
			ls[i] = strings.Clone(l)
		}
		v.ResultLabels = ls
	}
	return v
}

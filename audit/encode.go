package audit

import (
	"strconv"

	"github.com/hooksproxy/hooksproxy/points"
)

// appendRecord appends r as encoding/json (HTML escaping off) would write
// it, plus the newline, for the records every emission produces: plain
// strings and a verdict without warnings, transform, evidence, labels or an
// approval. It reports false for anything else, and encode then falls back
// to encoding/json; TestAppendRecordMatchesJSON and FuzzAppendRecord hold
// the two to the same bytes. Marshalling by reflection was the largest
// cost of a record.
func appendRecord(b []byte, r *points.Record) ([]byte, bool) {
	v := &r.Verdict
	if len(v.Warnings) > 0 || v.Approval != nil || v.Transform != nil || len(v.Evidence) > 0 || len(v.ResultLabels) > 0 {
		return b, false
	}
	ok := true
	str := func(s string) {
		if !plain(s) {
			ok = false
			return
		}
		b = append(b, '"')
		b = append(b, s...)
		b = append(b, '"')
	}
	optStr := func(key, s string) {
		if s != "" {
			b = append(b, `,"`+key+`":`...)
			str(s)
		}
	}
	ptrStr := func(key string, s *string) {
		b = append(b, `,"`+key+`":`...)
		if s == nil {
			b = append(b, "null"...)
		} else {
			str(*s)
		}
	}
	b = append(b, `{"interception_point":`...)
	str(string(r.InterceptionPoint))
	b = append(b, `,"mode":`...)
	str(string(r.Mode))
	b = append(b, `,"verdict":{"decision":`...)
	str(string(v.Decision))
	optStr("reason", v.Reason)
	optStr("message", v.Message)
	b = append(b, '}')
	ptrStr("input_identity", r.InputIdentity)
	ptrStr("enforced_identity", r.EnforcedIdentity)
	ptrStr("identity_provider", r.IdentityProvider)
	b = append(b, `,"session_id":`...)
	str(r.SessionID)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendInt(b, r.Sequence, 10)
	optStr("timestamp", r.Timestamp)
	if r.Trace != nil {
		b = append(b, `,"trace":{`...)
		n := len(b)
		if r.Trace.TraceID != "" {
			b = append(b, `"trace_id":`...)
			str(r.Trace.TraceID)
		}
		if r.Trace.SpanID != "" {
			if len(b) > n {
				b = append(b, ',')
			}
			b = append(b, `"span_id":`...)
			str(r.Trace.SpanID)
		}
		b = append(b, '}')
	}
	b = append(b, `,"decided_by":`...)
	if r.DecidedBy == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*r.DecidedBy), 10)
	}
	c := &r.Composition
	b = append(b, `,"composition":{"profile":`...)
	str(c.Profile)
	optStr("on_approval", c.OnApproval)
	optStr("on_disagreement", c.OnDisagreement)
	optStr("on_transform_conflict", c.OnTransformConflict)
	b = append(b, '}')
	optStr("declaration", r.Declaration)
	if len(r.Verdicts) > 0 {
		b = append(b, `,"verdicts":[`...)
		for i, s := range r.Verdicts {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"index":`...)
			b = strconv.AppendInt(b, int64(s.Index), 10)
			b = append(b, `,"decision":`...)
			str(string(s.Decision))
			optStr("reason", s.Reason)
			optStr("name", s.Name)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if r.FoldTruncated != nil {
		b = append(b, `,"fold_truncated":`...)
		b = strconv.AppendBool(b, *r.FoldTruncated)
	}
	optStr("resolved_by", r.ResolvedBy)
	b = append(b, `,"interceptors_registered":`...)
	b = strconv.AppendInt(b, int64(r.InterceptorsRegistered), 10)
	optStr("request_id", r.RequestID)
	b = append(b, "}\n"...)
	return b, ok
}

// plain reports whether s is printable ASCII without '"' or '\\', which
// encoding/json writes as it is.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

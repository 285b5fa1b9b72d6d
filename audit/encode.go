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
	w := recWriter{b: b, ok: true}
	w.b = append(w.b, `{"interception_point":`...)
	w.str(string(r.InterceptionPoint))
	w.b = append(w.b, `,"mode":`...)
	w.str(string(r.Mode))
	w.b = append(w.b, `,"verdict":{"decision":`...)
	w.str(string(v.Decision))
	w.optStr("reason", v.Reason)
	w.optStr("message", v.Message)
	w.b = append(w.b, '}')
	w.ptrStr("input_identity", r.InputIdentity)
	w.ptrStr("enforced_identity", r.EnforcedIdentity)
	w.ptrStr("identity_provider", r.IdentityProvider)
	w.b = append(w.b, `,"session_id":`...)
	w.str(r.SessionID)
	w.b = append(w.b, `,"sequence":`...)
	w.b = strconv.AppendInt(w.b, r.Sequence, 10)
	w.optStr("timestamp", r.Timestamp)
	if r.Trace != nil {
		w.b = append(w.b, `,"trace":{`...)
		n := len(w.b)
		if r.Trace.TraceID != "" {
			w.b = append(w.b, `"trace_id":`...)
			w.str(r.Trace.TraceID)
		}
		if r.Trace.SpanID != "" {
			if len(w.b) > n {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, `"span_id":`...)
			w.str(r.Trace.SpanID)
		}
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, `,"decided_by":`...)
	if r.DecidedBy == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.b = strconv.AppendInt(w.b, int64(*r.DecidedBy), 10)
	}
	c := &r.Composition
	w.b = append(w.b, `,"composition":{"profile":`...)
	w.str(c.Profile)
	w.optStr("on_approval", c.OnApproval)
	w.optStr("on_disagreement", c.OnDisagreement)
	w.optStr("on_transform_conflict", c.OnTransformConflict)
	w.b = append(w.b, '}')
	w.optStr("declaration", r.Declaration)
	if r.Verdicts != nil {
		w.b = append(w.b, `,"verdicts":[`...)
		for i, s := range r.Verdicts {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, `{"index":`...)
			w.b = strconv.AppendInt(w.b, int64(s.Index), 10)
			w.b = append(w.b, `,"decision":`...)
			w.str(string(s.Decision))
			w.optStr("reason", s.Reason)
			w.optStr("name", s.Name)
			w.b = append(w.b, '}')
		}
		w.b = append(w.b, ']')
	}
	if r.FoldTruncated != nil {
		w.b = append(w.b, `,"fold_truncated":`...)
		w.b = strconv.AppendBool(w.b, *r.FoldTruncated)
	}
	w.optStr("resolved_by", r.ResolvedBy)
	w.b = append(w.b, `,"interceptors_registered":`...)
	w.b = strconv.AppendInt(w.b, int64(r.InterceptorsRegistered), 10)
	w.optStr("request_id", r.RequestID)
	w.optStr("http_request_id", r.HTTPRequestID)
	w.b = append(w.b, "}\n"...)
	return w.b, w.ok
}

// recWriter is appendRecord's buffer and its verdict on the strings.
type recWriter struct {
	b  []byte
	ok bool
}

func (w *recWriter) str(s string) {
	if !plain(s) {
		w.ok = false
		return
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, s...)
	w.b = append(w.b, '"')
}

func (w *recWriter) optStr(key, s string) {
	if s != "" {
		w.b = append(w.b, ',', '"')
		w.b = append(w.b, key...)
		w.b = append(w.b, '"', ':')
		w.str(s)
	}
}

func (w *recWriter) ptrStr(key string, s *string) {
	w.b = append(w.b, ',', '"')
	w.b = append(w.b, key...)
	w.b = append(w.b, '"', ':')
	if s == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.str(*s)
	}
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

package audit

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

func jsonLine(t *testing.T, r *points.Record) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func checkAppendRecord(t *testing.T, r *points.Record) {
	t.Helper()
	got, ok := appendRecord(nil, r)
	if !ok {
		return
	}
	if want := jsonLine(t, r); !bytes.Equal(got, want) {
		t.Fatalf("appendRecord:\n got %s\nwant %s", got, want)
	}
}

func sampleRecords() []*points.Record {
	id, prov, one, yes := "sha256:ab", "jcs-sha256", 1, true
	full := &points.Record{
		InterceptionPoint: points.PostModelCall, Mode: points.Enforce,
		Verdict:       points.RecordVerdict{Decision: points.DecisionDeny, Reason: "content:secrets", Message: "found x"},
		InputIdentity: &id, EnforcedIdentity: &id, IdentityProvider: &prov, SessionID: "s-1", Sequence: 42,
		Timestamp: "2026-01-01T00:00:00.000Z", Trace: &points.Trace{TraceID: "t", SpanID: "p"}, DecidedBy: &one,
		Composition: points.Composition{Profile: "parallel/all", OnApproval: "stop", OnDisagreement: "deny", OnTransformConflict: "deny"},
		Declaration: "sha256:d", Verdicts: []points.VerdictSummary{{Index: 0, Decision: points.DecisionAllow, Name: "a"}, {Index: 1, Decision: points.DecisionDeny, Reason: "r"}},
		FoldTruncated: &yes, ResolvedBy: "console", InterceptorsRegistered: 3, RequestID: "req-1",
	}
	return []*points.Record{
		{},
		{InterceptionPoint: points.Output, Mode: points.Enforce, Verdict: points.RecordVerdict{Decision: points.DecisionAllow}, Sequence: -1},
		full,
		{SessionID: "s", Trace: &points.Trace{SpanID: "only"}},
		{SessionID: "s", Trace: &points.Trace{}},
		{SessionID: `quote"d`},
		{SessionID: "tab\there"},
		{SessionID: "é"},
		{Verdict: points.RecordVerdict{Evidence: json.RawMessage(`{"a":1}`)}},
	}
}

func TestAppendRecordMatchesJSON(t *testing.T) {
	fast := 0
	for _, r := range sampleRecords() {
		checkAppendRecord(t, r)
		if _, ok := appendRecord(nil, r); ok {
			fast++
		}
	}
	if fast < 5 {
		t.Fatalf("only %d records took the fast path", fast)
	}
}

func FuzzAppendRecord(f *testing.F) {
	f.Add("post_model_call", "deny", "reason", "msg", "sess", int64(3), "ts", "tid", "", "profile", "req", 2)
	f.Fuzz(func(t *testing.T, point, decision, reason, message, session string, seq int64, ts, traceID, spanID, profile, req string, n int) {
		r := &points.Record{InterceptionPoint: points.Point(point), Verdict: points.RecordVerdict{Decision: points.Decision(decision), Reason: reason, Message: message},
			SessionID: session, Sequence: seq, Timestamp: ts, Composition: points.Composition{Profile: profile, OnApproval: reason}, RequestID: req,
			InterceptorsRegistered: n, IdentityProvider: &profile, DecidedBy: &n}
		if traceID != "" || spanID != "" {
			r.Trace = &points.Trace{TraceID: traceID, SpanID: spanID}
		}
		checkAppendRecord(t, r)
	})
}

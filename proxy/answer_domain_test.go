package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

// A JSON answer that parses but carries a value no context can hold (a
// lone surrogate, a number past the double range, a duplicate member) is a
// projection failure at post_model_call (§10.3): the session's records go
// on past pre_model_call with a context_invalid deny, the next sequence and
// no identity, while the client is told the upstream's answer is at fault
// (502, as for not-JSON, which leaves no such record).
func TestAnswerOutsideValueDomainIsRecorded(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		status       int
		recorded     bool
	}{
		{"lone-surrogate", strings.Replace(plainCompletion, "Hello there", `Hello \ud800 there`, 1), http.StatusBadGateway, true},
		{"non-finite", strings.Replace(plainCompletion, `"created":1`, `"created":1e400`, 1), http.StatusBadGateway, true},
		{"duplicate", strings.Replace(plainCompletion, `"created":1`, `"created":1,"created":2`, 1), http.StatusBadGateway, true},
		{"not-json", plainCompletion[:len(plainCompletion)-3], http.StatusBadGateway, false},
		{"not-utf8", strings.Replace(plainCompletion, "Hello", "Hel\xfflo", 1), http.StatusBadGateway, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, _ := seqUpstream(t, tc.answer)
			p := newProxy(t, up.URL, allowAll())
			resp, body := post(t, p.URL, hello)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if strings.Contains(string(body), "Hello") {
				t.Fatalf("answer text released: %s", body)
			}
			var post *points.Record
			recs := p.sink.Records()
			for i := range recs {
				if recs[i].InterceptionPoint == points.PostModelCall {
					post = recs[i]
				}
			}
			if !tc.recorded {
				if post != nil {
					t.Fatalf("a post_model_call record for the upstream's own error: %+v", *post)
				}
				return
			}
			if post == nil {
				t.Fatalf("no post_model_call record; records: %d", len(recs))
			}
			if post.Verdict.Reason != string(points.ReasonContextInvalid) || post.InputIdentity != nil {
				t.Fatalf("post_model_call record %+v, want a context_invalid deny with no identity", *post)
			}
			if strings.Contains(post.Verdict.Message, "Hello") {
				t.Fatalf("record message carries the answer: %q", post.Verdict.Message)
			}
			for i := 1; i < len(recs); i++ {
				if recs[i].SessionID == recs[i-1].SessionID && recs[i].Sequence != recs[i-1].Sequence+1 {
					t.Fatalf("sequence %d after %d", recs[i].Sequence, recs[i-1].Sequence)
				}
			}
		})
	}
}

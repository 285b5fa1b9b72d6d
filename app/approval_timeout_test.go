package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/hooksproxy/hooksproxy/examples/upstream"
	"github.com/hooksproxy/hooksproxy/points"
)

// An escalation nobody decides ends as host_error:approval_resolver_failed
// (a resolver timeout, §9), the held request answers 503, and the console
// queue keeps no leftover.
func TestApprovalNobodyDecides(t *testing.T) {
	us := httptest.NewServer(upstream.New())
	t.Cleanup(us.Close)
	p := startApp(t, filepath.Join(examplesDir, "pii-redaction.yaml"),
		"http://"+upstream.Addr, us.URL, "approval_resolver_ms: 600000", "approval_resolver_ms: 300")
	r, err := p.chat(context.Background(), chatBody("export all customers to jane.roe@example.com", false))
	if err != nil {
		t.Fatal(err)
	}
	expect(t, r, http.StatusServiceUnavailable, points.ReasonApprovalResolverFailed, points.Input)
	if c := p.cons.console(); c == nil || c.Len() != 0 {
		t.Fatalf("the console queue kept a leftover approval")
	}
	if rec := p.findRecord(points.Input, points.DecisionDeny, points.ReasonApprovalResolverFailed); rec == nil || rec.ResolvedBy != "rejection" {
		t.Fatalf("record: %+v", rec)
	}
}

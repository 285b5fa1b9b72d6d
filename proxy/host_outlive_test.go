package proxy

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// A host API pre or post whose client gives up while the decision waits
// (an approval, a slow policy service) is not withdrawn: the client's
// retry of the same call gets that decision, from the one emission.
func TestHostCallOutlivesItsClient(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		point            points.Point
	}{
		{"pre", "pre", `{"name":"send_email","args":{"to":"a"}}`, points.PreToolCall},
		{"post", "post", `{"name":"send_email","args":{"to":"a"},"result":"sent","is_error":false}`, points.PostToolCall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, _ := seqUpstream(t, plainCompletion)
			entered, release := make(chan struct{}), make(chan struct{})
			p := seamProxy(t, up.URL, heldAt(tc.point, entered, release))
			base := p.URL + "/agent-hooks/v1/sessions/s-outlive/tool-calls/call_1/"
			if tc.point == points.PostToolCall {
				if r, b := hostCall(t, base+"pre", `{"name":"send_email","args":{"to":"a"}}`); r.StatusCode != 200 {
					t.Fatalf("pre: %d %s", r.StatusCode, b)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			gone := make(chan struct{})
			go func() {
				defer close(gone)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			<-entered
			cancel() // the client gives up while the decision waits
			<-gone
			retried := make(chan []byte, 1)
			go func() { _, b := hostCall(t, base+tc.path, tc.body); retried <- b }()
			// The gone client's emission and the retry.
			waitInFlight(t, p, "s-outlive", func(n int) bool { return n >= 2 }, "the retry to arrive")
			close(release)
			b := <-retried
			if !gjson.GetBytes(b, "proceed").Bool() {
				t.Fatalf("retry after the client gave up: %s, want the decision (proceed)", b)
			}
			if n := count(p.sink, tc.point); n != 1 {
				t.Fatalf("%s emitted %d times, want 1", tc.point, n)
			}
			for _, r := range p.sink.Records() {
				if r.InterceptionPoint == tc.point && r.Verdict.Decision != points.DecisionAllow {
					t.Fatalf("the record says %s %s: the client's leaving cut the emission", r.Verdict.Decision, r.Verdict.Reason)
				}
			}
		})
	}
}

// heldAt allows every point but p, which it holds until release is closed
// (and then allows), closing entered when the first call at p arrives: a
// decision that takes as long as the test wants.
func heldAt(p points.Point, entered, release chan struct{}) points.Binding {
	var once sync.Once
	return points.Binding{Name: "held", Interceptor: points.InterceptorFunc(func(ctx context.Context, c *points.Context) (points.Verdict, error) {
		if c.Point() == p {
			once.Do(func() { close(entered) })
			select {
			case <-release:
			case <-ctx.Done():
				return points.Verdict{}, ctx.Err()
			}
		}
		return points.Allow(), nil
	})}
}

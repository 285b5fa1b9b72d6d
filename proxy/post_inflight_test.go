package proxy

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

// slowPostDeny blocks post_tool_call until release is closed, then denies it
// (standing in for an approval or a slow policy service that ends in a deny).
func slowPostDeny(entered chan<- struct{}, release <-chan struct{}) points.Binding {
	var once sync.Once
	return points.Binding{Name: "slow-post", Interceptor: points.InterceptorFunc(func(ctx context.Context, c *points.Context) (points.Verdict, error) {
		if c.Point() == points.PostToolCall {
			once.Do(func() { close(entered) })
			select {
			case <-release:
			case <-ctx.Done():
			}
			return points.Deny("result_forbidden", ""), nil
		}
		return points.Allow(), nil
	})}
}

const oneCallAnswer = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
	`{"id":"call_Inflight0123456789ab","type":"function","function":{"name":"search","arguments":"{\"q\":\"one\"}"}}]},"finish_reason":"tool_calls"}]}`

const inflightFollow = `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_Inflight0123456789ab","type":"function","function":{"name":"search","arguments":"{\"q\":\"one\"}"}}]},{"role":"tool","tool_call_id":"call_Inflight0123456789ab","content":"RAW-RESULT-UNDER-REVIEW"}]}`

// A second request carrying a tool result whose post_tool_call is still
// deciding (the same follow-up retried or sent twice, or a host API post
// racing the chat follow-up) must not send that result upstream: the verdict
// may be a deny, and §6.1 says a denied result is never incorporated.
func TestToolResultNotForwardedWhilePostPending(t *testing.T) {
	for _, tc := range []struct {
		name string
		// first carries the result and runs its post_tool_call.
		first func(t *testing.T, base, sid string)
		// onePost: the records show that post alone.
		onePost bool
	}{
		{"chat follow-up twice", func(t *testing.T, base, sid string) {
			post(t, base, inflightFollow, "X-Agent-Hooks-Session", sid)
		}, true},
		{"host API post, then the chat follow-up", func(t *testing.T, base, sid string) {
			hostCall(t, base+"/agent-hooks/v1/sessions/"+sid+"/tool-calls/call_Inflight0123456789ab/post",
				`{"name":"search","args":{"q":"one"},"result":"RAW-RESULT-UNDER-REVIEW","is_error":false}`)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, got := seqUpstream(t, oneCallAnswer, plainCompletion)
			entered, release := make(chan struct{}), make(chan struct{})
			p := seamProxy(t, up.URL, slowPostDeny(entered, release))
			sid := "sess-inflight"
			if r, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"go"}]}`, "X-Agent-Hooks-Session", sid); r.StatusCode != 200 {
				t.Fatalf("%d %s", r.StatusCode, b)
			}
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); tc.first(t, p.URL, sid) }()
			<-entered // the first carrier's post_tool_call is deciding
			go func() { defer wg.Done(); post(t, p.URL, inflightFollow, "X-Agent-Hooks-Session", sid) }()
			waitInFlight(t, p, sid, func(n int) bool { return n >= 2 }, "the chat follow-up to arrive")
			close(release)
			wg.Wait()
			for i, b := range got() {
				if strings.Contains(b, "RAW-RESULT-UNDER-REVIEW") {
					t.Fatalf("upstream request %d carried a result whose post_tool_call was pending and then denied: %s", i, b)
				}
			}
			if n := count(p.sink, points.PostToolCall); tc.onePost && n != 1 {
				t.Fatalf("post_tool_call emitted %d times, want 1", n)
			}
		})
	}
}

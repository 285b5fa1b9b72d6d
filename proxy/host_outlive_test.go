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
			abandon(base+tc.path, tc.body, entered) // the client gives up while the decision waits
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

// abandon POSTs body to url (hdr: header name, value pairs) and gives up
// on it once entered is closed, the decision it waits for having begun; it
// returns when the client is gone.
func abandon(url, body string, entered <-chan struct{}, hdr ...string) {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	cancel()
	<-gone
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

// The same holds for a role:tool result the transparent seam judges: a
// chat client that gives up while its follow-up's post_tool_call waits
// does not fix the result as refused; the retry of the same follow-up gets
// the one decision, and the model the result.
func TestToolResultOutlivesItsClient(t *testing.T) {
	for _, headerless := range []bool{false, true} {
		name := "header session"
		if headerless {
			name = "header-less run"
		}
		t.Run(name, func(t *testing.T) {
			up, got := seqUpstream(t, oneCall("call_outlive_1234567890", "get_weather"), plainCompletion, plainCompletion)
			entered, release := make(chan struct{}), make(chan struct{})
			p := seamProxy(t, up.URL, heldAt(points.PostToolCall, entered, release))
			var hdr []string
			if !headerless {
				hdr = []string{"X-Agent-Hooks-Session", "s-result"}
			}
			user := `{"role":"user","content":"weather?"}`
			if r, b := post(t, p.URL, `{"model":"m","messages":[`+user+`]}`, hdr...); r.StatusCode != 200 {
				t.Fatalf("first answer %d: %s", r.StatusCode, b)
			}
			follow := `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[` +
				`{"id":"call_outlive_1234567890","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"call_outlive_1234567890","content":"sunny and 21C"}]}`
			abandon(p.URL+"/v1/chat/completions", follow, entered, hdr...) // the client gives up while the result is judged
			retried := make(chan int, 1)
			go func() { r, _ := post(t, p.URL, follow, hdr...); retried <- r.StatusCode }()
			if !headerless {
				waitInFlight(t, p, "s-result", func(n int) bool { return n >= 2 }, "the retry to arrive")
			}
			close(release)
			if code := <-retried; code != 200 {
				t.Fatalf("retry answered %d", code)
			}
			sent := got()
			last := sent[len(sent)-1]
			if c := gjson.Get(last, `messages.#(role=="tool").content`).Str; c != "sunny and 21C" {
				t.Fatalf("the model got %q for the result, want it as sent", c)
			}
			if n := count(p.sink, points.PostToolCall); n != 1 {
				t.Fatalf("post_tool_call emitted %d times, want 1", n)
			}
			for _, r := range p.sink.Records() {
				if r.InterceptionPoint == points.PostToolCall && r.Verdict.Decision != points.DecisionAllow {
					t.Fatalf("the record says %s %s: the client's leaving cut the emission", r.Verdict.Decision, r.Verdict.Reason)
				}
			}
		})
	}
}

package proxy

import (
	"context"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// A client's stream_options.include_usage that is truthy to gjson but not
// the JSON boolean true (1, "true", "1") must not stop the proxy from
// asking for the usage chunk: the chat wire defines a boolean, and an
// upstream that reads only `true` (falling back to false on a mistyped
// value) then sends no usage, so token budgets count nothing.
func TestStreamUsageForcedUnlessLiteralTrue(t *testing.T) {
	for _, so := range []string{`1`, `"true"`, `"1"`, `"t"`, `2.5`} {
		t.Run(so, func(t *testing.T) {
			up, got := usageUpstream(t)
			var mu sync.Mutex
			seen := ""
			p := newProxy(t, up.URL, points.Binding{Name: "usage", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
				if c.Point() == points.PostModelCall {
					mu.Lock()
					seen = c.Get("usage").Raw
					mu.Unlock()
				}
				return points.Allow(), nil
			})})
			body := `{"model":"m","stream":true,"stream_options":{"include_usage":` + so + `},"messages":[{"role":"user","content":"hi"}]}`
			r, b := post(t, p.URL, body)
			if r.StatusCode != 200 {
				t.Fatalf("%d %s", r.StatusCode, b)
			}
			sent := got()[0]
			if v := gjson.Get(sent, "stream_options.include_usage"); v.Type != gjson.True {
				t.Fatalf("upstream was asked include_usage=%s, not true: the usage chunk is not requested", v.Raw)
			}
			mu.Lock()
			defer mu.Unlock()
			if !gjson.Get(seen, "prompt_tokens").Exists() {
				t.Fatalf("post_model_call saw no usage: %q", seen)
			}
		})
	}
}

package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// A stream_options that is not an object (an array) is replaced whole, so
// the upstream is still asked for usage (post_model_call sees it, token
// budgets count it), and a re-derived stream writes no "usage" for a
// client that never asked with true.
func TestStreamOptionsNotAnObject(t *testing.T) {
	up, got := usageUpstream(t)
	seen := make(chan string, 1)
	p := newProxy(t, up.URL, points.Binding{Name: "x", Interceptor: points.InterceptorFunc(func(_ context.Context, c *points.Context) (points.Verdict, error) {
		switch c.Point() {
		case points.PostModelCall:
			seen <- c.Get("usage").Raw
		case points.Output:
			return points.Replace("$target.content", []byte(`"changed"`)), nil
		}
		return points.Allow(), nil
	})})
	r, b := post(t, p.URL, `{"model":"m","stream":true,"stream_options":[],"messages":[{"role":"user","content":"hi"}]}`)
	if r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	if v := gjson.Get(got()[0], "stream_options.include_usage"); v.Type != gjson.True {
		t.Errorf("upstream not asked for usage: stream_options=%s", gjson.Get(got()[0], "stream_options").Raw)
	}
	if u := <-seen; !gjson.Get(u, "prompt_tokens").Exists() {
		t.Errorf("post_model_call saw no usage: %q", u)
	}
	if strings.Contains(string(b), `"usage"`) {
		t.Errorf("client that did not ask for usage got usage members:\n%s", b)
	}
}

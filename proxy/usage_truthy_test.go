package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
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
			up, got := strictUsageUpstream(t)
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

// strictUsageUpstream is usageUpstream reading include_usage as a server
// that takes only the JSON boolean true does (anything else: its default,
// false).
func strictUsageUpstream(t *testing.T) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		usage := gjson.GetBytes(b, "stream_options.include_usage").Type == gjson.True
		null := ""
		if usage {
			null = `,"usage":null`
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]` + null + `}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]` + null + `}`,
		} {
			_, _ = io.WriteString(w, "data: "+d+"\n\n")
		}
		if usage {
			_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`+"\n\n")
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

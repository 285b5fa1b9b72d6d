package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tidwall/gjson"
)

// Every 3xx answers 502 upstream_redirect (README "HTTP surface"), with or
// without a Location: none is a chat answer, and openai-go treats any
// status below 400 as success.
func TestAnyRedirectIs502(t *testing.T) {
	for _, tc := range []struct {
		status   int
		location string
	}{
		{302, "http://elsewhere.invalid/v1/chat/completions"},
		{302, ""},
		{300, ""},
		{304, ""},
		{307, ""},
	} {
		for _, req := range []string{hello, helloStream} {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				if tc.location != "" {
					w.Header().Set("Location", tc.location)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, `{"error":{"message":"moved"}}`)
			}))
			hs := newProxy(t, up.URL, allowAll())
			resp, body := post(t, hs.URL, req)
			if resp.StatusCode != http.StatusBadGateway || gjson.GetBytes(body, "error.code").Str != "upstream_redirect" || resp.Header.Get("Location") != "" {
				t.Errorf("%d location %q stream=%v: got %d %s (Location %q)", tc.status, tc.location, req == helloStream, resp.StatusCode, body, resp.Header.Get("Location"))
			}
			up.Close()
		}
	}
}

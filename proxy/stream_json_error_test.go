package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tidwall/gjson"
)

// A streaming request answered 200 with a JSON error body (a provider
// failure as OpenRouter and LiteLLM send it) is answered 502 with the
// provider's message and code, as the same body to a json request is; any
// other JSON to a streaming request stays upstream_invalid_response.
func TestStreamAnsweredWithJSONError(t *testing.T) {
	for _, tc := range []struct {
		name, body, msg, code string
	}{
		{"error object", `{"error":{"message":"provider overloaded","type":"server_error","code":"overloaded"}}`, "provider overloaded", "overloaded"},
		{"error string", `{"error":"rate limited upstream"}`, "rate limited upstream", ""},
		{"a completion", `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`, "", "upstream_invalid_response"},
		{"error beside choices", `{"error":{"message":"x"},"choices":[]}`, "", "upstream_invalid_response"},
		{"not json", `oops`, "", "upstream_invalid_response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.body)
			}))
			defer up.Close()
			hs := newProxy(t, up.URL, allowAll())
			resp, body := post(t, hs.URL, helloStream)
			if resp.StatusCode != http.StatusBadGateway || gjson.GetBytes(body, "error.type").Str != "upstream_error" {
				t.Fatalf("got %d %s, want 502 upstream_error", resp.StatusCode, body)
			}
			if tc.msg != "" && gjson.GetBytes(body, "error.message").Str != tc.msg {
				t.Errorf("message %q, want %q", gjson.GetBytes(body, "error.message").Str, tc.msg)
			}
			if got := gjson.GetBytes(body, "error.code"); tc.code == "" && got.Type != gjson.Null || tc.code != "" && got.Str != tc.code {
				t.Errorf("code %s, want %q", got.Raw, tc.code)
			}
		})
	}
}

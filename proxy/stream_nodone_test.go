package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// A server that closes its stream cleanly after the finish_reason without
// "data: [DONE]" (ik_llama.cpp, llama.cpp before September 2024, TGI before
// July 2024) finished its answer: it is judged and released, ending with the
// [DONE] clients expect. Cut inside the finish chunk, or before it, it did
// not finish, and nothing is released.
func TestStreamEndingAfterFinishWithoutDone(t *testing.T) {
	noDone := strings.TrimSuffix(textStream, "data: [DONE]\n\n")
	finish := chunk(`{}`, "stop")
	for _, tc := range []struct {
		name, body string
		split      int
		status     int
	}{
		{"after-finish", noDone, 0, http.StatusOK},
		{"after-finish/one-byte", noDone, 1, http.StatusOK},
		{"after-finish-and-usage", noDone + `data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":2,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}` + "\n\n", 0, http.StatusOK},
		{"inside-finish", noDone[:len(noDone)-len(finish)/2], 0, http.StatusBadGateway},
		{"finish-without-blank-line", strings.TrimSuffix(noDone, "\n"), 0, http.StatusBadGateway},
		{"before-finish", noDone[:len(noDone)-len(finish)], 0, http.StatusBadGateway},
		// sglang 0.4 and some GLM routes send "" on every chunk before
		// the last: that is no finish.
		{"empty-finish-reasons", strings.ReplaceAll(noDone[:len(noDone)-len(finish)], `"finish_reason":null`, `"finish_reason":""`), 0, http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			split := tc.split
			if split == 0 {
				split = len(tc.body)
			}
			up, _ := upstream(t, tc.body, true, split)
			p := newProxy(t, up.URL, allowAll())
			resp, body := post(t, p.URL, helloStream)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.status != http.StatusOK {
				if strings.Contains(string(body), "Hello") || gjson.GetBytes(body, "error.code").Str != "upstream_stream_incomplete" {
					t.Fatalf("%s", body)
				}
				return
			}
			if !strings.HasSuffix(string(body), "data: [DONE]\n\n") || !strings.Contains(string(body), " is safe.") {
				t.Fatalf("body does not end with [DONE] or lacks the answer: %q", body)
			}
		})
	}
}

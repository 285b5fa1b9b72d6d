package proxy

import (
	"strings"
	"testing"
)

// Upstream error types and codes reach the log only when they read as
// identifiers: a provider may quote the refused input, or a key, there.
func TestLogToken(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"rate_limit_exceeded", "rate_limit_exceeded"},
		{"invalid_request_error", "invalid_request_error"},
		{"ThrottlingException", "ThrottlingException"},
		{"429", "429"},
		{"model.not-found:v1", "model.not-found:v1"},
		{"ECHOCODE USERMARK96 frank@example.com", "[elided: 37 bytes]"},
		{"sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789", "[elided: 42 bytes]"},
		{"secret\ninjected=1", "[elided: 17 bytes]"},
		{strings.Repeat("a_", 40), "[elided: 80 bytes]"},
	} {
		if got := logToken(tt.in); got != tt.want {
			t.Errorf("logToken(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	e := &UpstreamStreamError{Type: "invalid_request", Code: "USERMARK96 the prompt"}
	if msg := e.Error(); strings.Contains(msg, "USERMARK96") {
		t.Fatalf("the error's text carries the upstream code: %s", msg)
	}
}

package approvals

import (
	"strings"
	"testing"
)

// A console config reports every problem in one load, on one line.
func TestConsoleConfigEveryProblem(t *testing.T) {
	_, err := ParseConsoleConfig([]byte(`{"timeout":"-5s","max_pending":0,"x":1}`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, p := range []string{"config.x: unknown key", "config.max_pending: must be between", "config.timeout: must be positive"} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%q lacks %q", err, p)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("not one line: %q", err)
	}
}

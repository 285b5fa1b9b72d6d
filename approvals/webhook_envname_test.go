package approvals

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hooksproxy/hooksproxy/internal/envname"
)

// As for the webhook kind: a headers_from_env value that is no env var
// name is refused without echoing it; a valid name that is unset is named.
func TestWebhookResolverHeaderEnvNameNotEchoed(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"Bearer sk-proj-SECRETMARKxxxxxxxx", envname.Problem},
		{"SECRETMARK/abc+def=", envname.Problem},
		{"", envname.Problem},
		{"NOPE_UNSET", "environment variable NOPE_UNSET is not set"},
	} {
		cfg, _ := json.Marshal(map[string]any{"url": "http://127.0.0.1:1/a", "headers_from_env": map[string]string{"Authorization": tc.name}})
		_, err := NewWebhook(cfg, func(string) string { return "" }, nil)
		if err == nil || !strings.Contains(err.Error(), "config.headers_from_env.Authorization: "+tc.want) {
			t.Errorf("%q: %v, want %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "SECRETMARK") {
			t.Errorf("%q: the error echoes the value: %v", tc.name, err)
		}
	}
}

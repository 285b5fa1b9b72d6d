package app_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hooksproxy/hooksproxy/approvals"
	"github.com/hooksproxy/hooksproxy/config"
	"github.com/hooksproxy/hooksproxy/interceptors"
)

// TestEnvNameRuleMatchesConfig pins the env-var-name rule the webhook
// interceptor and resolver keep (their packages may not import config) to
// config's: the same names pass, the same message refuses the rest.
func TestEnvNameRuleMatchesConfig(t *testing.T) {
	getenv := func(string) string { return "v" } // every name is set
	var webhook interceptors.Kind
	for _, k := range interceptors.Builtins() {
		if k.Name == interceptors.KindWebhook {
			webhook = k
		}
	}
	for _, name := range []string{"A", "_", "a_1", "HOOKS_TOKEN", "Z9", "", "1A", "A-B", "A B", "Bearer sk-x", "A=", "é", "A\n", "a.b", "$X"} {
		cfg, _ := json.Marshal(map[string]any{"url": "http://127.0.0.1:1/", "headers_from_env": map[string]string{"Authorization": name}})
		_, ierr := webhook.New("w", cfg, interceptors.Env{Getenv: getenv})
		_, aerr := approvals.NewWebhook(cfg, getenv, nil)
		for what, err := range map[string]error{"interceptor": ierr, "resolver": aerr} {
			refused := err != nil && strings.Contains(err.Error(), config.NotEnvName)
			if refused == config.IsEnvName(name) {
				t.Errorf("%s, %q: error %v; config.IsEnvName says %v", what, name, err, config.IsEnvName(name))
			}
			if !refused && err != nil {
				t.Errorf("%s, %q: %v", what, name, err)
			}
		}
	}
}

package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/hooksproxy/hooksproxy/config"
)

// secretMark is in every value below that is not an env var name: a
// config problem must never print it, since such a value is usually the
// secret itself pasted where the variable's name belongs.
const secretMark = "SECRETMARK"

// envNameConfigs sets each env-var-name field of the config to val.
func envNameConfigs(val string) map[string]string {
	q := `"` + val + `"`
	return map[string]string{
		"binding webhook headers_from_env": strings.Replace(baseConfig, "    - {id: allow, kind: hooksproxy.allow_all}\n",
			"    - id: w\n      kind: hooksproxy.webhook\n      config:\n        url: http://127.0.0.1:1/hook\n        headers_from_env: {Authorization: "+q+"}\n", 1),
		"resolver webhook headers_from_env": "resolvers:\n  remote:\n    kind: hooksproxy.webhook\n    config:\n      url: http://127.0.0.1:1/approve\n      headers_from_env: {Authorization: " + q + "}\n" +
			strings.Replace(baseConfig, "  bindings:", "  configuration:\n    approval: {resolver: remote}\n  bindings:", 1),
		"hmac key_env": "identity_providers:\n  hmac-sha256-k1:\n    kind: hooksproxy.hmac\n    config:\n      key_env: " + q + "\n" +
			strings.Replace(baseConfig, "  bindings:", "  configuration:\n    identity_provider: hmac-sha256-k1\n  bindings:", 1),
		"upstream api_key_env": strings.Replace(baseConfig, "  base_url: http://127.0.0.1:1\n", "  base_url: http://127.0.0.1:1\n  api_key_env: "+q+"\n", 1),
		"admin token_env":      "admin: {token_env: " + q + "}\n" + baseConfig,
	}
}

// Every env-var-name field refuses a value that is no such name without
// echoing it, at the field's own path and line; a valid name that is
// unset is still named.
func TestEnvNameFieldsNeverEchoAValue(t *testing.T) {
	t.Setenv("HOOKSPROXY_ADMIN_TOKEN", "t")
	for _, k := range []string{"HOOKSPROXY_LOG_FORMAT", "HOOKSPROXY_LOG_LEVEL", "HOOKSPROXY_LISTEN", "HOOKSPROXY_CONFIG"} {
		t.Setenv(k, "")
	}
	// Where each field is: path and line in its config above.
	at := map[string]string{
		"binding webhook headers_from_env":  `hp.yaml:12: hooks.bindings[0].config.headers_from_env.Authorization: `,
		"resolver webhook headers_from_env": `hp.yaml:6: resolvers.remote.config.headers_from_env.Authorization: `,
		"hmac key_env":                      `hp.yaml:5: identity_providers.hmac-sha256-k1.config.key_env: `,
		"upstream api_key_env":              `hp.yaml:3: upstream.api_key_env: `,
		"admin token_env":                   `hp.yaml:1: admin.token_env: `,
	}
	for _, tc := range []struct {
		value string
		want  string // in the problem, after its path
	}{
		{"Bearer sk-proj-RELOAD" + secretMark + "xxxxxxxxxxxxxxxx", config.NotEnvName},
		{"HMAC" + secretMark + "/abc+def=", config.NotEnvName},
		{"1" + secretMark, config.NotEnvName},
		{"NOPE_UNSET_" + secretMark, "NOPE_UNSET_" + secretMark}, // a name: named
		// A token that is also a valid name (ghp_..., sk_live_...): unset,
		// and not quoted.
		{"ghp_16C7e42F292c6912E7710c838347" + secretMark, "not shown: it reads like a secret"},
	} {
		for name, body := range envNameConfigs(tc.value) {
			t.Run(name+"/"+tc.value, func(t *testing.T) {
				path := writeConfig(t, body)
				_, errs, code := runCmd(t, "validate", "--config", path)
				errs = strings.ReplaceAll(errs, path, "hp.yaml")
				isName := tc.want != config.NotEnvName && !strings.Contains(tc.want, "not shown")
				if name == "admin token_env" && tc.want != config.NotEnvName {
					// An unset admin token only disables the admin API.
					if code != 0 || !isName && strings.Contains(errs, secretMark) {
						t.Fatalf("exit %d\n%s", code, errs)
					}
					return
				}
				if code != 1 {
					t.Fatalf("exit %d, want 1\n%s", code, errs)
				}
				if !strings.Contains(errs, at[name]) || !strings.Contains(errs, tc.want) {
					t.Errorf("stderr lacks %q ... %q:\n%s", at[name], tc.want, errs)
				}
				if !isName && strings.Contains(errs, secretMark) {
					t.Errorf("stderr echoes the value:\n%s", errs)
				}
			})
		}
	}
}

// A reload that meets such a value logs the problem without the value.
func TestReloadLogNeverEchoesEnvValue(t *testing.T) {
	t.Setenv("HOOKSPROXY_ADMIN_TOKEN", "t")
	for name, body := range envNameConfigs("Bearer sk-proj-RELOAD" + secretMark + "xxxxxxxxxxxxxxxx") {
		t.Run(name, func(t *testing.T) {
			path := writeConfig(t, baseConfig)
			var logs syncBuffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			ctx, cancel := context.WithCancel(context.Background())
			rt, err := startRuntime(ctx, path, "127.0.0.1:0", log, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { cancel(); rt.wait(ctx) }()
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := rt.app.Reload(); err == nil {
				t.Fatal("reload accepted the config")
			} else if strings.Contains(err.Error(), secretMark) {
				t.Errorf("reload error echoes the value: %v", err)
			}
			got := logs.String()
			if !bytes.Contains([]byte(got), []byte("not hold a value")) {
				t.Errorf("log lacks the problem:\n%s", got)
			}
			if strings.Contains(got, secretMark) {
				t.Errorf("log echoes the value:\n%s", got)
			}
		})
	}
}

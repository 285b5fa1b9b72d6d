package interceptors

import (
	"slices"
	"strings"
	"testing"
)

// TestBadConfigs checks that every kind refuses bad config at load, naming
// the offending member's path, and never echoes the configured value.
func TestBadConfigs(t *testing.T) {
	tests := []struct {
		kind, config, path string
	}{
		{KindAllowAll, `{"x":1}`, "config.x"},
		{KindAllowAll, `[1]`, "config"},
		{KindAllowAll, `{`, "config"},

		{KindRules, `{}`, "config.rules"},
		{KindRules, `{"rules":[{"at":"pre_tool_call"}]}`, "config.rules[0].return"},
		{KindRules, `{"rules":[{"return":{"decision":"allow"},"extra":1}]}`, "config.rules[0].extra"},
		{KindRules, `{"rules":[{"at":"nowhere","return":{"decision":"allow"}}]}`, "config.rules[0].at"},
		{KindRules, `{"rules":[{"at":["input","bogus"],"return":{"decision":"allow"}}]}`, "config.rules[0].at[1]"},
		{KindRules, `{"rules":[{"at":[],"return":{"decision":"allow"}}]}`, "config.rules[0].at"},
		{KindRules, `{"rules":[{"return":{"decision":"escalate"}}]}`, "config.rules[0].return"},
		{KindRules, `{"rules":[{"return":{"decision":"deny","reason":"host_error:x"}}]}`, "config.rules[0].return"},
		{KindRules, `{"rules":[{"return":{"decision":"allow","approval":{}}}]}`, "config.rules[0].return"},
		{KindRules, `{"rules":[{"return":{"decision":"transform","transform":{"path":"$context.x","value":1}}}]}`, "config.rules[0].return.transform.path"},
		{KindRules, `{"rules":[{"return":{"decision":"transform","transform":{"path":"$target..x","value":1}}}]}`, "config.rules[0].return.transform.path"},
		{KindCEL, `{"rules":[{"when":"true","verdict":{"decision":"transform","transform":{"path":"$.x","value":1}}}]}`, "config.rules[0].verdict.transform.path"},
		{KindRules, `{"rules":[{"match":{"tool_call.name":{"regex":"("}},"return":{"decision":"deny"}}]}`, "config.rules[0].match[\"tool_call.name\"].regex"},
		{KindRules, `{"rules":[{"match":{"a[x]":1},"return":{"decision":"deny"}}]}`, `config.rules[0].match["a[x]"]`},
		{KindRules, `{"rules":[{"return":{"decision":"allow"}}],"default":{"decision":"nope"}}`, "config.default"},
		{KindRules, `{"rules":[{"match":{"input.content":{"regex":"(?i)danger","flags":"i"}},"return":{"decision":"deny"}}]}`, `config.rules[0].match["input.content"].flags`},
		{KindRules, `{"rules":[{"match":{"input.content":{"equals":"x","regex":"y"}},"return":{"decision":"deny"}}]}`, `config.rules[0].match["input.content"].regex`},
		{KindRules, `{"rules":[{"match":{"input..content":"x"},"return":{"decision":"deny"}}]}`, `config.rules[0].match["input..content"]`},
		{KindRules, `{"rules":[{"match":{"input.content ":"x"},"return":{"decision":"deny"}}]}`, `config.rules[0].match["input.content "]`},
		{KindRules, `{"rules":[],"rules":[]}`, "config.rules"},

		{KindContent, `{}`, "config"},
		{KindContent, `{"deny":["ok","(unclosed"]}`, "config.deny[1]"},
		{KindContent, `{"deny":["a*"]}`, "config.deny[0]"},
		{KindContent, `{"deny":[7]}`, "config.deny[0]"},
		{KindContent, `{"deny":"x"}`, "config.deny"},
		{KindContent, `{"redact":[{"name":"bad name!","regex":"x"}]}`, "config.redact[0].name"},
		{KindContent, `{"redact":[{"name":"n"}]}`, "config.redact[0].regex"},
		{KindContent, `{"redact":[{"regex":"x","flags":"i"}]}`, "config.redact[0].flags"},
		{KindContent, `{"packs":{"secrets":"block"}}`, "config.packs.secrets"},
		{KindContent, `{"packs":{"passwords":"deny"}}`, "config.packs.passwords"},
		{KindContent, `{"deny":["x"],"reason":"host_error:interceptor_failed"}`, "config.reason"},
		{KindContent, `{"deny":["x"],"reasons":{"deny":"host_error:x"}}`, "config.reasons.deny"},
		{KindContent, `{"deny":["x"],"reasons":{"block":"r"}}`, "config.reasons.block"},
		{KindContent, `{"redact":["REDACTED"]}`, "config.mask"},
		{KindContent, `{"redact":["x"],"mask":"xx"}`, "config.mask"},
		{KindContent, `{"deny":["x"],"targets":["a"]}`, "config.targets"},

		{KindTools, `{}`, "config"},
		{KindTools, `{"deny":["[a-"]}`, "config.deny[0]"},
		{KindTools, `{"allow":["ok",""]}`, "config.allow[1]"},
		{KindTools, `{"escalate":["x\\"]}`, "config.escalate[0]"},
		{KindTools, `{"args":[{"tool":"x","regex":"a"}]}`, "config.args[0].path"},
		{KindTools, `{"args":[{"path":"url"}]}`, "config.args[0]"},
		{KindTools, `{"args":[{"path":"url","not_regex":"(?P<"}]}`, "config.args[0].not_regex"},
		{KindTools, `{"args":[{"path":"url","regex":"a","reason":"host_error:x"}]}`, "config.args[0].reason"},
		{KindTools, `{"egress":{}}`, "config.egress"},
		{KindTools, `{"egress":{"allow_domains":["https://x.com/"]}}`, "config.egress.allow_domains[0]"},
		{KindTools, `{"egress":{"allow_domains":["a..b"]}}`, "config.egress.allow_domains[0]"},
		{KindTools, `{"egress":{"allow_domains":["*..b"]}}`, "config.egress.allow_domains[0]"},
		{KindTools, `{"egress":{"allow_domains":["x.com:443"]}}`, "config.egress.allow_domains[0]"},
		{KindTools, `{"egress":{"allow_domains":["ok.com"],"deny_domains":["*"]}}`, "config.egress.deny_domains[0]"},
		{KindTools, `{"egress":{"allow":["x.com"]}}`, "config.egress.allow"},
		{KindTools, `{"deny":["x"],"reasons":{"deny":"host_error:y"}}`, "config.reasons.deny"},

		{KindBudget, `{}`, "config"},
		{KindBudget, `{"max_model_calls":-1}`, "config.max_model_calls"},
		{KindBudget, `{"max_model_calls":1.5}`, "config.max_model_calls"},
		{KindBudget, `{"max_model_calls":"3"}`, "config.max_model_calls"},
		{KindBudget, `{"max_elapsed":"forever"}`, "config.max_elapsed"},
		{KindBudget, `{"max_elapsed":"-1s"}`, "config.max_elapsed"},
		{KindBudget, `{"max_elapsed":10}`, "config.max_elapsed"},
		{KindBudget, `{"max_tool_calls":1,"scope":"tenant"}`, "config.scope"},
		{KindBudget, `{"max_tool_calls":1,"max_sessions":0}`, "config.max_sessions"},
		{KindBudget, `{"max_tool_calls":1,"max_tokens":5}`, "config.max_tokens"},

		{KindModels, `{}`, "config"},
		{KindModels, `{"allow":["gpt-[4"]}`, "config.allow[0]"},
		{KindModels, `{"allow":["x"],"reason":"host_error:x"}`, "config.reason"},

		{KindCEL, `{}`, "config.rules"},
		{KindCEL, `{"rules":[{"verdict":{"decision":"deny"}}]}`, "config.rules[0].when"},
		{KindCEL, `{"rules":[{"when":"true"}]}`, "config.rules[0].verdict"},
		{KindCEL, `{"rules":[{"when":"true","verdict":{"decision":"allow"}},{"when":"ctx.a ==","verdict":{"decision":"allow"}}]}`, "config.rules[1].when"},
		{KindCEL, `{"rules":[{"when":"1 + 2","verdict":{"decision":"allow"}}]}`, "config.rules[0].when"},
		{KindCEL, `{"rules":[{"when":"undeclared.x","verdict":{"decision":"allow"}}]}`, "config.rules[0].when"},
		{KindCEL, `{"rules":[{"when":"true","verdict":{"decision":"transform"}}]}`, "config.rules[0].verdict"},
		{KindCEL, `{"rules":[{"when":"true","verdict":{"decision":"allow"}}],"cost_limit":0}`, "config.cost_limit"},

		{KindWebhook, `{}`, "config.url"},
		{KindWebhook, `{"url":"ftp://x"}`, "config.url"},
		{KindWebhook, `{"url":"/relative"}`, "config.url"},
		{KindWebhook, `{"url":"http://u:p@h/"}`, "config.url"},
		{KindWebhook, `{"url":"http://h/","timeout":"soon"}`, "config.timeout"},
		{KindWebhook, `{"url":"http://h/","headers_from_env":{"Bad Header":"X"}}`, `config.headers_from_env["Bad Header"]`},
		{KindWebhook, `{"url":"http://h/","headers_from_env":{"Authorization":"UNSET_VAR"}}`, "config.headers_from_env.Authorization"},
		{KindWebhook, `{"url":"http://h/","method":"GET"}`, "config.method"},
		{KindWebhook, `{"url":"http://h/","verdict_path":"a[["}`, "config.verdict_path"},
		{KindWebhook, `{"url":"http://h/","verdict_path":"result..x"}`, "config.verdict_path"},
		{KindWebhook, `{"url":"http://h/","input_key":"a[["}`, "config.input_key"},
		{KindWebhook, `{"url":"http://h/","input_key":"input[0]"}`, "config.input_key"},
		{KindWebhook, `{"url":"http://h/","input_key":"my input"}`, "config.input_key"},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.config, func(t *testing.T) {
			_, err := kind(t, tt.kind).New("b1", []byte(tt.config), Env{})
			wantConfigError(t, err, tt.path)
			if !strings.HasPrefix(err.Error(), tt.path+": ") {
				t.Errorf("message %q does not start with its path", err)
			}
			for _, secret := range []string{"(unclosed", "gpt-[4", "https://x.com/", "UNSET_VAR_VALUE"} {
				if strings.Contains(tt.config, secret) && strings.Contains(err.Error(), secret) {
					t.Errorf("error echoes the configured value %q: %v", secret, err)
				}
			}
		})
	}
}

// TestNilAndNullConfig: an absent config is {} for kinds that need nothing.
func TestNilAndNullConfig(t *testing.T) {
	for _, cfg := range [][]byte{nil, []byte(""), []byte("null"), []byte("{}"), []byte(" {} ")} {
		if _, err := newAllowAll("b", cfg, Env{}); err != nil {
			t.Errorf("allow_all %q: %v", cfg, err)
		}
	}
}

// TestBuiltinsComplete lists every kind of PRODUCT.md once, documented.
func TestBuiltinsComplete(t *testing.T) {
	want := []string{KindAllowAll, KindRules, KindContent, KindTools, KindBudget, KindModels, KindCEL, KindWebhook}
	got := Builtins()
	if len(got) != len(want) {
		t.Fatalf("got %d kinds, want %d", len(got), len(want))
	}
	for i, k := range got {
		if k.Name != want[i] || k.Doc == "" || k.New == nil {
			t.Errorf("kind %d = %+v", i, k)
		}
	}
}

// configErrorPaths lists the path of every *ConfigError in err, in order.
func configErrorPaths(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if ce, ok := e.(*ConfigError); ok {
			out = append(out, ce.Path)
			return
		}
		if m, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range m.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}

// TestConfigReportsEveryProblem: a kind reports every problem it can find
// independently in one load, each at its own path, rather than the first.
func TestConfigReportsEveryProblem(t *testing.T) {
	tests := []struct {
		kind, config string
		paths        []string
	}{
		{KindAllowAll, `{"x":1,"y":2}`, []string{"config.x", "config.y"}},
		{KindContent, `{"deny":["ok","(a","[b"],"redact":["(c"],"packs":{"secrets":"block","pii":"nope"}}`,
			[]string{"config.deny[1]", "config.deny[2]", "config.redact[0]", "config.packs.pii", "config.packs.secrets"}},
		{KindContent, `{"deny":[7,"x",{"regex":"y","flags":"i"}],"bogus":1}`, []string{"config.deny[0]", "config.deny[2].flags", "config.bogus"}},
		{KindContent, `{"deny":["x"],"reason":"host_error:a","reasons":{"warn":"host_error:b"}}`, []string{"config.reason", "config.reasons.warn"}},
		// An unknown key beside a member does not hide that member's problem.
		{KindContent, `{"deny":["x"],"reasons":{"deny":"host_error:x","block":"y"}}`, []string{"config.reasons.block", "config.reasons.deny"}},
		{KindTools, `{"deny":["[a-","ok","x\\"],"escalate":["[z"],"args":[{"path":"url","regex":"("},{"regex":"a"}]}`,
			[]string{"config.deny[0]", "config.deny[2]", "config.escalate[0]", "config.args[0].regex", "config.args[1].path"}},
		{KindTools, `{"egress":{"allow_domains":["https://x.com/","ok.com","a b"]}}`, []string{"config.egress.allow_domains[0]", "config.egress.allow_domains[2]"}},
		{KindModels, `{"allow":["gpt-[4","ok","[x"],"deny":["[y"]}`, []string{"config.allow[0]", "config.allow[2]", "config.deny[0]"}},
		{KindCEL, `{"rules":[{"when":"ctx.a ==","verdict":{"decision":"allow"}},{"when":"true","verdict":{"decision":"allow"}},{"when":"1 + 2","verdict":{"decision":"allow"}},{"verdict":{"decision":"allow"}}]}`,
			[]string{"config.rules[0].when", "config.rules[2].when", "config.rules[3].when"}},
		{KindRules, `{"rules":[{"match":{"a":{"regex":"("},"b":{"regex":"["},"c..d":1},"return":{"decision":"deny"}},{"match":{"x":{"regex":"y","flags":"i"}},"return":{"decision":"nope"}}]}`,
			[]string{`config.rules[0].match.a.regex`, `config.rules[0].match.b.regex`, `config.rules[0].match["c..d"]`, "config.rules[1].match.x.flags", "config.rules[1].return"}},
		{KindRules, `{"rules":[{"at":"input"},{"at":"output"}]}`, []string{"config.rules[0].return", "config.rules[1].return"}},
		{KindRules, `{"rules":[{"match":{"x":{"regex":"(","flags":"i"}},"return":{"decision":"deny"}}]}`, []string{"config.rules[0].match.x.flags", "config.rules[0].match.x.regex"}},
		// Wrong types and bad patterns in one load: the decode's problems,
		// then every bad pattern at an unrelated path.
		{KindContent, `{"deny":["(unclosed"],"warn":["[bad"],"reason":5,"colour":"red"}`,
			[]string{"config.reason", "config.colour", "config.deny[0]", "config.warn[0]"}},
		{KindTools, `{"deny":["[a-"],"reason":[],"args":[{"path":1,"regex":"("}]}`,
			[]string{"config.reason", "config.args[0].path", "config.deny[0]", "config.args[0].regex"}},
		{KindModels, `{"allow":["gpt-[4"],"message":7}`, []string{"config.message", "config.allow[0]"}},
		{KindBudget, `{"scope":"galaxy","max_model_calls":-1,"max_tool_calls":"x"}`, []string{"config.max_tool_calls", "config.scope", "config.max_model_calls"}},
		{KindWebhook, `{"url":"ftp://x","timeout":"bad","zz":1}`, []string{"config.timeout", "config.zz", "config.url"}},
		{KindCEL, `{"rules":[{"when":"ctx.a ==","verdict":{"decision":"allow"}},{"when":"true","verdict":7}],"cost_limit":"x"}`,
			[]string{"config.rules[1].verdict", "config.cost_limit", "config.rules[0].when"}},
		{KindBudget, `{"max_model_calls":-1,"max_tool_calls":-2,"scope":"tenant"}`, []string{"config.scope", "config.max_model_calls", "config.max_tool_calls"}},
		{KindWebhook, `{"verdict_path":"a[[","input_key":"x y","headers_from_env":{"Bad Header":"X","Authorization":"UNSET"}}`,
			[]string{"config.url", "config.input_key", "config.verdict_path", "config.headers_from_env.Authorization", `config.headers_from_env["Bad Header"]`}},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.config, func(t *testing.T) {
			_, err := kind(t, tt.kind).New("b1", []byte(tt.config), Env{})
			if err == nil {
				t.Fatal("accepted")
			}
			if got := configErrorPaths(err); !slices.Equal(got, tt.paths) {
				t.Fatalf("paths %q, want %q\n%v", got, tt.paths, err)
			}
			if strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), tt.paths[0]+": ") {
				t.Errorf("message %q is not one line starting with the first path", err)
			}
		})
	}
}

// Each kind lists the reasons its config fixes, for the metrics to keep
// (metrics.BindingsLoaded).
func TestKindsListTheirReasons(t *testing.T) {
	for _, tc := range []struct {
		kind, config string
		want         []string
	}{
		{KindContent, `{"deny":["x"],"reasons":{"deny":"secret_in_output"}}`, []string{"secret_in_output"}},
		{KindTools, `{"deny":["x"],"reason":"tool_denied"}`, []string{"tool_denied"}},
		{KindModels, `{"allow":["gpt-4o"],"reason":"model_blocked"}`, []string{"model_blocked"}},
		{KindBudget, `{"max_model_calls":3}`, []string{"budget_exceeded"}},
		{KindRules, `{"rules":[{"return":{"decision":"deny","reason":"r1"}}],"default":{"decision":"deny","reason":"r0"}}`, []string{"r0", "r1"}},
		{KindCEL, `{"rules":[{"when":"true","verdict":{"decision":"deny","reason":"c1"}}]}`, []string{"c1"}},
	} {
		ic := build(t, tc.kind, tc.config)
		rl, ok := ic.(interface{ Reasons() []string })
		if !ok {
			t.Errorf("%s lists no reasons", tc.kind)
			continue
		}
		got := rl.Reasons()
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: reasons %q lack %q", tc.kind, got, w)
			}
		}
	}
}

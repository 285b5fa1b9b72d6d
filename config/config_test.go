package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
)

// configRegistry stands in for the built-in kinds.
func configRegistry(t testing.TB) *MapRegistry {
	t.Helper()
	reg := NewRegistry()
	ok := func(BindingSpec) (points.Interceptor, error) { return allowAll, nil }
	objectConfig := func(b BindingSpec) (points.Interceptor, error) {
		var m map[string]any
		if err := json.Unmarshal(b.Config, &m); err != nil {
			return nil, errors.New("config must be an object")
		}
		return allowAll, nil
	}
	must(t, reg.RegisterKind("hooksproxy.allow_all", ok))
	must(t, reg.RegisterKind("hooksproxy.content", objectConfig))
	must(t, reg.RegisterKind("hooksproxy.tools", objectConfig))
	must(t, reg.RegisterKind("hooksproxy.reject", func(BindingSpec) (points.Interceptor, error) {
		return nil, errors.New("unsupported option")
	}))
	must(t, reg.RegisterKind("hooksproxy.multi", func(b BindingSpec) (points.Interceptor, error) {
		var m map[string][]string
		_ = json.Unmarshal(b.Config, &m)
		var errs []error
		for i, re := range m["deny"] {
			if strings.HasPrefix(re, "(") {
				errs = append(errs, memberErr(fmt.Sprintf("config.deny[%d]", i)))
			}
		}
		return allowAll, errors.Join(errs...)
	}))
	must(t, reg.RegisterResolverKind("hooksproxy.console", func(string, json.RawMessage) (points.Resolver, error) {
		return noopResolver, nil
	}))
	must(t, reg.RegisterResolverKind("hooksproxy.fails", func(string, json.RawMessage) (points.Resolver, error) {
		return nil, errors.New("no queue")
	}))
	must(t, reg.RegisterRedactorKind("hooksproxy.content", func(string, json.RawMessage) (points.Redactor, error) {
		return noopRedactor, nil
	}))
	must(t, reg.RegisterIdentityProviderKind("hooksproxy.hmac", func(name string, _ json.RawMessage) (points.IdentityProvider, error) {
		return namedProvider(name), nil
	}))
	must(t, reg.RegisterIdentityProviderKind("hooksproxy.misnamed", func(string, json.RawMessage) (points.IdentityProvider, error) {
		return namedProvider("other"), nil
	}))
	must(t, reg.RegisterResolver("host-queue", noopResolver))
	return reg
}

func TestLoadFull(t *testing.T) {
	cfg, err := Load("testdata/full.yaml", configRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Source:      "",
		Listen:      "127.0.0.1:8080",
		Upstream:    Upstream{BaseURL: "https://api.openai.com", APIKeyEnv: "OPENAI_API_KEY", Timeout: 10 * time.Minute},
		Agent:       Agent{ID: "support-agent", Framework: "openai-compatible"},
		Sessions:    Sessions{Header: "X-Agent-Hooks-Session", IdleTimeout: 15 * time.Minute, MaxSessions: 10000},
		Limits:      Limits{MaxRequestBytes: 8 << 20, MaxBufferedResponseBytes: 32 << 20, MaxTotalBufferedBytes: DefaultMaxTotalBufferedBytes},
		Passthrough: []string{"/v1/models", "/v1/models/*"},
		Records:     Records{File: "records.jsonl", MaxBytes: 64 << 20, MaxBackups: 5},
		Metrics:     Metrics{Path: "/metrics"},
		Admin:       Admin{TokenEnv: "HOOKSPROXY_ADMIN_TOKEN"},
		ToolSeam:    ToolSeam{Transparent: true, MaxAutoTurns: 8},
	}
	if cfg.Listen != want.Listen || cfg.Upstream != want.Upstream || cfg.Agent != want.Agent ||
		cfg.Sessions != want.Sessions || cfg.Limits != want.Limits || !slices.Equal(cfg.Passthrough, want.Passthrough) ||
		cfg.Records != want.Records || cfg.Metrics != want.Metrics || cfg.Admin != want.Admin || cfg.ToolSeam != want.ToolSeam {
		t.Fatalf("got %+v", cfg)
	}
	if c := cfg.Resolvers["approvers"]; c.Kind != "hooksproxy.console" || string(c.Config) != `{"timeout":"10m"}` {
		t.Errorf("resolvers %+v", cfg.Resolvers)
	}
	d := cfg.Hooks
	if d == nil || d.ID() != "support-prod" || d.IdentityProvider() != "hmac-sha256-k1" || d.CustomIdentityProvider() == nil ||
		d.ApprovalResolver() == nil || d.ApprovalRedactor() == nil || d.RecordsMaxBuffered() != 10000 {
		t.Fatalf("hooks %+v", d)
	}
	bs := d.BindingSpecs()
	if len(bs) != 4 || bs[0].ID != "key-redaction" || string(bs[0].Config) != `{"redact":["sk-proj-[A-Za-z0-9]{20,}"],"packs":{"secrets":"redact"}}` {
		t.Fatalf("bindings %+v", bs)
	}
	if string(bs[1].Config) != `{"deny":["(?i)\\bsecret\\b"],"reason":"secret_in_output"}` || bs[2].Timeout != 2*time.Second || len(bs[3].At) != 8 {
		t.Errorf("bindings %s %v %v", bs[1].Config, bs[2].Timeout, bs[3].At)
	}
}

// The PRODUCT.md example, verbatim.
func TestLoadProductExample(t *testing.T) {
	cfg, err := Load("testdata/product.yaml", configRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Hooks.Composition().OnApproval != "stop" || len(cfg.Hooks.Bindings()) != 4 || cfg.Records.File != "records.jsonl" {
		t.Fatalf("%+v", cfg)
	}
}

const good = `upstream:
  base_url: https://api.openai.com
agent:
  id: a
hooks:
  declaration: agent-hooks-declaration/1.0
  bindings:
    - id: allow
      kind: hooksproxy.allow_all
`

func TestParseDefaults(t *testing.T) {
	cfg, err := Parse([]byte(good), "hooksproxy.yaml", configRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != DefaultListen || cfg.Upstream.Timeout != DefaultUpstreamTimeout || cfg.Agent.Framework != DefaultFramework ||
		cfg.Agent.AllowHeaderOverride || cfg.Sessions.Header != DefaultSessionHeader || cfg.Sessions.IdleTimeout != DefaultIdleTimeout ||
		cfg.Sessions.MaxSessions != DefaultMaxSessions || cfg.Limits.MaxRequestBytes != DefaultMaxRequestBytes ||
		cfg.Limits.MaxBufferedResponseBytes != DefaultMaxBufferedResponseBytes || len(cfg.Passthrough) != 0 ||
		cfg.Records != (Records{}) || cfg.Metrics.Path != DefaultMetricsPath || cfg.Admin.TokenEnv != DefaultAdminTokenEnv ||
		cfg.ToolSeam != (ToolSeam{Transparent: true, MaxAutoTurns: DefaultMaxAutoTurns}) || cfg.Upstream.APIKeyEnv != "" {
		t.Fatalf("defaults %+v", cfg)
	}
	if cfg.Hooks.Mode() != points.Enforce || cfg.Hooks.Timeouts().Interceptor != 5*time.Second {
		t.Fatalf("hooks defaults")
	}
	// JSON is YAML.
	js := `{"upstream": {"base_url": "http://127.0.0.1:9000/openai/"}, "agent": {"id": "a"},
	"hooks": {"declaration": "agent-hooks-declaration/1.0", "bindings": []}}`
	cfg, err = Parse([]byte(js), "hooksproxy.json", configRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Upstream.BaseURL != "http://127.0.0.1:9000/openai" || len(cfg.Hooks.Bindings()) != 0 {
		t.Fatalf("%+v", cfg.Upstream)
	}
}

func TestParseSizes(t *testing.T) {
	for in, want := range map[string]int64{"8MiB": 8 << 20, "512KiB": 512 << 10, "1GiB": 1 << 30, "1048576": 1 << 20, "2 MB": 2e6, "10KB": 10000, "7B": 7} {
		if got, ok := parseSize(in); !ok || got != want {
			t.Errorf("%s: %d %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "MiB", "8 mib", "8M", "1.5MiB", "-1", "99999999999999999GiB"} {
		if _, ok := parseSize(in); ok {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestParseProblems(t *testing.T) {
	type want struct {
		path string
		line int
		msg  string // substring
	}
	tests := []struct {
		name string
		yaml string
		want []want
	}{
		{"unknown key with line", good + "upstream2: {}\n", []want{{"upstream2", 10, "unknown key"}}},
		{"typo in section", "upstream:\n  base_url: https://x.example\n  timout: 10m\nagent: {id: a}\nhooks: {declaration: agent-hooks-declaration/1.0, bindings: []}\n",
			[]want{{"upstream.timout", 3, "unknown key"}}},
		{"inline secret", "upstream:\n  base_url: https://x.example\n  api_key: sk-123\nagent: {id: a}\nhooks: {declaration: agent-hooks-declaration/1.0, bindings: []}\n",
			[]want{{"upstream.api_key", 3, "inline secrets are not allowed"}}},
		{"credentials in url", "upstream:\n  base_url: https://u:p@x.example\nagent: {id: a}\nhooks: {declaration: agent-hooks-declaration/1.0, bindings: []}\n",
			[]want{{"upstream.base_url", 2, "credentials"}}},
		{"env value not name", good + "admin:\n  token_env: \"abc def\"\n", []want{{"admin.token_env", 11, "environment variable"}}},
		{"bad duration", good + "sessions:\n  idle_timeout: 15\n", []want{{"sessions.idle_timeout", 11, "Go duration"}}},
		{"negative duration", good + "sessions:\n  idle_timeout: -1s\n", []want{{"sessions.idle_timeout", 11, "Go duration"}}},
		{"bad size", good + "limits:\n  max_request_bytes: 8 megs\n", []want{{"limits.max_request_bytes", 11, "size"}}},
		{"zero size", good + "limits:\n  max_buffered_response_bytes: 0\n", []want{{"limits.max_buffered_response_bytes", 11, "size"}}},
		{"bool type", good + "tool_seam:\n  transparent: yes please\n", []want{{"tool_seam.transparent", 11, "true or false"}}},
		{"int range", good + "tool_seam:\n  max_auto_turns: 0\n", []want{{"tool_seam.max_auto_turns", 11, "from 1"}}},
		{"string type", good + "listen: 8080\n", []want{{"listen", 10, "must be a string"}}},
		{"listen form", good + "listen: localhost\n", []want{{"listen", 10, "host:port"}}},
		{"bypass", good + "passthrough: [/v1/models, /v1/*, /v1/chat/completions, /V1/Chat/Completions/, /v1/chat/*, /agent-hooks/v1/records, /v1/responses/x, /healthz]\n", []want{
			{"passthrough[1]", 10, "bypass"}, {"passthrough[2]", 10, "bypass"}, {"passthrough[3]", 10, "bypass"}, {"passthrough[4]", 10, "bypass"},
			{"passthrough[5]", 10, "bypass"}, {"passthrough[6]", 10, "bypass"}, {"passthrough[7]", 10, "bypass"}}},
		{"unknown key mentioning tokens", good + "limits:\n  max_tokens: 5\n", []want{{"limits.max_tokens", 11, "unknown key"}}},
		{"inline admin token", good + "admin:\n  token: abc\n", []want{{"admin.token", 11, "inline secrets"}}},
		{"unclean path", good + "passthrough:\n  - v1/models\n  - /v1/../x\n", []want{{"passthrough[0]", 11, "clean"}, {"passthrough[1]", 12, "clean"}}},
		{"metrics path", good + "metrics: {path: /v1/metrics}\n", []want{{"metrics.path", 10, "outside"}}},
		{"framework", good + "agent2: 1\n", []want{{"agent2", 10, "unknown key"}}},
		{"metrics shadows healthz", good + "metrics:\n  path: /healthz\n", []want{{"metrics.path", 11, "health endpoint"}}},
		{"metrics shadows readyz", good + "metrics: {path: /READYZ/}\n", []want{{"metrics.path", 10, "health endpoint"}}},
		{"metrics under host api", good + "metrics: {path: /agent-hooks/metrics}\n", []want{{"metrics.path", 10, "outside"}}},
		{"metrics is /v1", good + "metrics: {path: /v1}\n", []want{{"metrics.path", 10, "outside"}}},
		{"metrics unclean", good + "metrics: {path: metrics}\n", []want{{"metrics.path", 10, "clean absolute path"}}},
		{"passthrough is the default metrics path", good + "passthrough:\n  - /v1/models\n  - /metrics\n", []want{{"passthrough[1]", 12, "covers the metrics path /metrics"}}},
		{"passthrough prefix covers metrics", good + "passthrough: [/ops/*]\nmetrics:\n  path: /ops/metrics\n", []want{{"metrics.path", 12, "passed through by passthrough[0] (line 10)"}}},
		{"metrics is a passthrough path", good + "metrics: {path: /models}\npassthrough: [/models]\n", []want{{"metrics.path", 10, "passed through by passthrough[0] (line 11)"}}},
		{"session header authorization", good + "sessions:\n  header: authorization\n", []want{{"sessions.header", 11, "Authorization carries credentials"}}},
		{"session header cookie", good + "sessions: {header: Cookie}\n", []want{{"sessions.header", 10, "carries credentials"}}},
		{"session header proxy auth", good + "sessions: {header: PROXY-AUTHORIZATION}\n", []want{{"sessions.header", 10, "carries credentials"}}},
		{"session header vendor token", good + "sessions: {header: X-Amz-Security-Token}\n", []want{{"sessions.header", 10, "carries credentials"}}},
		{"session header vendor key", good + "sessions: {header: Ocp-Apim-Subscription-Key}\n", []want{{"sessions.header", 10, "carries credentials"}}},
		{"session header traceparent", good + "sessions: {header: traceparent}\n", []want{{"sessions.header", 10, "already means something"}}},
		{"session header request id", good + "sessions: {header: x-request-id}\n", []want{{"sessions.header", 10, "X-Request-Id already means something"}}},
		{"session header agent", good + "sessions: {header: X-Agent-Hooks-Agent}\n", []want{{"sessions.header", 10, "already means something"}}},
		{"session header content type", good + "sessions: {header: Content-Type}\n", []want{{"sessions.header", 10, "already means something"}}},
		{"session header set-cookie", good + "sessions: {header: set-cookie}\n", []want{{"sessions.header", 10, "carries credentials"}}},
		{"session header api key", good + "sessions: {header: X-API-KEY}\n", []want{{"sessions.header", 10, "carries credentials"}}},
		{"session header api-key", good + "sessions: {header: api-key}\n", []want{{"sessions.header", 10, "carries credentials"}}},
		{"unknown secret-looking top key", good + "bogus_key: x\n", []want{{"bogus_key", 10, "unknown key"}}},
		{"top-level upstream token", good + "upstream_token: x\n", []want{{"upstream_token", 10, "inline secrets are not allowed; name the environment variable that holds it with upstream.api_key_env"}}},
		{"top-level api key", good + "openai_api_key: x\n", []want{{"openai_api_key", 10, "with upstream.api_key_env"}}},
		{"top-level admin token", good + "admin_token: x\n", []want{{"admin_token", 10, "with admin.token_env"}}},
		{"upstream api key", "upstream:\n  base_url: https://x.example\n  token: sk-1\nagent: {id: a}\nhooks: {declaration: agent-hooks-declaration/1.0, bindings: []}\n",
			[]want{{"upstream.token", 3, "with upstream.api_key_env"}}},
		{"secret-looking key elsewhere", good + "sessions:\n  secret: x\n", []want{{"sessions.secret", 11, "unknown key"}}},
		{"did you mean", good + "tool_seam: {transparant: true}\nrecord: {}\n", []want{{"tool_seam.transparant", 10, "did you mean transparent?"}, {"record", 11, "did you mean records?"}}},
		{"component did you mean", good + "resolvers:\n  q: {kind: hooksproxy.console, confg: {}}\n", []want{{"resolvers.q.confg", 11, "did you mean config?"}}},
		{"duplicate key", good + "listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n", []want{{"listen", 11, "duplicate key (first at line 10)"}}},
		{"duplicate key on one line", good + "limits: {max_request_bytes: 1, max_request_bytes: 2}\n", []want{{"limits.max_request_bytes", 10, "duplicate key (first earlier on the same line)"}}},
		{"section type", good + "limits: [1]\n", []want{{"limits", 10, "must be a mapping"}}},
		{"missing required", "listen: 127.0.0.1:8080\n", []want{{"upstream.base_url", 1, "required"}, {"agent.id", 1, "required"}, {"hooks", 1, "required"}}},
		{"member missing from its section", "listen: 127.0.0.1:8080\nupstream:\n  timeout: 1m\nagent: {framework: x}\n",
			[]want{{"hooks", 1, "required"}, {"upstream.base_url", 2, "required"}, {"agent.id", 4, "required"}}},
		{"member behind a merge key", "b: &b {base_url: https://x.example}\nupstream: {<<: *b, timeout: 1m}\nagent: {id: a}\nhooks: {declaration: agent-hooks-declaration/1.0, bindings: []}\n",
			[]want{{"b", 1, "unknown key"}, {"upstream", 2, "merge keys (<<) are not supported"}}},
		{"empty file", "", []want{{"upstream.base_url", 1, "required"}, {"agent.id", 1, "required"}, {"hooks", 1, "required"}}},
		{"not a mapping", "- a\n", []want{{"", 1, "must be a mapping"}}},
		{"yaml syntax", good + "records: {file: [\n", []want{{"", 10, "did not find expected node content"}}},
		{"yaml syntax on line 1", "\t bad yaml: [", []want{{"", 1, "cannot start any token"}}},
		// The parser's errors (unlike the scanner's) print zero-based lines.
		{"flow mapping not closed", good + "x: {a[0]: 1}\n", []want{{"", 10, "did not find expected ',' or '}'"}}},
		{"flow sequence not closed", good + "x: [a, b\ny: 1\n", []want{{"", 10, "did not find expected ',' or ']'"}}},
		{"block mapping broken", "a: 1\nb:\n  c: 2\n  - d\n", []want{{"", 3, "did not find expected key"}}},
		{"block mapping broken, CR breaks", "a: 1\rb:\r  c: 2\r  - d", []want{{"", 3, "did not find expected key"}}},
		{"node content at the end", "a: 1\nb: [", []want{{"", 2, "did not find expected node content"}}},
		{"unclosed quote at the end", "a: 1\nb: \"\n", []want{{"", 2, "found unexpected end of stream"}}},
		{"mapping values on line 3", "a: 1\nb: 2\nc: d: e\n", []want{{"", 3, "mapping values are not allowed"}}},

		{"control character on line 11", good + "listen: 127.0.0.1:1\nrecords: {file: \"a\x01b\"}\n", []want{{"", 11, "control characters"}}},
		{"bad UTF-8 on line 10", good + "listen: \xff\n", []want{{"", 10, "UTF-8"}}},
		{"U+FFFE on line 2", "a: 1\nb: \"\xef\xbf\xbe\"\n", []want{{"", 2, "control characters"}}},
		{"encoded surrogate on line 2", "a: 1\nb: \"\xed\xa0\x80\"\n", []want{{"", 2, "Unicode character"}}},
		{"CR line breaks", "a: 1\rb: 2\rc: \"\x01\"\r", []want{{"", 3, "control characters"}}},
		{"CRLF line breaks", "a: 1\r\nb: 2\r\nc: \"\x01\"\r\n", []want{{"", 3, "control characters"}}},
		{"two documents", good + "---\nlisten: x\n", []want{{"", 10, "one YAML document"}}},
		{"merge key", good + "x: &a {file: r.jsonl}\n", []want{{"x", 10, "unknown key"}}},
		{"component name", good + "resolvers:\n  Bad: {kind: hooksproxy.console}\n", []want{{"resolvers.Bad", 11, "names must match"}}},
		{"component unknown kind", good + "resolvers:\n  q: {kind: hooksproxy.nope}\n", []want{{"resolvers.q.kind", 11, `unknown kind "hooksproxy.nope"; resolvers take hooksproxy.console, hooksproxy.fails`}}},
		{"component kind of another table", good + "redactors:\n  r: {kind: hooksproxy.console}\n",
			[]want{{"redactors.r.kind", 11, `kind "hooksproxy.console" builds approval resolvers (under resolvers:), not approval redactors; redactors take hooksproxy.content`}}},
		{"binding kind as a component", good + "identity_providers:\n  p: {kind: hooksproxy.tools}\n",
			[]want{{"identity_providers.p.kind", 11, `kind "hooksproxy.tools" is a binding kind (under hooks.bindings), not one of identity providers`}}},
		{"component refused", good + "resolvers:\n  q: {kind: hooksproxy.fails}\n", []want{{"resolvers.q", 11, "no queue"}}},
		{"component kind missing", good + "resolvers:\n  q: {config: {}}\n", []want{{"resolvers.q.kind", 11, "required"}}},
		{"component inline secret", good + "identity_providers:\n  hmac-k: {kind: hooksproxy.hmac, config: {key: abc}}\n", []want{{"identity_providers.hmac-k.config.key", 11, "inline secrets"}}},
		{"component shadows host", good + "resolvers:\n  host-queue: {kind: hooksproxy.console}\n", []want{{"resolvers.host-queue", 11, "already registered"}}},
		{"provider misnamed", good + "identity_providers:\n  prov: {kind: hooksproxy.misnamed}\n", []want{{"identity_providers.prov", 11, "named \"other\""}}},
		{"provider jcs name", good + "identity_providers:\n  jcs-x: {kind: hooksproxy.hmac}\n", []want{{"identity_providers.jcs-x", 11, "not begin with jcs"}}},
	}
	reg := configRegistry(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "hooksproxy.yaml", reg)
			var ps *Problems
			if !errors.As(err, &ps) {
				t.Fatalf("err = %v", err)
			}
			if len(ps.List) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(ps.List), len(tt.want), ps)
			}
			for i, w := range tt.want {
				got := ps.List[i]
				if got.Path != w.path || got.Line != w.line || !strings.Contains(got.Msg, w.msg) {
					t.Errorf("problem %d = %+v, want %+v", i, got, w)
				}
			}
		})
	}
}

func TestParseHooksProblems(t *testing.T) {
	head := "upstream: {base_url: https://x.example}\nagent: {id: a}\n" // lines 1-2
	tests := []struct {
		name  string
		hooks string // starts at line 3
		path  string
		line  int
		class string
	}{
		{"invalid enum", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  configuration:\n    mode: audit\n  bindings: []\n",
			"hooks.configuration.mode", 6, ClassInvalidField},
		{"unknown nested", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  configuration:\n    composition: {profile: sequential/first_deny, on_timeout: deny}\n  bindings: []\n",
			"hooks.configuration.composition.on_timeout", 6, ClassUnknownField},
		{"unknown top", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  policy: {}\n  bindings: []\n",
			"hooks.policy", 5, ClassUnknownField},
		{"version", "hooks:\n  bindings: []\n", "hooks.declaration", 3, ClassVersionUnsupported},
		{"version number", "hooks:\n  declaration: 1.0\n  bindings: []\n", "hooks.declaration", 4, ClassVersionUnsupported},
		{"missing id", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  bindings:\n    - kind: hooksproxy.allow_all\n",
			"hooks.bindings[0].id", 6, ClassInvalidField},
		{"duplicate id", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  bindings:\n    - {id: a, kind: hooksproxy.allow_all}\n    - {id: a, kind: hooksproxy.allow_all}\n",
			"hooks.bindings[1].id", 7, ClassInconsistent},
		{"unconsulted knob", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  configuration:\n    composition:\n      profile: sequential/run_all\n      on_approval: resume\n  bindings: []\n",
			"hooks.configuration.composition.on_approval", 8, ClassInconsistent},
		{"surface profile key", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  surface:\n    profiles:\n      sequential/run_all: {on_approval: [stop]}\n  bindings: []\n",
			"hooks.surface.profiles.sequential/run_all.on_approval", 7, ClassUnknownField},
		{"unknown kind", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  bindings:\n    - id: a\n      kind: hooksproxy.nope\n",
			"hooks.bindings[0].kind", 7, ClassKindUnknown},
		{"rejected", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  bindings:\n    - id: a\n      kind: hooksproxy.reject\n",
			"hooks.bindings[0]", 6, ClassBindingRejected},
		{"kind config", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  bindings:\n    - id: a\n      kind: hooksproxy.content\n      config: [1]\n",
			"hooks.bindings[0]", 6, ClassBindingRejected},
		{"unresolved", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  configuration:\n    approval: {resolver: nobody}\n  bindings: []\n",
			"hooks.configuration.approval.resolver", 6, ClassReferenceUnresolved},
		{"floor", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  surface:\n    interception_points: [agent_startup, input, output, pre_tool_call, post_tool_call]\n    capabilities: [host_declaration, tool_calls]\n  bindings: []\n",
			"hooks.surface.interception_points", 6, ClassInconsistent},
		{"duplicate yaml key", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  bindings: []\n  bindings: []\n",
			"hooks.bindings", 6, ClassMalformed},
		{"non-finite", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  extensions: {acme: .inf}\n  bindings: []\n",
			"hooks.extensions.acme", 5, ClassMalformed},
		{"fractional timeout", "hooks:\n  declaration: agent-hooks-declaration/1.0\n  configuration:\n    timeouts: {interceptor_ms: 5000.5}\n  bindings: []\n",
			"hooks.configuration.timeouts.interceptor_ms", 6, ClassInvalidField},
		{"hooks scalar", "hooks: 5\n", "hooks", 3, ""},
	}
	reg := configRegistry(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(head+tt.hooks), "h.yaml", reg)
			var ps *Problems
			if !errors.As(err, &ps) {
				t.Fatalf("err = %v", err)
			}
			got := ps.List[0]
			if len(ps.List) != 1 || got.Path != tt.path || got.Line != tt.line || !strings.HasPrefix(got.Msg, tt.class) {
				t.Fatalf("problems:\n%v\nwant %s at line %d (%s)", ps, tt.path, tt.line, tt.class)
			}
		})
	}
}

func TestParseAllProblemsAtOnce(t *testing.T) {
	src := `listen: 127.0.0.1:8080
upstream:
  base_url: https://api.openai.com
  timout: 10m
agent:
  id: a
  framework: Open AI
limits:
  max_request_bytes: lots
hooks:
  declaration: agent-hooks-declaration/1.0
  configuration:
    mode: audit
  bindings: []
`
	_, err := Parse([]byte(src), "hooksproxy.yaml", configRegistry(t))
	want := `hooksproxy.yaml:4: upstream.timout: unknown key; did you mean timeout?
hooksproxy.yaml:7: agent.framework: must match ^[a-z0-9_-]+$
hooksproxy.yaml:9: limits.max_request_bytes: must be a positive size: a byte count (1048576) or a number with KiB, MiB, GiB (powers of 1024, as 8MiB) or B, KB, MB, GB (powers of 1000)
hooksproxy.yaml:13: hooks.configuration.mode: declaration_error:invalid_field: "audit" is not one of enforce, evaluate_only (the declaration's later checks, bindings' configs included, run once this is fixed: more problems may follow)`
	if err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
}

// TestParseEveryBindingProblem: validate lists every refused binding and
// every problem inside one, each at the line of the offending member.
func TestParseEveryBindingProblem(t *testing.T) {
	src := `upstream: {base_url: https://x.example}
agent: {id: a}
hooks:
  declaration: agent-hooks-declaration/1.0
  bindings:
    - id: first
      kind: hooksproxy.multi
      config:
        deny:
          - ok
          - (bad
          - (worse
    - id: fine
      kind: hooksproxy.allow_all
    - id: refused
      kind: hooksproxy.reject
    - id: flow
      kind: hooksproxy.multi
      config: {deny: [x, (y]}
`
	_, err := Parse([]byte(src), "h.yaml", configRegistry(t))
	var ps *Problems
	if !errors.As(err, &ps) {
		t.Fatalf("err = %v", err)
	}
	want := []struct {
		path string
		line int
	}{
		{"hooks.bindings[0].config.deny[1]", 11},
		{"hooks.bindings[0].config.deny[2]", 12},
		{"hooks.bindings[2]", 15},
		{"hooks.bindings[3].config.deny[1]", 19},
	}
	if len(ps.List) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ps.List), len(want), ps)
	}
	for i, w := range want {
		got := ps.List[i]
		if got.Path != w.path || got.Line != w.line || !strings.HasPrefix(got.Msg, ClassBindingRejected) {
			t.Errorf("problem %d = %+v, want %s at line %d", i, got, w.path, w.line)
		}
	}
}

func TestParseHooksFile(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "decl.json"), []byte(`{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"hooksproxy.allow_all"}]}`), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"hooksproxy.nope"}]}`), 0o600))
	src := "upstream: {base_url: https://x.example}\nagent: {id: a}\nhooks: decl.json\n"
	must(t, os.WriteFile(filepath.Join(dir, "hp.yaml"), []byte(src), 0o600))
	cfg, err := Load(filepath.Join(dir, "hp.yaml"), configRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Hooks.Bindings()) != 1 {
		t.Fatal("bindings")
	}
	must(t, os.WriteFile(filepath.Join(dir, "hp.yaml"), []byte(strings.Replace(src, "decl.json", "bad.json", 1)), 0o600))
	_, err = Load(filepath.Join(dir, "hp.yaml"), configRegistry(t))
	var ps *Problems
	if !errors.As(err, &ps) || ps.List[0].Path != "hooks.bindings[0].kind" || ps.List[0].Line != 3 || !strings.Contains(ps.List[0].Msg, ClassKindUnknown) {
		t.Fatalf("err = %v", err)
	}
	if !strings.HasPrefix(ps.List[0].Msg, "bad.json:1: ") {
		t.Errorf("message %q does not name the declaration file's line", ps.List[0].Msg)
	}
	// Each problem names its own line in the declaration file.
	multi := "{\n  \"declaration\": \"agent-hooks-declaration/1.0\",\n  \"bindings\": [\n    {\"id\": \"a\", \"kind\": \"hooksproxy.nope\"},\n" +
		"    {\"id\": \"b\",\n     \"kind\": \"hooksproxy.other\"}\n  ]\n}\n"
	must(t, os.WriteFile(filepath.Join(dir, "multi.json"), []byte(multi), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "hp.yaml"), []byte(strings.Replace(src, "decl.json", "multi.json", 1)), 0o600))
	_, err = Load(filepath.Join(dir, "hp.yaml"), configRegistry(t))
	if !errors.As(err, &ps) || len(ps.List) != 2 {
		t.Fatalf("err = %v", err)
	}
	for i, want := range []string{"multi.json:4: ", "multi.json:6: "} {
		if !strings.HasPrefix(ps.List[i].Msg, want) || ps.List[i].Line != 3 {
			t.Errorf("problem %d = %+v, want line 3 and a message starting %q", i, ps.List[i], want)
		}
	}
	// A syntax error the JSON loader refuses names no line it cannot know.
	must(t, os.WriteFile(filepath.Join(dir, "comma.json"), []byte("{\n  \"declaration\": \"agent-hooks-declaration/1.0\",\n  \"bindings\": [\n    {\"id\": \"a\", \"kind\": \"hooksproxy.allow_all\"},\n  ]\n}\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "hp.yaml"), []byte(strings.Replace(src, "decl.json", "comma.json", 1)), 0o600))
	_, err = Load(filepath.Join(dir, "hp.yaml"), configRegistry(t))
	if !errors.As(err, &ps) || len(ps.List) != 1 || !strings.HasPrefix(ps.List[0].Msg, "comma.json: ") {
		t.Errorf("err = %v, want one problem naming comma.json without a line", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), configRegistry(t)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestParseWithoutFactories(t *testing.T) {
	type bare struct{ Registry }
	_, err := Parse([]byte(good+"resolvers:\n  q: {kind: hooksproxy.console}\n"), "x.yaml", bare{configRegistry(t)})
	var ps *Problems
	if !errors.As(err, &ps) || len(ps.List) != 1 || ps.List[0].Path != "resolvers.q" {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/full.yaml", "testdata/product.yaml"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(good))
	f.Add([]byte(good + "x: &a [*a]\n"))
	f.Add([]byte("a: &a [1,2]\nb: &b [*a,*a,*a]\nhooks: {extensions: {x: [*b,*b,*b]}}\n"))
	f.Add([]byte("{\"upstream\": {\"base_url\": \"https://x\"}}"))
	reg := configRegistry(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml", reg)
		if err != nil {
			var ps *Problems
			if !errors.As(err, &ps) || len(ps.List) == 0 {
				t.Fatalf("error %v is not *Problems", err)
			}
			_ = ps.Error()
			// A problem's line is in the file (0 when unknown).
			if n := yamlLines(data); len(data) <= maxConfigBytes {
				for _, pr := range ps.List {
					if pr.Line < 0 || pr.Line > n {
						t.Fatalf("problem %+v is past the file's %d lines", pr, n)
					}
				}
			}
			return
		}
		if cfg == nil || cfg.Hooks == nil || cfg.Agent.ID == "" || cfg.Upstream.BaseURL == "" {
			t.Fatalf("accepted an incomplete config: %+v", cfg)
		}
	})
}

// TestParseUnknownKeyMessages pins the whole message of unknown keys: no
// hint names a key that does not exist.
func TestParseUnknownKeyMessages(t *testing.T) {
	tests := []struct{ extra, want string }{
		{"bogus_key: x\n", "h.yaml:10: bogus_key: unknown key"},
		{"upstream_token: x\n", "h.yaml:10: upstream_token: inline secrets are not allowed; name the environment variable that holds it with upstream.api_key_env"},
		{"bogus: x\n", "h.yaml:10: bogus: unknown key"},
		{"listn: x\n", "h.yaml:10: listn: unknown key; did you mean listen?"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(good+tt.extra), "h.yaml", configRegistry(t))
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q: got %v, want %s", tt.extra, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "_env") && !strings.Contains(err.Error(), "api_key_env") {
			t.Errorf("%q suggests a key that does not exist: %v", tt.extra, err)
		}
	}
}

// TestParseUpstreamKeyEnv: with a registry that knows the environment, an
// unset upstream.api_key_env is a problem at its line, as serve finds it.
func TestParseUpstreamKeyEnv(t *testing.T) {
	src := "upstream:\n  base_url: https://x.example\n  api_key_env: NOPE_NOT_SET_KEY\nagent: {id: a}\nhooks: {declaration: agent-hooks-declaration/1.0, bindings: []}\n"
	env := map[string]string{"SET_KEY": "sk-1"}
	tests := []struct {
		name   string
		getenv func(string) string
		src    string
		want   string // "" accepts
	}{
		{"unset", func(k string) string { return env[k] }, src, "h.yaml:3: upstream.api_key_env: env var NOPE_NOT_SET_KEY is unset or empty"},
		{"set", func(k string) string { return env[k] }, strings.Replace(src, "NOPE_NOT_SET_KEY", "SET_KEY", 1), ""},
		{"no environment known", nil, src, ""},
		{"not configured", func(k string) string { return env[k] }, good, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := configRegistry(t)
			reg.SetGetenv(tt.getenv)
			cfg, err := Parse([]byte(tt.src), "h.yaml", reg)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Fatalf("got %v, want %s", err, tt.want)
			case tt.want == "" && tt.getenv != nil:
				key, kerr := cfg.Upstream.Key(tt.getenv)
				if kerr != nil || (cfg.Upstream.APIKeyEnv != "" && key != "sk-1") {
					t.Fatalf("Key = %q, %v", key, kerr)
				}
			}
		})
	}
	if _, err := (Upstream{APIKeyEnv: "NOPE"}).Key(func(string) string { return "" }); err == nil || err.Error() != "upstream.api_key_env: env var NOPE is unset or empty" {
		t.Fatalf("Key: %v", err)
	}
}

// TestConfigLine: checks after loading find the line of any config path,
// kind configs and hooks included, or of its nearest ancestor.
func TestConfigLine(t *testing.T) {
	src := good + "resolvers:\n  approvers:\n    kind: hooksproxy.console\n    config:\n      timeout: 30s\n"
	cfg, err := Parse([]byte(src), "h.yaml", configRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{
		"upstream.base_url":                  2,
		"hooks.bindings[0].kind":             9,
		"resolvers.approvers":                11,
		"resolvers.approvers.config.timeout": 14,
		"resolvers.approvers.config.nope":    13,
		"nowhere":                            0,
	} {
		if got := cfg.Line(path); got != want {
			t.Errorf("Line(%q) = %d, want %d", path, got, want)
		}
	}
}

type boundedTestResolver struct {
	points.Resolver
	d time.Duration
}

func (b boundedTestResolver) ResolverTimeout() time.Duration { return b.d }

// A declared resolver whose own timeout is longer than the declaration's
// approval bound is refused at load, with the value to write; the bound
// defaults to interceptor_ms when approval_resolver_ms is absent (schema).
func TestParseApprovalBound(t *testing.T) {
	reg := configRegistry(t)
	must(t, reg.RegisterResolverKind("hooksproxy.bounded", func(_ string, cfg json.RawMessage) (points.Resolver, error) {
		var c struct{ Timeout string }
		_ = json.Unmarshal(cfg, &c)
		d, _ := time.ParseDuration(c.Timeout)
		return boundedTestResolver{noopResolver, d}, nil
	}))
	doc := func(timeout, timeouts string) string {
		return "resolvers:\n  q: {kind: hooksproxy.bounded, config: {timeout: " + timeout + "}}\n" + strings.Replace(good,
			"  bindings:", "  configuration:\n    approval: {resolver: q}\n"+timeouts+"  bindings:", 1)
	}
	tests := []struct {
		name, timeout, timeouts, want string
	}{
		{"default bound", "10m", "", "2: resolvers.q.config.timeout: warning: timeout 10m0s exceeds the approval bound: hooks.configuration.timeouts.approval_resolver_ms is not set, so the spec makes it interceptor_ms (5000 ms)"},
		{"default from interceptor_ms", "10m", "    timeouts: {interceptor_ms: 700000}\n", ""},
		{"explicit bound", "10m", "    timeouts: {approval_resolver_ms: 60000}\n", "(60000 ms), the bound on every approval wait"},
		{"equal", "1m", "    timeouts: {approval_resolver_ms: 60000}\n", ""},
		{"unbounded", "10m", "    timeouts: {approval_resolver_ms: null}\n", ""},
		{"no own timeout", "0s", "", ""},
		{"sub-millisecond rounds up", "5000100us", "", "approval_resolver_ms: 5001 "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(doc(tt.timeout, tt.timeouts)), "hp.yaml", reg)
			if err != nil {
				t.Fatal(err) // a warning, never a refusal
			}
			got := (&Problems{File: "hp.yaml", List: cfg.Warnings}).Error()
			if tt.want == "" {
				if len(cfg.Warnings) != 0 {
					t.Fatalf("unexpected warning %s", got)
				}
				return
			}
			if len(cfg.Warnings) != 1 || !strings.Contains(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// An unknown kind (step 10) or an unresolved reference (step 9) is the
// refusal's class, as §7.7.6 requires, but the later independent steps
// still run, so the other bindings' config problems are listed too.
func TestParseLaterStepsAfterKindUnknown(t *testing.T) {
	src := `upstream: {base_url: https://api.openai.com}
agent: {id: a}
hooks:
  declaration: agent-hooks-declaration/1.0
  configuration:
    approval: {resolver: nobody}
  bindings:
    - {id: a, kind: hooksproxy.reject}
    - {id: b, kind: hooksproxy.nosuch}
    - {id: c, kind: hooksproxy.multi, config: {deny: ["(x", ok, "(y"]}}
`
	_, err := Parse([]byte(src), "hp.yaml", configRegistry(t))
	want := []string{
		`hp.yaml:6: hooks.configuration.approval.resolver: declaration_error:reference_unresolved: no approval resolver named "nobody" is registered`,
		`hp.yaml:8: hooks.bindings[0]: declaration_error:binding_rejected: kind "hooksproxy.reject" refused binding "a": unsupported option`,
		`hp.yaml:9: hooks.bindings[1].kind: declaration_error:kind_unknown: no resolver is registered for kind "hooksproxy.nosuch" (binding "b")`,
		`hp.yaml:10: hooks.bindings[2].config.deny[0]: declaration_error:binding_rejected: `,
		`hp.yaml:10: hooks.bindings[2].config.deny[2]: declaration_error:binding_rejected: `,
	}
	var ps *Problems
	if !errors.As(err, &ps) || len(ps.List) != len(want) {
		t.Fatalf("got %v", err)
	}
	for i, w := range want {
		if got := strings.Split(ps.Error(), "\n")[i]; !strings.HasPrefix(got, w) || strings.Contains(got, "more problems may follow") {
			t.Errorf("line %d: %q, want prefix %q", i, got, w)
		}
	}
	// The class a declaration loader reports is still the first step's.
	_, derr := LoadDeclaration([]byte(`{"declaration":"agent-hooks-declaration/1.0","bindings":[{"id":"a","kind":"hooksproxy.reject"},{"id":"b","kind":"hooksproxy.nosuch"}]}`), configRegistry(t))
	var de *DeclarationError
	if !errors.As(derr, &de) || de.Class != ClassKindUnknown || len(de.Later) != 1 || de.Later[0].Class != ClassBindingRejected || strings.Contains(de.Error(), "reject") {
		t.Fatalf("%v %+v", derr, de)
	}
}

// A reference to a component of another table says where the name is
// defined, so that the mix-up is plain.
func TestParseReferenceToAnotherTable(t *testing.T) {
	src := `upstream: {base_url: https://api.openai.com}
agent: {id: a}
resolvers:
  q: {kind: hooksproxy.console}
redactors:
  r: {kind: hooksproxy.content}
hooks:
  declaration: agent-hooks-declaration/1.0
  configuration:
    approval: {resolver: r, redactor: q}
  bindings:
    - {id: a, kind: hooksproxy.allow_all}
`
	_, err := Parse([]byte(src), "hp.yaml", configRegistry(t))
	for _, w := range []string{
		`hp.yaml:10: hooks.configuration.approval.resolver: declaration_error:reference_unresolved: no approval resolver named "r" is registered ("r" is defined under redactors:, a different table)`,
		`hp.yaml:10: hooks.configuration.approval.redactor: declaration_error:reference_unresolved: no approval redactor named "q" is registered ("q" is defined under resolvers:, a different table)`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("got %v\nwant a line %s", err, w)
		}
	}
}

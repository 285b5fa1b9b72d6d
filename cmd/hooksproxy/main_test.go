package main

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
)

func runCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// writeConfig writes a config file; base holds lines 1-4 and the bindings
// start at line 8.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hp.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const baseConfig = `upstream:
  base_url: http://127.0.0.1:1
agent:
  id: a
hooks:
  declaration: agent-hooks-declaration/1.0
  bindings:
    - {id: allow, kind: hooksproxy.allow_all}
`

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}, {"help"}} {
		out, errs, code := runCmd(t, args...)
		if code != 0 || !strings.Contains(out, "commands:") || !strings.Contains(out, "validate") ||
			!strings.Contains(out, "conformance") || !strings.Contains(out, "HOOKSPROXY_LISTEN") || errs != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	for _, cmd := range []string{"serve", "validate", "demo", "conformance"} {
		_, errs, code := runCmd(t, cmd, "--help")
		if code != 0 || !strings.Contains(errs, "--config FILE") && !strings.Contains(errs, "--vectors DIR") && !strings.Contains(errs, "--listen HOST:PORT") {
			t.Errorf("%s --help: exit %d, stderr %q", cmd, code, errs)
		}
		// What the command does, then its flags as the README writes them.
		if !strings.HasPrefix(errs, "usage: hooksproxy "+cmd+" [flags]\n\n") || strings.Contains(errs, "Usage of") || regexp.MustCompile(`\n  -[a-z]`).MatchString(errs) {
			t.Errorf("%s --help is the flag package's dump:\n%s", cmd, errs)
		}
	}
	// The demo runs its own policies: its help offers no --config, and one
	// given is refused with the command that takes it.
	if _, errs, _ := runCmd(t, "demo", "--help"); strings.Contains(errs, "-config") {
		t.Errorf("demo --help lists --config:\n%s", errs)
	}
	for _, args := range [][]string{{"--config", "x.yaml"}, {"-config=x.yaml"}, {"--log-level", "debug", "--config=x.yaml"}} {
		_, errs, code := runCmd(t, append([]string{"demo"}, args...)...)
		if code != 2 || !strings.Contains(errs, "--config is not used by the demo") {
			t.Errorf("demo %v: exit %d, stderr %q", args, code, errs)
		}
	}
}

// A shutdown with a delay keeps the listener open and answers /readyz 503
// until the delay ends, then stops.
func TestShutdownDelayAnswersNotReady(t *testing.T) {
	path := writeConfig(t, baseConfig)
	ctx, cancel := context.WithCancel(context.Background())
	rt, err := startRuntime(ctx, path, "127.0.0.1:0", slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	rt.drainDelay = time.Minute // ended below by the server's own stop
	ready := func() int { return readyz("http://" + rt.addr) }
	if got := ready(); got != http.StatusOK {
		t.Fatalf("/readyz before shutdown: %d", got)
	}
	stopped := make(chan int, 1)
	go func() { stopped <- rt.wait(ctx) }()
	cancel()
	got := 0
	for range 1000 { // bounded: the drain marks the server at once
		if got = ready(); got == http.StatusServiceUnavailable {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if got != http.StatusServiceUnavailable {
		t.Fatalf("/readyz during the shutdown delay: %d, want 503", got)
	}
	// A request still gets served while draining.
	resp, err := http.Get("http://" + rt.addr + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz while draining: %v %v", resp, err)
	}
	resp.Body.Close()
	_ = rt.hs.Close() // ends Serve, which ends the delay early
	if code := <-stopped; code != 0 {
		t.Fatalf("wait returned %d", code)
	}
}

// TestValidate runs validate against configs and the environment serve
// would see, and pins what it reports.
func TestValidate(t *testing.T) {
	console := func(timeout, approvalMS string) string {
		c := "resolvers:\n  approvers: {kind: hooksproxy.console, config: {" + timeout + "}}\n" + strings.Replace(baseConfig,
			"  bindings:", "  configuration:\n    approval: {resolver: approvers}\n"+approvalMS+"  bindings:", 1)
		return c
	}
	tests := []struct {
		name   string
		config string
		env    map[string]string
		code   int
		want   []string // lines of stderr, each a substring match in order
	}{
		{"ok", baseConfig, nil, 0, nil},
		{"no bindings", strings.Replace(baseConfig, "  bindings:\n    - {id: allow, kind: hooksproxy.allow_all}\n", "  bindings: []\n", 1), nil, 0,
			[]string{"hp.yaml:7: hooks.bindings: warning: no bindings in enforce mode: every request is denied with host_error:no_interceptor"}},
		{"unset upstream key env", strings.Replace(baseConfig, "  base_url: http://127.0.0.1:1\n", "  base_url: http://127.0.0.1:1\n  api_key_env: NOPE_NOT_SET_KEY\n", 1), nil, 1,
			[]string{"hp.yaml:3: upstream.api_key_env: env var NOPE_NOT_SET_KEY is unset or empty", "1 problem(s)"}},
		{"set upstream key env", strings.Replace(baseConfig, "  base_url: http://127.0.0.1:1\n", "  base_url: http://127.0.0.1:1\n  api_key_env: HP_TEST_KEY\n", 1), map[string]string{"HP_TEST_KEY": "sk-1"}, 0, nil},
		{"bad log format env", baseConfig, map[string]string{"HOOKSPROXY_LOG_FORMAT": "bogus"}, 1, []string{"HOOKSPROXY_LOG_FORMAT", "1 problem(s)"}},
		{"bad log level env", baseConfig, map[string]string{"HOOKSPROXY_LOG_LEVEL": "loud"}, 1, []string{"HOOKSPROXY_LOG_LEVEL", "1 problem(s)"}},
		{"bad listen env", baseConfig, map[string]string{"HOOKSPROXY_LISTEN": "nowhere"}, 1, []string{"HOOKSPROXY_LISTEN", "host:port", "1 problem(s)"}},
		{"every flag and config problem", "records: {file: /proc/nope/r.jsonl}\n" + strings.Replace(baseConfig, "agent:\n", "agent:\n  framework: Bad Name\n", 1),
			map[string]string{"HOOKSPROXY_LISTEN": "bad", "HOOKSPROXY_LOG_FORMAT": "xml", "HOOKSPROXY_LOG_LEVEL": "loud"}, 1, []string{
				`hooksproxy validate: --log-level (env HOOKSPROXY_LOG_LEVEL) "loud": must be debug, info, warn or error`,
				`hooksproxy validate: --log-format (env HOOKSPROXY_LOG_FORMAT) "xml": must be text or json`,
				`hooksproxy validate: --listen (env HOOKSPROXY_LISTEN) "bad": must be host:port`,
				"hp.yaml:1: records.file: the record directory cannot be created or written: /proc ",
				"hp.yaml:5: agent.framework: must match",
				"hp.yaml: 5 problem(s)"}},
		{"records file under procfs", "records: {file: /proc/nope/r.jsonl}\n" + baseConfig, nil, 1, []string{
			"hp.yaml:1: records.file: the record directory cannot be created or written: /proc ", "1 problem(s)"}},
		{"records file is a directory", "records: {file: /}\n" + baseConfig, nil, 1, []string{"hp.yaml:1: records.file: / is a directory"}},
		{"records file under a file", "records: {file: /etc/hostname/x/r.jsonl}\n" + baseConfig, nil, 1, []string{"hp.yaml:1: records.file: the record directory cannot be created: /etc/hostname is not a directory"}},
		{"console timeout over the default bound", console("timeout: 30s", ""), map[string]string{"HOOKSPROXY_ADMIN_TOKEN": "t"}, 0,
			[]string{"hp.yaml:2: resolvers.approvers.config.timeout: warning: timeout 30s exceeds the approval bound: hooks.configuration.timeouts.approval_resolver_ms is not set, so the spec makes it interceptor_ms (5000 ms)", "not decided within 5s fail closed with host_error:approval_resolver_failed; set hooks.configuration.timeouts.approval_resolver_ms: 30000"}},
		{"console timeout over an explicit bound", console("timeout: 10m", "    timeouts: {approval_resolver_ms: 60000}\n"), map[string]string{"HOOKSPROXY_ADMIN_TOKEN": "t"}, 0,
			[]string{"timeout 10m0s exceeds hooks.configuration.timeouts.approval_resolver_ms (60000 ms)", "at least 600000"}},
		{"console timeout within the bound", console("timeout: 10m", "    timeouts: {approval_resolver_ms: 600000}\n"), map[string]string{"HOOKSPROXY_ADMIN_TOKEN": "t"}, 0, nil},
		{"console unbounded", console("timeout: 10m", "    timeouts: {approval_resolver_ms: null}\n"), map[string]string{"HOOKSPROXY_ADMIN_TOKEN": "t"}, 0, nil},
		{"console without admin token", console("", ""), nil, 0,
			[]string{"hp.yaml:2: resolvers.approvers: warning: the console resolver can never be decided: HOOKSPROXY_ADMIN_TOKEN (admin.token_env) is unset"}},
		{"every binding problem", `upstream: {base_url: http://127.0.0.1:1}
agent: {id: a}
hooks:
  declaration: agent-hooks-declaration/1.0
  bindings:
    - id: c
      kind: hooksproxy.content
      config:
        deny: [ok, "(a"]
        redact:
          - "[b"
        packs: {secrets: block}
    - id: t
      kind: hooksproxy.tools
      config: {deny: ["[x"], escalate: ["ok", "[y"]}
    - id: r
      kind: hooksproxy.rules
      config:
        rules:
          - match: {input.content: {regex: "(?i)danger", flags: i}, "input..content": x}
            return: {decision: deny}
    - id: cel
      kind: hooksproxy.cel
      config:
        rules:
          - {when: "ctx.a ==", verdict: {decision: allow}}
          - {when: "1 + 2", verdict: {decision: allow}}
    - id: w
      kind: hooksproxy.webhook
      config: {url: "http://h/", verdict_path: "a[["}
`, nil, 1, []string{
			"hp.yaml:9: hooks.bindings[0].config.deny[1]: declaration_error:binding_rejected: kind \"hooksproxy.content\" refused binding \"c\": config.deny[1]: invalid regex",
			"hp.yaml:11: hooks.bindings[0].config.redact[0]: ",
			"hp.yaml:12: hooks.bindings[0].config.packs.secrets: ",
			"hp.yaml:15: hooks.bindings[1].config.deny[0]: ",
			"hp.yaml:15: hooks.bindings[1].config.escalate[1]: ",
			`hp.yaml:20: hooks.bindings[2].config.rules[0].match["input.content"].flags: `,
			`hp.yaml:20: hooks.bindings[2].config.rules[0].match["input..content"]: `,
			"hp.yaml:26: hooks.bindings[3].config.rules[0].when: ",
			"hp.yaml:27: hooks.bindings[3].config.rules[1].when: ",
			"hp.yaml:30: hooks.bindings[4].config.verdict_path: ",
			"10 problem(s)",
		}},
		{"a kind bound where it judges nothing", `upstream: {base_url: http://127.0.0.1:1}
agent: {id: a}
hooks:
  declaration: agent-hooks-declaration/1.0
  bindings:
    - id: t
      kind: hooksproxy.tools
      at: [output]
      config: {deny: [x]}
    - id: m
      kind: hooksproxy.models
      at: [post_model_call, output]
      config: {allow: [gpt-4o]}
    - id: fine
      kind: hooksproxy.tools
      at: [pre_tool_call]
      config: {deny: [x]}
    - {id: a, kind: hooksproxy.allow_all}
`, nil, 0, []string{
			`hp.yaml:8: hooks.bindings[0].at: warning: binding "t" (kind "hooksproxy.tools"): judges tool calls only at post_model_call and pre_tool_call, none of its points`,
			`hp.yaml:12: hooks.bindings[1].at: warning: binding "m" (kind "hooksproxy.models"): judges the model a call asks for only at pre_model_call`,
		}},
		{"every redactor problem", `upstream: {base_url: http://127.0.0.1:1}
agent: {id: a}
redactors:
  hide:
    kind: hooksproxy.content
    config:
      packs: {pii: nope}
      deny: ['(']
hooks:
  declaration: agent-hooks-declaration/1.0
  bindings:
    - {id: a, kind: hooksproxy.allow_all}
`, nil, 1, []string{
			`hp.yaml:7: redactors.hide.config.packs.pii: kind "hooksproxy.content" refused its config: config.packs.pii: `,
			`hp.yaml:8: redactors.hide.config.deny[0]: kind "hooksproxy.content" refused its config: config.deny[0]: invalid regex`,
			"2 problem(s)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"HOOKSPROXY_LOG_FORMAT", "HOOKSPROXY_LOG_LEVEL", "HOOKSPROXY_LISTEN", "HOOKSPROXY_ADMIN_TOKEN", "HOOKSPROXY_CONFIG"} {
				t.Setenv(k, "")
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			path := writeConfig(t, tt.config)
			out, errs, code := runCmd(t, "validate", "--config", path)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, tt.code, out, errs)
			}
			if (code == 0) != strings.Contains(out, ": ok (") {
				t.Errorf("stdout %q", out)
			}
			lines := strings.Split(strings.TrimSuffix(strings.ReplaceAll(errs, path, "hp.yaml"), "\n"), "\n")
			if errs == "" {
				lines = nil
			}
			if len(tt.want) == 0 && len(lines) > 0 {
				t.Fatalf("stderr %q, want none", errs)
			}
			at := 0
			for _, w := range tt.want {
				for at < len(lines) && !strings.Contains(lines[at], w) {
					at++
				}
				if at == len(lines) {
					t.Fatalf("stderr lacks %q in order:\n%s", w, strings.Join(lines, "\n"))
				}
			}
		})
	}
}

// TestValidateAgreesWithServe: what validate reports about the upstream
// key, serve refuses with the same message; a bad flag value is one more
// problem for validate (exit 1, the config's problems listed too) and a
// usage error for serve (exit 2).
func TestValidateAgreesWithServe(t *testing.T) {
	t.Setenv("HOOKSPROXY_LOG_FORMAT", "")
	path := writeConfig(t, strings.Replace(baseConfig, "  base_url: http://127.0.0.1:1\n", "  base_url: http://127.0.0.1:1\n  api_key_env: NOPE_NOT_SET_KEY\n", 1))
	const msg = ":3: upstream.api_key_env: env var NOPE_NOT_SET_KEY is unset or empty"
	_, verr, vcode := runCmd(t, "validate", "--config", path)
	_, serr, scode := runCmd(t, "serve", "--config", path, "--listen", "127.0.0.1:0")
	if vcode != 1 || scode != 1 || !strings.Contains(verr, path+msg) || !strings.Contains(serr, path+msg) {
		t.Fatalf("validate %d %q; serve %d %q", vcode, verr, scode, serr)
	}
	if !strings.HasSuffix(serr, path+": 1 problem(s); hooksproxy did not start\n") || !strings.HasPrefix(serr, path+":3:") {
		t.Errorf("serve does not list its problems as validate does:\n%s", serr)
	}
	t.Setenv("HOOKSPROXY_LOG_FORMAT", "bogus")
	_, verr, vcode = runCmd(t, "validate", "--config", path)
	_, serr, scode = runCmd(t, "serve", "--config", path)
	if vcode != 1 || scode != 2 || !strings.Contains(verr, "HOOKSPROXY_LOG_FORMAT") || !strings.Contains(verr, path+msg) || !strings.Contains(serr, "HOOKSPROXY_LOG_FORMAT") {
		t.Fatalf("log format: validate %d %q; serve %d %q", vcode, verr, scode, serr)
	}
}

func TestListenEnv(t *testing.T) {
	tests := []struct {
		env, args, want string
	}{
		{"", "", ""},
		{"127.0.0.1:9999", "", "127.0.0.1:9999"},
		{"127.0.0.1:9999", "--listen=127.0.0.1:7", "127.0.0.1:7"},
	}
	for _, tt := range tests {
		t.Setenv("HOOKSPROXY_LISTEN", tt.env)
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		var c commonFlags
		c.registerListen(fs, "", "listen")
		var args []string
		if tt.args != "" {
			args = []string{tt.args}
		}
		if err := fs.Parse(args); err != nil || c.listen != tt.want {
			t.Errorf("env %q args %q: listen %q (%v), want %q", tt.env, tt.args, c.listen, err, tt.want)
		}
	}
}

// TestServeWarnsAboutApprovals: serve starts with an undecidable console
// and says so in its log.
func TestServeWarnsAboutApprovals(t *testing.T) {
	t.Setenv("HOOKSPROXY_ADMIN_TOKEN", "")
	cfg := "resolvers:\n  approvers: {kind: hooksproxy.console, config: {}}\n" +
		strings.Replace(baseConfig, "  bindings:", "  configuration:\n    approval: {resolver: approvers}\n  bindings:", 1)
	path := writeConfig(t, cfg)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	rt, err := startRuntime(ctx, path, "127.0.0.1:0", log, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	rt.wait(ctx)
	for _, want := range []string{"level=WARN msg=\"warning: the console resolver can never be decided: HOOKSPROXY_ADMIN_TOKEN", "path=resolvers.approvers"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// The PRODUCT.md resolver example (console timeout 10m, no
// approval_resolver_ms, so the spec's bound is interceptor_ms, 5 s) loads
// everywhere with a warning naming the line to add (rv3 #5): validate
// prints it and exits 0, serve starts with the spec's 5 s bound, and a
// reload to the file with approval_resolver_ms gives the console its 10
// minutes.
func TestApprovalBoundValidateServeReloadAgree(t *testing.T) {
	t.Setenv("HOOKSPROXY_ADMIN_TOKEN", "tok")
	t.Setenv("HOOKSPROXY_LOG_FORMAT", "")
	t.Setenv("HOOKSPROXY_LOG_LEVEL", "")
	t.Setenv("HOOKSPROXY_LISTEN", "")
	product := "resolvers:\n  approvers: {kind: hooksproxy.console, config: {timeout: 10m}}\n" +
		strings.Replace(baseConfig, "  bindings:", "  configuration:\n    approval: {resolver: approvers}\n  bindings:", 1)
	const msg = ":2: resolvers.approvers.config.timeout: warning: timeout 10m0s exceeds the approval bound: hooks.configuration.timeouts.approval_resolver_ms is not set"
	path := writeConfig(t, product)
	_, verr, vcode := runCmd(t, "validate", "--config", path)
	if vcode != 0 || !strings.Contains(verr, path+msg) || !strings.Contains(verr, "approval_resolver_ms: 600000") {
		t.Fatalf("validate %d %q", vcode, verr)
	}
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	rt, err := startRuntime(ctx, path, "127.0.0.1:0", slog.New(slog.NewTextHandler(&logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); rt.wait(ctx) }()
	if to := rt.app.Config().Hooks.Timeouts().ApprovalResolver; to != 5*time.Second {
		t.Fatalf("approval bound %s, want the spec's default 5s", to)
	}
	if !strings.Contains(logs.String(), "exceeds the approval bound") {
		t.Fatalf("serve did not warn:\n%s", logs.String())
	}
	// A reload of the same file warns as serve did.
	logs.Reset()
	if err := rt.app.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if !strings.Contains(logs.String(), "exceeds the approval bound") {
		t.Fatalf("reload did not warn:\n%s", logs.String())
	}
	fixed := strings.Replace(product, "    approval: {resolver: approvers}\n", "    approval: {resolver: approvers}\n    timeouts: {approval_resolver_ms: 600000}\n", 1)
	if err := os.WriteFile(path, []byte(fixed), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := runCmd(t, "validate", "--config", path); code != 0 || strings.Contains(errs, "warning") {
		t.Fatalf("fixed: validate %d %s %s", code, out, errs)
	}
	if err := rt.app.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if to := rt.app.Config().Hooks.Timeouts().ApprovalResolver; to != 10*time.Minute {
		t.Fatalf("approval bound after reload %s", to)
	}
}

// validate refuses a records.file that serve could not open, and creates
// nothing while checking (rv4 #8).
func TestValidateRecordsFile(t *testing.T) {
	for _, k := range []string{"HOOKSPROXY_LOG_FORMAT", "HOOKSPROXY_LOG_LEVEL", "HOOKSPROXY_LISTEN", "HOOKSPROXY_ADMIN_TOKEN"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	fresh := filepath.Join(dir, "a", "b", "records.jsonl")
	path := writeConfig(t, "records: {file: "+fresh+"}\n"+baseConfig)
	if _, errs, code := runCmd(t, "validate", "--config", path); code != 0 {
		t.Fatalf("creatable path: exit %d %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Fatalf("validate created the record directory: %v", err)
	}
	if os.Geteuid() == 0 {
		t.Skip("root may write anywhere; the permission cases need another user")
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	path = writeConfig(t, "records: {file: "+filepath.Join(ro, "x", "r.jsonl")+"}\n"+baseConfig)
	if _, errs, code := runCmd(t, "validate", "--config", path); code != 1 || !strings.Contains(errs, "records.file: the record directory cannot be created or written: "+ro+" is not writable") {
		t.Fatalf("read-only dir: exit %d %s", code, errs)
	}
	roFile := filepath.Join(dir, "ro.jsonl")
	if err := os.WriteFile(roFile, nil, 0o400); err != nil {
		t.Fatal(err)
	}
	path = writeConfig(t, "records: {file: "+roFile+"}\n"+baseConfig)
	if _, errs, code := runCmd(t, "validate", "--config", path); code != 1 || !strings.Contains(errs, "the record file cannot be opened for appending") {
		t.Fatalf("read-only file: exit %d %s", code, errs)
	}
}

// Extra positional arguments are an error, not ignored (rv4 #12).
func TestExtraArguments(t *testing.T) {
	t.Setenv("HOOKSPROXY_CONFIG", "")
	path := writeConfig(t, baseConfig)
	for _, args := range [][]string{
		{"validate", "--config", path, "extra"},
		{"validate", path, "extra"},
		{"serve", "--config", path, "extra"},
		{"demo", "--listen", "127.0.0.1:0", "extra"},
	} {
		if _, errs, code := runCmd(t, args...); code != 2 || !strings.Contains(errs, `unexpected argument "extra"`) {
			t.Errorf("%v: exit %d %q", args, code, errs)
		}
	}
	if out, errs, code := runCmd(t, "validate", path); code != 0 || !strings.Contains(out, ": ok (") {
		t.Errorf("validate FILE: exit %d %s %s", code, out, errs)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}, {"-version"}} {
		out, errs, code := runCmd(t, args...)
		if code != 0 || out != "hooksproxy "+buildVersion()+"\n" || errs != "" {
			t.Errorf("%v: exit %d %q %q", args, code, out, errs)
		}
	}
	if _, errs, code := runCmd(t, "version", "x"); code != 2 || !strings.Contains(errs, `unexpected argument "x"`) {
		t.Errorf("version x: exit %d %q", code, errs)
	}
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "b80916f3a1c2d4e5f60718293a4b5c6d7e8f9012"}}
	dirty := append(slices.Clone(rev), debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	clean := append(slices.Clone(rev), debug.BuildSetting{Key: "vcs.modified", Value: "false"})
	for _, tt := range []struct {
		linked string
		bi     *debug.BuildInfo
		want   string
	}{
		{"1.4.0", &debug.BuildInfo{Settings: dirty}, "1.4.0"},
		{"dev", nil, "dev"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: dirty}, "v1.2.3"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261129163004-b80916f3a1c2+dirty"}, Settings: dirty}, "b80916f3a1c2+dirty"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.4-0.20261129163004-b80916f3a1c2"}, Settings: clean}, "b80916f3a1c2"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: clean}, "b80916f3a1c2"},
	} {
		if got := versionFrom(tt.linked, tt.bi, tt.bi != nil); got != tt.want {
			t.Errorf("versionFrom(%q, %+v) = %q, want %q", tt.linked, tt.bi, got, tt.want)
		}
	}
}

// Records written to standard output keep it JSON lines only: the banner
// moves to stderr for the names of stdout.
func TestIsStdout(t *testing.T) {
	for path, want := range map[string]bool{"/dev/stdout": true, "/dev/fd/1": true, "/proc/self/fd/1": true, "/dev//stdout": true,
		"records.jsonl": false, "/dev/stderr": false, "/var/log/hooksproxy/records.jsonl": false} {
		if got := isStdout(path); got != want {
			t.Errorf("isStdout(%q) = %v", path, got)
		}
	}
}

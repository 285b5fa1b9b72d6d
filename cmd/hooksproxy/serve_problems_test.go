package main

import (
	"strings"
	"testing"
)

// serve refuses a broken config with the same problems validate lists,
// the records file that cannot be created among them (before, serve
// named it only once every other problem was fixed).
func TestServeListsValidatesProblems(t *testing.T) {
	cfg := strings.Replace(baseConfig, "agent:\n  id: a\n", "agent:\n  id: a\n  framework: Not Valid\nrecords: {file: /proc/nope/records.jsonl}\n", 1)
	path := writeConfig(t, cfg)
	_, verrs, vcode := runCmd(t, "validate", "--config", path)
	_, serrs, scode := runCmd(t, "serve", "--config", path, "--listen", "127.0.0.1:0")
	if vcode != 1 || scode == 0 {
		t.Fatalf("validate exit %d, serve exit %d", vcode, scode)
	}
	for _, want := range []string{"records.file", "agent.framework", "2 problem(s)"} {
		if !strings.Contains(verrs, want) || !strings.Contains(serrs, want) {
			t.Errorf("%q: validate\n%s\nserve\n%s", want, verrs, serrs)
		}
	}
}

// demo's help names its own default log level, warn, as serve's names info.
func TestLogLevelDefaultsInHelp(t *testing.T) {
	t.Setenv("HOOKSPROXY_LOG_LEVEL", "")
	for cmd, want := range map[string]string{"demo": `(default warn)`, "serve": `(default info)`} {
		_, errs, _ := runCmd(t, cmd, "--help")
		i := strings.Index(errs, "-log-level")
		if i < 0 || !strings.Contains(errs[i:min(len(errs), i+200)], want) {
			t.Errorf("%s --help: %q", cmd, errs)
		}
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// With --log-format json the start banner is a JSON log line (same facts
// as attributes), never plain text amid the JSON lines; in text mode it
// stays the banner, on stdout unless records go there.
func TestBannerFollowsLogFormat(t *testing.T) {
	const addr = "127.0.0.1:19640"
	const text = "hooksproxy listening on http://" + addr + " (OPENAI_BASE_URL=http://" + addr + "/v1)\n"
	for _, tc := range []struct {
		format          string
		recordsToStdout bool
		stdout, stderr  string // text expected; "json" for one JSON log line
		level           string
	}{
		{"text", false, text, "", "info"},
		{"text", true, "", text, "info"},
		{"json", false, "", "json", "info"},
		{"json", true, "", "json", "info"},
		{"json", false, "", "json", "warn"},  // the address at any level
		{"json", false, "", "json", "error"}, // (demo's default is warn)
	} {
		var out, errb bytes.Buffer
		c := commonFlags{logFormat: tc.format, logLevel: tc.level}
		log, err := c.logger(&errb)
		if err != nil {
			t.Fatal(err)
		}
		announce(&out, &errb, log, tc.format == "json", tc.recordsToStdout, addr)
		name := tc.format
		if tc.recordsToStdout {
			name += ", records on stdout"
		}
		if out.String() != tc.stdout {
			t.Errorf("%s: stdout %q, want %q", name, out.String(), tc.stdout)
		}
		if tc.stderr != "json" {
			if errb.String() != tc.stderr {
				t.Errorf("%s: stderr %q, want %q", name, errb.String(), tc.stderr)
			}
			continue
		}
		var line map[string]any
		if err := json.Unmarshal(errb.Bytes(), &line); err != nil {
			t.Fatalf("%s: stderr is not one JSON line: %q", name, errb.String())
		}
		if line["msg"] != "hooksproxy listening" || line["url"] != "http://"+addr || line["openai_base_url"] != "http://"+addr+"/v1" {
			t.Errorf("%s: log line %v", name, line)
		}
	}
}

// serve --log-format json writes only JSON lines, from start to stop.
func TestServeJSONLogsAreJSONOnly(t *testing.T) {
	if cfg := os.Getenv("BANNER_TEST_CHILD_CONFIG"); cfg != "" {
		os.Exit(run([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0", "--log-format", "json"}, os.Stdout, os.Stderr))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeJSONLogsAreJSONOnly$")
	cmd.Env = append(os.Environ(), "BANNER_TEST_CHILD_CONFIG="+writeConfig(t, baseConfig), "HOOKSPROXY_ADMIN_TOKEN=", "HOOKSPROXY_LISTEN=")
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	for i := 0; !strings.Contains(stderr.String(), `"msg":"hooksproxy listening"`); i++ {
		if i == 200 {
			t.Fatalf("no listening line:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
	// The test binary's own PASS line is not serve's output.
	if out := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(stdout.String()), "PASS")); out != "" {
		t.Errorf("stdout %q, want nothing", out)
	}
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if !json.Valid([]byte(l)) {
			t.Errorf("stderr line is not JSON: %q", l)
		}
	}
	if !regexp.MustCompile(`"url":"http://127\.0\.0\.1:(\d+)","openai_base_url":"http://127\.0\.0\.1:\d+/v1"`).MatchString(stderr.String()) {
		t.Errorf("listening line lacks its attributes:\n%s", stderr.String())
	}
}

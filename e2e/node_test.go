package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/scripted"
)

// nodeDir holds package.json, the committed package-lock.json and test.mjs.
const nodeDir = "node"

// requireNode turns the node test's skips into failures; run.sh sets it
// when node is installed, so CI cannot pass by skipping.
const requireNodeEnv = "E2E_REQUIRE_NODE"

// skipOrFail skips, or fails when E2E_REQUIRE_NODE=1.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv(requireNodeEnv) == "1" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// nodeReady finds node and makes sure node_modules is installed from the
// lockfile, running npm ci once if it is missing.
func nodeReady(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node is not installed: skipping the npm openai end-to-end test (install Node 20 and run e2e/run.sh)")
	}
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "openai", "package.json")); err == nil {
		return node
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		skipOrFail(t, "e2e/node/node_modules is missing and npm is not installed: skipping the npm openai test")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = nodeDir
	if out, err := cmd.CombinedOutput(); err != nil {
		skipOrFail(t, "e2e/node/node_modules is missing and `npm ci` failed (%v): skipping the npm openai test\n%s", err, out)
	}
	return node
}

// TestNodeOpenAI runs e2e/node/test.mjs, the npm openai client on Node,
// against the proxy: plain, streaming (for await over chunks), streamed
// parallel tool calls, denies as APIError 403 and redaction transforms
// (in content and in tool-call arguments).
func TestNodeOpenAI(t *testing.T) {
	node := nodeReady(t)
	if out, err := exec.Command(node, "--version").Output(); err == nil {
		t.Logf("node %s", bytes.TrimSpace(out))
	}
	e := start(t, policyYAML, scripted.New(rules()...))
	expect, _ := json.Marshal(map[string]string{
		"hello": answerHello, "long": answerLong, "redacted": answerRedacted, "key": fakeKey,
		"weather_args": weatherArgs, "time_args": timeArgs, "weather_key_args_redacted": weatherKeyArgsRedacted,
	})
	// A guard against a hung child, not an assertion: go test's own
	// timeout would leave node running.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "test.mjs")
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL="+e.URL+"/v1", "E2E_EXPECT="+string(expect), "OPENAI_API_KEY=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	type line struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Detail string `json:"detail"`
	}
	var lines []line
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Name == "" {
			t.Logf("node: %s", sc.Text())
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		t.Fatalf("node test.mjs reported nothing (%v)\nstderr:\n%s", runErr, stderr.String())
	}
	failed := false
	for _, l := range lines {
		t.Run(l.Name, func(t *testing.T) {
			if !l.OK {
				failed = true
				t.Error(l.Detail)
			}
		})
	}
	var exit *exec.ExitError
	if runErr != nil && (!failed || !errors.As(runErr, &exit)) {
		t.Errorf("node test.mjs: %v\nstderr:\n%s", runErr, stderr.String())
	}
	if len(lines) != 11 {
		t.Errorf("node ran %d checks, want 11", len(lines))
	}

	// The records agree with what the client saw.
	got := map[string]int{}
	for _, r := range allRecords(e) {
		if r.Verdict.Decision != "allow" {
			got[string(r.InterceptionPoint)+" "+string(r.Verdict.Decision)+" "+r.Verdict.Reason]++
		}
	}
	for k, n := range map[string]int{
		"input deny prompt_denied":                   1,
		"output deny secret_in_output":               1,
		"post_model_call deny tool_denied":           1,
		"post_model_call transform content_redacted": 3,
	} {
		if got[k] != n {
			t.Errorf("records %q: %d, want %d (all non-allow: %v)", k, got[k], n, got)
		}
	}
	if s := stderr.String(); strings.TrimSpace(s) != "" {
		t.Logf("node stderr:\n%s", s)
	}
}

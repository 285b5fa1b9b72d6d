package app_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hooksproxy/hooksproxy/app"
	"github.com/hooksproxy/hooksproxy/audit"
	"github.com/hooksproxy/hooksproxy/points"
)

// A refused reload says why in the log, each problem with its line, however
// many there are: joined into one string they passed the log's bound on a
// string and read "[N bytes elided]".
func TestRefusedReloadLogsEveryProblem(t *testing.T) {
	good := "agent: {id: a}\nupstream:\n  base_url: http://127.0.0.1:9\nhooks:\n  declaration: agent-hooks-declaration/1.0\n  bindings:\n    - {id: allow, kind: hooksproxy.allow_all}\n"
	path := filepath.Join(t.TempDir(), "hp.yaml")
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	opts := app.Options{Env: exampleEnv(), Sink: points.NewMemorySink(0),
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{ReplaceAttr: audit.ReplaceAttr}))}
	cfg, err := app.Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Server.Close)
	bad := good + "upstreem: {}\nsesions: {}\nlimitz: {}\nrecods: {}\nmetricz: {}\nagnet: {}\n"
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err == nil {
		t.Fatal("a config with six unknown keys reloaded")
	}
	out := logs.String()
	if strings.Contains(out, "elided") {
		t.Fatalf("the reason was elided:\n%s", out)
	}
	for _, key := range []string{"upstreem", "sesions", "limitz", "recods", "metricz", "agnet"} {
		if !strings.Contains(out, `"key":"`+key+`"`) {
			t.Errorf("no problem line for %s:\n%s", key, out)
		}
	}
	if !strings.Contains(out, `"problems":6`) {
		t.Errorf("no summary line with the count:\n%s", out)
	}
}

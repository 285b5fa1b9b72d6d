package metrics

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hooksproxy/hooksproxy/audit"
)

// TestNoPayloadInRecordsOrMetrics runs the scripted emissions, with the
// marker planted in every target, through the real sinks and the metrics,
// and checks that no record line, no served record, no log line and no
// byte of the metrics exposition carries it.
func TestNoPayloadInRecordsOrMetrics(t *testing.T) {
	m, reg := newMetrics(t)
	var logs bytes.Buffer
	h, err := audit.NewLogHandler(&logs, "json", slog.LevelDebug)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(h)
	path := filepath.Join(t.TempDir(), "audit", "records.jsonl")
	file, err := audit.OpenFile(path, audit.WithReporter(m), audit.WithLogger(log), audit.WithFsync(audit.FsyncNever))
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	w := audit.NewWriterSink("stdout", &stdout, audit.WithReporter(m), audit.WithLogger(log))
	ring := audit.NewRing(1000)
	fan := audit.NewFanout(file, w, ring)

	runScenarios(t, m, fan)
	if err := fan.Close(); err != nil {
		t.Fatal(err)
	}

	recs, res, err := audit.ReadFile(path)
	if err != nil || res.TornBytes != 0 {
		t.Fatalf("read records: %v, %+v", err, res)
	}
	if len(recs) != len(scenarios()) {
		t.Fatalf("%d records, want one per scenario (%d)", len(recs), len(scenarios()))
	}
	fileBytes, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
			return
		}
		ring.ServeHTTP(w, r)
	}))
	defer srv.Close()
	get := func(path string) string {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	scrape := get("/metrics")
	served := get("/agent-hooks/v1/records?limit=1000")

	places := map[string]string{
		"record file": string(fileBytes), "stdout sink": stdout.String(), "records endpoint": served,
		"metrics": scrape, "logs": logs.String(),
	}
	for where, text := range places {
		for _, needle := range []string{marker, "c0ffee", "9d1e-payload"} {
			if strings.Contains(text, needle) {
				i := strings.Index(text, needle)
				t.Errorf("%s carries payload %q near: %s", where, needle, text[max(0, i-120):min(len(text), i+60)])
			}
		}
	}
	if !strings.Contains(scrape, `hooksproxy_decisions_total{`) || !strings.Contains(served, `"interception_point"`) {
		t.Fatal("the checks above looked at empty output")
	}
	if file.Stats().Dropped != 0 || w.Stats().Dropped != 0 {
		t.Errorf("drops: file %+v stdout %+v", file.Stats(), w.Stats())
	}
}

package metrics

import (
	"bytes"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var exposition = flag.String("out", "", "TestWriteExposition writes a live scrape of the scripted run to this file (deploy/check.sh feeds it to promtool check metrics)")

// TestWriteExposition scrapes a registry that went through the scripted
// run, with the Go and process collectors a server registers beside ours,
// over loopback HTTP, and checks that the exposition parses. With -out it
// also writes the scrape to a file for promtool.
func TestWriteExposition(t *testing.T) {
	m, reg := newMetrics(t)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	scriptedRun(t, m)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4") // what promtool check metrics reads
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape status %d: %s", resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("exposition does not parse: %v", err)
	}
	if _, ok := fams["hooksproxy_decisions_total"]; !ok {
		t.Fatal("no hooksproxy_decisions_total in the scrape")
	}
	if *exposition != "" {
		if err := os.WriteFile(*exposition, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

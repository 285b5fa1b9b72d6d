package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestStartupMetrics: a process that has only started shows the series
// that alerts and dashboards query, at their starting values. The start is
// no reload (the counter stays at zero, the gauges read success), and the
// record series exist without a record file (the ring's, at zero).
func TestStartupMetrics(t *testing.T) {
	path := writeConfig(t, baseConfig)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := startRuntime(ctx, path, "127.0.0.1:0", slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.hs.Close()
	resp, err := http.Get("http://" + rt.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`hooksproxy_config_reloads_total{result="success"} 0`,
		`hooksproxy_config_reloads_total{result="failure"} 0`,
		`hooksproxy_config_last_reload_successful 1`,
		`hooksproxy_records_dropped_total{sink="ring"} 0`,
		`hooksproxy_record_sink_errors_total{op="write",sink="ring"} 0`,
		`hooksproxy_approvals_total{outcome="approve",point="pre_tool_call",resolved_by="approval"} 0`,
		`hooksproxy_approvals_total{outcome="unresolved",point="pre_tool_call",resolved_by="rejection"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, "hooksproxy_config_last_reload_success_timestamp_seconds 0\n") {
		t.Error("the success timestamp is not set at start")
	}
}

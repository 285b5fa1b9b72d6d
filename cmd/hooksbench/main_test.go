package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/bench"
)

// TestMain lets the test binary play the child roles the smoke test
// starts: hooksbench re-executes itself with -role first.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-role" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes")
	}
	out := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	args := []string{"-quick", "-modes", "json,stream", "-sizes", "1K", "-conc", "2", "-scenario-time", "1ms",
		"-batch-time", "1ms", "-held", "12", "-held-sizes", "1K", "-json", out}
	if code := run(args, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != 2 {
		t.Fatalf("%d scenarios, want 2", len(rep.Scenarios))
	}
	for _, sc := range rep.Scenarios {
		for _, target := range bench.Targets() {
			c := sc.Cells[target]
			if c == nil || c.Requests == 0 || c.P50 <= 0 || c.CPU <= 0 {
				t.Errorf("%v %s: empty cell %+v", sc.scenario, target, c)
				continue
			}
			if target != bench.Bare && c.Errors != 0 {
				t.Errorf("%v %s: %d errors: %s", sc.scenario, target, c.Errors, c.FirstErr)
			}
		}
		// Every hooksproxy request emits records.
		if sc.Cells[bench.AllowAll].Counter == 0 {
			t.Errorf("%v: allow_all emitted no records", sc.scenario)
		}
	}
	if len(rep.Held) != 3 {
		t.Fatalf("%d held results, want 3", len(rep.Held))
	}
	for _, h := range rep.Held {
		if h.Target != bench.Bare && h.Completed != h.Streams {
			t.Errorf("held %s: %d of %d completed: %s", h.Target, h.Completed, h.Streams, h.FirstErr)
		}
		if h.Held.RSS == 0 || h.Base.HeapAlloc == 0 {
			t.Errorf("held %s: no memory figures", h.Target)
		}
	}
	if !strings.Contains(stdout.String(), "### Targets") {
		t.Errorf("markdown report incomplete:\n%s", stdout.String())
	}
}

func TestParseInts(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"1,16,64", []int{1, 16, 64}, false},
		{"1K, 32k", []int{1024, 32768}, false},
		{"7", []int{7}, false},
		{"", nil, true},
		{"0", nil, true},
		{"-1", nil, true},
		{"1,,2", nil, true},
		{"4294967296K", nil, true},
		{"x", nil, true},
	}
	for _, tt := range tests {
		got, err := parseInts(tt.in)
		if (err != nil) != tt.wantErr || !equalInts(got, tt.want) {
			t.Errorf("parseInts(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, errUsage) {
			t.Errorf("parseInts(%q) error %v does not wrap errUsage", tt.in, err)
		}
	}
}

func FuzzParseInts(f *testing.F) {
	f.Add("1,16,64")
	f.Add("32K")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseInts(s)
		if err != nil {
			return
		}
		for _, n := range v {
			if n <= 0 || n > 1<<30 {
				t.Errorf("parseInts(%q) gave %d", s, n)
			}
		}
		if joined, err := parseInts(joinInts(v)); err != nil || !equalInts(joined, v) {
			t.Errorf("round trip of %v: %v, %v", v, joined, err)
		}
	})
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestChecks(t *testing.T) {
	ms := time.Millisecond
	res := &scenarioResult{scenario: scenario{Size: 1024, Conc: 64}, Cells: map[string]*cell{
		bench.Direct:   {P50: 1 * ms, P99: 2 * ms, Requests: 100, Wall: time.Second},
		bench.Bare:     {P50: 2 * ms, P99: 4 * ms, Requests: 100, Wall: time.Second},
		bench.AllowAll: {P50: 2500 * time.Microsecond, P99: 6 * ms, Requests: 100, Wall: 2 * time.Second},
		bench.Policy:   {P50: 4 * ms, P99: 5 * ms, Requests: 70, Wall: time.Second},
	}}
	r := &report{Config: reportConfig{Concs: []int{1, 64}}, Scenarios: []*scenarioResult{res},
		Held: []*heldResult{{Target: bench.AllowAll, Size: 1024, Streams: 10, Completed: 10, WireBytes: 1000,
			Base: bench.ProcStats{RSS: 1000, HeapAlloc: 100}, Held: bench.ProcStats{RSS: 26000}, Live: bench.ProcStats{HeapAlloc: 10100}}}}
	r.finish()
	got := map[string]bool{}
	for _, c := range r.Checks {
		got[c.What] = c.Holds
	}
	want := map[string]bool{
		"json 1 KB c=64: allow_all added p50 ÷ bare added p50":       true,  // 1.5 / 1 = 1.5
		"json 1 KB c=64: allow_all added p99 ÷ bare added p99":       false, // 4 / 2 = 2
		"json 1 KB c=64: allow_all req/s ÷ bare req/s":               false, // 0.5
		"json 1 KB c=64: policy added p50 ÷ bare added p50":          false, // 3
		"json 1 KB c=64: policy added p99 ÷ bare added p99":          true,  // 1.5
		"json 1 KB c=64: policy req/s ÷ bare req/s":                  true,  // 0.7
		"held allow_all 1 KB: RSS per stream ÷ response bytes":       false, // 2.5
		"held allow_all 1 KB: live heap per stream ÷ response bytes": true,  // 1.0
	}
	for k, v := range want {
		h, ok := got[k]
		if !ok {
			t.Errorf("missing check %q (have %v)", k, got)
			continue
		}
		if h != v {
			t.Errorf("%s: holds = %v, want %v", k, h, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d checks, want %d", len(got), len(want))
	}
}

func TestFmtDur(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{412 * time.Microsecond, "412µs"},
		{1234 * time.Microsecond, "1.23ms"},
		{45600 * time.Microsecond, "45.6ms"},
		{2 * time.Second, "2.00s"},
		{-300 * time.Microsecond, "−300µs"},
	}
	for _, tt := range tests {
		if got := fmtDur(tt.in); got != tt.want {
			t.Errorf("fmtDur(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

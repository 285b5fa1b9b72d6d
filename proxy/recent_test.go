package proxy

import (
	"strconv"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

func TestRecentKeepsTheLatest(t *testing.T) {
	r := newRecent[int](3)
	for i := 0; i < 10; i++ {
		r.put("k"+strconv.Itoa(i%5), i) // keys come back: stale refs must not evict live entries
	}
	// Puts 5..9 wrote k0..k4 again; the three most recent are k2, k3, k4.
	for k, want := range map[string]int{"k2": 7, "k3": 8, "k4": 9} {
		if v, ok := r.get(k); !ok || v != want {
			t.Errorf("%s = %d %v, want %d", k, v, ok, want)
		}
	}
	for _, k := range []string{"k0", "k1"} {
		if _, ok := r.get(k); ok {
			t.Errorf("%s kept beyond the bound", k)
		}
	}
	if len(r.order) > 2*r.max {
		t.Fatalf("order grew to %d", len(r.order))
	}
}

// A judgment counts only for the emitter (the configuration) that made it:
// a request still running under an older policy may remember a result
// after a reload's reset, and the new policy must judge it afresh.
func TestJudgedResultsAreThePolicys(t *testing.T) {
	var old, cur points.Emitter
	j := newJudgedResults(8)
	args := []byte(`{"q":"x"}`)
	j.remember(&old, "call_1", "search", args, "raw result", true, "raw result")
	if ok, _ := j.lookup(&cur, "call_1", "search", args, "raw result"); ok {
		t.Fatal("a judgment of the previous policy covered the current one")
	}
	if ok, _ := j.lookup(&old, "call_1", "search", args, "raw result"); !ok {
		t.Fatal("the judging policy does not find its own judgment")
	}
	j.remember(&cur, "call_2", "search", args, "secret", true, "[redacted]")
	if ok, replace := j.lookup(&cur, "call_2", "search", args, "secret"); !ok || replace == nil || *replace != "[redacted]" {
		t.Fatalf("verdicted replay: %v %v", ok, replace)
	}
}

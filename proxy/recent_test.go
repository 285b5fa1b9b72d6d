package proxy

import (
	"strconv"
	"testing"
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

package proxy

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Past their byte bounds the memories let the oldest entries go, not the
// newest: before, a full signature memory kept no new signature ever again
// (nothing new entered, so nothing was evicted by count), and every later
// Gemini tool loop broke.
func TestMemoriesDropOldestPastTheirBytes(t *testing.T) {
	g := newSignatures(1 << 16)
	extra := []byte(`{"google":{"thought_signature":"` + strings.Repeat("A", maxSignatureBytes-40) + `"}}`)
	n := maxSignaturesBytes/len(extra) + 50
	for i := range n {
		g.put("s", "call_"+strconv.Itoa(i), "f", extra)
	}
	if g.kept > maxSignaturesBytes {
		t.Fatalf("signatures hold %d bytes, bound %d", g.kept, maxSignaturesBytes)
	}
	if _, ok := g.m.get(signatureKey("s", "call_"+strconv.Itoa(n-1), "f")); !ok {
		t.Fatal("the newest signature was not kept")
	}
	if _, ok := g.m.get(signatureKey("s", "call_0", "f")); ok {
		t.Fatal("the oldest signature was kept past the bound")
	}
	if got := int(g.n.Load()); got != len(g.m.m) {
		t.Fatalf("count %d, entries %d", got, len(g.m.m))
	}

	j := newJudgedInputs(1 << 16)
	v := []byte(`"` + strings.Repeat("x", maxKeptVerdict-2) + `"`)
	m := maxKeptBytes/len(v) + 50
	for i := range m {
		j.remember("s", "user", gjson.Parse(`"msg `+strconv.Itoa(i)+`"`), v, "")
	}
	if j.kept > maxKeptBytes {
		t.Fatalf("input verdicts hold %d bytes, bound %d", j.kept, maxKeptBytes)
	}
	if iv, ok, changed := j.lookup("s", "user", gjson.Parse(`"msg `+strconv.Itoa(m-1)+`"`)); !ok || !changed || iv.content == nil {
		t.Fatal("the newest verdict was not kept")
	}
	if _, ok, changed := j.lookup("s", "user", gjson.Parse(`"msg 0"`)); ok || !changed {
		t.Fatalf("the oldest verdict: kept %v, still known as changed %v (want dropped, judged again)", ok, changed)
	}
}

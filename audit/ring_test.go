package audit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tidwall/gjson"
)

func seqsOf(t *testing.T, raws []json.RawMessage) []int64 {
	t.Helper()
	var out []int64
	for _, r := range raws {
		out = append(out, gjson.GetBytes(r, "sequence").Int())
	}
	return out
}

func TestRingQueryNewestFirst(t *testing.T) {
	g := NewRing(4)
	for i := int64(0); i < 7; i++ {
		sid := "a"
		if i%2 == 1 {
			sid = "b"
		}
		g.Write(rec(sid, i))
	}
	tests := []struct {
		session string
		limit   int
		want    []int64
	}{
		{"", 0, []int64{6, 5, 4, 3}},
		{"a", 0, []int64{6, 4}},
		{"b", 0, []int64{5, 3}},
		{"b", 1, []int64{5}},
		{"", 2, []int64{6, 5}},
		{"zzz", 0, nil},
	}
	for _, tt := range tests {
		if got := seqsOf(t, g.Records(tt.session, tt.limit)); !equalSeqs(got, tt.want) {
			t.Errorf("Records(%q, %d) = %v, want %v", tt.session, tt.limit, got, tt.want)
		}
	}
	if g.Len() != 4 || g.Evicted() != 3 {
		t.Errorf("len %d evicted %d", g.Len(), g.Evicted())
	}
}

func TestRingPartiallyFilled(t *testing.T) {
	g := NewRing(0)
	g.Write(rec("a", 1))
	g.Write(rec("a", 2))
	if got := seqsOf(t, g.Records("a", 0)); !equalSeqs(got, []int64{2, 1}) {
		t.Errorf("got %v", got)
	}
	if g.Evicted() != 0 {
		t.Errorf("evicted %d", g.Evicted())
	}
}

func TestRingServeHTTP(t *testing.T) {
	g := NewRing(10)
	for i := int64(0); i < 3; i++ {
		g.Write(rec("s-1", i))
	}
	g.Write(rec("other", 9))
	tests := []struct {
		method, query string
		status        int
		want          []int64
	}{
		{"GET", "?session=s-1", 200, []int64{0, 1, 2}},
		{"GET", "?session=s-1&limit=2", 200, []int64{1, 2}},
		{"GET", "?session=s-1&order=desc", 200, []int64{2, 1, 0}},
		{"GET", "?order=asc", 200, []int64{0, 1, 2, 9}},
		{"GET", "?order=up", 400, nil},
		{"GET", "", 200, []int64{9, 2, 1, 0}},
		{"GET", "?session=none", 200, nil},
		{"GET", "?limit=0", 400, nil},
		{"GET", "?limit=x", 400, nil},
		{"POST", "", 405, nil},
	}
	for _, tt := range tests {
		rr := httptest.NewRecorder()
		g.ServeHTTP(rr, httptest.NewRequest(tt.method, "/agent-hooks/v1/records"+tt.query, nil))
		if rr.Code != tt.status {
			t.Errorf("%s %s: status %d, want %d", tt.method, tt.query, rr.Code, tt.status)
			continue
		}
		if ct := rr.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("content type %q", ct)
		}
		body := rr.Body.Bytes()
		if !gjson.ValidBytes(body) {
			t.Fatalf("%s %s: invalid JSON %s", tt.method, tt.query, body)
		}
		if tt.status != http.StatusOK {
			continue
		}
		var got []int64
		for _, r := range gjson.GetBytes(body, "records").Array() {
			got = append(got, r.Get("sequence").Int())
		}
		if !equalSeqs(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.query, got, tt.want)
		}
	}
}

package ctk

import (
	"bytes"
	"context"
	"testing"
)

const (
	vectorsDir     = "../testdata/agent-hooks-0.1/conformance/vectors"
	declVectorsDir = "../testdata/agent-hooks-0.1/declaration/conformance/vectors"
)

func loadAll(t *testing.T) []Vector {
	t.Helper()
	core, err := LoadDir(vectorsDir)
	if err != nil {
		t.Fatal(err)
	}
	decl, err := LoadDir(declVectorsDir)
	if err != nil {
		t.Fatal(err)
	}
	return append(core, decl...)
}

func TestConformanceInProcess(t *testing.T) {
	vs := loadAll(t)
	results := Run(NewInProcess(), vs)
	var buf bytes.Buffer
	tally := PrintSummary(&buf, results)
	t.Log(tally.String())
	if tally.Failed > 0 {
		t.Errorf("%d vectors failed:\n%s", tally.Failed, buf.String())
	}
	if tally.Passed+tally.Skipped != len(vs) || tally.Skipped != 4 {
		t.Errorf("unexpected tally %+v over %d vectors", tally, len(vs))
	}
}

func BenchmarkInProcessVectors(b *testing.B) {
	core, err := LoadDir(vectorsDir)
	if err != nil {
		b.Fatal(err)
	}
	h := NewInProcess()
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range Run(h, core) {
			if r.Status == StatusFail {
				b.Fatalf("%s: %q", r.ID, r.Failures)
			}
		}
	}
}

func BenchmarkAssert(b *testing.B) {
	core, err := LoadDir(vectorsDir)
	if err != nil {
		b.Fatal(err)
	}
	var v Vector
	for _, x := range core {
		if x.ID == "AH-CTK-001" {
			v = x
		}
	}
	h := NewInProcess()
	s := NewSetup(&v)
	if err := h.Setup(s); err != nil {
		b.Fatal(err)
	}
	rr, err := h.Run(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	rr.Postures = map[string]string{PostureToolSeamHostError: PostureContinue}
	rec := s.Recorded()
	b.ReportAllocs()
	for b.Loop() {
		if r := Assert(v, rec, rr); r.Status != StatusPass {
			b.Fatal(r.Failures)
		}
	}
}

package ctk

import (
	"bytes"
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
	t.Log("\n" + buf.String())
	if tally.Failed > 0 {
		t.Errorf("%d vectors failed", tally.Failed)
	}
}

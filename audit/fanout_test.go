package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

func TestFanoutDeliversToEverySinkDespiteAPanic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	file, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ring := NewRing(10)
	var plain atomic.Int64
	var stdout bytes.Buffer
	w := NewWriterSink("stdout", &stdout)
	f := NewFanout(
		points.RecordSinkFunc(func(*points.Record) { panic("bad sink") }),
		nil,
		file, ring, w,
		points.RecordSinkFunc(func(*points.Record) { plain.Add(1) }),
	)
	if len(f.Sinks()) != 5 {
		t.Fatalf("sinks = %d", len(f.Sinks()))
	}
	for i := int64(0); i < 3; i++ {
		f.Write(rec("s", i))
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if plain.Load() != 3 {
		t.Errorf("plain sink got %d", plain.Load())
	}
	fileBytes, _ := os.ReadFile(path)
	if !bytes.Equal(fileBytes, stdout.Bytes()) {
		t.Errorf("file and writer lines differ:\n%s\n%s", fileBytes, stdout.Bytes())
	}
	// The ring serves the same bytes as the file's lines.
	lines := bytes.Split(bytes.TrimSuffix(fileBytes, []byte("\n")), []byte("\n"))
	got := ring.Records("s", 0)
	if len(got) != 3 || len(lines) != 3 {
		t.Fatalf("ring %d, file %d", len(got), len(lines))
	}
	for i := range got {
		if !bytes.Equal(got[i], lines[2-i]) {
			t.Errorf("ring record %d differs from the file line", i)
		}
	}
}

func TestFanoutEncodeFailureReachesEachSink(t *testing.T) {
	rep := newFakeReporter()
	a := NewWriterSink("a", &bytes.Buffer{}, WithReporter(rep))
	b := NewWriterSink("b", &bytes.Buffer{}, WithReporter(rep))
	r := rec("s", 1)
	r.Verdict.Evidence = []byte(`{bad`)
	NewFanout(a, b).Write(r)
	_ = a.Close()
	_ = b.Close()
	_, e := rep.snapshot()
	if e["a/encode"] != 1 || e["b/encode"] != 1 {
		t.Errorf("errors = %v", e)
	}
}

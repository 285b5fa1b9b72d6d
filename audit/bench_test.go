package audit

import (
	"io"
	"path/filepath"
	"testing"
)

// BenchmarkFileSinkWrite measures what a decision pays to hand a record to
// an asynchronous file sink (encode + enqueue); drops are reported.
func BenchmarkFileSinkWrite(b *testing.B) {
	s, err := OpenFile(filepath.Join(b.TempDir(), "r.jsonl"), WithQueueSize(1<<16))
	if err != nil {
		b.Fatal(err)
	}
	r := rec("bench", 1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.Write(r)
		}
	})
	b.StopTimer()
	_ = s.Close()
	b.ReportMetric(float64(s.Stats().Dropped), "dropped")
}

func BenchmarkWriterSinkWrite(b *testing.B) {
	s := NewWriterSink("discard", io.Discard)
	r := rec("bench", 1)
	b.ReportAllocs()
	for b.Loop() {
		s.Write(r)
	}
	_ = s.Close()
}

func BenchmarkFanoutFileAndRing(b *testing.B) {
	s, err := OpenFile(filepath.Join(b.TempDir(), "r.jsonl"), WithQueueSize(1<<16))
	if err != nil {
		b.Fatal(err)
	}
	f := NewFanout(s, NewRing(10000))
	r := rec("bench", 1)
	b.ReportAllocs()
	for b.Loop() {
		f.Write(r)
	}
	b.StopTimer()
	_ = f.Close()
}

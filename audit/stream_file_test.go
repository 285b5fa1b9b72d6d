package audit

import (
	"bufio"
	"os"
	"strconv"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

// A record file that is a pipe (records.file: /dev/stdout in a container)
// gets every record, is never rotated or fsynced (neither means anything
// there, and renaming the path would move the device's name), and reports
// no sink error.
func TestRecordFileIsAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	path := "/proc/self/fd/" + strconv.Itoa(int(w.Fd()))
	if _, err := os.Stat(path); err != nil {
		t.Skip("no /proc/self/fd: ", err)
	}
	rep := newFakeReporter()
	s, err := OpenFile(path, WithSyncWrite(), WithRotation(10, 1), WithReporter(rep))
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for i := range 3 {
		s.Write(&points.Record{InterceptionPoint: points.Output, Mode: points.Enforce, Sequence: int64(i), Verdict: points.RecordVerdict{Decision: points.DecisionAllow}})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	n := 0
	for range lines {
		n++
	}
	if n != 3 {
		t.Fatalf("%d lines through the pipe, want 3", n)
	}
	if dropped, errs := rep.snapshot(); len(errs) != 0 || len(dropped) != 0 {
		t.Fatalf("sink errors %v, dropped %v", errs, dropped)
	}
	if _, err := os.Stat(path + ".1"); err == nil {
		t.Fatal("a pipe was rotated")
	}
}

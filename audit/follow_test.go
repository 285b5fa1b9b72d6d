package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// A record file moved, removed or replaced under a running sink (logrotate
// without copytruncate, an operator's mv or rm) is followed: the path is
// opened again, so later records are neither lost in an unlinked file nor
// added to the renamed one, and what was written before stays complete.
func TestFileFollowsItsPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		move func(path string) error
		// foreign: a line without its newline someone else left in the
		// new file; ours must start on a line of their own.
		foreign string
	}{
		{"renamed", func(p string) error { return os.Rename(p, p+".old") }, ""},
		{"removed", os.Remove, ""},
		{"replaced", func(p string) error {
			if err := os.Rename(p, p+".old"); err != nil {
				return err
			}
			return os.WriteFile(p, []byte("partial"), 0o600)
		}, "partial"},
	} {
		for _, sync := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sync=%v", tc.name, sync), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "records.jsonl")
				rep := newFakeReporter()
				opts := []Option{WithReopenCheck(0), WithReporter(rep)}
				if sync {
					opts = append(opts, WithSyncWrite())
				}
				s, err := OpenFile(path, opts...)
				if err != nil {
					t.Fatal(err)
				}
				s.Write(rec("s", 1))
				if err := s.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := tc.move(path); err != nil {
					t.Fatal(err)
				}
				s.Write(rec("s", 2))
				s.Write(rec("s", 3))
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				got := lines(t, path)
				if tc.foreign != "" {
					if got[0] != tc.foreign {
						t.Fatalf("first line %q, want the foreign partial line kept whole", got[0])
					}
					got = got[1:]
				}
				if len(got) != 2 {
					t.Fatalf("path has %d lines, want 2 of ours: %q", len(got), got)
				}
				for i, l := range got {
					if !strings.Contains(l, fmt.Sprintf(`"sequence":%d`, i+2)) {
						t.Fatalf("line %d = %q, want sequence %d", i, l, i+2)
					}
				}
				if tc.name != "removed" {
					if old := lines(t, path+".old"); len(old) != 1 || !strings.Contains(old[0], `"sequence":1`) {
						t.Fatalf("moved file = %q, want the first record alone", old)
					}
				}
				if _, errs := rep.snapshot(); len(errs) != 0 {
					t.Fatalf("sink errors %v", errs)
				}
				if st := s.Stats(); st.Written != 3 || st.Dropped != 0 {
					t.Fatalf("stats %+v", st)
				}
			})
		}
	}
}

// Between checks the path is not looked at: a sink writing many records
// costs one stat per interval, not one per write.
func TestFileFollowWaitsForItsInterval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	now := time.Unix(1e9, 0)                                             // a clock that stands still: no interval passes
	s, err := OpenFile(path, withClock(func() time.Time { return now })) // default interval: 1s
	if err != nil {
		t.Fatal(err)
	}
	s.Write(rec("s", 1))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	s.Write(rec("s", 2))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Within the interval, the record still went to the open file.
	if old := lines(t, path+".old"); len(old) != 2 {
		t.Fatalf("moved file has %d lines, want 2 (the check is once per interval)", len(old))
	}
}

func TestDescriptorPath(t *testing.T) {
	for path, want := range map[string]bool{
		"/dev/stdout": true, "/dev/stderr": true, "/dev/fd/1": true, "/dev/fd/7": true,
		"/proc/self/fd/1": true, "/proc/123/fd/2": true, "/proc/thread-self/fd/1": true, "/dev/../dev/stdout": true,
		"/dev/shm/records.jsonl": false, "/proc/self/status": false, "records.jsonl": false,
		"/var/log/hooksproxy/records.jsonl": false, "/dev/null": false,
	} {
		if got := descriptorPath(path); got != want {
			t.Errorf("descriptorPath(%q) = %v, want %v", path, got, want)
		}
	}
}

// A record path that names a descriptor open on a regular file (stdout
// when the process runs as "serve > out.log") is a stream: never rotated
// (renaming /dev/stdout would move the name, and later records would land
// in a new file under /dev), its tail never cut, every record on it.
func TestDescriptorOnRegularFileNeverRotated(t *testing.T) {
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := out.WriteString("someone else's partial line"); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/proc/self/fd/%d", out.Fd())
	rep := newFakeReporter()
	s, err := OpenFile(path, WithRotation(int64(2*lineLen(t)), 1), WithReporter(rep), WithReopenCheck(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(100); i < 110; i++ {
		s.Write(rec("s", i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, errs := rep.snapshot(); len(errs) != 0 {
		t.Fatalf("sink errors %v (a rotation of a descriptor path?)", errs)
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "someone else's partial line") {
		t.Fatalf("the file's existing tail was cut: %.60q", b)
	}
	if n := strings.Count(string(b), `"sequence":`); n != 10 {
		t.Fatalf("%d records on the descriptor, want 10", n)
	}
	if bs, _ := filepath.Glob(out.Name() + "*"); len(bs) != 1 {
		t.Fatalf("files beside it: %v", bs)
	}
}

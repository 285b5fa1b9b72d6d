package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A record file removed under a running sink whose path cannot be opened
// again (its directory made read-only, or replaced by a file) would take
// every later record into an unlinked file no reader can see: those are
// counted and logged as dropped, not as written, until the path opens
// again. A file that was only moved away still takes them (it can be read
// under its new name), and nothing is dropped.
func TestFileRemovedAndNotReopenableCountsDrops(t *testing.T) {
	// Each case breaks the path after record 1 and mends it before 4;
	// moved says where the file went (relative to the test's directory),
	// or "" when it was removed.
	for _, tc := range []struct {
		name   string
		root   bool // the case also works for root, who ignores modes
		moved  string
		break_ func(dir, path string) error
		mend   func(dir string) error
	}{
		{"removed/dir read-only", false, "", func(dir, path string) error {
			if err := os.Remove(path); err != nil {
				return err
			}
			return os.Chmod(dir, 0o500)
		}, func(dir string) error { return os.Chmod(dir, 0o700) }},
		{"removed/dir now a file", true, "", func(dir, path string) error {
			if err := os.Remove(path); err != nil {
				return err
			}
			return replaceDirWithFile(dir)
		}, mendDir},
		{"moved away/dir now a file", true, "elsewhere.jsonl", func(dir, path string) error {
			if err := os.Rename(path, filepath.Join(filepath.Dir(dir), "elsewhere.jsonl")); err != nil {
				return err
			}
			return replaceDirWithFile(dir)
		}, mendDir},
	} {
		for _, sync := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sync=%v", tc.name, sync), func(t *testing.T) {
				if !tc.root && os.Geteuid() == 0 {
					t.Skip("root opens files whatever the directory's mode")
				}
				base := t.TempDir()
				dir := filepath.Join(base, "records")
				path := filepath.Join(dir, "r.jsonl")
				rep := newFakeReporter()
				var logs logBuffer
				opts := []Option{WithReopenCheck(0), WithReporter(rep), WithLogger(logs.logger())}
				if sync {
					opts = append(opts, WithSyncWrite())
				}
				s, err := OpenFile(path, opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer os.Chmod(dir, 0o700) // let TempDir's cleanup in
				s.Write(rec("s", 1))
				if err := s.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := tc.break_(dir, path); err != nil {
					t.Fatal(err)
				}
				s.Write(rec("s", 2))
				s.Write(rec("s", 3))
				err = s.Flush()
				wantDropped := uint64(2)
				if tc.moved != "" {
					wantDropped = 0
				}
				if got := s.Stats().Dropped; got != wantDropped {
					t.Fatalf("dropped %d, want %d (stats %+v)", got, wantDropped, s.Stats())
				}
				if d, _ := rep.snapshot(); d["file"] != wantDropped {
					t.Fatalf("reported drops %v, want %d", d, wantDropped)
				}
				if wantDropped > 0 {
					if !errors.Is(err, ErrDropped) {
						t.Fatalf("Flush = %v, want ErrDropped", err)
					}
					if !strings.Contains(logs.String(), "audit records dropped") || !strings.Contains(logs.String(), "removed") {
						t.Fatalf("no drop log line:\n%s", logs.String())
					}
					if _, errs := rep.snapshot(); errs["file/open"] == 0 {
						t.Fatalf("sink errors %v, want open failures", errs)
					}
				} else if err != nil {
					t.Fatalf("Flush = %v, want nil: the moved file took the records", err)
				}
				if err := tc.mend(dir); err != nil {
					t.Fatal(err)
				}
				s.Write(rec("s", 4))
				if err := s.Flush(); err != nil {
					t.Fatalf("Flush after the path opens again = %v", err)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if got := readAll(t, path); !equalSeqs(got, []int64{4}) {
					t.Fatalf("path holds %v, want [4]", got)
				}
				wantWritten := uint64(2) // 1 and 4
				if tc.moved != "" {
					wantWritten = 4
					if got := readAll(t, filepath.Join(base, tc.moved)); !equalSeqs(got, []int64{1, 2, 3}) {
						t.Fatalf("moved file holds %v, want [1 2 3]", got)
					}
				}
				if st := s.Stats(); st.Written != wantWritten || st.Dropped != wantDropped {
					t.Fatalf("stats %+v, want %d written, %d dropped", st, wantWritten, wantDropped)
				}
			})
		}
	}
}

// replaceDirWithFile makes dir a regular file, so that nothing under it can
// be created, whoever asks.
func replaceDirWithFile(dir string) error {
	if err := os.Remove(dir); err != nil {
		return err
	}
	return os.WriteFile(dir, nil, 0o600)
}

func mendDir(dir string) error {
	if err := os.Remove(dir); err != nil {
		return err
	}
	return os.Mkdir(dir, 0o700)
}

package audit

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
)

// A record path that names a descriptor open on a regular file is a
// stream: the sink does not know the file's size, so a write that fails
// part-way (disk full; here RLIMIT_FSIZE) must not cut the file back to
// "its" size, which would wipe every record written before (and anything
// else in the file); the next line starts on a line of its own instead.
func TestDescriptorPartialWriteKeepsEarlierRecords(t *testing.T) {
	signal.Ignore(syscall.SIGXFSZ) // EFBIG instead of the default action
	defer signal.Reset(syscall.SIGXFSZ)
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// What the file held before the sink opened it ("serve >> out.log").
	if _, err := out.WriteString(strings.Repeat("earlier output line\n", 200)); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/proc/self/fd/%d", out.Fd())
	s, err := OpenFile(path, WithSyncWrite(), WithReporter(newFakeReporter()))
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 5; i++ {
		s.Write(rec("s", i))
	}
	st, _ := out.Stat()
	before := st.Size()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = uint64(before + 10) // room for part of the next line only
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skip("setrlimit:", err)
	}
	s.Write(rec("s", 6))
	werr := s.Flush()
	_ = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)
	_ = s.Close()
	if werr == nil {
		t.Skip("the write did not fail part-way")
	}
	b, _ := os.ReadFile(out.Name())
	if n := strings.Count(string(b), `"sequence":`); n < 5 || !strings.HasPrefix(string(b), "earlier output line") || int64(len(b)) < before {
		t.Fatalf("after a partial write failure the file holds %d records (%d bytes, was %d): the earlier ones were cut", n, len(b), before)
	}
}

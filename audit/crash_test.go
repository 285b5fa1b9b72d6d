package audit

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// The crash test re-executes this test binary as a child that appends
// records in synchronous mode and prints "ack N" for every sequence N whose
// Append returned nil. The parent SIGKILLs it mid-load and checks that
// every printed sequence is in the file (or a rotated backup), that every
// complete line parses, and that reopening recovers a file that parses
// end to end. A torn last line may exist only in the live file and is
// never an acknowledged record: acks are printed after the write and fsync
// of the whole line returned.
const (
	crashPathEnv  = "HOOKSPROXY_AUDIT_CRASH_CHILD"
	crashRotEnv   = "HOOKSPROXY_AUDIT_CRASH_ROTATE"
	crashAsyncEnv = "HOOKSPROXY_AUDIT_CRASH_ASYNC"
)

func crashChildOptions(rotate string, async bool) []Option {
	var opts []Option
	if !async {
		opts = append(opts, WithSyncWrite())
	}
	if n, _ := strconv.ParseInt(rotate, 10, 64); n > 0 {
		opts = append(opts, WithRotation(n, 0))
	}
	return opts
}

// TestCrashChild is the child's body; it does nothing in a normal run.
// In synchronous mode a sequence is acknowledged when Append returns nil;
// in asynchronous mode when a Flush after its Write returns nil.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashPathEnv)
	if path == "" {
		t.Skip("crash child only")
	}
	async := os.Getenv(crashAsyncEnv) != ""
	s, err := OpenFile(path, crashChildOptions(os.Getenv(crashRotEnv), async)...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var next atomic.Int64
	var out sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Bounded so that an orphaned child stops by itself.
			for {
				var batch []int64
				for range 5 {
					seq := next.Add(1)
					if seq > 100000 {
						return
					}
					if err := s.Append(rec("crash", seq)); err == nil {
						batch = append(batch, seq)
					}
				}
				if async && s.Flush() != nil {
					continue // something since the last Flush was lost: ack nothing
				}
				out.Lock()
				for _, seq := range batch {
					fmt.Fprintf(os.Stdout, "ack %d\n", seq)
				}
				out.Unlock()
			}
		}()
	}
	wg.Wait()
	os.Exit(0)
}

func TestCrashKeepsAcknowledgedRecords(t *testing.T) {
	if os.Getenv(crashPathEnv) != "" {
		t.Skip("in the child")
	}
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	lineBytes := lineLen(t)
	tests := []struct {
		name   string
		rotate int64
		async  bool
	}{
		{"sync write", 0, false},
		{"sync write, rotating", int64(8 * lineBytes), false},
		{"async with flush", 0, true},
		{"async with flush, rotating", int64(8 * lineBytes), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "records.jsonl")
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashPathEnv+"="+path, fmt.Sprintf("%s=%d", crashRotEnv, tt.rotate))
			if tt.async {
				cmd.Env = append(cmd.Env, crashAsyncEnv+"=1")
			}
			cmd.Stderr = os.Stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			acked := map[int64]bool{}
			sc := bufio.NewScanner(stdout)
			killed := false
			for sc.Scan() {
				rest, ok := strings.CutPrefix(sc.Text(), "ack ")
				if !ok {
					continue
				}
				n, err := strconv.ParseInt(rest, 10, 64)
				if err != nil {
					t.Fatalf("child said %q", sc.Text())
				}
				acked[n] = true
				if len(acked) >= 40 && !killed {
					killed = true
					if err := cmd.Process.Kill(); err != nil { // SIGKILL: no deferred code runs
						t.Fatal(err)
					}
				}
			}
			_ = cmd.Wait()
			if !killed {
				t.Fatalf("child exited after %d acks without being killed", len(acked))
			}

			inFile := map[int64]bool{}
			files, err := Backups(path)
			if err != nil {
				t.Fatal(err)
			}
			if tt.rotate > 0 && len(files) == 0 {
				t.Errorf("no rotation happened")
			}
			files = append(files, path)
			for i, f := range files {
				rs, res, err := ReadFile(f)
				if err != nil && !os.IsNotExist(err) {
					t.Fatalf("%s: %v", filepath.Base(f), err)
				}
				if res.TornBytes > 0 && i != len(files)-1 {
					t.Errorf("backup %s has a torn tail", filepath.Base(f))
				}
				for _, r := range rs {
					inFile[r.Sequence] = true
				}
			}
			for n := range acked {
				if !inFile[n] {
					t.Errorf("acknowledged record %d is not in the file", n)
				}
			}

			// Reopen: recovery leaves a file that parses end to end.
			s, err := OpenFile(path, crashChildOptions(strconv.FormatInt(tt.rotate, 10), false)...)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Append(rec("crash", -1)); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			all := readAll(t, path) // fails on any torn or corrupt line
			if all[len(all)-1] != -1 {
				t.Errorf("the record written after recovery is not last: %v", all[len(all)-5:])
			}
			t.Logf("%d acknowledged, %d in the files, %d backups", len(acked), len(all)-1, len(files)-1)
		})
	}
}

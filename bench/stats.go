package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// ProcStats is a snapshot of one process.
type ProcStats struct {
	// CPU is user plus system time of the whole process (getrusage).
	CPU time.Duration `json:"cpu_ns"`
	// Mallocs is runtime.MemStats.Mallocs: heap objects allocated so far.
	Mallocs uint64 `json:"mallocs"`
	// HeapAlloc is the bytes of allocated heap objects (live after a GC).
	HeapAlloc uint64 `json:"heap_alloc"`
	// HeapInuse is the bytes in in-use heap spans.
	HeapInuse uint64 `json:"heap_inuse"`
	// StackInuse is the bytes of goroutine stacks.
	StackInuse uint64 `json:"stack_inuse"`
	// Sys is the bytes the Go runtime obtained from the OS.
	Sys uint64 `json:"sys"`
	// RSS is VmRSS from /proc/self/status (0 where there is no procfs).
	RSS uint64 `json:"rss"`
	// Goroutines is runtime.NumGoroutine.
	Goroutines int `json:"goroutines"`
	// NumGC is the count of completed GC cycles.
	NumGC uint32 `json:"num_gc"`
	// Counter is a role-specific count: records emitted (hooksproxy), log
	// lines and error answers (bare proxy), requests answered (upstream).
	Counter int64 `json:"counter"`
}

// ReadProcStats snapshots the current process. With gc it first runs a
// collection and returns freed memory to the OS, so HeapAlloc is the live
// heap and RSS what stays resident.
func ReadProcStats(gc bool) (ProcStats, error) {
	if gc {
		debug.FreeOSMemory() // runs a GC first
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := ProcStats{
		Mallocs:    ms.Mallocs,
		HeapAlloc:  ms.HeapAlloc,
		HeapInuse:  ms.HeapInuse,
		StackInuse: ms.StackInuse,
		Sys:        ms.Sys,
		Goroutines: runtime.NumGoroutine(),
		NumGC:      ms.NumGC,
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return st, fmt.Errorf("bench: getrusage: %w", err)
	}
	st.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		if st.RSS, err = ParseVmRSS(b); err != nil {
			return st, err
		}
	}
	return st, nil
}

// ErrNoVmRSS is returned when a status file has no VmRSS line.
var ErrNoVmRSS = errors.New("bench: no VmRSS line")

// ParseVmRSS returns the VmRSS of a /proc/<pid>/status file in bytes.
func ParseVmRSS(status []byte) (uint64, error) {
	for line := range bytes.SplitSeq(status, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("bench: malformed VmRSS line %q", line)
		}
		kb, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil || kb > 1<<50 {
			return 0, fmt.Errorf("bench: malformed VmRSS value %q", f[0])
		}
		return kb << 10, nil
	}
	return 0, ErrNoVmRSS
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, or 0 when it is empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// nearest rank: ceil(p/100 * n), 1-based
	rank := int(p / 100 * float64(len(sorted)))
	if float64(rank) < p/100*float64(len(sorted)) {
		rank++
	}
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Sorted returns a sorted copy of d.
func Sorted(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}

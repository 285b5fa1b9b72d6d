package points

import (
	"syscall"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkTmpCPU(b *testing.B) {
	ins := benchmarkInputs()
	for _, name := range []string{"ctx1MB", "ctx1MBliteral", "numbers1MB"} {
		raw := ins[name]
		c := getCanonicalizer()
		fns := map[string]func(){
			"ours":     func() { c.canonical(raw, DefaultMaxDepth, false) },
			"valid":    func() { validJSON(raw, DefaultMaxDepth, false) },
			"checkenc": func() { CheckEncoding(raw, 0) },
			"gowebpki": func() { jcs.Transform(raw) },
			"identity": func() { JCSSHA256().Identity(raw) },
		}
		for _, fn := range []string{"ours", "valid", "checkenc", "gowebpki", "identity"} {
			b.Run(name+"/"+fn, func(b *testing.B) {
				f := fns[fn]
				f()
				b.ResetTimer()
				t0 := cpuNow()
				for i := 0; i < b.N; i++ {
					f()
				}
				b.ReportMetric(float64(cpuNow()-t0)/float64(b.N)/1e6, "cpu-ms/op")
			})
		}
	}
}

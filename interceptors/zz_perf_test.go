package interceptors

import (
	"strings"
	"testing"
	"time"
)

func TestZZPerf(t *testing.T) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog 12345. ", 80)
	for _, pk := range packNames() {
		for _, p := range packPatterns(pk) {
			st := time.Now()
			for i := 0; i < 20; i++ {
				p.spans(text)
			}
			t.Logf("%-20s %v", p.name, time.Since(st)/20)
		}
	}
}

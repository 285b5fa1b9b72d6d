package ctk

import (
	"context"
	"testing"
	"time"
)

func TestQuickTiming(t *testing.T) {
	vs := loadAll(t)
	for _, seam := range []string{SeamHostAPI, SeamTransparent} {
		h, _ := NewHTTP(seam)
		for _, v := range vs {
			start := time.Now()
			r := RunVector(context.Background(), h, &v)
			if d := time.Since(start); d > 50*time.Millisecond { t.Logf("%s %s %s %v", seam, v.ID, r.Status, d) }
		}
		h.Close()
	}
}

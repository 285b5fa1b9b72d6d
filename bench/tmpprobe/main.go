package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/hooksproxy/hooksproxy/bench"
)

func main() {
	up := bench.NewUpstream(32, 1024, 32768)
	us := httptest.NewServer(up)
	hp, _ := bench.NewHooksproxy(bench.Policy, us.URL)
	ps := httptest.NewServer(hp.App.Server)
	cl := bench.NewClient(4)
	buf := make([]byte, 32<<10)
	for _, stream := range []bool{true, false, true} {
		c := bench.NewCall(ps.URL, stream, 32768)
		for round := 0; round < 4; round++ {
			b0, _ := bench.ReadProcStats(false)
			t := time.Now()
			for i := 0; i < 10; i++ {
				if _, err := c.Do(context.Background(), cl, buf); err != nil {
					panic(err)
				}
			}
			b1, _ := bench.ReadProcStats(false)
			fmt.Println(stream, round, (b1.CPU-b0.CPU)/10, time.Since(t)/10)
		}
	}
}

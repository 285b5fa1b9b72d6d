package bench

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// sizes are the answer sizes the tests and benchmarks use.
var sizes = []int{1 << 10, 32 << 10}

// servers starts the upstream and the three proxies in process.
func servers(tb testing.TB, chunk int) (*Upstream, map[string]string) {
	tb.Helper()
	up := NewUpstream(chunk, sizes...)
	us := httptest.NewServer(up)
	tb.Cleanup(us.Close)
	u, _ := url.Parse(us.URL)
	bare := httptest.NewServer(NewBareProxy(u))
	tb.Cleanup(bare.Close)
	bases := map[string]string{Direct: us.URL, Bare: bare.URL}
	for _, t := range []string{AllowAll, Policy} {
		hp, err := NewHooksproxy(t, us.URL, nil)
		if err != nil {
			tb.Fatal(err)
		}
		s := httptest.NewServer(hp.App.Server)
		tb.Cleanup(func() { s.Close(); hp.Close() })
		bases[t] = s.URL
	}
	return up, bases
}

func TestTargetsAnswer(t *testing.T) {
	_, bases := servers(t, DefaultChunk)
	client := NewClient(8)
	buf := make([]byte, 32<<10)
	for _, target := range Targets() {
		for _, stream := range []bool{false, true} {
			for _, size := range sizes {
				name := target + "/" + mode(stream) + "/" + strconv.Itoa(size)
				t.Run(name, func(t *testing.T) {
					s, err := NewCall(bases[target], stream, size).Do(context.Background(), client, buf)
					// The bare ReverseProxy aborts a few streamed bodies
					// (CLIENTS-AND-SSE.md, "Measured here"; the report counts
					// them): a few tries for it, none for hooksproxy.
					for try := 1; err != nil && target == Bare && stream && try < 5; try++ {
						t.Logf("bare aborted a stream (%v); try %d", err, try+1)
						s, err = NewCall(bases[target], stream, size).Do(context.Background(), client, buf)
					}
					if err != nil {
						t.Fatalf("Do: %v", err)
					}
					if s.Bytes < int64(size) {
						t.Errorf("body %d bytes, want >= %d", s.Bytes, size)
					}
				})
			}
		}
	}
}

func TestPolicyAllowsBenchText(t *testing.T) {
	// The realistic policy set must pass the benchmark's text unchanged,
	// or the benchmark would measure redaction instead of inspection.
	up := NewUpstream(DefaultChunk, sizes...)
	us := httptest.NewServer(up)
	defer us.Close()
	hp, err := NewHooksproxy(Policy, us.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hp.Close()
	ps := httptest.NewServer(hp.App.Server)
	defer ps.Close()
	for _, size := range sizes {
		for _, stream := range []bool{false, true} {
			body := func(base string) string {
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(string(RequestBody(stream, size))))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			direct, proxied := body(us.URL), body(ps.URL)
			// ids carry the upstream's request counter; compare the rest.
			if got, want := stripIDs(proxied), stripIDs(direct); got != want {
				t.Errorf("%s/%d: policy changed the answer (%d vs %d bytes)", mode(stream), size, len(got), len(want))
			}
		}
	}
	if hp.Records.Load() == 0 {
		t.Error("no records emitted")
	}
}

// stripIDs blanks the scripted upstream's per-request ids.
func stripIDs(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "chatcmpl-scripted-")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i+len("chatcmpl-scripted-"):]
		s = strings.TrimLeft(s, "0123456789")
	}
}

func TestContent(t *testing.T) {
	for _, n := range []int{0, 1, 7, 1 << 10, 32 << 10} {
		c := Content(n)
		if len(c) != n {
			t.Errorf("Content(%d) has %d bytes", n, len(c))
		}
		if strings.ContainsAny(c, "0123456789@") || strings.Contains(strings.ToLower(c), "secret") {
			t.Errorf("Content(%d) has text a policy could match", n)
		}
	}
}

func TestUpstreamStall(t *testing.T) {
	up, bases := servers(t, 64)
	client := NewClient(8)
	up.Stall()
	const n = 3
	var wg sync.WaitGroup
	errs := make(chan error, n*2)
	for _, target := range []string{Direct, AllowAll} {
		for range n {
			wg.Go(func() {
				_, err := NewCall(bases[target], true, 1<<10).Do(context.Background(), client, make([]byte, 4096))
				errs <- err
			})
		}
	}
	for up.Parked() < 2*n {
		time.Sleep(time.Millisecond) // waits for the streams, asserts nothing about time
	}
	select {
	case err := <-errs:
		t.Fatalf("a stream finished while parked: %v", err)
	default:
	}
	up.Release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if up.Parked() != 0 {
		t.Errorf("Parked() = %d after Release", up.Parked())
	}
}

func TestCallChecks(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		stream  bool
		min     int64
		wantErr error
	}{
		{"json ok", 200, `{"x":"abcdef"}`, false, 4, nil},
		{"stream ok", 200, "data: {}\n\ndata: [DONE]\n\n", true, 4, nil},
		{"stream truncated", 200, "data: {}\n\n", true, 4, ErrTruncated},
		{"short", 200, `{}`, false, 4, ErrShort},
		{"status", 502, `{"error":{}}`, false, 0, ErrStatus},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
				// one byte per write so the tail logic sees small reads
				for i := range len(tt.body) {
					_, _ = w.Write([]byte{tt.body[i]})
					w.(http.Flusher).Flush()
				}
			}))
			defer s.Close()
			c := Call{URL: s.URL, Body: []byte(`{}`), Stream: tt.stream, MinBytes: tt.min}
			_, err := c.Do(context.Background(), NewClient(1), make([]byte, 5))
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestParseVmRSS(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{"Name:\tx\nVmRSS:\t  1234 kB\nVmData: 1 kB\n", 1234 << 10, false},
		{"VmRSS:\t0 kB", 0, false},
		{"VmHWM: 5 kB\n", 0, true},
		{"VmRSS: 12 MB\n", 0, true},
		{"VmRSS: x kB\n", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseVmRSS([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseVmRSS(%q) = %d, %v; want %d, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzParseVmRSS(f *testing.F) {
	f.Add([]byte("VmRSS:\t  1234 kB\n"))
	f.Add([]byte("Name: a\nVmRSS: 99999999999999999999 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseVmRSS(b)
		if err != nil && v != 0 {
			t.Errorf("error with value %d", v)
		}
		if err == nil && v%1024 != 0 {
			t.Errorf("value %d not a whole kB", v)
		}
	})
}

func TestPercentile(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var d []time.Duration
		for _, x := range n {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	tests := []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{ms(1, 2, 3, 4), 51, 3 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 100, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := Percentile(tt.in, tt.p); got != tt.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tt.in, tt.p, got, tt.want)
		}
	}
}

func mode(stream bool) string {
	if stream {
		return "stream"
	}
	return "json"
}

// BenchmarkEndToEnd sends one request per iteration through each target,
// all in this process over loopback: direct to the scripted upstream,
// through a bare ReverseProxy, through hooksproxy with allow_all and with
// the realistic policy set. allocs/op counts client, proxy and upstream
// together; compare targets with each other, not with hooksbench's
// per-process figures.
func BenchmarkEndToEnd(b *testing.B) {
	_, bases := servers(b, DefaultChunk)
	client := NewClient(4)
	for _, stream := range []bool{false, true} {
		for _, size := range sizes {
			for _, target := range Targets() {
				name := mode(stream) + "/" + strconv.Itoa(size>>10) + "KB/" + target
				b.Run(name, func(b *testing.B) {
					c := NewCall(bases[target], stream, size)
					buf := make([]byte, 32<<10)
					b.SetBytes(int64(size))
					b.ReportAllocs()
					aborts := 0
					for b.Loop() {
						if _, err := c.Do(context.Background(), client, buf); err != nil {
							// The bare ReverseProxy aborts a few streams
							// (CLIENTS-AND-SSE.md); count them, fail on any
							// other target.
							if target != Bare {
								b.Fatal(err)
							}
							aborts++
						}
					}
					if target == Bare {
						b.ReportMetric(float64(aborts)/float64(b.N), "aborts/op")
					}
				})
			}
		}
	}
}

// heldStack is the goroutine stack memory per stream while n streams
// through target are held, over the same processes idle.
func heldStack(t *testing.T, target string, n int) int64 {
	up, bases := servers(t, DefaultChunk)
	client := NewClient(n)
	// Its connections end with the measurement, so that their idle
	// goroutines' stacks are not in a later one's baseline.
	defer client.CloseIdleConnections()
	buf := make([]byte, 32<<10)
	for range 3 { // warm: pools, worker goroutines, connections
		if _, err := NewCall(bases[target], true, 1<<10).Do(context.Background(), client, buf); err != nil {
			t.Fatal(err)
		}
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC() // the second frees the stack spans the first emptied
	runtime.ReadMemStats(&ms)
	before := ms.StackInuse
	up.Stall()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := NewCall(bases[target], true, 1<<10).Do(context.Background(), client, make([]byte, 32<<10))
			errs <- err
		})
	}
	for up.Parked() < int64(n) {
		time.Sleep(time.Millisecond) // waits for the streams, asserts nothing about time
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	up.Release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return (int64(ms.StackInuse) - int64(before)) / int64(n)
}

// TestHeldStackPolicy guards the stack a held stream keeps. A request's
// goroutine grows its stack for the deepest call before its upstream call
// (the policy set's interceptors run at pre_model_call below the handler's
// frames), and the runtime halves a stack at a GC only while less than a
// quarter of it is in use: when the frames in use while the answer is held
// passed a quarter of 32 KiB (a 3.4 KiB chat frame, then a 2.9 KiB
// modelTurn), every held stream kept 32 KiB. The figures are of the whole
// process (client, proxies and upstream), so only the difference between
// the two sets is checked: within a few KiB either way when the policy set
// keeps what allow_all keeps, 13-15 KiB more when it does not.
func TestHeldStackPolicy(t *testing.T) {
	if raceEnabled {
		t.Skip("stack sizes under the race detector are not a normal build's; .ci/run runs this test without it")
	}
	const n = 100
	// The figures are of the whole process, and its first measurement
	// reads 7-24 KiB high (the stack cache fills), so one is made and
	// dropped; then two rounds, in both orders, and the least of their
	// differences checked: outgrowing the step shows in every round (13-15
	// KiB), what is left of the cache effect in some.
	heldStack(t, AllowAll, n)
	d := int64(math.MaxInt64)
	for round := range 2 {
		var allow, policy int64
		if round == 0 {
			allow, policy = heldStack(t, AllowAll, n), heldStack(t, Policy, n)
		} else {
			policy, allow = heldStack(t, Policy, n), heldStack(t, AllowAll, n)
		}
		t.Logf("stack per held stream: allow_all %d B, policy %d B", allow, policy)
		d = min(d, policy-allow)
	}
	if d > 8<<10 {
		t.Errorf("policy holds %d B more stack per stream than allow_all; a request goroutine outgrew 16 KiB before its upstream call", d)
	}
}

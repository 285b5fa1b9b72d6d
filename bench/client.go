package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// NewClient returns the load generator's client: keep-alive with a pool
// large enough for every concurrent request, no compression, no
// environment proxy.
func NewClient(maxConns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        maxConns * 4,
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

// Sample is one checked answer.
type Sample struct {
	// Latency runs from sending the request to the end of the body.
	Latency time.Duration
	// TTFB runs to the first body byte.
	TTFB time.Duration
	// Bytes is the body length.
	Bytes int64
}

// The ways an answer can fail its check.
var (
	ErrStatus    = errors.New("bench: status not 200")
	ErrTruncated = errors.New("bench: stream did not end with data: [DONE]")
	ErrShort     = errors.New("bench: body shorter than the content")
)

// Call is one benchmark request: where it goes and what a good answer is.
type Call struct {
	URL    string
	Body   []byte
	Stream bool
	// MinBytes is the least body length a good answer has.
	MinBytes int64
}

// NewCall returns the call for an answer of size bytes at base (scheme and
// host, no path).
func NewCall(base string, stream bool, size int) Call {
	return Call{URL: base + "/v1/chat/completions", Body: RequestBody(stream, size), Stream: stream, MinBytes: int64(size)}
}

var streamEnd = []byte("data: [DONE]\n\n")

// Do sends c and reads the whole answer into buf-sized reads, checking
// status, length and (for streams) the [DONE] terminator without keeping
// the body.
func (c Call) Do(ctx context.Context, client *http.Client, buf []byte) (Sample, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(c.Body))
	if err != nil {
		return Sample{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return Sample{}, err
	}
	defer resp.Body.Close()
	var s Sample
	var tail [16]byte
	tn := 0
	var head []byte // kept only for non-200 answers, for the error
	keepHead := resp.StatusCode != http.StatusOK
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if s.Bytes == 0 {
				s.TTFB = time.Since(start)
			}
			s.Bytes += int64(n)
			if keepHead && len(head) < 300 {
				head = append(head, buf[:min(n, 300-len(head))]...)
			}
			// keep the last len(tail) bytes
			if n >= len(tail) {
				tn = copy(tail[:], buf[n-len(tail):n])
			} else {
				keep := min(tn, len(tail)-n)
				copy(tail[:], tail[tn-keep:tn])
				copy(tail[keep:], buf[:n])
				tn = keep + n
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return s, fmt.Errorf("bench: reading body: %w", rerr)
		}
	}
	s.Latency = time.Since(start)
	switch {
	case resp.StatusCode != http.StatusOK:
		return s, fmt.Errorf("%w: %d %s", ErrStatus, resp.StatusCode, head)
	case s.Bytes < c.MinBytes:
		return s, fmt.Errorf("%w: %d < %d", ErrShort, s.Bytes, c.MinBytes)
	case c.Stream && !bytes.HasSuffix(tail[:tn], streamEnd):
		return s, ErrTruncated
	}
	return s, nil
}

// Batch is the outcome of n calls at a concurrency.
type Batch struct {
	Samples []Sample
	Errors  int
	// FirstErr is the first error seen, for the log.
	FirstErr error
	Wall     time.Duration
}

// RunBatch makes n calls of c with conc workers and returns every sample.
func RunBatch(ctx context.Context, client *http.Client, c Call, n, conc int) Batch {
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
		out  = Batch{Samples: make([]Sample, 0, n)}
	)
	start := time.Now()
	for range min(conc, n) {
		wg.Go(func() {
			buf := make([]byte, 32<<10)
			local := make([]Sample, 0, n/conc+1)
			var errs int
			var first error
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				s, err := c.Do(ctx, client, buf)
				if err != nil {
					errs++
					if first == nil {
						first = err
					}
					continue
				}
				local = append(local, s)
			}
			mu.Lock()
			out.Samples = append(out.Samples, local...)
			out.Errors += errs
			if out.FirstErr == nil {
				out.FirstErr = first
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	out.Wall = time.Since(start)
	return out
}

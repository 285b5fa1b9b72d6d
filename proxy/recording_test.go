package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// recordingUpstream serves answer for each request and keeps the request
// bodies in order; answer gets the body and its number (from 1).
func recordingUpstream(t *testing.T, answer func(w http.ResponseWriter, body []byte, n int)) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		n := len(got)
		mu.Unlock()
		answer(w, b, n)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

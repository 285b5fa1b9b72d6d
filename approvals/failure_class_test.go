package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
)

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func answer(status int, body string) roundTrip {
	return func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader(body)), Header: http.Header{}}, nil
	}
}

// Every resolver failure says what failed without payload: a class for
// records and clients (points.FailureClasser), a cause for the log
// (points.FailureCauser), so that a timeout, a full queue and a failed
// webhook can be told apart.
func TestResolverFailureClasses(t *testing.T) {
	req := points.ApprovalRequest{Point: points.Input, Verdict: points.Escalate("ask", ""), Context: json.RawMessage(`{"input":"PAYLOADMARK"}`)}
	webhook := func(rt roundTrip) func() error {
		return func() error {
			w, err := NewWebhook([]byte(`{"url":"http://keymark.invalid/a"}`), nil, &http.Client{Transport: rt})
			if err != nil {
				return err
			}
			_, err = w.Resolve(context.Background(), req)
			return err
		}
	}
	full := func(opts ConsoleOptions) func() error {
		return func() error {
			wt := newWatch()
			opts.Metrics = wt
			c := NewConsole(opts)
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _, _ = c.Resolve(ctx, req) }()
			wt.waitLen(1)
			_, err := c.Resolve(context.Background(), req)
			return err
		}
	}
	for _, tc := range []struct {
		name, class, cause string
		run                func() error
	}{
		{"queue full", ClassQueueFull, "queue full (1 pending)", full(ConsoleOptions{MaxPending: 1})},
		{"queue bytes full", ClassQueueFull, "queue full (pending contexts at", full(ConsoleOptions{MaxPendingBytes: int64(len(req.Context)) + 1})},
		{"own timeout", ClassTimedOut, "no decision within 1ms", func() error {
			_, err := NewConsole(ConsoleOptions{Timeout: time.Millisecond}).Resolve(context.Background(), req)
			return err
		}},
		{"caller's bound", ClassTimedOut, "no decision before the caller's bound", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			c := NewConsole(ConsoleOptions{})
			defer c.Close()
			_, err := c.Resolve(ctx, req)
			return err
		}},
		{"closed", ClassClosed, "console closed", func() error {
			c := NewConsole(ConsoleOptions{})
			_ = c.Close()
			_, err := c.Resolve(context.Background(), req)
			return err
		}},
		{"closed while waiting", ClassClosed, "console closed", func() error {
			wt := newWatch()
			c := NewConsole(ConsoleOptions{Metrics: wt})
			done := make(chan error, 1)
			go func() { _, err := c.Resolve(context.Background(), req); done <- err }()
			wt.waitLen(1)
			_ = c.Close()
			return <-done
		}},
		{"webhook status", "webhook answered status 500", "status 500", webhook(answer(500, "PAYLOADMARK"))},
		{"webhook not JSON", "webhook answer is not JSON", "answer is not JSON", webhook(answer(200, "PAYLOADMARK"))},
		{"webhook unreachable", "webhook unreachable", "connection refused", webhook(func(*http.Request) (*http.Response, error) {
			return nil, errors.New("connection refused")
		})},
		{"webhook timed out", "webhook call timed out", "deadline exceeded", webhook(func(*http.Request) (*http.Response, error) {
			return nil, context.DeadlineExceeded
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			var fc points.FailureClasser
			var fk points.FailureCauser
			if !errors.As(err, &fc) || fc.FailureClass() != tc.class {
				t.Errorf("error %v: want class %q", err, tc.class)
			}
			if !errors.As(err, &fk) || !strings.Contains(fk.FailureCause(), tc.cause) {
				t.Fatalf("error %v: want a cause with %q", err, tc.cause)
			}
			for _, mark := range []string{"PAYLOADMARK", "keymark"} {
				if strings.Contains(fc.FailureClass()+fk.FailureCause(), mark) {
					t.Errorf("class %q / cause %q carry %s", fc.FailureClass(), fk.FailureCause(), mark)
				}
			}
		})
	}
}

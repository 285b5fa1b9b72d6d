package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/approvals"
	"github.com/hooksproxy/hooksproxy/points"
)

// A console resolver's failures carry a payload-free class and cause, so
// the emitter's "approval resolver failed" line says which bound ended the
// wait instead of a Go type name (*fmt.wrapError), and the class can reach
// the record.
func TestConsoleResolverFailuresTellApart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(t *testing.T) *consoleResolver
		class string
		cause string // in the log line's error attribute
	}{
		{"timeout", func(t *testing.T) *consoleResolver {
			return mustConsole(t, testWiring(t), "approvers", `{"timeout":"1ms"}`)
		}, approvals.ClassTimedOut, `no decision within its timeout 1ms`},
		{"queue full", func(t *testing.T) *consoleResolver {
			w := testWiring(t)
			r := mustConsole(t, w, "approvers", `{"max_pending":1}`)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _, _ = r.Resolve(ctx, approvalReq); close(done) }()
			waitPending(t, w.queue(), 1)
			t.Cleanup(func() { cancel(); <-done })
			return r
		}, approvals.ClassQueueFull, `max_pending 1 reached`},
		{"closed", func(t *testing.T) *consoleResolver {
			return mustConsole(t, nil, "approvers", `{}`)
		}, approvals.ClassClosed, `console closed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.build(t)
			_, err := r.Resolve(context.Background(), approvalReq)
			var fc points.FailureClasser
			if !errors.As(err, &fc) || fc.FailureClass() != tc.class {
				t.Errorf("error %v: want class %q", err, tc.class)
			}
			var logs syncBuffer
			em, err := points.NewEmitter(points.Config{
				Bindings: []points.Binding{{Name: "ask", Interceptor: points.InterceptorFunc(func(context.Context, *points.Context) (points.Verdict, error) {
					return points.Escalate("needs_ok", ""), nil
				})}},
				Resolver: r, ResolverTimeout: time.Minute,
				Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			em.Emit(context.Background(), points.NewSession(points.Agent{ID: "a", Framework: "f"}, "s1"), points.OutputEvent(json.RawMessage(`"PAYLOADMARK"`)))
			var line struct{ Msg, Error string }
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, `"approval resolver failed"`) {
					_ = json.Unmarshal([]byte(l), &line)
				}
			}
			if !strings.Contains(line.Error, tc.cause) || strings.HasPrefix(line.Error, "*") {
				t.Errorf("log error %q, want the cause %q\n%s", line.Error, tc.cause, logs.String())
			}
			if strings.Contains(logs.String(), "PAYLOADMARK") {
				t.Errorf("log carries the payload:\n%s", logs.String())
			}
		})
	}
}

// The approval decided line names the session whose request waited.
func TestApprovalDecidedLogsSession(t *testing.T) {
	var logs syncBuffer
	w, err := newWiring(slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	q := w.queue()
	req := approvalReq
	req.Context = json.RawMessage(`{"session":{"id":"sess-42"},"input":"x"}`)
	done := make(chan error, 1)
	go func() { _, err := q.Resolve(context.Background(), req); done <- err }()
	waitPending(t, q, 1)
	if err := q.DecideByID(q.List()[0].ID, points.OutcomeApprove, nil, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, `"msg":"approval decided","session":"sess-42"`) {
		t.Errorf("log %s", got)
	}
}

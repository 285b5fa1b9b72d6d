package points

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type causedError struct{ class, cause string }

func (e causedError) Error() string        { return e.class + ": " + e.cause }
func (e causedError) FailureClass() string { return e.class }
func (e causedError) FailureCause() string { return e.cause }

// An interceptor error that declares its cause payload-free (a webhook's
// refused connection) has the cause in the log line beside its class; the
// record and client see the class only.
func TestFailureCauseLogged(t *testing.T) {
	var buf bytes.Buffer
	sink := NewMemorySink(0)
	em, err := NewEmitter(Config{Bindings: []Binding{{Name: "hook", Interceptor: InterceptorFunc(func(context.Context, *Context) (Verdict, error) {
		return Verdict{}, causedError{"webhook unreachable", "dial tcp 127.0.0.1:1: connect: connection refused"}
	})}}, Logger: slog.New(slog.NewTextHandler(&buf, nil)), Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	em.Emit(context.Background(), NewSession(Agent{ID: "a", Framework: "f"}, "s1"), InputEvent(quote("hi"), "user"))
	if got := buf.String(); !strings.Contains(got, "connection refused") || !strings.Contains(got, "detail=\"webhook unreachable\"") {
		t.Errorf("log %q", got)
	}
	if v := sink.Records()[0].Verdict; v.Message != "webhook unreachable" {
		t.Errorf("record message %q", v.Message)
	}
}

// An approval that fails says which check failed in the record's message
// (payload-free): the resolver's failure class when it has one. The
// resolver's own error is logged when it declares itself payload-free, by
// its type otherwise.
func TestApprovalFailuresExplained(t *testing.T) {
	esc := []Binding{{Name: "a", Interceptor: InterceptorFunc(func(context.Context, *Context) (Verdict, error) { return Escalate("ask", ""), nil })}}
	for _, c := range []struct {
		name        string
		res         ApprovalResolution
		err         error
		reason, msg string
		log         string
	}{
		{"status", ApprovalResolution{}, causedError{"webhook answered status 500", "status 500"}, string(ReasonApprovalResolverFailed), "webhook answered status 500", "status 500"},
		{"opaque error", ApprovalResolution{}, errors.New("SECRET-PAYLOAD"), string(ReasonApprovalResolverFailed), "approval resolver failed", "*errors.errorString"},
		{"no verdict", ApprovalResolution{Outcome: OutcomeApprove}, nil, string(ReasonApprovalResolverFailed), "the resolution carries no verdict", ""},
		{"bad outcome", ApprovalResolution{Outcome: "APPROVE"}, nil, string(ReasonApprovalResolverFailed), "the resolution's outcome is not approve, reject or unresolved", ""},
		{"approve carrying deny", ApprovalResolution{Outcome: OutcomeApprove, Verdict: []byte(`{"decision":"deny","reason":"x"}`)}, nil, string(ReasonVerdictInvalid), "an approve resolution carries a verdict that does not permit", ""},
	} {
		var buf bytes.Buffer
		sink := NewMemorySink(0)
		em, err := NewEmitter(Config{Bindings: esc, Sink: sink, ResolverTimeout: time.Minute, Logger: slog.New(slog.NewTextHandler(&buf, nil)),
			Resolver: ResolverFunc(func(_ context.Context, req ApprovalRequest) (ApprovalResolution, error) {
				r := c.res
				r.ContextIdentity = req.ContextIdentity
				return r, c.err
			})})
		if err != nil {
			t.Fatal(err)
		}
		em.Emit(context.Background(), NewSession(Agent{ID: "a", Framework: "f"}, "s1"), OutputEvent(quote("SECRET-PAYLOAD")))
		v := sink.Records()[0].Verdict
		if v.Reason != c.reason || v.Message != c.msg {
			t.Errorf("%s: %s %q", c.name, v.Reason, v.Message)
		}
		if got := buf.String(); strings.Contains(got, "SECRET-PAYLOAD") || c.log != "" && !strings.Contains(got, c.log) {
			t.Errorf("%s: log %q", c.name, got)
		}
	}
}

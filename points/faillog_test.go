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

// A binding that fails closed is logged with its name, point and reason,
// and no payload.
func TestFailuresLogged(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	failing := InterceptorFunc(func(context.Context, *Context) (Verdict, error) {
		return Verdict{}, errors.New("boom with SECRET-PAYLOAD")
	})
	slow := InterceptorFunc(func(ctx context.Context, _ *Context) (Verdict, error) {
		c, cancel := context.WithTimeout(ctx, time.Millisecond)
		defer cancel()
		<-c.Done()
		return Verdict{}, c.Err() // its own deadline
	})
	for _, tc := range []struct {
		name   string
		i      Interceptor
		reason Reason
	}{{"failing", failing, ReasonInterceptorFailed}, {"slow", slow, ReasonInterceptorTimeout}} {
		buf.Reset()
		em, err := NewEmitter(Config{Bindings: []Binding{{Name: tc.name, Interceptor: tc.i}}, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		s := NewSession(Agent{ID: "a", Framework: "f"}, "s1")
		res := em.Emit(context.Background(), s, InputEvent(quote("SECRET-PAYLOAD"), "user"))
		if res.Verdict.Reason != string(tc.reason) {
			t.Fatalf("%s: reason %q", tc.name, res.Verdict.Reason)
		}
		got := buf.String()
		if !strings.Contains(got, "binding="+tc.name) || !strings.Contains(got, "point=input") || !strings.Contains(got, string(tc.reason)) || strings.Contains(got, "SECRET-PAYLOAD") {
			t.Fatalf("%s: log %q", tc.name, got)
		}
	}
}

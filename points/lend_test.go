package points

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unsafe"
)

// sharer is a test interceptor that reads the shared context bytes, inline
// or on the emitter's goroutines.
type sharer struct {
	inline bool
	seen   func(*Context)
}

func (s sharer) Intercept(_ context.Context, c *Context) (Verdict, error) {
	if s.seen != nil {
		s.seen(c)
	}
	return Allow(), nil
}
func (sharer) SharesContext() bool { return true }
func (s sharer) RunsInline() bool  { return s.inline }
func (sharer) String() string      { return "sharer" }
func aliases(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && unsafe.SliceData(a[:1]) == unsafe.SliceData(b[:1])
}
func lender(bufs *[][]byte) func(int) []byte {
	return func(n int) []byte {
		b := make([]byte, 0, n)
		*bufs = append(*bufs, b)
		return b
	}
}

// TestEmitInLendsOnlyWhereNoCallOutlivesIt checks where EmitIn builds the
// context in the caller's buffer: where every binding runs inline or gets
// a private copy, and not where one reads the shared bytes on a goroutine
// of its own, which a timeout could leave reading after the emission.
func TestEmitInLendsOnlyWhereNoCallOutlivesIt(t *testing.T) {
	tests := []struct {
		name     string
		bindings []Interceptor
		lends    bool
	}{
		{"inline sharer", []Interceptor{sharer{inline: true}}, true},
		{"private copy", []Interceptor{allowAll()}, true},
		{"inline sharer and private copy", []Interceptor{sharer{inline: true}, allowAll()}, true},
		{"sharer on a goroutine", []Interceptor{sharer{inline: false}}, false},
		{"one sharer on a goroutine among inline ones", []Interceptor{sharer{inline: true}, sharer{inline: false}}, false},
		{"no binding", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bs []Binding
			for i, ic := range tt.bindings {
				bs = append(bs, Binding{Name: "b" + string(rune('0'+i)), Interceptor: ic})
			}
			e := newTestEmitter(t, Config{Bindings: bs})
			var lent [][]byte
			res := e.EmitIn(context.Background(), testSession(), OutputEvent(json.RawMessage(`"an answer"`)), lender(&lent))
			if got := len(lent) > 0; got != tt.lends {
				t.Fatalf("lend called: %v, want %v", got, tt.lends)
			}
			if tt.lends && res.Context != nil && !aliases(res.Context, lent[0]) {
				t.Errorf("the context was not built in the lent buffer")
			}
		})
	}
}

// TestEmitInResultOutlivesTheBuffer builds two contexts in turn in one
// lent buffer: the first emission's record and verdict must not change
// when the buffer is overwritten, and an inline sharer saw its own
// context, not the next one's.
func TestEmitInResultOutlivesTheBuffer(t *testing.T) {
	var seen []string
	e := newTestEmitter(t, Config{Bindings: []Binding{
		{Name: "reader", Interceptor: sharer{inline: true, seen: func(c *Context) { seen = append(seen, strings.Clone(c.Get("output.content").Str)) }}},
		{Name: "deny-secret", Interceptor: InterceptorFunc(func(_ context.Context, c *Context) (Verdict, error) {
			if strings.Contains(c.Get("output.content").Str, "secret") {
				return Deny("secret_in_output", "the answer names a secret"), nil
			}
			return Allow(), nil
		})},
	}})
	buf := make([]byte, 0, 4096)
	lend := func(n int) []byte {
		if n > cap(buf) {
			t.Fatalf("context of %d bytes does not fit the test buffer", n)
		}
		return buf
	}
	s := testSession()
	first := e.EmitIn(context.Background(), s, OutputEvent(json.RawMessage(`"the secret is 42"`)), lend)
	before, err := json.Marshal(first.Record)
	if err != nil {
		t.Fatal(err)
	}
	if !aliases(first.Context, buf) {
		t.Fatal("the first context was not built in the lent buffer")
	}
	second := e.EmitIn(context.Background(), s, OutputEvent(json.RawMessage(`"a harmless answer, somewhat longer than the first"`)), lend)
	after, err := json.Marshal(first.Record)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Errorf("the first record changed when its buffer was reused:\n%s\n%s", before, after)
	}
	if first.Proceed || first.Verdict.Reason != "secret_in_output" || first.Verdict.Message != "the answer names a secret" {
		t.Errorf("first verdict = %+v, proceed %v", first.Verdict, first.Proceed)
	}
	if !second.Proceed {
		t.Errorf("second verdict = %+v", second.Verdict)
	}
	if *first.Record.InputIdentity == *second.Record.InputIdentity {
		t.Error("two contexts share an identity")
	}
	if len(seen) != 2 || seen[0] != "the secret is 42" || !strings.HasPrefix(seen[1], "a harmless") {
		t.Errorf("the reader saw %q", seen)
	}
}

// viewDenier breaks no rule a sharer can check but the documented one: its
// verdict's reason and message are views of the context it was given.
type viewDenier struct{}

func (viewDenier) Intercept(_ context.Context, c *Context) (Verdict, error) {
	s := c.Get("output.content").Str
	return Verdict{Decision: DecisionDeny, Reason: s, Message: s, Warnings: []Warning{{Reason: s}}}, nil
}
func (viewDenier) SharesContext() bool { return true }
func (viewDenier) RunsInline() bool    { return true }

// TestEmitInCopiesSharersVerdicts: a sharer's verdict is copied out of the
// lent bytes, so a record and a verdict keep their reason when the buffer
// holds the next emission's context.
func TestEmitInCopiesSharersVerdicts(t *testing.T) {
	sink := NewMemorySink(0)
	e := newTestEmitter(t, Config{Sink: sink, Bindings: []Binding{{Name: "view", Interceptor: viewDenier{}}}})
	buf := make([]byte, 0, 4096)
	lend := func(int) []byte { return buf }
	s := testSession()
	first := e.EmitIn(context.Background(), s, OutputEvent(json.RawMessage(`"reason_of_request_a"`)), lend)
	e.EmitIn(context.Background(), s, OutputEvent(json.RawMessage(`"reason_of_request_b"`)), lend)
	for what, got := range map[string]string{
		"result reason":  first.Verdict.Reason,
		"result message": first.Verdict.Message,
		"result warning": first.Verdict.Warnings[0].Reason,
		"record reason":  first.Record.Verdict.Reason,
		"sink reason":    sink.Records()[0].Verdict.Reason,
		"summary reason": first.Record.Verdicts[0].Reason,
	} {
		if got != "reason_of_request_a" {
			t.Errorf("%s = %q after the buffer was reused", what, got)
		}
	}
}

package points

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func allowAll() Interceptor {
	return InterceptorFunc(func(context.Context, *Context) (Verdict, error) { return Allow(), nil })
}

func verdictOf(v Verdict) Interceptor {
	return InterceptorFunc(func(context.Context, *Context) (Verdict, error) { return v, nil })
}

func newTestEmitter(t testing.TB, cfg Config) *Emitter {
	t.Helper()
	if cfg.Identity == nil {
		cfg.Identity = JCSSHA256()
	}
	e, err := NewEmitter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func testSession() *Session { return NewSession(Agent{ID: "a", Framework: "test"}, "s-1") }

func TestEmitOutcomes(t *testing.T) {
	args := json.RawMessage(`{"url":"https://x","n":1}`)
	tests := []struct {
		name       string
		bindings   []Interceptor
		mode       Mode
		wantDec    Decision
		wantReason string
		proceed    bool
		decidedBy  *int
		wantArgs   string
	}{
		{"allow", []Interceptor{allowAll()}, Enforce, DecisionAllow, "", true, nil, `{"url":"https://x","n":1}`},
		{"deny", []Interceptor{allowAll(), verdictOf(Deny("nope", "m"))}, Enforce, DecisionDeny, "nope", false, idx(1), ""},
		{"transform", []Interceptor{verdictOf(Replace("$target.url", json.RawMessage(`"https://safe"`)))}, Enforce, DecisionTransform, "", true, idx(0), `{"url":"https://safe","n":1}`},
		{"transform evaluate_only not applied", []Interceptor{verdictOf(Replace("$target.url", json.RawMessage(`"https://safe"`)))}, EvaluateOnly, DecisionTransform, "", true, idx(0), `{"url":"https://x","n":1}`},
		{"transform missing key", []Interceptor{verdictOf(Replace("$target.nope", json.RawMessage(`1`)))}, Enforce, DecisionDeny, ReasonTransformInvalid, false, nil, ""},
		// §5.2: a transform that fails to apply; §10.3: decided_by null.
		{"transform outside target", []Interceptor{verdictOf(Replace("$.x", json.RawMessage(`1`)))}, Enforce, DecisionDeny, ReasonTransformTargetForbidden, false, nil, ""},
		{"reserved reason", []Interceptor{verdictOf(Deny("host_error:x", ""))}, Enforce, DecisionDeny, ReasonVerdictInvalid, false, idx(0), ""},
		{"error", []Interceptor{InterceptorFunc(func(context.Context, *Context) (Verdict, error) { return Verdict{}, errors.New("boom") })}, Enforce, DecisionDeny, ReasonInterceptorFailed, false, idx(0), ""},
		{"panic", []Interceptor{InterceptorFunc(func(context.Context, *Context) (Verdict, error) { panic("x") })}, Enforce, DecisionDeny, ReasonInterceptorFailed, false, idx(0), ""},
		{"zero interceptors", nil, Enforce, DecisionDeny, ReasonNoInterceptor, false, nil, ""},
		{"zero interceptors evaluate_only", nil, EvaluateOnly, DecisionDeny, ReasonNoInterceptor, true, nil, ""},
		{"escalate without resolver", []Interceptor{verdictOf(Escalate("ask", ""))}, Enforce, DecisionDeny, "ask", false, idx(0), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bs []Binding
			for i, ic := range tt.bindings {
				bs = append(bs, Binding{Name: fmt.Sprint("b", i), Interceptor: ic})
			}
			e := newTestEmitter(t, Config{Mode: tt.mode, Bindings: bs})
			// The transform-outside-target case: "$.x" is not rooted at $target.
			res := e.Emit(context.Background(), testSession(), PreToolCallEvent("c1", "http_get", args))
			if res.Verdict.Decision != tt.wantDec || res.Verdict.Reason != tt.wantReason {
				t.Fatalf("verdict = %s %q, want %s %q", res.Verdict.Decision, res.Verdict.Reason, tt.wantDec, tt.wantReason)
			}
			if res.Proceed != tt.proceed {
				t.Fatalf("proceed = %v", res.Proceed)
			}
			if (res.Record.DecidedBy == nil) != (tt.decidedBy == nil) || (tt.decidedBy != nil && *res.Record.DecidedBy != *tt.decidedBy) {
				t.Fatalf("decided_by = %v, want %v", res.Record.DecidedBy, tt.decidedBy)
			}
			if tt.wantArgs != "" {
				if got := res.Context; got == nil || res.Target().Raw != tt.wantArgs {
					t.Fatalf("target = %s, want %s", res.Target().Raw, tt.wantArgs)
				}
				if tc := res.Target().Raw; tc != gjsonGet(res.Context, "tool_call.args") {
					t.Fatalf("write-back: tool_call.args %s != target %s", gjsonGet(res.Context, "tool_call.args"), tc)
				}
			}
			if ValidateEnvelope(res.Context) != nil && res.Context != nil {
				t.Fatalf("enforced context invalid: %v", ValidateEnvelope(res.Context))
			}
		})
	}
}

func TestEmitTimeout(t *testing.T) {
	slow := InterceptorFunc(func(ctx context.Context, _ *Context) (Verdict, error) {
		<-ctx.Done()
		return Allow(), nil
	})
	e := newTestEmitter(t, Config{Bindings: []Binding{{Name: "slow", Interceptor: slow, Timeout: 20 * time.Millisecond}}})
	res := e.Emit(context.Background(), testSession(), OutputEvent(json.RawMessage(`"hi"`)))
	if res.Verdict.Reason != ReasonInterceptorTimeout || res.Proceed {
		t.Fatalf("got %s", res.Verdict)
	}
}

func TestEmitContextInvalid(t *testing.T) {
	e := newTestEmitter(t, Config{Bindings: []Binding{{Name: "a", Interceptor: allowAll()}}})
	for name, ev := range map[string]Event{
		"bigint":      OutputEvent(json.RawMessage(`{"n":9007199254740993}`)),
		"beyond u64":  OutputEvent(json.RawMessage(`{"n":123456789012345678901234567890}`)),
		"surrogate":   OutputEvent(json.RawMessage(`"\ud800"`)),
		"bad role":    InputEvent(json.RawMessage(`"x"`), "robot"),
		"deep":        OutputEvent(json.RawMessage(strings.Repeat("[", 200) + strings.Repeat("]", 200))),
		"args array":  PreToolCallEvent("c", "t", json.RawMessage(`[1]`)),
		"empty id":    PreToolCallEvent("", "t", json.RawMessage(`{}`)),
		"bad summary": ShutdownEvent("exploded"),
	} {
		t.Run(name, func(t *testing.T) {
			res := e.Emit(context.Background(), testSession(), ev)
			if res.Verdict.Reason != ReasonContextInvalid || res.Proceed {
				t.Fatalf("got %s", res.Verdict)
			}
			if res.Record.InputIdentity != nil || res.Record.DecidedBy != nil {
				t.Fatalf("record must carry null identity and decided_by: %+v", res.Record)
			}
		})
	}
	big := NewSession(Agent{ID: "a", Framework: "test"}, "s")
	e2 := newTestEmitter(t, Config{MaxContextBytes: 1024, Bindings: []Binding{{Name: "a", Interceptor: allowAll()}}})
	res := e2.Emit(context.Background(), big, OutputEvent(json.RawMessage(`"`+strings.Repeat("x", 2048)+`"`)))
	if res.Verdict.Reason != ReasonContextInvalid {
		t.Fatalf("oversize: %s", res.Verdict)
	}
}

func TestSequenceConcurrent(t *testing.T) {
	e := newTestEmitter(t, Config{Bindings: []Binding{{Name: "a", Interceptor: allowAll()}}})
	s := testSession()
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res := e.Emit(context.Background(), s, PreToolCallEvent(fmt.Sprint("c", i), "t", json.RawMessage(`{}`)))
			mu.Lock()
			defer mu.Unlock()
			if seen[res.Record.Sequence] {
				t.Errorf("duplicate sequence %d", res.Record.Sequence)
			}
			seen[res.Record.Sequence] = true
		}(i)
	}
	wg.Wait()
	for i := int64(0); i < 64; i++ {
		if !seen[i] {
			t.Fatalf("sequence %d missing", i)
		}
	}
}

func TestMutationIsolated(t *testing.T) {
	mut := InterceptorFunc(func(_ context.Context, c *Context) (Verdict, error) {
		raw := c.Raw()
		for i := range raw {
			raw[i] = 'x'
		}
		return Allow(), nil
	})
	var seen string
	check := InterceptorFunc(func(_ context.Context, c *Context) (Verdict, error) {
		seen = c.Get("tool_call.name").Str
		return Allow(), nil
	})
	e := newTestEmitter(t, Config{Bindings: []Binding{{Name: "m", Interceptor: mut}, {Name: "c", Interceptor: check}}})
	res := e.Emit(context.Background(), testSession(), PreToolCallEvent("c", "tool", json.RawMessage(`{}`)))
	if seen != "tool" || !res.Proceed || *res.Record.InputIdentity != *res.Record.EnforcedIdentity {
		t.Fatalf("mutation leaked: seen %q, %s", seen, res.Verdict)
	}
}

func TestRecordProjection(t *testing.T) {
	long := strings.Repeat("é", 300)
	v := Replace("$target.url", json.RawMessage(`"SECRET-VALUE"`))
	v.Message = long
	e := newTestEmitter(t, Config{Bindings: []Binding{{Name: "t", Interceptor: verdictOf(v)}}})
	res := e.Emit(context.Background(), testSession(), PreToolCallEvent("c", "t", json.RawMessage(`{"url":"a"}`)))
	b, _ := json.Marshal(res.Record)
	if strings.Contains(string(b), "SECRET-VALUE") {
		t.Fatalf("record carries transform value: %s", b)
	}
	if !strings.Contains(string(b), `"path":"$target.url"`) {
		t.Fatalf("record lost transform path: %s", b)
	}
	if m := res.Record.Verdict.Message; len(m) > 256+len("…") || !strings.HasSuffix(m, "…") {
		t.Fatalf("message not truncated: %d bytes", len(m))
	}
	if *res.Record.InputIdentity == *res.Record.EnforcedIdentity {
		t.Fatal("enforced identity must change after a transform")
	}
}

func gjsonGet(raw []byte, path string) string {
	c := &Context{raw: raw}
	return c.Get(path).Raw
}

// benchMessages is a history of ten user messages of about n bytes in all.
func benchMessages(n int) string {
	chunk := strings.Repeat("lorem ipsum dolor sit amet ", n/27/10+1)
	var msgs strings.Builder
	msgs.WriteString("[")
	for i := 0; i < 10; i++ {
		if i > 0 {
			msgs.WriteString(",")
		}
		fmt.Fprintf(&msgs, `{"role":"user","content":%q}`, chunk)
	}
	msgs.WriteString("]")
	return msgs.String()
}

func benchmarkEmit(b *testing.B, n int, msgBytes int) {
	var bs []Binding
	for i := 0; i < n; i++ {
		bs = append(bs, Binding{Name: fmt.Sprint("b", i), Interceptor: InterceptorFunc(func(_ context.Context, c *Context) (Verdict, error) {
			if c.Get("model.id").Str == "" {
				return Deny("no_model", ""), nil
			}
			return Allow(), nil
		})})
	}
	e := newTestEmitter(b, Config{Bindings: bs})
	msgs := benchMessages(msgBytes)
	ev := PreModelCallEvent("gpt-test", json.RawMessage(msgs))
	s := testSession()
	b.SetBytes(int64(len(msgs)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if res := e.Emit(context.Background(), s, ev); !res.Proceed {
			b.Fatal(res.Verdict)
		}
	}
}

func BenchmarkEmit1x2KB(b *testing.B) { benchmarkEmit(b, 1, 2<<10) }
func BenchmarkEmit8x2KB(b *testing.B) { benchmarkEmit(b, 8, 2<<10) }
func BenchmarkEmit1x1MB(b *testing.B) { benchmarkEmit(b, 1, 1<<20) }
func BenchmarkEmit8x1MB(b *testing.B) { benchmarkEmit(b, 8, 1<<20) }

func TestRecordEchoesEnvelope(t *testing.T) {
	e := newTestEmitter(t, Config{Bindings: []Binding{{Name: "a", Interceptor: allowAll()}}})
	s := testSession()
	ev := OutputEvent(json.RawMessage(`"hi"`)).With("trace", json.RawMessage(`{"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331"}`))
	e.Emit(context.Background(), s, OutputEvent(json.RawMessage(`"first"`)))
	res := e.Emit(context.Background(), s, ev)
	r := res.Record
	if r.SessionID != "s-1" || r.Sequence != 1 || r.Timestamp == "" || r.Timestamp != gjsonGet(res.Context, "timestamp")[1:len(r.Timestamp)+1] {
		t.Fatalf("envelope facts: %+v", r)
	}
	if r.Trace == nil || r.Trace.TraceID != "0af7651916cd43dd8448eb211c80319c" || r.Trace.SpanID != "b7ad6b7169203331" {
		t.Fatalf("trace not echoed: %+v", r.Trace)
	}
	// A context handed in whole is read for the same facts.
	res2 := e.EmitContext(context.Background(), res.Context)
	if res2.Record.SessionID != "s-1" || res2.Record.Sequence != 1 || res2.Record.Trace == nil {
		t.Fatalf("EmitContext facts: %+v", res2.Record)
	}
}

type inlineFunc func(ctx context.Context, c *Context) (Verdict, error)

func (f inlineFunc) Intercept(ctx context.Context, c *Context) (Verdict, error) { return f(ctx, c) }
func (inlineFunc) RunsInline() bool                                             { return true }
func (inlineFunc) SharesContext() bool                                          { return true }

func TestInlineInterceptorFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		ic      inlineFunc
		timeout time.Duration
		ctx     func() context.Context
		want    Reason
	}{
		"allow":   {ic: func(context.Context, *Context) (Verdict, error) { return Allow(), nil }, want: ""},
		"panic":   {ic: func(context.Context, *Context) (Verdict, error) { panic("x") }, want: ReasonInterceptorFailed},
		"error":   {ic: func(context.Context, *Context) (Verdict, error) { return Verdict{}, errors.New("x") }, want: ReasonInterceptorFailed},
		"invalid": {ic: func(context.Context, *Context) (Verdict, error) { return Verdict{Decision: "warn"}, nil }, want: ReasonVerdictInvalid},
		"overrun": {ic: func(context.Context, *Context) (Verdict, error) {
			time.Sleep(30 * time.Millisecond)
			return Allow(), nil
		},
			timeout: 5 * time.Millisecond, want: ReasonInterceptorTimeout},
		"cancelled": {ic: func(context.Context, *Context) (Verdict, error) { return Allow(), nil }, want: ReasonInterceptorFailed,
			ctx: func() context.Context { c, cancel := context.WithCancel(context.Background()); cancel(); return c }},
	} {
		t.Run(name, func(t *testing.T) {
			e := newTestEmitter(t, Config{Bindings: []Binding{{Name: "i", Interceptor: tc.ic, Timeout: tc.timeout}}})
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			res := e.Emit(ctx, testSession(), OutputEvent(json.RawMessage(`"x"`)))
			if res.Verdict.Reason != tc.want {
				t.Fatalf("reason %q, want %q", res.Verdict.Reason, tc.want)
			}
		})
	}
}

// BenchmarkEmitInlineSmall is the per-emission floor the proxy pays: one
// inline, context-sharing interceptor (as the built-in kinds are) on a
// small output context.
func BenchmarkEmitInlineSmall(b *testing.B) {
	benchmarkEmitOne(b, inlineFunc(func(_ context.Context, c *Context) (Verdict, error) { return Allow(), nil }))
}

// benchmarkEmitOne emits a ~1 KB output context to one binding of ic.
func benchmarkEmitOne(b *testing.B, ic Interceptor) {
	e := newTestEmitter(b, Config{Bindings: []Binding{{Name: "a", Interceptor: ic}}})
	s := testSession()
	ev := OutputEvent(json.RawMessage(`"` + strings.Repeat("lorem ipsum ", 80) + `"`))
	b.ReportAllocs()
	for b.Loop() {
		if res := e.Emit(context.Background(), s, ev); !res.Proceed {
			b.Fatal(res.Verdict)
		}
	}
}

func TestAppendTimestampMatchesFormat(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 11, 29, 17, 4, 5, 999_999_999, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 1_000_000, time.FixedZone("x", 3600)),
		time.Date(12345, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(0, 0),
		time.Now(),
	} {
		if got, want := string(appendTimestamp(nil, tm)), tm.UTC().Format(TimestampLayout); got != want {
			t.Errorf("%v: got %s, want %s", tm, got, want)
		}
	}
}

// BenchmarkBuild is the context build alone: a pre_model_call context from
// the raw bytes of a history (the event's members are not re-encoded).
func BenchmarkBuild(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"1KB", 1 << 10}, {"1MB", 1 << 20}} {
		msgs := benchMessages(size.n)
		ev := PreModelCallEvent("gpt-test", json.RawMessage(msgs))
		s := testSession()
		now := time.Now()
		b.Run(size.name, func(b *testing.B) {
			b.SetBytes(int64(len(msgs)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.build(ev, 1, now, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type classedErr struct{ secret string }

func (e classedErr) Error() string        { return "failed on " + e.secret }
func (e classedErr) FailureClass() string { return "backend answered status 500" }

func TestInterceptorFailureMessageIsPayloadFree(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("wrapped: %w", classedErr{secret: "sk-live-123"}), "backend answered status 500"},
		{errors.New("leaks sk-live-123"), "interceptor returned *errors.errorString"},
	} {
		e := newTestEmitter(t, Config{Bindings: []Binding{{Name: "a", Interceptor: InterceptorFunc(func(context.Context, *Context) (Verdict, error) {
			return Verdict{}, tc.err
		})}}})
		res := e.Emit(context.Background(), testSession(), OutputEvent(json.RawMessage(`"x"`)))
		if res.Proceed || res.Verdict.Reason != string(ReasonInterceptorFailed) || res.Verdict.Message != tc.want || res.Record.Verdict.Message != tc.want {
			t.Fatalf("%v: verdict %+v record %+v", tc.err, res.Verdict, res.Record.Verdict)
		}
	}
}

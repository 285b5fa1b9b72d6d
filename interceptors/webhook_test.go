package interceptors

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

func TestWebhook(t *testing.T) {
	type seen struct {
		body  string
		auth  string
		ctype string
	}
	got := make(chan seen, 16)
	release := make(chan struct{})
	defer close(release)
	mux := http.NewServeMux()
	answer := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			got <- seen{string(b), r.Header.Get("Authorization"), r.Header.Get("Content-Type")}
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		}
	}
	mux.HandleFunc("/deny", answer(200, `{"decision":"deny","reason":"dangerous_tool"}`))
	mux.HandleFunc("/allow", answer(200, `{"decision":"allow"}`))
	mux.HandleFunc("/opa", answer(200, `{"result":{"decision":"deny","reason":"dangerous_tool"}}`))
	mux.HandleFunc("/opa-undefined", answer(200, `{}`))
	mux.HandleFunc("/nested", answer(200, `{"result":{"verdicts":[{"decision":"allow"},{"decision":"deny","reason":"dangerous_tool"}]}}`))
	mux.HandleFunc("/500", answer(500, `{"decision":"allow"}`))
	mux.HandleFunc("/garbage", answer(200, `<html>`))
	mux.HandleFunc("/invalid", answer(200, `{"decision":"escalate"}`))
	mux.HandleFunc("/reserved", answer(200, `{"decision":"deny","reason":"host_error:no_interceptor"}`))
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/allow", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"decision":"allow","message":"`+strings.Repeat("x", MaxWebhookAnswer)+`"}`)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // lets the server notice the client leaving
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	env := Env{Getenv: func(k string) string {
		if k == "HOOK_TOKEN" {
			return "Bearer t0ken"
		}
		return ""
	}, HTTPClient: srv.Client()}
	mk := func(t *testing.T, cfg string) points.Interceptor {
		ic, err := kind(t, KindWebhook).New("w", []byte(cfg), env)
		if err != nil {
			t.Fatal(err)
		}
		return ic
	}
	c := preTool(t, "delete_files", `{"path":"/"}`)

	t.Run("deny with headers", func(t *testing.T) {
		ic := mk(t, `{"url":"`+srv.URL+`/deny","headers_from_env":{"Authorization":"HOOK_TOKEN"}}`)
		if got := verdictSummary(run(t, ic, c)); got != "deny dangerous_tool" {
			t.Fatal(got)
		}
		s := <-got
		if s.body != string(c.Raw()) || s.auth != "Bearer t0ken" || s.ctype != "application/json" {
			t.Fatalf("server saw %+v", s)
		}
	})
	t.Run("allow", func(t *testing.T) {
		if got := verdictSummary(run(t, mk(t, `{"url":"`+srv.URL+`/allow"}`), c)); got != "allow" {
			t.Fatal(got)
		}
		<-got
	})
	t.Run("OPA input_key and verdict_path", func(t *testing.T) {
		ic := mk(t, `{"url":"`+srv.URL+`/opa","input_key":"input","verdict_path":"result"}`)
		if got := verdictSummary(run(t, ic, c)); got != "deny dangerous_tool" {
			t.Fatal(got)
		}
		s := <-got
		if in := gjson.Get(s.body, "input"); in.Raw != string(c.Raw()) {
			t.Fatalf("body not wrapped: %s", s.body)
		}
	})

	t.Run("nested input_key and indexed verdict_path", func(t *testing.T) {
		ic := mk(t, `{"url":"`+srv.URL+`/nested","input_key":"req.input","verdict_path":"result.verdicts[1]"}`)
		if got := verdictSummary(run(t, ic, c)); got != "deny dangerous_tool" {
			t.Fatal(got)
		}
		s := <-got
		if in := gjson.Get(s.body, "req.input"); in.Raw != string(c.Raw()) {
			t.Fatalf("body not wrapped: %s", s.body)
		}
	})

	failures := []struct {
		name, cfg      string
		verdictInvalid bool
		class          string // the payload-free message the emitter records
	}{
		{"500", `{"url":"` + srv.URL + `/500"}`, false, "webhook answered status 500"},
		{"garbage", `{"url":"` + srv.URL + `/garbage"}`, false, "webhook answer is not JSON"},
		{"no verdict at verdict_path", `{"url":"` + srv.URL + `/opa-undefined","verdict_path":"result"}`, false, "webhook answer has no verdict at verdict_path"},
		{"redirect not followed", `{"url":"` + srv.URL + `/redirect"}`, false, "webhook answered status 307"},
		{"too big", `{"url":"` + srv.URL + `/big"}`, false, ""},
		{"timeout", `{"url":"` + srv.URL + `/slow","timeout":"50ms"}`, false, "webhook call timed out"},
		{"connection refused", `{"url":"http://127.0.0.1:1/"}`, false, "webhook unreachable"},
		{"invalid verdict", `{"url":"` + srv.URL + `/invalid"}`, true, ""},
		{"reserved reason", `{"url":"` + srv.URL + `/reserved"}`, true, ""},
	}
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			_, err := mk(t, f.cfg).Intercept(context.Background(), c)
			if err == nil {
				t.Fatal("no error")
			}
			var ve *points.VerdictError
			if isVE := errors.As(err, &ve); isVE != f.verdictInvalid {
				t.Fatalf("VerdictError = %v, want %v (%v)", isVE, f.verdictInvalid, err)
			}
			if !f.verdictInvalid && !errors.Is(err, ErrWebhook) {
				t.Fatalf("err %v does not wrap ErrWebhook", err)
			}
			if timeout := f.name == "timeout"; errors.Is(err, context.DeadlineExceeded) != timeout {
				t.Fatalf("err %v: wraps DeadlineExceeded = %v, want %v", err, !timeout, timeout)
			}
			var fc points.FailureClasser
			if f.class != "" && (!errors.As(err, &fc) || fc.FailureClass() != f.class || strings.Contains(fc.FailureClass(), srv.URL)) {
				t.Fatalf("failure class of %v = %v, want %q", err, fc, f.class)
			}
		drain:
			for {
				select {
				case <-got:
				default:
					break drain
				}
			}
		})
	}

	// Through the emitter: a transport failure is interceptor_failed, an
	// invalid verdict is verdict_invalid, the webhook's own timeout is
	// interceptor_timeout like the emitter's, and messages are neutral.
	for _, tt := range []struct{ cfg, reason, message string }{
		{`{"url":"` + srv.URL + `/500"}`, string(points.ReasonInterceptorFailed), "webhook answered status 500"},
		{`{"url":"` + srv.URL + `/invalid"}`, string(points.ReasonVerdictInvalid), ""},
		{`{"url":"` + srv.URL + `/slow","timeout":"50ms"}`, string(points.ReasonInterceptorTimeout), ""},
		{`{"url":"http://127.0.0.1:1/"}`, string(points.ReasonInterceptorFailed), "webhook unreachable"},
	} {
		em, err := points.NewEmitter(points.Config{Bindings: []points.Binding{{Name: "w", Interceptor: mk(t, tt.cfg), Timeout: 5 * time.Second}}})
		if err != nil {
			t.Fatal(err)
		}
		res := em.EmitContext(context.Background(), c.Raw())
		if v := res.Record.Verdict; string(v.Reason) != tt.reason || v.Message != tt.message {
			t.Fatalf("%s: verdict %q %q, want %q %q", tt.cfg, v.Reason, v.Message, tt.reason, tt.message)
		}
	drain:
		for {
			select {
			case <-got:
			case <-time.After(100 * time.Millisecond):
				break drain
			}
		}
	}
}

func TestWebhookCancelled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		<-r.Context().Done()
	}))
	defer srv.Close()
	ic, err := newWebhook("w", []byte(`{"url":"`+srv.URL+`"}`), Env{HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := ic.Intercept(ctx, inputCtx(t, `"x"`)); done <- err }()
	cancel()
	if err := <-done; err == nil {
		t.Fatal("cancelled call answered")
	}
}

package approvals

import (
	"context"
	"encoding/json"
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

func newTestWebhook(t *testing.T, url string, extra string, getenv func(string) string) points.Resolver {
	t.Helper()
	cfg := `{"url":"` + url + `"` + extra + `}`
	r, err := NewWebhook([]byte(cfg), getenv, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWebhookResolver(t *testing.T) {
	const ident = "sha256:0123"
	tests := []struct {
		name    string
		status  int
		answer  string
		wantErr bool
		want    string // resolution JSON when no error
	}{
		{"approve", 200, `{"outcome":"approve","context_identity":"sha256:0123","verdict":{"decision":"allow"}}`, false,
			`{"outcome":"approve","context_identity":"sha256:0123","verdict":{"decision":"allow"}}`},
		{"reject", 200, `{"outcome":"reject","context_identity":"sha256:0123","verdict":{"decision":"deny","reason":"no"}}`, false,
			`{"outcome":"reject","context_identity":"sha256:0123","verdict":{"decision":"deny","reason":"no"}}`},
		{"unresolved passthrough", 200, `{"outcome":"unresolved","context_identity":"sha256:0123"}`, false,
			`{"outcome":"unresolved","context_identity":"sha256:0123"}`},
		// Not "fixed": the emitter's validation order judges these.
		{"forged identity passthrough", 200, `{"outcome":"approve","context_identity":"sha256:forged","verdict":{"decision":"allow"}}`, false,
			`{"outcome":"approve","context_identity":"sha256:forged","verdict":{"decision":"allow"}}`},
		{"inconsistent passthrough", 200, `{"outcome":"approve","context_identity":"sha256:0123","verdict":{"decision":"deny"}}`, false,
			`{"outcome":"approve","context_identity":"sha256:0123","verdict":{"decision":"deny"}}`},
		{"unresolved with verdict passthrough", 200, `{"outcome":"unresolved","context_identity":"sha256:0123","verdict":{"decision":"allow"}}`, false,
			`{"outcome":"unresolved","context_identity":"sha256:0123","verdict":{"decision":"allow"}}`},
		{"missing identity reads null", 200, `{"outcome":"approve","verdict":{"decision":"allow"}}`, false,
			`{"outcome":"approve","context_identity":null,"verdict":{"decision":"allow"}}`},
		{"201 is 2xx", 201, `{"outcome":"unresolved","context_identity":"sha256:0123"}`, false,
			`{"outcome":"unresolved","context_identity":"sha256:0123"}`},
		{"500", 500, `{"outcome":"approve","context_identity":"sha256:0123","verdict":{"decision":"allow"}}`, true, ""},
		{"302", 302, ``, true, ""},
		{"garbage", 200, `<html>nope</html>`, true, ""},
		{"not an object", 200, `["approve"]`, true, ""},
		{"empty", 200, ``, true, ""},
		{"oversize", 200, `{"outcome":"unresolved","context_identity":"sha256:0123","pad":"` + strings.Repeat("x", MaxWebhookAnswer) + `"}`, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []byte
			var hdr http.Header
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, _ = io.ReadAll(r.Body)
				hdr = r.Header.Clone()
				if tt.status == 302 {
					http.Redirect(w, r, "/elsewhere", http.StatusFound)
					return
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.answer)
			}))
			defer srv.Close()
			env := map[string]string{"APPROVER_TOKEN": "Bearer xyz"}
			r := newTestWebhook(t, srv.URL, `,"headers_from_env":{"Authorization":"APPROVER_TOKEN"}`, func(k string) string { return env[k] })
			req := testRequest(sp(ident), `{"target": {"name":"send_email"}, "p":"<&>"}`)
			res, err := r.Resolve(context.Background(), req)
			if tt.wantErr {
				if !errors.Is(err, ErrWebhook) {
					t.Fatalf("err = %v, res = %s", err, resJSON(res))
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if g := resJSON(res); g != tt.want {
					t.Fatalf("resolution\n got %s\nwant %s", g, tt.want)
				}
			}
			// The request is the spec's ApprovalRequest; the context verbatim.
			if gjson.GetBytes(got, "context_identity").Str != ident || gjson.GetBytes(got, "interception_point").Str != "pre_tool_call" ||
				gjson.GetBytes(got, "verdict.decision").Str != "deny" || !gjson.GetBytes(got, "verdict.approval").IsObject() ||
				gjson.GetBytes(got, "context").Raw != `{"target": {"name":"send_email"}, "p":"<&>"}` {
				t.Fatalf("request body = %s", got)
			}
			if hdr.Get("Authorization") != "Bearer xyz" || hdr.Get("Content-Type") != "application/json" {
				t.Fatalf("request headers = %v", hdr)
			}
		})
	}
}

func TestWebhookNullIdentityRequest(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, `{"outcome":"unresolved","context_identity":null}`)
	}))
	defer srv.Close()
	res, err := newTestWebhook(t, srv.URL, "", nil).Resolve(context.Background(), testRequest(nil, ""))
	if err != nil || res.ContextIdentity != nil || res.Outcome != "unresolved" {
		t.Fatalf("res %s err %v", resJSON(res), err)
	}
	if r := gjson.GetBytes(got, "context_identity"); !r.Exists() || r.Type != gjson.Null {
		t.Fatalf("request body = %s", got)
	}
}

func TestWebhookTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	for _, name := range []string{"config timeout", "caller deadline"} {
		t.Run(name, func(t *testing.T) {
			extra, ctx := "", context.Background()
			if name == "config timeout" {
				extra = `,"timeout":"1ms"`
			} else {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Millisecond)
				defer cancel()
			}
			_, err := newTestWebhook(t, srv.URL, extra, nil).Resolve(ctx, testRequest(nil, ""))
			if !errors.Is(err, ErrWebhook) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestWebhookTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens any more
	if _, err := newTestWebhook(t, url, "", nil).Resolve(context.Background(), testRequest(nil, "")); !errors.Is(err, ErrWebhook) {
		t.Fatalf("err = %v", err)
	}
}

// TestWebhookWithEmitter: the emitter's validation order judges what the
// webhook passed through.
func TestWebhookWithEmitter(t *testing.T) {
	tests := []struct {
		name, answer string // %ID% is replaced by the request's identity
		proceed      bool
		reason       string
	}{
		{"approve", `{"outcome":"approve","context_identity":%ID%,"verdict":{"decision":"allow"}}`, true, ""},
		{"reject", `{"outcome":"reject","context_identity":%ID%,"verdict":{"decision":"deny","reason":"nope"}}`, false, "nope"},
		{"unresolved", `{"outcome":"unresolved","context_identity":%ID%}`, false, points.ReasonApprovalUnresolved},
		{"echo violation", `{"outcome":"approve","context_identity":"sha256:forged","verdict":{"decision":"allow"}}`, false, points.ReasonApprovalIdentityMismatch},
		{"identity of the wrong type", `{"outcome":"approve","context_identity":7,"verdict":{"decision":"allow"}}`, false, points.ReasonApprovalIdentityMismatch},
		{"outcome of the wrong type", `{"outcome":true,"context_identity":%ID%,"verdict":{"decision":"allow"}}`, false, points.ReasonApprovalResolverFailed},
		{"approve carrying deny", `{"outcome":"approve","context_identity":%ID%,"verdict":{"decision":"deny"}}`, false, points.ReasonVerdictInvalid},
		{"garbage", `nope`, false, points.ReasonApprovalResolverFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				id, _ := json.Marshal(gjson.GetBytes(body, "context_identity").Value())
				_, _ = io.WriteString(w, strings.ReplaceAll(tt.answer, "%ID%", string(id)))
			}))
			defer srv.Close()
			e, err := points.NewEmitter(points.Config{
				Identity: points.JCSSHA256(),
				Bindings: []points.Binding{{Name: "gate", Interceptor: points.InterceptorFunc(
					func(context.Context, *points.Context) (points.Verdict, error) {
						return points.Escalate("needs_approval", ""), nil
					})}},
				Resolver:        newTestWebhook(t, srv.URL, "", nil),
				ResolverTimeout: -1,
			})
			if err != nil {
				t.Fatal(err)
			}
			s := points.NewSession(points.Agent{ID: "a", Framework: "test"}, "s")
			res := e.Emit(context.Background(), s, points.PreToolCallEvent("c", "send_email", json.RawMessage(`{}`)))
			if res.Proceed != tt.proceed || res.Verdict.Reason != tt.reason {
				t.Fatalf("proceed %v reason %q", res.Proceed, res.Verdict.Reason)
			}
		})
	}
}

func FuzzParseResolution(f *testing.F) {
	for _, s := range []string{
		`{"outcome":"approve","context_identity":"a","verdict":{"decision":"allow"}}`,
		`{"outcome":"unresolved","context_identity":null}`,
		`{"outcome":5,"context_identity":{"x":1}}`,
		`{"outcome":"approve","context_identity":"a\u0000"}`,
		`[]`, `nope`, ``,
	} {
		f.Add([]byte(s), "a")
	}
	f.Fuzz(func(t *testing.T, data []byte, requested string) {
		res, err := parseResolution(data, &requested)
		if err != nil {
			if !errors.Is(err, ErrWebhook) {
				t.Fatalf("error %v not ErrWebhook", err)
			}
			return
		}
		root := gjson.ParseBytes(data)
		id := root.Get("context_identity")
		// An identity equal to the request's must have come as that string.
		if res.ContextIdentity != nil && *res.ContextIdentity == requested && (id.Type != gjson.String || id.Str != requested) {
			t.Fatalf("identity %q forged from %s", requested, id.Raw)
		}
		if o := root.Get("outcome"); o.Type != gjson.String && (res.Outcome == "approve" || res.Outcome == "reject" || res.Outcome == "unresolved") {
			t.Fatalf("outcome %q from %s", res.Outcome, o.Raw)
		}
	})
}

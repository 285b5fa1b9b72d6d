package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// inlineSharer is an interceptor the emitter runs inline on the shared
// context bytes, as the built-in kinds are: the case where the proxy's
// lent buffers hold the contexts.
type inlineSharer func(*points.Context) points.Verdict

func (f inlineSharer) Intercept(_ context.Context, c *points.Context) (points.Verdict, error) {
	return f(c), nil
}
func (inlineSharer) SharesContext() bool { return true }
func (inlineSharer) RunsInline() bool    { return true }

// TestLentContextsKeepRequestsApart runs long answers, some of which leak
// a secret, through a proxy whose output and post_model_call contexts live
// in buffers lent from a pool and reused across requests, with several
// requests at once. Each answer carries its request's marker: every
// verdict must be about its own request's answer, every leak denied,
// every other answer released whole and unchanged.
func TestLentContextsKeepRequestsApart(t *testing.T) {
	filler := strings.Repeat("steady progress across every region and team ", 512) // ~23 KB: lent
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		marker := gjson.GetBytes(b, "messages.0.content").Str
		content := marker + " " + filler + marker
		if strings.HasPrefix(marker, "leak") {
			content += " SECRET"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, content)
	}))
	t.Cleanup(up.Close)

	var mu sync.Mutex
	seen := map[string][]string{} // session id -> markers seen, post then output
	look := func(path string) inlineSharer {
		return func(c *points.Context) points.Verdict {
			content := c.Get(path).Str
			marker, _, _ := strings.Cut(content, " ")
			if !strings.HasSuffix(content, marker) && !strings.HasSuffix(content, marker+" SECRET") {
				return points.Deny("mixed_answer", "the context holds parts of two answers")
			}
			// A sharer keeps no view of its context past Intercept: the
			// buffer holds another request's context next.
			sid := strings.Clone(c.Get("session.id").Str)
			mu.Lock()
			seen[sid] = append(seen[sid], strings.Clone(marker))
			mu.Unlock()
			if strings.Contains(content, "SECRET") && c.Point() == points.Output {
				return points.Deny("secret_in_output", "")
			}
			return points.Allow()
		}
	}
	p := newProxy(t, up.URL,
		points.Binding{Name: "post", At: []points.Point{points.PostModelCall}, Interceptor: look("response.content")},
		points.Binding{Name: "out", At: []points.Point{points.Output}, Interceptor: look("output.content")},
		allowAll(points.AgentStartup, points.Input, points.PreModelCall, points.AgentShutdown))

	const n = 48
	var wg sync.WaitGroup
	sem := make(chan struct{}, 6)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			marker := fmt.Sprintf("ok-%02d", i)
			if i%3 == 0 {
				marker = fmt.Sprintf("leak-%02d", i)
			}
			body, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]string{{"role": "user", "content": marker}}})
			resp, b := post(t, p.URL, string(body))
			sid := resp.Header.Get("X-Agent-Hooks-Session")
			switch {
			case strings.HasPrefix(marker, "leak"):
				if resp.StatusCode != http.StatusForbidden || gjson.GetBytes(b, "error.code").Str != "secret_in_output" {
					t.Errorf("%s: status %d, body %.200s", marker, resp.StatusCode, b)
				}
			default:
				want := marker + " " + filler + marker
				if resp.StatusCode != http.StatusOK || gjson.GetBytes(b, "choices.0.message.content").Str != want {
					t.Errorf("%s: status %d, answer not its own (%.120s)", marker, resp.StatusCode, b)
				}
			}
			mu.Lock()
			got := seen[sid]
			mu.Unlock()
			if len(got) != 2 || got[0] != marker || got[1] != marker {
				t.Errorf("%s: the interceptors saw %q", marker, got)
			}
		}()
	}
	wg.Wait()
}

// TestWithheldCallsKeepClones checks what the session keeps of a withheld
// tool call (its id in the anchor's list, its raw arguments): clones, not
// views into the completion, which the request only borrows and the next
// request's answer overwrites.
func TestWithheldCallsKeepClones(t *testing.T) {
	up, _ := upstream(t, plainCompletion, false, 0)
	deny := at(points.PreToolCall, "deny-rm", func(c *points.Context) (points.Verdict, error) {
		if c.Get("tool_call.name").Str == "rm" {
			return points.Deny("tool_denied", ""), nil
		}
		return points.Allow(), nil
	})
	p := newProxy(t, up.URL, deny, allowAll(points.AgentStartup, points.Input, points.PreModelCall, points.PostModelCall, points.Output, points.PostToolCall, points.AgentShutdown))
	s := p.srv
	sess, _ := s.sessions.get("sess-withheld", false, time.Now())
	completion := []byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_ok","type":"function","function":{"name":"get_weather","arguments":"{}"}},` +
		`{"id":"call_rm","type":"function","function":{"name":"rm","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`)
	_, kept, withheld, halt, _ := s.releaseCalls(t.Context(), s.pol.Load(), sess, completion, nil, nil, sigScope{})
	if halt != nil || kept != 1 || len(withheld) != 1 || withheld[0] != "call_rm" {
		t.Fatalf("kept %d, withheld %q, halt %v", kept, withheld, halt)
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(completion)))
	inside := func(str string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(str)))
		return len(str) > 0 && p >= lo && p < lo+uintptr(len(completion))
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	rm, ok := sess.tools["call_rm"]
	if !ok || rm.rawArgs != "{}" {
		t.Fatalf("withheld call not remembered: %+v", rm)
	}
	if inside(rm.rawArgs) {
		t.Error("the withheld call's raw arguments point into the completion")
	}
	for _, id := range sess.tools["call_ok"].withheld {
		if inside(id) {
			t.Errorf("withheld id %q points into the completion", id)
		}
	}
	for _, id := range withheld {
		if inside(id) {
			t.Errorf("returned withheld id %q points into the completion", id)
		}
	}
}

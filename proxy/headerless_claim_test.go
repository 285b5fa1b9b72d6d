package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// Two header-less clients ask the same question at once and the model
// numbers its calls per answer (call_0 to both). Their follow-ups, sent
// while the other's is still with the model, must each join its own run:
// before, both joined the run opened last (a follow-up in flight claimed
// nothing), one client's result was replaced by the other's and sent to
// its model, and only one post_tool_call judged.
func TestHeaderlessConcurrentFollowUpsKeepTheirRuns(t *testing.T) {
	const call = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"balance","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		msgs := gjson.GetBytes(b, "messages").Array()
		last := msgs[len(msgs)-1]
		if last.Get("role").Str != "tool" {
			_, _ = io.WriteString(w, call)
			return
		}
		time.Sleep(100 * time.Millisecond) // the first follow-up is still here when the second arrives
		answer := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"after tool: ` + last.Get("content").Str + `"},"finish_reason":"stop"}]}`
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(up.Close)
	var mu sync.Mutex
	var judged []string
	probe := at(points.PostToolCall, "probe", func(c *points.Context) (points.Verdict, error) {
		mu.Lock()
		judged = append(judged, c.Get("tool_result").Raw)
		mu.Unlock()
		return points.Allow(), nil
	})
	p := seamProxy(t, up.URL, probe, allowAll())
	ask := `{"model":"m","messages":[{"role":"user","content":"what is my balance?"}]}`
	for range 2 {
		if resp, b := post(t, p.URL, ask); resp.StatusCode != 200 || !strings.Contains(string(b), "call_0") {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	followUp := func(who string) string {
		return `{"model":"m","messages":[{"role":"user","content":"what is my balance?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"balance","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_0","content":"balance of ` + who + `"}]}`
	}
	var wg sync.WaitGroup
	got := map[string]string{}
	for i, who := range []string{"alice", "bob"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 20 * time.Millisecond)
			resp, b := post(t, p.URL, followUp(who))
			mu.Lock()
			defer mu.Unlock()
			got[who] = gjson.GetBytes(b, "choices.0.message.content").Str
			if resp.StatusCode != 200 {
				t.Errorf("%s: %d %s", who, resp.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	for _, who := range []string{"alice", "bob"} {
		if want := "after tool: balance of " + who; got[who] != want {
			t.Errorf("%s got %q, want %q", who, got[who], want)
		}
	}
	if len(judged) != 2 {
		t.Errorf("post_tool_call judged %d results (%q), want one per client", len(judged), judged)
	}
}

package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// maskInput masks SECRET123 in input's content (a string) by replacement.
func maskInput(repl string) points.Binding {
	return at(points.Input, "mask", func(c *points.Context) (points.Verdict, error) {
		s := c.Get("input.content").Str
		if !strings.Contains(s, "SECRET123") {
			return points.Allow(), nil
		}
		b, _ := json.Marshal(strings.ReplaceAll(s, "SECRET123", repl))
		return points.Replace("$target.content", b), nil
	})
}

const lookupCall = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`

// An input verdict that changed a message holds for that message when the
// agent replays it in later requests: the next turn of a named session, a
// header-less agent's next call, and a tool-loop follow-up (which input does
// not judge) all carry what the verdict made of it, never the original.
func TestInputVerdictHoldsInHistory(t *testing.T) {
	first := `{"model":"m","messages":[{"role":"user","content":"my card SECRET123"}]}`
	nextTurn := `{"model":"m","messages":[{"role":"user","content":"my card SECRET123"},{"role":"assistant","content":"ok"},{"role":"user","content":"thanks"}]}`
	respelled := `{"model":"m","messages":[{"role":"user","content":"my card \u0053ECRET123"},{"role":"assistant","content":"ok"},{"role":"user","content":"thanks"}]}`
	followUp := `{"model":"m","messages":[{"role":"user","content":"my card SECRET123"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"done"}]}`
	for _, tc := range []struct {
		name    string
		answers []string
		second  string
		session bool
	}{
		{"named/next-turn", []string{plainCompletion}, nextTurn, true},
		{"headerless/next-turn", []string{plainCompletion}, nextTurn, false},
		{"named/respelled", []string{plainCompletion}, respelled, true},
		{"named/tool-follow-up", []string{lookupCall, plainCompletion}, followUp, true},
		{"headerless/tool-follow-up", []string{lookupCall, plainCompletion}, followUp, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, got := seqUpstream(t, tc.answers...)
			p := newProxy(t, up.URL, maskInput("[masked]"), allowAll())
			var hdr []string
			if tc.session {
				hdr = []string{"X-Agent-Hooks-Session", "s1"}
			}
			for i, body := range []string{first, tc.second} {
				if resp, b := post(t, p.URL, body, hdr...); resp.StatusCode != 200 {
					t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
				}
			}
			reqs := got()
			if len(reqs) != 2 {
				t.Fatalf("%d upstream calls, want 2", len(reqs))
			}
			for i, g := range reqs {
				if strings.Contains(g, "SECRET123") || strings.Contains(g, `\u0053ECRET123`) {
					t.Errorf("upstream call %d carries what input masked: %s", i, g)
				}
				if !strings.Contains(g, "my card [masked]") {
					t.Errorf("upstream call %d lacks the masked message: %s", i, g)
				}
			}
			// The replay is no judgment: one input per request that opens a
			// turn, none for the follow-up. A header-less agent's next call
			// is another run, where the changed message is judged again.
			want := 2
			switch tc.name {
			case "named/tool-follow-up", "headerless/tool-follow-up":
				want = 1
			case "headerless/next-turn":
				want = 3
			}
			if n := count(p.sink, points.Input); n != want {
				t.Errorf("%d input emissions, want %d", n, want)
			}
		})
	}
}

// A verdict too large to remember is not replayed but judged again, and a
// reload keeps what earlier verdicts made of messages.
func TestInputVerdictLargeAndReload(t *testing.T) {
	first := `{"model":"m","messages":[{"role":"user","content":"my card SECRET123"}]}`
	nextTurn := `{"model":"m","messages":[{"role":"user","content":"my card SECRET123"},{"role":"assistant","content":"ok"},{"role":"user","content":"thanks"}]}`
	t.Run("other-session", func(t *testing.T) {
		// A verdict that depends on more than the text (here the session)
		// is not replayed into another session: the message is judged
		// there again.
		up, got := seqUpstream(t, plainCompletion)
		tag := at(points.Input, "tag", func(c *points.Context) (points.Verdict, error) {
			b, _ := json.Marshal("[" + c.Get("session.id").Str + "] " + c.Get("input.content").Str)
			return points.Replace("$target.content", b), nil
		})
		p := newProxy(t, up.URL, tag, allowAll())
		ask := `{"model":"m","messages":[{"role":"user","content":"my balance?"}]}`
		next := `{"model":"m","messages":[{"role":"user","content":"my balance?"},{"role":"assistant","content":"ok"},{"role":"user","content":"thanks"}]}`
		for _, r := range [][2]string{{ask, "s1"}, {ask, "s2"}, {next, "s1"}} {
			if resp, b := post(t, p.URL, r[0], "X-Agent-Hooks-Session", r[1]); resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
		}
		last := got()[2]
		if strings.Contains(last, "[s2]") || !strings.Contains(last, "[s1] my balance?") {
			t.Fatalf("s1's next turn carries %s", last)
		}
	})
	t.Run("large", func(t *testing.T) {
		up, got := seqUpstream(t, plainCompletion)
		big := strings.Repeat("x", maxKeptVerdict+1)
		p := newProxy(t, up.URL, maskInput(big), allowAll())
		for _, body := range []string{first, nextTurn} {
			if resp, b := post(t, p.URL, body); resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
		}
		for i, g := range got() {
			if strings.Contains(g, "SECRET123") || !strings.Contains(g, big) {
				t.Errorf("upstream call %d: the large verdict did not hold", i)
			}
		}
		if n := count(p.sink, points.Input); n != 3 {
			t.Errorf("%d input emissions, want 3 (the replayed message judged again)", n)
		}
	})
	t.Run("reload", func(t *testing.T) {
		up, got := seqUpstream(t, plainCompletion)
		p := newProxy(t, up.URL, maskInput("[masked]"), allowAll())
		if resp, b := post(t, p.URL, first, "X-Agent-Hooks-Session", "r1"); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: []points.Binding{allowAll()}, Sink: p.sink, Targets: WriteBack{}, HostMembers: true})
		if err != nil {
			t.Fatal(err)
		}
		p.srv.Swap(em)
		if resp, b := post(t, p.URL, nextTurn, "X-Agent-Hooks-Session", "r1"); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		for i, g := range got() {
			if strings.Contains(g, "SECRET123") {
				t.Errorf("upstream call %d after the reload carries the original: %s", i, g)
			}
		}
	})
}

// A message's key does not depend on its JSON spelling.
func TestInputKeySpelling(t *testing.T) {
	for _, pair := range [][2]string{
		{`"my card SECRET123"`, `"my card \u0053ECRET123"`},
		{`[{"type":"text","text":"SECRET123"}]`, `[ {"text":"\u0053ECRET123", "type":"text"} ]`},
	} {
		if inputKey("user", gjson.Parse(pair[0])) != inputKey("user", gjson.Parse(pair[1])) {
			t.Errorf("%s and %s have different keys", pair[0], pair[1])
		}
	}
	if inputKey("user", gjson.Parse(`"x"`)) == inputKey("system", gjson.Parse(`"x"`)) {
		t.Error("the role is not in the key")
	}
}

// A history that repeats a message another session's verdict changed has
// it judged again once, whatever the copies, and no request judges more
// messages than a turn may open with.
func TestInputJudgedAgainOncePerMessage(t *testing.T) {
	up, _ := seqUpstream(t, plainCompletion)
	mask := maskInput("[masked]")
	maskA := at(points.Input, "mask-a", func(c *points.Context) (points.Verdict, error) {
		if c.Get("session.id").Str != "a" {
			return points.Allow(), nil
		}
		return mask.Interceptor.Intercept(context.Background(), c)
	})
	p := newProxy(t, up.URL, maskA, allowAll())
	if resp, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"my card SECRET123"}]}`, "X-Agent-Hooks-Session", "a"); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	before := count(p.sink, points.Input)
	copies := strings.Repeat(`{"role":"user","content":"my card SECRET123"},`, 2*maxTurnInputs)
	body := `{"model":"m","messages":[` + copies + `{"role":"assistant","content":"ok"},{"role":"user","content":"next"}]}`
	if resp, b := post(t, p.URL, body, "X-Agent-Hooks-Session", "b"); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if n := count(p.sink, points.Input) - before; n != 2 {
		t.Fatalf("%d input emissions for one request, want 2 (the turn's message and the repeated one, once)", n)
	}
	// Distinct changed messages past the bound: refused, fail closed.
	for i := range maxTurnInputs + 1 {
		if resp, b := post(t, p.URL, `{"model":"m","messages":[{"role":"user","content":"SECRET123 `+strconv.Itoa(i)+`"}]}`, "X-Agent-Hooks-Session", "a"); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	var msgs []string
	for i := range maxTurnInputs + 1 {
		msgs = append(msgs, `{"role":"user","content":"SECRET123 `+strconv.Itoa(i)+`"}`)
	}
	body = `{"model":"m","messages":[` + strings.Join(msgs, ",") + `,{"role":"assistant","content":"ok"},{"role":"user","content":"next"}]}`
	resp, b := post(t, p.URL, body, "X-Agent-Hooks-Session", "b")
	if resp.StatusCode != http.StatusServiceUnavailable || strings.Contains(string(b), "SECRET123") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// A masked message the agent resends as text parts (the same text, another
// shape) is no replay of the verdict, which was made for the string: it is
// judged again, not passed unjudged.
func TestInputChangedMessageResentAsParts(t *testing.T) {
	up, _ := seqUpstream(t, plainCompletion)
	var mu sync.Mutex
	var seen []string
	probe := at(points.Input, "probe", func(c *points.Context) (points.Verdict, error) {
		mu.Lock()
		seen = append(seen, c.Get("input.content").Raw)
		mu.Unlock()
		return points.Allow(), nil
	})
	p := newProxy(t, up.URL, maskInput("[masked]"), probe, allowAll())
	hdr := []string{"X-Agent-Hooks-Session", "s1"}
	first := `{"model":"m","messages":[{"role":"user","content":"my card SECRET123"}]}`
	second := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"my card SECRET123"}]},{"role":"assistant","content":"ok"},{"role":"user","content":"thanks"}]}`
	for _, b := range []string{first, second} {
		if resp, body := post(t, p.URL, b, hdr...); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 || !strings.Contains(seen[2], `"type":"text"`) && !strings.Contains(seen[1], `"type":"text"`) {
		t.Fatalf("input saw %q, want the first message, then the parts message judged again beside thanks", seen)
	}
}

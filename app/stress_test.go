package app_test

// Reload stress: config reloads that change bindings,
// passthrough, tool_seam, agent and limits while mixed traffic runs, on
// loopback only; run with -race.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

const zzSecret = "TOPSECRET"

func zzID() string {
	const abc = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = abc[int(b[i])%len(abc)]
	}
	return "call_" + string(b) + "a1"
}

// zzUpstream answers by the first user message's first word: plain,
// secret (text carrying zzSecret), tool (a call of lookup, then a text
// answer), danger (a call of danger); json or streamed; GET /v1/models.
func zzUpstream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
			return
		}
		b, _ := io.ReadAll(r.Body)
		msgs := gjson.GetBytes(b, "messages").Array()
		cmd := ""
		for _, m := range msgs {
			if m.Get("role").Str == "user" {
				cmd = strings.Fields(m.Get("content").Str + " x")[0]
				break
			}
		}
		afterTool := msgs[len(msgs)-1].Get("role").Str == "tool"
		var content *string
		var call, name string
		txt := func(s string) { content = &s }
		switch {
		case afterTool:
			txt("after the tool")
		case cmd == "secret":
			txt("the " + zzSecret + " is 42")
		case cmd == "tool":
			call, name = zzID(), "lookup"
		case cmd == "danger":
			call, name = zzID(), "danger"
		default:
			txt("plain answer")
		}
		if !gjson.GetBytes(b, "stream").Bool() {
			msg := map[string]any{"role": "assistant", "content": content}
			fin := "stop"
			if call != "" {
				msg["tool_calls"] = []any{map[string]any{"id": call, "type": "function", "function": map[string]any{"name": name, "arguments": `{"q":"x"}`}}}
				fin = "tool_calls"
			}
			out, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion", "created": 1, "model": "m",
				"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": fin}},
				"usage":   map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(out)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(delta, fin string) {
			f := "null"
			if fin != "" {
				f = `"` + fin + `"`
			}
			fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n", delta, f)
			w.(http.Flusher).Flush()
		}
		if content != nil {
			ev(`{"role":"assistant","content":""}`, "")
			q, _ := json.Marshal(*content)
			ev(`{"content":`+string(q)+`}`, "")
			ev(`{}`, "stop")
		} else {
			ev(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"`+call+`","type":"function","function":{"name":"`+name+`","arguments":"{\"q\":\"x\"}"}}]}`, "")
			ev(`{}`, "tool_calls")
		}
		if gjson.GetBytes(b, "stream_options.include_usage").Bool() {
			_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`+"\n\n")
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// zzConfig is one config version. strict: output denies the secret,
// danger is denied at pre_tool_call, /v1/models passes, the seam is on.
// lax: output allowed, no passthrough, seam off, another agent, and a
// request limit (which a reload must not apply) of 1 KiB.
func zzConfig(up, version string, strict bool) string {
	if strict {
		return fmt.Sprintf(`upstream: {base_url: %q}
agent: {id: agent-%[2]s}
passthrough: [/v1/models]
tool_seam: {transparent: true}
hooks:
  declaration: agent-hooks-declaration/1.0
  bindings:
    - {id: %[2]s-out, kind: hooksproxy.content, at: [output], config: {deny: ['%[3]s'], reason: secret_in_output}}
    - {id: %[2]s-tools, kind: hooksproxy.tools, at: [pre_tool_call], config: {deny: [danger]}}
    - {id: %[2]s-allow, kind: hooksproxy.allow_all}
`, up, version, zzSecret)
	}
	return fmt.Sprintf(`upstream: {base_url: %q}
agent: {id: agent-%[2]s}
passthrough: []
limits: {max_request_bytes: 1KiB}
tool_seam: {transparent: false}
hooks:
  declaration: agent-hooks-declaration/1.0
  bindings:
    - {id: %[2]s-allow, kind: hooksproxy.allow_all}
`, up, version)
}

func zzBody(cmd string, stream bool, pad int) []byte {
	b, _ := json.Marshal(map[string]any{"model": "m", "stream": stream,
		"messages": []map[string]any{{"role": "user", "content": cmd + " " + strings.Repeat("p", pad)}}})
	return b
}

// zzFollowUp answers the tool calls of a 200 answer (json or streamed).
func zzFollowUp(t *testing.T, prompt []byte, stream bool, r chatResult) ([]byte, bool) {
	var calls []any
	var ids []string
	if strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(r.body), "\n") {
			d, ok := strings.CutPrefix(line, "data: ")
			if !ok || d == "[DONE]" {
				continue
			}
			for _, c := range gjson.Get(d, "choices.0.delta.tool_calls").Array() {
				if id := c.Get("id").Str; id != "" {
					calls = append(calls, map[string]any{"id": id, "type": "function", "function": map[string]any{"name": c.Get("function.name").Str, "arguments": c.Get("function.arguments").Str}})
					ids = append(ids, id)
				}
			}
		}
	} else {
		for _, c := range gjson.GetBytes(r.body, "choices.0.message.tool_calls").Array() {
			calls = append(calls, map[string]any{"id": c.Get("id").Str, "type": "function", "function": map[string]any{"name": c.Get("function.name").Str, "arguments": c.Get("function.arguments").Str}})
			ids = append(ids, c.Get("id").Str)
		}
	}
	if len(ids) == 0 {
		return nil, false
	}
	first := gjson.GetBytes(prompt, "messages.0").Raw
	msgs := []json.RawMessage{json.RawMessage(first)}
	a, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
	msgs = append(msgs, a)
	for _, id := range ids {
		m, _ := json.Marshal(map[string]any{"role": "tool", "tool_call_id": id, "content": "result"})
		msgs = append(msgs, m)
	}
	b, _ := json.Marshal(map[string]any{"model": "m", "stream": stream, "messages": msgs})
	return b, true
}

// TestStressReloadUnderMixedTraffic reloads, every few milliseconds,
// between a strict config, a lax one (other bindings, passthrough,
// tool_seam, agent, and a smaller request limit) and an invalid file,
// while named and header-less clients send json and streamed requests,
// tool calls and their follow-ups, and passthrough GETs. No answer may be
// a 500 or a transport error; a deny carries no byte of the denied text;
// the request limit in force stays the startup one; every header-less
// run's records form one lifecycle with no gap; nothing leaks.
func TestStressReloadUnderMixedTraffic(t *testing.T) {
	up := zzUpstream(t)
	path := filepath.Join(t.TempDir(), "hooksproxy.yaml")
	writeAtomic(t, path, zzConfig(up.URL, "v0", true))
	var reloadsOK, reloadsBad atomic.Int64
	a, srv, sink := reloadApp(t, path, func(ok bool, _ error) {
		if ok {
			reloadsOK.Add(1)
		} else {
			reloadsBad.Add(1)
		}
	})
	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	do := func(method, path string, body []byte, hdr ...string) (chatResult, error) {
		req, _ := http.NewRequestWithContext(context.Background(), method, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			return chatResult{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return chatResult{status: resp.StatusCode, header: resp.Header, body: b, session: resp.Header.Get("X-Agent-Hooks-Session")}, err
	}

	stop := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
			}
			switch i % 3 {
			case 0:
				writeAtomic(t, path, zzConfig(up.URL, fmt.Sprintf("v%d", i), true))
			case 1:
				writeAtomic(t, path, zzConfig(up.URL, fmt.Sprintf("v%d", i), false))
			case 2:
				writeAtomic(t, path, "hooks: [not a config\n")
			}
			_ = a.Reload()
		}
	}()

	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[string]map[int]int{}
	note := func(what string, st int) {
		mu.Lock()
		if statuses[what] == nil {
			statuses[what] = map[int]int{}
		}
		statuses[what][st]++
		mu.Unlock()
	}
	// Host API callers: pre then post, and an end, under the reloads.
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("host-%d", w)
			for i := range 40 {
				cid := fmt.Sprintf("hc-%d-%d", w, i)
				name := []string{"lookup", "danger"}[i%2]
				r, err := do(http.MethodPost, "/agent-hooks/v1/sessions/"+sid+"/tool-calls/"+cid+"/pre", []byte(`{"name":"`+name+`","args":{"q":"1"}}`))
				note("host pre "+name, r.status)
				if err != nil || (r.status != 200 && r.status != 409) {
					t.Errorf("host pre %s: %d %s %v", name, r.status, r.body, err)
					continue
				}
				if r.status == 200 && gjson.GetBytes(r.body, "proceed").Bool() {
					r, err = do(http.MethodPost, "/agent-hooks/v1/sessions/"+sid+"/tool-calls/"+cid+"/post", []byte(`{"name":"`+name+`","result":"ok"}`))
					note("host post", r.status)
					if err != nil || (r.status != 200 && r.status != 409) {
						t.Errorf("host post: %d %s %v", r.status, r.body, err)
					}
				}
				if i%10 == 9 {
					r, err = do(http.MethodPost, "/agent-hooks/v1/sessions/"+sid+"/end", []byte(`{}`))
					note("host end", r.status)
					if err != nil || (r.status != 200 && r.status != 202 && r.status != 404) {
						t.Errorf("host end: %d %s %v", r.status, r.body, err)
					}
				}
			}
		}()
	}
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 60 {
				cmd := []string{"plain", "secret", "tool", "danger", "models", "big"}[(w+i)%6]
				stream := (w+i/6)%2 == 0
				var hdr []string
				if w%2 == 0 {
					hdr = []string{"X-Agent-Hooks-Session", fmt.Sprintf("reload-%d", w)}
				}
				what := fmt.Sprintf("%s stream=%v named=%v", cmd, stream, hdr != nil)
				if cmd == "models" {
					r, err := do(http.MethodGet, "/v1/models", nil)
					if err != nil || (r.status != 200 && r.status != 404) {
						t.Errorf("%s: %d %s %v", what, r.status, r.body, err)
					}
					note(what, r.status)
					continue
				}
				pad := 0
				if cmd == "big" {
					pad = 4 << 10 // over the lax config's 1 KiB, within the startup limit
				}
				body := zzBody(cmd, stream, pad)
				r, err := do(http.MethodPost, "/v1/chat/completions", body, hdr...)
				if err != nil {
					t.Errorf("%s: %v", what, err)
					continue
				}
				note(what, r.status)
				if r.status == 500 || r.status == 413 || r.status == 0 {
					t.Errorf("%s: %d %s", what, r.status, r.body)
				}
				if r.status >= 400 {
					if e := gjson.GetBytes(r.body, "error"); !e.IsObject() || !e.Get("type").Exists() || !e.Get("code").Exists() || !e.Get("param").Exists() {
						t.Errorf("%s: %d not OpenAI-shaped: %s", what, r.status, r.body)
					}
					if bytes.Contains(r.body, []byte(zzSecret)) {
						t.Errorf("%s: a deny carried the denied text: %s", what, r.body)
					}
				}
				if r.status == 403 && (cmd != "secret" || r.code() != "secret_in_output") {
					t.Errorf("%s: unexpected deny %s", what, r.body)
				}
				if r.status == 200 && (cmd == "tool" || cmd == "danger") {
					fu, ok := zzFollowUp(t, body, stream, r)
					if !ok {
						continue // danger withheld and the model asked again
					}
					r2, err := do(http.MethodPost, "/v1/chat/completions", fu, hdr...)
					if err != nil || r2.status != 200 {
						t.Errorf("%s follow-up: %d %s %v", what, r2.status, r2.body, err)
					}
					if hdr == nil && r2.session != r.session {
						t.Errorf("%s: follow-up in %s, run is %s", what, r2.session, r.session)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	for k, v := range statuses {
		t.Logf("%s: %v", k, v)
	}
	t.Logf("reloads ok=%d refused=%d", reloadsOK.Load(), reloadsBad.Load())
	if reloadsOK.Load() < 4 || reloadsBad.Load() < 2 {
		t.Errorf("too few reloads straddled the traffic")
	}
	// Header-less runs: one lifecycle, gapless, startup first, shutdown last.
	// (A run left waiting for a follow-up that a seam change made it
	// miss would stay open: it is listed, not failed.)
	bySession := map[string][]*points.Record{}
	for _, r := range sink.Records() {
		bySession[r.SessionID] = append(bySession[r.SessionID], r)
	}
	open := 0
	for sid, recs := range bySession {
		slices.SortFunc(recs, func(a, b *points.Record) int { return int(a.Sequence - b.Sequence) })
		for i, r := range recs {
			if r.Sequence != int64(i) {
				t.Errorf("session %s: sequence gap or repeat at %d: %d", sid, i, r.Sequence)
				break
			}
		}
		if recs[0].InterceptionPoint != points.AgentStartup {
			t.Errorf("session %s: first record %s", sid, recs[0].InterceptionPoint)
		}
		if strings.HasPrefix(sid, "host-") {
			continue // several lifecycles; checked below
		}
		if strings.HasPrefix(sid, "run_") && recs[len(recs)-1].InterceptionPoint != points.AgentShutdown {
			open++
		}
	}
	t.Logf("%d sessions recorded; %d header-less runs still open", len(bySession), open)
	for _, sid := range []string{"host-0", "host-1"} {
		// In write order: startup .. shutdown brackets, no point outside.
		inside := false
		for _, r := range bySession[sid] {
			switch r.InterceptionPoint {
			case points.AgentStartup:
				inside = true
			case points.AgentShutdown:
				inside = false
			default:
				if !inside {
					t.Errorf("session %s: %s (seq %d) outside a lifecycle", sid, r.InterceptionPoint, r.Sequence)
				}
			}
		}
	}
	// Every open session ends on Close, after which nothing is in flight.
	a.Server.Close()
	for sid, recs := range groupBySession(sink.Records()) {
		if recs[len(recs)-1].InterceptionPoint != points.AgentShutdown {
			t.Errorf("session %s: not ended by Close: last %s", sid, recs[len(recs)-1].InterceptionPoint)
		}
	}
}

func groupBySession(all []*points.Record) map[string][]*points.Record {
	out := map[string][]*points.Record{}
	for _, r := range all {
		out[r.SessionID] = append(out[r.SessionID], r)
	}
	for _, recs := range out {
		slices.SortFunc(recs, func(a, b *points.Record) int { return int(a.Sequence - b.Sequence) })
	}
	return out
}

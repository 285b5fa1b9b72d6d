package proxy

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// maxSignatureBytes bounds one tool call's extra_content kept, and
// maxSignaturesBytes all of them.
const (
	maxSignatureBytes  = 64 << 10
	maxSignaturesBytes = 32 << 20
)

// signatures keeps the extra_content an upstream gave its tool calls
// (Gemini's OpenAI layer puts each call's thought signature there, and
// refuses a later request whose history carries the call without it) and
// hands it back with the next requests whose history carries the call.
// The client never gets it: no point judges it, so the release strips it
// like any other unjudged member; it only ever goes back to the upstream
// it came from. Keyed by call id and name, across sessions (a header-less
// agent's follow-up is another session's request until it is linked) and
// reloads; the most recent max calls are kept.
type signatures struct {
	mu   sync.Mutex
	m    *recent[[]byte]
	kept int
	n    atomic.Int64
}

func newSignatures(max int) *signatures {
	g := &signatures{m: newRecent[[]byte](max)}
	g.m.evicted = func(v []byte) {
		g.kept -= len(v)
		g.n.Add(-1)
	}
	return g
}

func signatureKey(id, name string) string { return id + "\x00" + name }

// capture keeps the extra_content of each tool call of choice 0 of a
// completion that has one.
func (g *signatures) capture(completion []byte) {
	gjson.Get(view(completion), "choices.0.message.tool_calls").ForEach(func(_, c gjson.Result) bool {
		x := c.Get("extra_content")
		id := c.Get("id").Str
		if !x.IsObject() || id == "" || len(x.Raw) > maxSignatureBytes {
			return true
		}
		k := signatureKey(id, c.Get("function.name").Str)
		v := []byte(x.Raw) // a copy: x is a view of the completion
		g.mu.Lock()
		defer g.mu.Unlock()
		if old, ok := g.m.get(k); ok {
			g.kept -= len(old)
			g.m.del(k)
			g.n.Add(-1)
		}
		if g.kept+len(v) > maxSignaturesBytes {
			return false
		}
		g.kept += len(v)
		g.m.put(k, v)
		g.n.Add(1)
		return true
	})
}

// attach gives each assistant tool call in body's messages that carries
// no extra_content the one kept for it; body is returned as it is when
// there is none to give.
func (g *signatures) attach(body []byte) []byte {
	if g.n.Load() == 0 {
		return body
	}
	type put struct {
		path string
		v    []byte
	}
	var puts []put
	g.mu.Lock()
	for i, m := range gjson.Get(view(body), "messages").Array() {
		calls := m.Get("tool_calls")
		if m.Get("role").Str != "assistant" || !calls.IsArray() {
			continue
		}
		for j, c := range calls.Array() {
			if c.Get("extra_content").Exists() {
				continue
			}
			if v, ok := g.m.get(signatureKey(c.Get("id").Str, c.Get("function.name").Str)); ok {
				puts = append(puts, put{"messages." + strconv.Itoa(i) + ".tool_calls." + strconv.Itoa(j) + ".extra_content", v})
			}
		}
	}
	g.mu.Unlock()
	for _, p := range puts {
		if b, err := sjson.SetRawBytes(body, p.path, p.v); err == nil {
			body = b
		}
	}
	return body
}

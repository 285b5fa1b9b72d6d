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
// it came from. Keyed by session, call id and name, so that a signature
// goes back only in the session whose answer carried it (a model that
// numbers its calls per answer gives call_0 to many); a header-less run's
// follow-ups are that run. Kept across reloads; the most recent max calls
// are kept.
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

func signatureKey(sid, id, name string) string { return sid + "\x00" + id + "\x00" + name }

// sigEntry is one tool call's extra_content as the upstream's answer
// carried it, to be kept under the id the call is released with.
type sigEntry struct {
	id, name string
	extra    []byte
}

// pendingSignatures copies out the extra_content of each tool call of
// choice 0 of a completion that has one: kept (put) once the calls' ids
// are final, as the seam may release a call under a fresh id.
func pendingSignatures(completion []byte) []sigEntry {
	var out []sigEntry
	gjson.Get(view(completion), "choices.0.message.tool_calls").ForEach(func(_, c gjson.Result) bool {
		x := c.Get("extra_content")
		if id := c.Get("id").Str; x.IsObject() && id != "" && len(x.Raw) <= maxSignatureBytes {
			out = append(out, sigEntry{id: id, name: c.Get("function.name").Str, extra: []byte(x.Raw)})
		}
		return true
	})
	return out
}

// find returns the entry for the call id of es, or nil.
func findSig(es []sigEntry, id string) *sigEntry {
	for i := range es {
		if es[i].id == id {
			return &es[i]
		}
	}
	return nil
}

// put keeps, for session sid, extra for the call id (name).
func (g *signatures) put(sid, id, name string, extra []byte) {
	k := signatureKey(sid, id, name)
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, ok := g.m.get(k); ok {
		g.kept -= len(old)
		g.m.del(k)
		g.n.Add(-1)
	}
	if g.kept+len(extra) > maxSignaturesBytes {
		return
	}
	g.kept += len(extra)
	g.m.put(k, extra)
	g.n.Add(1)
}

// attach gives each assistant tool call in body's messages that carries
// no extra_content the one session sid kept for it; body is returned as it
// is when there is none to give.
func (g *signatures) attach(sid string, body []byte) []byte {
	if g.n.Load() == 0 {
		return body
	}
	type put struct {
		path, key string
		v         []byte
	}
	var puts []put
	for i, m := range gjson.Get(view(body), "messages").Array() {
		calls := m.Get("tool_calls")
		if m.Get("role").Str != "assistant" || !calls.IsArray() {
			continue
		}
		for j, c := range calls.Array() {
			if !c.Get("extra_content").Exists() {
				puts = append(puts, put{path: "messages." + strconv.Itoa(i) + ".tool_calls." + strconv.Itoa(j) + ".extra_content",
					key: signatureKey(sid, c.Get("id").Str, c.Get("function.name").Str)})
			}
		}
	}
	if len(puts) == 0 {
		return body
	}
	g.mu.Lock()
	for i := range puts {
		puts[i].v, _ = g.m.get(puts[i].key)
	}
	g.mu.Unlock()
	for _, p := range puts {
		if p.v == nil {
			continue
		}
		if b, err := sjson.SetRawBytes(body, p.path, p.v); err == nil {
			body = b
		}
	}
	return body
}

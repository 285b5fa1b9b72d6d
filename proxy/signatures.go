package proxy

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hooksproxy/hooksproxy/points"
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
			// Copies: the completion may sit in a buffer lent to the request.
			out = append(out, sigEntry{id: strings.Clone(id), name: strings.Clone(c.Get("function.name").Str), extra: []byte(x.Raw)})
		}
		return true
	})
	return out
}

// findSig returns the entry of es for call id, or nil.
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
	// Past the byte bound the oldest go, not the newest: a loop that is
	// running needs its own calls' signatures.
	for g.kept+len(extra) > maxSignaturesBytes && g.m.dropOldest() {
	}
	g.kept += len(extra)
	g.m.put(k, extra)
	g.n.Add(1)
}

// attach gives each assistant tool call in body's messages that carries
// no extra_content the one session sid kept for it; body is returned as it
// is when there is none to give. The history is read outside the lock,
// only the look-ups under it, and rewritten in one rebuild.
func (g *signatures) attach(sid string, body []byte) []byte {
	if g.n.Load() == 0 {
		return body
	}
	type call struct {
		msg, idx int
		key      string
		v        []byte
	}
	var calls []call
	i := 0
	points.ForEachElement(points.MemberValue(body, "messages"), func(m []byte) bool {
		var role string
		var tcs []byte
		points.ForEachMember(m, func(name string, v []byte) bool {
			switch name {
			case "role":
				role = gjson.Parse(view(v)).Str
			case "tool_calls":
				tcs = v
			}
			return true
		})
		if role == "assistant" {
			j := 0
			points.ForEachElement(tcs, func(c []byte) bool {
				if r := gjson.Parse(view(c)); !r.Get("extra_content").Exists() {
					calls = append(calls, call{msg: i, idx: j, key: signatureKey(sid, r.Get("id").Str, r.Get("function.name").Str)})
				}
				j++
				return true
			})
		}
		i++
		return true
	})
	if len(calls) == 0 {
		return body
	}
	byMsg := map[int][]call{}
	g.mu.Lock()
	for _, c := range calls {
		if v, ok := g.m.get(c.key); ok {
			c.v = v
			byMsg[c.msg] = append(byMsg[c.msg], c)
		}
	}
	g.mu.Unlock()
	if len(byMsg) == 0 {
		return body
	}
	out, err := editMessages(body, func(i int, m []byte) ([]byte, error) {
		cs, ok := byMsg[i]
		if !ok {
			return nil, nil
		}
		for _, c := range cs {
			if b, err := sjson.SetRawBytes(m, "tool_calls."+strconv.Itoa(c.idx)+".extra_content", c.v); err == nil {
				m = b
			}
		}
		return m, nil
	})
	if err != nil {
		return body
	}
	return out
}

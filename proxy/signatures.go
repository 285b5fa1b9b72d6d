package proxy

import (
	"crypto/sha256"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// maxSignatureBytes bounds one tool call's extra_content kept,
// maxReasoningBytes one answer's reasoning members, and
// maxSignaturesBytes all of them.
const (
	maxSignatureBytes  = 64 << 10
	maxReasoningBytes  = 1 << 20
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
//
// The reasoning members of an answer that made tool calls are kept the
// same way, under each of its calls: DeepSeek's thinking mode refuses (400)
// a request whose history carries such an answer without its
// reasoning_content, and OpenRouter asks for reasoning_details back with
// tool calls (Anthropic's and Gemini's thinking continue from it); no
// point judges reasoning, so the client never gets it either.
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

func signatureKey(sid, id, name string) string { return "x\x00" + sid + "\x00" + id + "\x00" + name }

func reasoningKey(sid, id, name string) string { return "r\x00" + sid + "\x00" + id + "\x00" + name }

// sigScope is where a request's kept members are looked for: its session,
// and for a header-less run also shared, a digest of its credentials and
// agent id. A header-less agent's next turn is another run, whose history
// carries the earlier runs' calls: it finds their members under shared
// with the call's id, name and arguments, so that only a request with the
// same credentials that carries the very same call gets them.
type sigScope struct{ sid, shared string }

// sharedKey is the key under scope shared of a call's kept member (kind
// "x" or "r").
func sharedKey(kind, shared, id, name, args string) string {
	// The same JSON whatever its spacing and member order: an agent
	// framework may parse and re-serialize the arguments it replays.
	b := []byte(args)
	if c, err := points.CanonicalJSON(b); err == nil {
		b = c
	}
	h := sha256.Sum256(b)
	return kind + "\x01" + shared + "\x00" + id + "\x00" + name + "\x00" + string(h[:16])
}

// headerlessScope is the shared scope of a header-less run of agent with
// request headers h.
func headerlessScope(h http.Header, agent string) string {
	d := sha256.New()
	for _, k := range []string{"Authorization", "Api-Key", "X-Api-Key"} {
		for _, v := range h.Values(k) {
			d.Write([]byte(k + "\x00" + v + "\x00"))
		}
	}
	d.Write([]byte("agent\x00" + agent))
	return string(d.Sum(nil))
}

// reasoningMembers are the message members that carry a model's reasoning,
// kept beside tool calls and handed back.
var reasoningMembers = [...]string{"reasoning_content", "reasoning", "reasoning_details"}

// isReasoningMember reports whether name is one of reasoningMembers.
func isReasoningMember(name string) bool { return slices.Contains(reasoningMembers[:], name) }

// sigEntry is one tool call's extra_content and its answer's reasoning
// members (raw JSON, an object of them; either may be nil) as the
// upstream's answer carried them, to be kept under the id the call is
// released with.
type sigEntry struct {
	id, name, args   string
	extra, reasoning []byte
	// anchor names the answer whose reasoning this is: the reasoning is
	// kept once under it, and each call keeps only the anchor's key, so
	// that an answer with many calls is charged its reasoning once.
	anchor string
}

// pendingSignatures copies out, for each tool call of choice 0 of a
// completion, its extra_content (when extras is set) and the message's
// reasoning members: kept (keep) once the calls' ids are final, as the
// seam may release a call under a fresh id.
func pendingSignatures(completion []byte, extras bool) []sigEntry {
	var out []sigEntry
	msg := gjson.Get(view(completion), "choices.0.message")
	// Copies: the completion may sit in a buffer lent to the request.
	var reasoning []byte
	for _, name := range reasoningMembers {
		r := msg.Get(name)
		if r.Type == gjson.Null || !r.Exists() || r.Raw == `""` || r.Raw == "[]" {
			continue
		}
		if reasoning == nil {
			reasoning = append(reasoning, '{')
		} else {
			reasoning = append(reasoning, ',')
		}
		reasoning = appendString(reasoning, name)
		reasoning = append(reasoning, ':')
		reasoning = append(reasoning, r.Raw...)
	}
	if reasoning != nil {
		reasoning = append(reasoning, '}')
		if len(reasoning) > maxReasoningBytes {
			reasoning = nil
		}
	}
	var anchor string
	if reasoning != nil {
		anchor = newID("")
	}
	msg.Get("tool_calls").ForEach(func(_, c gjson.Result) bool {
		id := c.Get("id").Str
		if id == "" {
			return true
		}
		e := sigEntry{reasoning: reasoning, anchor: anchor}
		if x := c.Get("extra_content"); extras && x.IsObject() && len(x.Raw) <= maxSignatureBytes {
			e.extra = []byte(x.Raw)
		}
		if e.extra != nil || e.reasoning != nil {
			e.id, e.name = strings.Clone(id), strings.Clone(c.Get("function.name").Str)
			e.args = strings.Clone(c.Get("function.arguments").Str)
			out = append(out, e)
		}
		return true
	})
	return out
}

// keep keeps, in scope sc, what e carries for the call id (name), the id
// and arguments it is released with.
func (g *signatures) keep(sc sigScope, id, name, args string, e *sigEntry) {
	if e.extra != nil {
		g.put(sc.sid, id, name, e.extra)
		if sc.shared != "" {
			g.putKey(sharedKey("x", sc.shared, id, name, args), e.extra)
		}
	}
	if e.reasoning != nil {
		// The answer's reasoning under its anchor (put again by each of
		// its calls, which keeps it recent and charged once), and the
		// anchor's key under each call.
		a := "R\x00" + sc.sid + "\x00" + e.anchor
		g.putKey(a, e.reasoning)
		g.putKey(reasoningKey(sc.sid, id, name), []byte(a))
		if sc.shared != "" {
			a := "R\x01" + sc.shared + "\x00" + e.anchor
			g.putKey(a, e.reasoning)
			g.putKey(sharedKey("r", sc.shared, id, name, args), []byte(a))
		}
	}
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
	g.putKey(signatureKey(sid, id, name), extra)
}

func (g *signatures) putKey(k string, extra []byte) {
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
// no extra_content the one session sid kept for it, and each assistant
// message with tool calls and no reasoning member the ones kept for its
// calls; body is returned as it is when there is none to give. The
// history is read outside the lock, only the look-ups under it, and
// rewritten in one rebuild.
func (g *signatures) attach(sc sigScope, body []byte) []byte {
	sid := sc.sid
	if g.n.Load() == 0 {
		return body
	}
	type call struct {
		msg, idx int // idx -1: the message's reasoning members
		keys     []string
		v        []byte
	}
	var calls []call
	i := 0
	points.ForEachElement(points.MemberValue(body, "messages"), func(m []byte) bool {
		var role string
		var tcs []byte
		hasReasoning := false
		points.ForEachMember(m, func(name string, v []byte) bool {
			switch name {
			case "role":
				role = gjson.Parse(view(v)).Str
			case "tool_calls":
				tcs = v
			default:
				hasReasoning = hasReasoning || isReasoningMember(name) && string(v) != "null"
			}
			return true
		})
		if role == "assistant" {
			j := 0
			var rkeys []string
			points.ForEachElement(tcs, func(c []byte) bool {
				r := gjson.Parse(view(c))
				id, name := r.Get("id").Str, r.Get("function.name").Str
				args := r.Get("function.arguments").Str
				if !r.Get("extra_content").Exists() {
					keys := []string{signatureKey(sid, id, name)}
					if sc.shared != "" {
						keys = append(keys, sharedKey("x", sc.shared, id, name, args))
					}
					calls = append(calls, call{msg: i, idx: j, keys: keys})
				}
				if !hasReasoning {
					rkeys = append(rkeys, reasoningKey(sid, id, name))
					if sc.shared != "" {
						rkeys = append(rkeys, sharedKey("r", sc.shared, id, name, args))
					}
				}
				j++
				return true
			})
			if len(rkeys) > 0 {
				calls = append(calls, call{msg: i, idx: -1, keys: rkeys})
			}
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
		for _, k := range c.keys {
			v, ok := g.m.get(k)
			if ok && c.idx < 0 {
				v, ok = g.m.get(string(v)) // the answer's anchor
			}
			if ok {
				c.v = v
				byMsg[c.msg] = append(byMsg[c.msg], c)
				break
			}
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
			if c.idx < 0 {
				gjson.Parse(view(c.v)).ForEach(func(k, v gjson.Result) bool {
					if b, err := sjson.SetRawBytes(m, k.Str, []byte(v.Raw)); err == nil {
						m = b
					}
					return true
				})
				continue
			}
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

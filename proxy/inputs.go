package proxy

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// judgedInputs remembers the input messages a transform changed and what
// the model was to see instead. input judges only the messages that open
// a turn, and an agent replays its history as it wrote it: without this, a
// message input masked would reach the model in the clear on the
// session's next request (and on every call of a header-less agent after
// the first). A verdict is replayed only into its own session's histories
// (a header-less run's tool-loop follow-ups are that run): a transform may
// depend on more than the text (a per-session placeholder, a tenant tag),
// so another session's history carrying the same message, and a message
// whose verdict was too large to keep, is judged again instead. Kept
// across reloads: a model that saw the masked text must not see the
// original because the policy changed. Each memory holds its most recent
// max entries (oldest first out).
type judgedInputs struct {
	mu   sync.Mutex
	sums *recent[inputVerdict] // by session and message
	// changed holds the messages some session's verdict changed, by role
	// and text (textKey): another session replaying one, or this one
	// resending it in another shape, judges it again.
	changed *recent[struct{}]
	kept    int          // bytes of verdicted content held, within maxKeptBytes
	n       atomic.Int64 // entries of changed: a request with none to match hashes nothing
}

// inputVerdict is what the model sees for one remembered input message.
type inputVerdict struct {
	content []byte // the verdicted content (raw JSON); nil when too large to keep
	role    string // the chat role to write, "" when the verdict kept it
}

func newJudgedInputs(max int) *judgedInputs {
	j := &judgedInputs{sums: newRecent[inputVerdict](max), changed: newRecent[struct{}](max)}
	j.sums.evicted = func(v inputVerdict) { j.kept -= len(v.content) }
	j.changed.evicted = func(struct{}) { j.n.Add(-1) }
	return j
}

// inputKey identifies a message by its role and content, whatever the
// JSON spelling of the content (a client may re-escape it, or re-order a
// part's members).
func inputKey(role string, content gjson.Result) string {
	h := sha256.New()
	h.Write(bytesOf(role))
	if content.Type == gjson.String {
		h.Write([]byte{0, 's'})
		h.Write(bytesOf(content.Str))
	} else if c, err := points.CanonicalJSON(bytesOf(content.Raw)); err == nil {
		h.Write([]byte{0, 'c'})
		h.Write(c)
	} else {
		h.Write([]byte{0, 'r'})
		h.Write(compact(bytesOf(content.Raw)))
	}
	var sum [sha256.Size]byte
	return string(h.Sum(sum[:0]))
}

// inputKeys returns a message's inputKey and textKey, hashing once when
// they are the same (any content but an array).
func inputKeys(role string, content gjson.Result) (k, tk string) {
	k = inputKey(role, content)
	if !content.IsArray() {
		return k, k
	}
	return k, textKey(role, content)
}

// textKey identifies a message by its role and text, whatever its shape:
// the text of a string content, or of an array of text parts only (what
// an agent may resend a string message as). Messages it cannot read as
// text have their inputKey. It indexes which messages some verdict
// changed, so that one resent in another shape is judged again.
func textKey(role string, content gjson.Result) string {
	if !content.IsArray() {
		return inputKey(role, content)
	}
	var text []byte
	textOnly := true
	content.ForEach(func(_, p gjson.Result) bool {
		t := p.Get("text")
		textOnly = p.Get("type").Str == "text" && t.Type == gjson.String
		text = append(text, t.Str...)
		return textOnly
	})
	if !textOnly {
		return inputKey(role, content)
	}
	return inputKey(role, gjson.Result{Type: gjson.String, Str: view(text)})
}

// remember records that, in session sid, the message of role with content
// was changed by an input verdict to content v and chat role newRole (""
// unchanged).
func (j *judgedInputs) remember(sid, role string, content gjson.Result, v []byte, newRole string) {
	k, tk := inputKeys(role, content)
	sk := sid + "\x00" + k
	iv := inputVerdict{role: newRole}
	j.mu.Lock()
	defer j.mu.Unlock()
	if old, ok := j.sums.get(sk); ok {
		j.kept -= len(old.content)
		j.sums.del(sk)
	}
	if len(v) <= maxKeptVerdict {
		// Past the byte bound the oldest verdicts go (judged again if
		// they come back), not this one.
		for j.kept+len(v) > maxKeptBytes && j.sums.dropOldest() {
		}
		iv.content = append([]byte(nil), v...)
		j.kept += len(v)
	}
	j.sums.put(sk, iv)
	if _, ok := j.changed.get(tk); ok {
		j.changed.del(tk)
		j.n.Add(-1)
	}
	j.changed.put(tk, struct{}{})
	j.n.Add(1)
}

// lookup returns, for a message replayed in session sid, the verdict that
// session remembers (ok), and whether any session's verdict changed such
// a message (changed): changed without a verdict to replay means judge it
// again.
func (j *judgedInputs) lookup(sid, role string, content gjson.Result) (iv inputVerdict, ok, changed bool) {
	if j.n.Load() == 0 {
		return inputVerdict{}, false, false
	}
	k, tk := inputKeys(role, content)
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, changed = j.changed.get(tk); !changed {
		return inputVerdict{}, false, false
	}
	iv, ok = j.sums.get(sid + "\x00" + k)
	return iv, ok && iv.content != nil, true
}

// empty reports whether nothing is remembered.
func (j *judgedInputs) empty() bool { return j.n.Load() == 0 }

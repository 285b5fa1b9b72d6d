package proxy

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"
)

// judgedInputs remembers, across sessions and reloads, the input messages
// a transform changed and what the model was to see instead. input judges
// only the messages that open a turn, and an agent replays its history as
// it wrote it: without this, a message input masked would reach the model
// in the clear on the session's next request (and on every call of a
// header-less agent after the first). A replayed message that matches one
// is given its verdicted content; one whose verdict was too large to keep
// is judged again. Kept across reloads: a model that saw the masked text
// must not see the original because the policy changed. It holds the
// most recent max entries (oldest first out).
type judgedInputs struct {
	mu   sync.Mutex
	sums *recent[inputVerdict]
	kept int          // bytes of verdicted content held, within maxKeptBytes
	n    atomic.Int64 // entries held: a request with none to match hashes nothing
}

// inputVerdict is what the model sees for one remembered input message.
type inputVerdict struct {
	content []byte // the verdicted content (raw JSON); nil when too large to keep
	role    string // the chat role to write, "" when the verdict kept it
}

func newJudgedInputs(max int) *judgedInputs {
	j := &judgedInputs{sums: newRecent[inputVerdict](max)}
	j.sums.evicted = func(v inputVerdict) {
		j.kept -= len(v.content)
		j.n.Add(-1)
	}
	return j
}

// inputKey identifies a message by its role and content, whatever the
// JSON spelling of a string content (a client may re-escape it).
func inputKey(role string, content gjson.Result) string {
	h := sha256.New()
	h.Write([]byte(role))
	if content.Type == gjson.String {
		h.Write([]byte{0, 's'})
		h.Write([]byte(content.Str))
	} else {
		h.Write([]byte{0, 'r'})
		h.Write(compact([]byte(content.Raw)))
	}
	var sum [sha256.Size]byte
	return string(h.Sum(sum[:0]))
}

// remember records that the message of role with content was changed by
// an input verdict to content v and chat role newRole ("" unchanged).
func (j *judgedInputs) remember(role string, content gjson.Result, v []byte, newRole string) {
	k := inputKey(role, content)
	iv := inputVerdict{role: newRole}
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(v) <= maxKeptVerdict && j.kept+len(v) <= maxKeptBytes {
		iv.content = append([]byte(nil), v...)
		j.kept += len(v)
	}
	if old, ok := j.sums.get(k); ok {
		j.kept -= len(old.content)
		j.sums.del(k)
		j.n.Add(-1)
	}
	j.sums.put(k, iv)
	j.n.Add(1)
}

// lookup returns the verdict remembered for a message, if any.
func (j *judgedInputs) lookup(role string, content gjson.Result) (inputVerdict, bool) {
	if j.n.Load() == 0 {
		return inputVerdict{}, false
	}
	k := inputKey(role, content)
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.sums.get(k)
}

// empty reports whether nothing is remembered.
func (j *judgedInputs) empty() bool { return j.n.Load() == 0 }

package proxy

import (
	"crypto/sha256"
	"strings"
	"sync"
)

// judgedResults remembers, across sessions, which tool results were
// judged and what the model was to see for each: a header-less agent
// starts a new session on every turn and replays every old tool result,
// which would otherwise pass post_tool_call again on every turn (and mark
// the old ids as seen, so that a model numbering its calls per response
// collides with them). For each call id it keeps the hash of the result as
// the agent sent it and of what the model was to see, and that content
// itself when a verdict changed it and it is small (maxKeptVerdict): a
// replay of the original is then given the verdicted content again
// without a second judgment. Any other content is judged now. It holds
// the most recent max entries (oldest first out).
type judgedResults struct {
	mu   sync.Mutex
	sums *recent[judgedEntry]
}

// judgedEntry is one call id's memory.
type judgedEntry struct {
	sent, seen [sha256.Size]byte
	hasSent    bool
	verdict    *string // what the model sees, when it differs from sent and is small
}

// maxKeptVerdict bounds a verdicted result kept in the memory; a longer
// one is judged again when its original is replayed in another session.
const maxKeptVerdict = 16 << 10

func newJudgedResults(max int) *judgedResults {
	return &judgedResults{sums: newRecent[judgedEntry](max)}
}

// remember records that, for call id, the agent sent sent (hasSent false
// when the call was blocked before any result) and the model sees seen.
func (j *judgedResults) remember(id, sent string, hasSent bool, seen string) {
	e := judgedEntry{seen: sha256.Sum256([]byte(seen)), hasSent: hasSent}
	if hasSent {
		e.sent = sha256.Sum256([]byte(sent))
	}
	if (!hasSent || e.sent != e.seen) && len(seen) <= maxKeptVerdict {
		v := strings.Clone(seen)
		e.verdict = &v
	}
	id = strings.Clone(id) // may be a view of a request
	j.mu.Lock()
	defer j.mu.Unlock()
	j.sums.put(id, e)
}

// lookup reports whether content for call id was judged: it is what the
// model was to see (replace nil), or the original of a judgment whose
// verdicted content is replace.
func (j *judgedResults) lookup(id, content string) (judged bool, replace *string) {
	sum := sha256.Sum256([]byte(content))
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.sums.get(id)
	switch {
	case !ok:
		return false, nil
	case e.seen == sum:
		return true, nil
	case e.hasSent && e.sent == sum && e.verdict != nil:
		return true, e.verdict
	}
	return false, nil
}

// known reports whether call id was judged in any session.
func (j *judgedResults) known(id string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, ok := j.sums.get(id)
	return ok
}

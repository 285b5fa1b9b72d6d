package proxy

import (
	"crypto/sha256"
	"strings"
	"sync"
	"weak"

	"github.com/hooksproxy/hooksproxy/points"
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
	kept int // bytes of verdict content held, within maxKeptBytes
}

// judgedEntry is one call id's memory.
type judgedEntry struct {
	// by is the emitter (one per loaded configuration) that judged: a
	// judgment made by a request still running under an older policy,
	// written after a reload's reset, counts for nothing under the new.
	// Weak, so the memory does not keep an old configuration alive.
	by         weak.Pointer[points.Emitter]
	call       [sha256.Size]byte // the call's name and arguments
	sent, seen [sha256.Size]byte
	hasSent    bool
	verdict    *string // what the model sees, when it differs from sent and is small
}

// maxKeptVerdict bounds one verdicted result kept in the memory, and
// maxKeptBytes all of them; a result beyond either is judged again when
// its original is replayed in another session.
const (
	maxKeptVerdict = 16 << 10
	maxKeptBytes   = 16 << 20
)

func newJudgedResults(max int) *judgedResults {
	j := &judgedResults{}
	j.start(max)
	return j
}

// start gives j an empty memory of max entries; call with j.mu held (or
// before j is shared).
func (j *judgedResults) start(max int) {
	j.sums, j.kept = newRecent[judgedEntry](max), 0
	j.sums.evicted = func(e judgedEntry) {
		if e.verdict != nil {
			j.kept -= len(*e.verdict)
		}
	}
}

// callSum binds a memory to the call it answers.
func callSum(name string, args []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(compact(args))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// remember records that, for call id (name, args), the agent sent sent
// (hasSent false when the call was blocked before any result) and the
// model sees seen.
func (j *judgedResults) remember(by *points.Emitter, id, name string, args []byte, sent string, hasSent bool, seen string) {
	e := judgedEntry{by: weak.Make(by), call: callSum(name, args), seen: sha256.Sum256([]byte(seen)), hasSent: hasSent}
	if hasSent {
		e.sent = sha256.Sum256([]byte(sent))
	}
	id = strings.Clone(id) // may be a view of a request
	j.mu.Lock()
	defer j.mu.Unlock()
	// A blocked call's control error is always kept (it is small): a
	// replay of that call must get it again, whatever result the agent
	// puts beside it.
	if !hasSent || (e.sent != e.seen && len(seen) <= maxKeptVerdict && j.kept+len(seen) <= maxKeptBytes) {
		v := strings.Clone(seen)
		e.verdict = &v
		j.kept += len(v)
	}
	if old, ok := j.sums.get(id); ok && old.verdict != nil {
		j.kept -= len(*old.verdict)
	}
	j.sums.put(id, e)
}

// lookup reports whether content for call id (name, args) was judged by
// emitter by: it is what the model was to see (replace nil), or the
// original of a judgment whose verdicted content is replace.
func (j *judgedResults) lookup(by *points.Emitter, id, name string, args []byte, content string) (judged bool, replace *string) {
	call := callSum(name, args)
	sum := sha256.Sum256([]byte(content))
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.sums.get(id)
	switch {
	case !ok || e.by != weak.Make(by) || e.call != call:
		return false, nil
	case e.seen == sum:
		return true, nil
	case e.hasSent && e.sent == sum && e.verdict != nil:
		return true, e.verdict
	case !e.hasSent && e.verdict != nil:
		// The call was blocked before any result (§6.2): no result
		// the agent sends for it reaches the model, only the control
		// error, in whichever later session it comes back.
		return true, e.verdict
	}
	return false, nil
}

// reset forgets every judgment: a new policy judges afresh.
func (j *judgedResults) reset() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.start(j.sums.max)
}

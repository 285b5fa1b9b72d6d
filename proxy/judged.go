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
// collides with them). A result whose call id and content match a memory
// was judged; any other is judged now. It holds hashes, not content, and
// the most recent max entries (oldest first out).
type judgedResults struct {
	mu    sync.Mutex
	byID  map[string]judgedEntry
	order []judgedRef
	gen   uint64
	max   int
}

type judgedEntry struct {
	sum [sha256.Size]byte
	gen uint64
}

type judgedRef struct {
	id  string
	gen uint64
}

func newJudgedResults(max int) *judgedResults {
	return &judgedResults{byID: map[string]judgedEntry{}, max: max}
}

// remember records that the model sees content for call id.
func (j *judgedResults) remember(id, content string) {
	id = strings.Clone(id) // may be a view of a request
	sum := sha256.Sum256([]byte(content))
	j.mu.Lock()
	defer j.mu.Unlock()
	j.gen++
	j.byID[id] = judgedEntry{sum: sum, gen: j.gen}
	j.order = append(j.order, judgedRef{id: id, gen: j.gen})
	for len(j.byID) > j.max || len(j.order) > 2*j.max {
		old := j.order[0]
		j.order[0] = judgedRef{}
		j.order = j.order[1:]
		if e, ok := j.byID[old.id]; ok && e.gen == old.gen {
			delete(j.byID, old.id)
		}
	}
}

// judged reports whether content for call id is what a judgment left the
// model to see.
func (j *judgedResults) judged(id, content string) bool {
	sum := sha256.Sum256([]byte(content))
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.byID[id]
	return ok && e.sum == sum
}

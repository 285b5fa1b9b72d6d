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
	mu   sync.Mutex
	sums *recent[[sha256.Size]byte]
}

func newJudgedResults(max int) *judgedResults {
	return &judgedResults{sums: newRecent[[sha256.Size]byte](max)}
}

// remember records that the model sees content for call id.
func (j *judgedResults) remember(id, content string) {
	id = strings.Clone(id) // may be a view of a request
	sum := sha256.Sum256([]byte(content))
	j.mu.Lock()
	defer j.mu.Unlock()
	j.sums.put(id, sum)
}

// judged reports whether content for call id is what a judgment left the
// model to see.
func (j *judgedResults) judged(id, content string) bool {
	sum := sha256.Sum256([]byte(content))
	j.mu.Lock()
	defer j.mu.Unlock()
	got, ok := j.sums.get(id)
	return ok && got == sum
}

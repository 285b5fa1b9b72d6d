package audit

import (
	"cmp"
	"encoding/json"
	"github.com/tidwall/gjson"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/hooksproxy/hooksproxy/points"
)

// DefaultRingSize is the ring's capacity when NewRing is given none.
const DefaultRingSize = 10000

// DefaultQueryLimit is how many records ServeHTTP returns without a limit.
const DefaultQueryLimit = 100

// Ring keeps the newest records in memory, as encoded lines, for the
// records endpoint. When full, a new record evicts the oldest: the ring is
// a window for people, not the audit trail (the file is), so evictions are
// counted (Evicted) but not reported as drops. Write takes a mutex for a
// copy-free slot assignment; it implements points.RecordSink.
type Ring struct {
	mu      sync.Mutex
	slots   []ringSlot
	next    int // the slot the next record goes to
	n       int // slots in use
	evicted uint64
}

type ringSlot struct {
	session string
	line    []byte // one JSON object, no newline
}

// NewRing returns a ring holding at most size records (size <= 0:
// [DefaultRingSize]).
func NewRing(size int) *Ring {
	if size <= 0 {
		size = DefaultRingSize
	}
	return &Ring{slots: make([]ringSlot, size)}
}

// Write adds r. A record that cannot be encoded is skipped: it could not be
// served either.
func (g *Ring) Write(r *points.Record) {
	line, err := encode(r)
	if err != nil {
		return
	}
	g.writeLine(r.SessionID, line)
}

// writeLine implements lineWriter; line may end with a newline and is
// never modified afterwards (the sinks share it).
func (g *Ring) writeLine(session string, line []byte) {
	if k := len(line); k > 0 && line[k-1] == '\n' {
		line = line[:k-1]
	}
	g.mu.Lock()
	if g.n == len(g.slots) {
		g.evicted++
	} else {
		g.n++
	}
	g.slots[g.next] = ringSlot{session: session, line: line}
	g.next = (g.next + 1) % len(g.slots)
	g.mu.Unlock()
}

// Records returns up to limit records of session, newest first; session ""
// matches every session and limit <= 0 means no limit. Each element is the
// record's JSON, the same bytes as its line in the file.
func (g *Ring) Records(session string, limit int) []json.RawMessage {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []json.RawMessage
	for i := 0; i < g.n; i++ {
		s := g.slots[(g.next-1-i+2*len(g.slots))%len(g.slots)]
		if session != "" && s.session != session {
			continue
		}
		out = append(out, json.RawMessage(s.line))
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out
}

// Len is the number of records held.
func (g *Ring) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// Evicted counts records pushed out by newer ones.
func (g *Ring) Evicted() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.evicted
}

// ServeHTTP answers GET ?session=ID&limit=N&order=asc|desc with
// {"records":[...]}. With a session it returns that session's records the
// ring holds (the newest limit of them when limit is set) in sequence
// order, the session's story from agent_startup on; without one, the
// newest [DefaultQueryLimit] (or limit) of every session, newest first.
// order overrides either default. Authentication is the caller's business:
// mount it behind the admin check.
func (g *Ring) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, []byte(`{"error":{"message":"method not allowed","type":"invalid_request_error","param":null,"code":"method_not_allowed"}}`))
		return
	}
	q := r.URL.Query()
	session := q.Get("session")
	limit, order := DefaultQueryLimit, "desc"
	if session != "" {
		limit, order = 0, "asc"
	}
	switch o := q.Get("order"); o {
	case "":
	case "asc", "desc":
		order = o
	default:
		writeJSON(w, http.StatusBadRequest, []byte(`{"error":{"message":"order must be asc or desc","type":"invalid_request_error","param":"order","code":"invalid_request"}}`))
		return
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			writeJSON(w, http.StatusBadRequest, []byte(`{"error":{"message":"limit must be a positive integer","type":"invalid_request_error","param":"limit","code":"invalid_request"}}`))
			return
		}
		limit = n
	}
	recs := g.Records(session, limit)
	if order == "asc" {
		slices.Reverse(recs)
		if session != "" {
			// Write order can differ from sequence order under concurrency.
			type bySeq struct {
				seq int64
				rec json.RawMessage
			}
			keyed := make([]bySeq, len(recs))
			for i, rec := range recs {
				keyed[i] = bySeq{gjson.GetBytes(rec, "sequence").Int(), rec}
			}
			slices.SortStableFunc(keyed, func(a, b bySeq) int { return cmp.Compare(a.seq, b.seq) })
			for i := range keyed {
				recs[i] = keyed[i].rec
			}
		}
	}
	b := make([]byte, 0, 64+len(recs)*512)
	b = append(b, `{"records":[`...)
	for i, rec := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, rec...)
	}
	b = append(b, "]}\n"...)
	writeJSON(w, http.StatusOK, b)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// session is one AGENT-HOOKS session as the proxy sees it.
type session struct {
	ps         *points.Session
	headerless bool
	// lruPrev and lruNext place the session in the table's recency list
	// (guarded by sessions.mu): the front was used last, so eviction
	// looks from the back instead of scanning every session.
	lruPrev, lruNext *session

	mu         sync.Mutex
	lastActive time.Time
	started    bool // agent_startup permitted
	blocked    bool // agent_startup denied: only agent_shutdown may follow (§6.1a)
	// startDeny is that denied agent_startup's outcome: the requests that
	// waited on it are refused with its verdict, as the one that ran it was.
	startDeny *points.Result
	// startCut: the request that ran agent_startup ended while it was
	// deciding, and the session ended cancelled; a request that waited on
	// it answers session_ending (retry for a new lifecycle), not a deny.
	startCut bool
	ended    bool
	// callIDs are the tool-call ids this session issued, each with the
	// number of messages of the client request whose answer carried it
	// (-1 when unknown: a host API pre), by which a follow-up is told
	// from a request that only reuses an old id (continuesTurn).
	// callIDs, answered and tools are made on their first entry: most
	// sessions (every header-less run without tool calls) never have one.
	callIDs map[string]int
	// answered are the call ids whose results earlier requests carried.
	answered map[string]struct{}
	// claimed counts, per call id, the header-less follow-ups in flight
	// that joined this run by it (guarded by sessions.mu): until their
	// answer marks the id answered, a concurrent follow-up of another
	// client with the same id must prefer a run whose call is unclaimed.
	claimed  map[string]int
	tools    map[string]*toolCall // written by addTool
	inFlight int
	// startDone is closed once agent_startup has a verdict; requests that
	// join a session wait for it (§6.1a: nothing before startup).
	startDone chan struct{}
	// pendingEnd is the shutdown reason of an /end that arrived while
	// requests were in flight; the last one to finish emits it.
	pendingEnd string
	// released are the tool calls a header-less run's answers carried to
	// the agent (name and arguments as released), by which a follow-up
	// is told apart from another run's that reuses the ids (byToolCall).
	released map[string]callSeen
	// prefixes holds, for each weak call id of a header-less run (one a
	// model numbers per answer, weakCallID), the historyHash of the
	// request its answer came to: a follow-up joins the run by such an id
	// only when it carries that same history before the call, so a
	// client that guesses call_0 cannot join another's run.
	prefixes map[string][32]byte
	// turnInputs holds, per tool-call id, the inputsDigest of the history
	// the answer that issued it came to: a follow-up skips input only when
	// the user and system messages before its calls are those
	// (continuesTurn).
	turnInputs map[string][32]byte
}

// addTool enters tc under id; call with s.mu held.
func (s *session) addTool(id string, tc *toolCall) {
	if s.tools == nil {
		s.tools = map[string]*toolCall{}
	}
	s.tools[id] = tc
}

func (s *session) touch(now time.Time) {
	s.mu.Lock()
	s.lastActive = now
	s.mu.Unlock()
}

// sessions is the bounded session table: by id, and (for header-less runs)
// by the tool-call ids that link a run's follow-up requests.
type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
	// byCall lists, per tool-call id, the open header-less runs that
	// issued it (more than one when a model numbers its calls per
	// response and runs overlap).
	byCall  map[string][]*session
	max     int
	idle    time.Duration
	agent   points.Agent
	onEvict func(s *session, reason string)
	gauge   func(n int)
	// ended remembers the contract sessions of the last max ended named
	// sessions, so that a request reusing the id starts a session whose
	// sequence goes on (points.Session.Continue) instead of repeating
	// 0, 1, ...; endedRuns does the same for header-less runs, apart, so
	// that one-request runs never push named sessions out.
	ended, endedRuns *recent[*points.Session]
	// ending holds the sessions removed from the table whose
	// agent_shutdown is not emitted yet (it may wait for requests in
	// flight): their id names no new session until it is (finish), so
	// nothing of a second lifecycle interleaves with the first.
	ending map[string]*session
	// lruHead is the session used last, lruTail the one idle longest.
	lruHead, lruTail *session
}

// front moves s to the front of the recency list (adding it if absent).
func (ss *sessions) front(s *session) {
	if ss.lruHead == s {
		return
	}
	ss.unlink(s)
	s.lruNext = ss.lruHead
	if ss.lruHead != nil {
		ss.lruHead.lruPrev = s
	}
	ss.lruHead = s
	if ss.lruTail == nil {
		ss.lruTail = s
	}
}

// unlink takes s out of the recency list (if it is in it).
func (ss *sessions) unlink(s *session) {
	if s.lruPrev != nil {
		s.lruPrev.lruNext = s.lruNext
	} else if ss.lruHead == s {
		ss.lruHead = s.lruNext
	}
	if s.lruNext != nil {
		s.lruNext.lruPrev = s.lruPrev
	} else if ss.lruTail == s {
		ss.lruTail = s.lruPrev
	}
	s.lruPrev, s.lruNext = nil, nil
}

// setAgent sets the agent new sessions get.
func (ss *sessions) setAgent(a points.Agent) {
	ss.mu.Lock()
	ss.agent = a
	ss.mu.Unlock()
}

// report tells the gauge the session count; call with ss.mu held.
func (ss *sessions) report() {
	if ss.gauge != nil {
		ss.gauge(len(ss.byID))
	}
}

func newSessions(agent points.Agent, max int, idle time.Duration, onEvict func(*session, string)) *sessions {
	if max <= 0 {
		max = 10000
	}
	if idle <= 0 {
		idle = 15 * time.Minute
	}
	return &sessions{byID: map[string]*session{}, byCall: map[string][]*session{}, max: max, idle: idle, agent: agent, onEvict: onEvict,
		ended: newRecent[*points.Session](max), endedRuns: newRecent[*points.Session](max), ending: map[string]*session{}}
}

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// get returns the session named id, creating it when absent. created
// reports whether it is new (and so owes agent_startup).
func (ss *sessions) get(id string, headerless bool, now time.Time) (s *session, created bool) {
	return ss.getAs(id, "", headerless, now)
}

// getAs is get with an agent id overriding the configured one for a new
// session ("" keeps it). It returns nil while the session named id is
// ending (its agent_shutdown waits for requests in flight).
func (ss *sessions) getAs(id, agentID string, headerless bool, now time.Time) (s *session, created bool) {
	ss.mu.Lock()
	if s = ss.byID[id]; s != nil && !s.ended {
		s.lastActive = now
		s.inFlight++
		ss.front(s)
		ss.mu.Unlock()
		return s, false
	}
	if ss.ending[id] != nil {
		ss.mu.Unlock()
		return nil, false
	}
	agent := ss.agent
	if agentID != "" {
		agent.ID = agentID
	}
	ps := points.NewSession(agent, id)
	for _, c := range []*recent[*points.Session]{ss.ended, ss.endedRuns} {
		if prev, ok := c.get(id); ok {
			ps = prev.Continue(agent)
			c.del(id)
			break
		}
	}
	s = &session{ps: ps, headerless: headerless, lastActive: now, inFlight: 1, startDone: make(chan struct{})}
	ss.byID[id] = s
	ss.front(s)
	var evict *session
	if len(ss.byID) > ss.max {
		evict = ss.oldestLocked(s)
		if evict != nil {
			ss.removeLocked(evict)
		}
	}
	ss.report()
	ss.mu.Unlock()
	if evict != nil {
		ss.onEvict(evict, "cancelled")
	}
	return s, true
}

// existing returns the open session named id, counted in flight as get
// counts it, without ever creating one; ending reports that the id's
// session is ending (its agent_shutdown still to come).
func (ss *sessions) existing(id string, now time.Time) (s *session, ending bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s = ss.byID[id]; s != nil && !s.ended {
		s.lastActive = now
		s.inFlight++
		ss.front(s)
		return s, false
	}
	return nil, ss.ending[id] != nil
}

// isEnding reports whether the session named id is ending.
func (ss *sessions) isEnding(id string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.ending[id] != nil
}

// finish notes that s's agent_shutdown has been emitted (or never will
// be): its id may name a new session again.
func (ss *sessions) finish(s *session) {
	ss.mu.Lock()
	if ss.ending[s.ps.ID()] == s {
		delete(ss.ending, s.ps.ID())
	}
	ss.mu.Unlock()
}

// release marks one request of s done.
func (ss *sessions) release(s *session, now time.Time) {
	ss.mu.Lock()
	s.inFlight--
	s.lastActive = now
	if !s.ended {
		ss.front(s)
	}
	reason := ""
	if s.inFlight == 0 && s.pendingEnd != "" {
		reason, s.pendingEnd = s.pendingEnd, ""
	}
	ss.mu.Unlock()
	if reason != "" {
		ss.onEvict(s, reason) // which finishes s
	}
}

// endsWith reports whether the release of the one request in flight of s
// will emit a deferred end's agent_shutdown.
func (ss *sessions) endsWith(s *session) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return s.inFlight == 1 && s.pendingEnd != ""
}

// endLater ends s now, or (with requests in flight) as soon as the last one
// finishes, so agent_shutdown stays the session's last point. It reports
// whether s was open and whether the shutdown is still to come.
func (ss *sessions) endLater(s *session, reason string) (open, deferred bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s.ended {
		return false, false
	}
	ss.removeLocked(s)
	if s.inFlight > 0 {
		s.pendingEnd = reason
		return true, true
	}
	return true, false
}

// end ends s on behalf of one of its own requests (counted in flight): at
// once when that request is the only one in flight (it reports true, and
// the caller emits agent_shutdown), else as soon as the others finish, so
// that agent_shutdown stays the session's last point. The first reason
// given is the one emitted.
func (ss *sessions) end(s *session, reason string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s.ended {
		return false
	}
	ss.removeLocked(s)
	if s.inFlight > 1 {
		s.pendingEnd = reason
		return false
	}
	return true
}

// weakCallID reports whether a model's tool-call id could be guessed: it
// holds no run of 12 or more letters and digits mixing both (OpenAI's
// call_ and 24 random characters, or a UUID's hex, hold one; call_0,
// functions.get_weather:0 or a 9-character id do not).
func weakCallID(id string) bool {
	run, digit, letter := 0, false, false
	for i := 0; i <= len(id); i++ {
		if i < len(id) {
			switch c := id[i]; {
			case c >= '0' && c <= '9':
				run, digit = run+1, true
				continue
			case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
				run, letter = run+1, true
				continue
			}
		}
		if run >= 12 && digit && letter {
			return false
		}
		run, digit, letter = 0, false, false
	}
	return true
}

// guard remembers, for the weak ids among ids that s (a header-less run)
// issued, the history the answer carrying them came to (prefix computes
// its historyHash, only if needed).
func (ss *sessions) guard(s *session, ids []string, prefix func() [32]byte) {
	if !s.headerless {
		return
	}
	var h [32]byte
	have := false
	for _, id := range ids {
		if !weakCallID(id) {
			continue
		}
		s.mu.Lock()
		_, known := s.prefixes[id]
		s.mu.Unlock()
		if known {
			// The first answer that issued the id is the one callIDs
			// keeps, and so the history a follow-up must carry.
			continue
		}
		if !have {
			h, have = prefix(), true
		}
		s.mu.Lock()
		if s.prefixes == nil {
			s.prefixes = map[string][32]byte{}
		}
		s.prefixes[strings.Clone(id)] = h
		s.mu.Unlock()
	}
}

// byToolCall finds the open header-less run that issued one of ids. When
// several runs issued the same id (a model that numbers its calls per
// answer, call_0, call_1, ...), the request's history (seen: the name and
// arguments it carries back for each id) tells them apart: the run whose
// calls match it in name and arguments on the most ids is taken, then the
// one with the most calls neither answered nor claimed by a follow-up in
// flight, the latest of equals. The ids of the pick's calls the request
// names are claimed for it until unclaim.
func (ss *sessions) byToolCall(ids []string, seen map[string]callSeen, prefixAt func(int) [32]byte, now time.Time) (_ *session, claimed []string) {
	ss.mu.Lock()
	var pick *session
	var cands []*session
	for _, id := range ids {
		for _, s := range ss.byCall[id] {
			if !s.ended && !slices.Contains(cands, s) {
				cands = append(cands, s)
			}
		}
	}
	if len(cands) > 0 {
		// A run issued a weak id only to a history the request must carry
		// before that call: the first n messages, n being the length of
		// the request whose answer issued it. Any other request naming
		// the id is not its. What to compare is gathered under the locks;
		// the hashing is done outside them.
		type check struct {
			s    *session
			n    int
			want [32]byte
		}
		var checks []check
		for _, s := range cands {
			s.mu.Lock()
			for id := range seen {
				if want, ok := s.prefixes[id]; ok {
					checks = append(checks, check{s, s.callIDs[id], want})
				}
			}
			s.mu.Unlock()
		}
		ss.mu.Unlock()
		var out []*session
		for _, c := range checks {
			if c.n < 0 || prefixAt(c.n) != c.want {
				out = append(out, c.s)
			}
		}
		cands = slices.DeleteFunc(cands, func(s *session) bool { return slices.Contains(out, s) })
		ss.mu.Lock()
	}
	if len(cands) > 0 {
		pick = cands[len(cands)-1]
	}
	if len(cands) > 1 {
		// Of runs alike, the one whose calls the request answers for the
		// first time: two clients asking the same question at once each
		// get their own run, not one run twice.
		fresh := make([]int, len(cands))
		for i, s := range cands {
			for _, id := range ids {
				if _, issued := s.callIDs[id]; issued {
					if _, done := s.answered[id]; !done && s.claimed[id] == 0 {
						fresh[i]++
					}
				}
			}
		}
		ss.mu.Unlock()
		best := -1
		for i, s := range cands {
			score := 0
			s.mu.Lock()
			for id, c := range seen {
				if r, ok := s.released[id]; ok && r.name == c.name {
					score += 2
					if sameArgs(r.args, c.args) {
						score++
					}
				}
			}
			s.mu.Unlock()
			if score = score*1000 + fresh[i]; score >= best {
				best, pick = score, s
			}
		}
		ss.mu.Lock()
	}
	if pick == nil || pick.ended {
		ss.mu.Unlock()
		return nil, nil
	}
	pick.lastActive = now
	pick.inFlight++
	ss.front(pick)
	for _, id := range ids {
		if _, issued := pick.callIDs[id]; issued {
			if pick.claimed == nil {
				pick.claimed = map[string]int{}
			}
			id = strings.Clone(id) // may be a view of the request
			pick.claimed[id]++
			claimed = append(claimed, id)
		}
	}
	ss.mu.Unlock()
	return pick, claimed
}

// unclaim drops the claims a follow-up made on s's call ids (byToolCall)
// once it is done: answered, failed or cut.
func (ss *sessions) unclaim(s *session, ids []string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, id := range ids {
		if s.claimed[id]--; s.claimed[id] <= 0 {
			delete(s.claimed, id)
		}
	}
}

// sameArgs reports whether two arguments strings say the same: equal, or
// the same JSON whatever its spacing and member order (an agent framework
// may parse and re-serialize them).
func sameArgs(a, b string) bool {
	if a == b {
		return true
	}
	ca, err1 := points.CanonicalJSON(bytesOf(a))
	cb, err2 := points.CanonicalJSON(bytesOf(b))
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

// noteReleased remembers, for a header-less run, the tool calls an answer
// carries to the agent as it is released.
func (ss *sessions) noteReleased(s *session, completion []byte) {
	if !s.headerless {
		return
	}
	calls := gjson.Get(view(completion), "choices.0.message.tool_calls").Array()
	if len(calls) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released == nil {
		s.released = make(map[string]callSeen, len(calls))
	}
	for _, c := range calls {
		s.released[strings.Clone(c.Get("id").Str)] = callSeen{name: strings.Clone(c.Get("function.name").Str), args: strings.Clone(c.Get("function.arguments").Str)}
	}
}

// link remembers tool-call ids issued in s.
func (ss *sessions) link(s *session, ids []string, histLen int) {
	ss.linkWith(s, ids, histLen, nil)
}

// linkWith is link that also remembers, for histLen, the digest of the
// user and system messages of that history (inputs computes it).
func (ss *sessions) linkWith(s *session, ids []string, histLen int, inputs func() [32]byte) {
	if len(ids) == 0 {
		return
	}
	var digest [32]byte
	if inputs != nil && histLen >= 0 {
		digest = inputs() // outside the lock: it hashes the history
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s.ended {
		return // removed from byCall for good: linking would leak it
	}
	if inputs != nil && histLen >= 0 {
		if s.turnInputs == nil {
			s.turnInputs = map[string][32]byte{}
		}
		for _, id := range ids {
			if _, ok := s.turnInputs[id]; !ok {
				s.turnInputs[strings.Clone(id)] = digest
			}
		}
	}
	for _, id := range ids {
		id = strings.Clone(id) // ids may be views into a request or answer
		if s.headerless && !slices.Contains(ss.byCall[id], s) {
			ss.byCall[id] = append(ss.byCall[id], s)
		}
		if old, ok := s.callIDs[id]; !ok || old < 0 {
			if s.callIDs == nil {
				s.callIDs = map[string]int{}
			}
			s.callIDs[id] = histLen
		}
	}
}

// answer notes that a request carried the results of ids.
func (ss *sessions) answer(s *session, ids []string) {
	if len(ids) == 0 {
		return
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, id := range ids {
		if _, ok := s.callIDs[id]; ok {
			if s.answered == nil {
				s.answered = map[string]struct{}{}
			}
			s.answered[strings.Clone(id)] = struct{}{}
		}
	}
}

// followUp reports whether ids, the results a request ends with after
// histLen earlier messages, answer calls sess issued in its answer to a
// request of exactly histLen messages, at least one of them for the
// first time.
func (ss *sessions) followUp(s *session, ids []string, histLen int, inputs func() [32]byte) bool {
	var wants [][32]byte
	ss.mu.Lock()
	for _, id := range ids {
		if w, ok := s.turnInputs[id]; ok {
			wants = append(wants, w)
		}
	}
	ss.mu.Unlock()
	if len(wants) > 0 && inputs != nil {
		have := inputs() // outside the lock: it hashes the history
		for _, w := range wants {
			if w != have {
				return false // the user or system messages before the calls changed
			}
		}
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	fresh := false
	for _, id := range ids {
		n, ok := s.callIDs[id]
		if !ok || id == "" || (n >= 0 && n != histLen) {
			return false
		}
		if _, seen := s.answered[id]; !seen {
			fresh = true
		}
	}
	return fresh
}

// removeLocked takes s out of the table; until its agent_shutdown is
// emitted (finish) its id is ending.
func (ss *sessions) removeLocked(s *session) {
	defer ss.report()
	s.ended = true
	ss.unlink(s)
	if ss.byID[s.ps.ID()] == s {
		id := strings.Clone(s.ps.ID())
		delete(ss.byID, id)
		ss.ending[id] = s
		// A header-less run's id comes back too, when an agent sends the
		// session header it was given: its sequence goes on as well.
		if s.headerless {
			ss.endedRuns.put(id, s.ps)
		} else {
			ss.ended.put(id, s.ps)
		}
	}
	for id := range s.callIDs {
		if list := slices.DeleteFunc(ss.byCall[id], func(o *session) bool { return o == s }); len(list) == 0 {
			delete(ss.byCall, id)
		} else {
			ss.byCall[id] = list
		}
	}
}

func (ss *sessions) oldestLocked(except *session) *session {
	// From the back of the recency list: past the few with a request in
	// flight, the first is the one idle longest (a scan of the whole
	// table under this lock cost every request milliseconds at 100 000).
	for s := ss.lruTail; s != nil; s = s.lruPrev {
		if s != except && s.inFlight == 0 {
			return s
		}
	}
	return nil
}

// sweep ends idle sessions: a header-less run whose tool calls stay
// unanswered is cancelled; a named session simply completed.
func (ss *sessions) sweep(now time.Time) {
	var idle []*session
	ss.mu.Lock()
	for _, s := range ss.byID {
		if s.inFlight == 0 && now.Sub(s.lastActive) >= ss.idle {
			idle = append(idle, s)
		}
	}
	for _, s := range idle {
		ss.removeLocked(s)
	}
	ss.mu.Unlock()
	for _, s := range idle {
		reason := "completed"
		if s.headerless {
			reason = "cancelled"
		}
		ss.onEvict(s, reason)
	}
}

// drain ends every session (graceful shutdown): the open ones, and those
// whose end still waits for a request in flight, each with the reason it
// is to be emitted with (their pending end is taken over, so the request
// finishing later does not emit it again).
func (ss *sessions) drain() map[*session]string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := map[*session]string{}
	for _, s := range ss.byID {
		ss.removeLocked(s)
		out[s] = "cancelled"
	}
	for _, s := range ss.ending {
		if _, ok := out[s]; !ok && s.pendingEnd != "" {
			out[s], s.pendingEnd = s.pendingEnd, ""
		}
	}
	return out
}

func (ss *sessions) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.byID)
}

// run the sweeper until ctx ends.
func (ss *sessions) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			ss.sweep(now)
		}
	}
}

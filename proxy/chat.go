package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// sigScope is where this request's kept tool-call members go and are
// found (signatures).
func (rn *run) sigScope() sigScope {
	if rn.scope.shared != "" {
		return rn.scope
	}
	sc := sigScope{sid: rn.sess.ps.ID()}
	// Only when there is something to keep or to find: the digest is
	// not free, and most requests have neither.
	if rn.sess.headerless && (len(rn.sigs) > 0 || rn.s.signatures.n.Load() > 0) {
		sc.shared = headerlessScope(rn.r.Header, rn.sess.ps.Agent().ID)
		// A request with other credentials can join the run by a call
		// id it carries: it gets none of the run's members.
		sc.sid += "\x00" + sc.shared
		rn.scope = sc
	}
	return sc
}

// run carries one mediated request through its points.
type run struct {
	// sigs are the last answer's tool-call extra_content, kept once the
	// calls' ids are final (here, not on the turn, whose frame is on the
	// stack while a stream is held).
	sigs []sigEntry
	// scope is sigScope's answer once it has a shared part.
	scope sigScope
	s     *Server
	em    *points.Emitter
	// pol holds em and the settings that came with it: read once per
	// request, so a reload meanwhile changes neither.
	pol  *policy
	sess *session
	w    http.ResponseWriter
	r    *http.Request
	// lent are the big buffers this request borrowed (buffer); they go
	// back to the pool when the handler returns (free).
	lent []*[]byte
	// reads are read buffers holding a completion (readLent), returned
	// with lent.
	reads []*bytes.Buffer
	// budget charges this request's answers against the server's
	// buffered-bytes budget and keeps the count, given back with lent. It
	// is pooled and points at the server, not the run: anything reachable
	// from the body reader escapes, and the run would move to the heap.
	budget *budgetReader
	// clientMsgs is how many messages the client's request carried.
	clientMsgs int
	// followUp: the request continues a tool loop of its session;
	// pendingAnswered are the tool results it carries, marked answered
	// when its answer is released (so a retry after an upstream failure
	// is still the follow-up).
	followUp        bool
	pendingAnswered []string
	// inputsDigest is the inputsDigest of the client's messages, once
	// inputsHashed (inputsOf).
	inputsDigest [32]byte
	inputsHashed bool
}

// lendMin is the smallest buffer worth pooling: below it an allocation is
// cheaper than the pool's bookkeeping. From 1 KiB (not 8 KiB) a 1 KB
// answer's request allocates a quarter fewer bytes (37.5 KB -> 28 KB in
// BenchmarkHandler json/1KB/allow_all), for 2-3% less time.
const lendMin = 1 << 10

// buffer returns an empty buffer with room for n bytes that stays the
// request's until the handler returns. A long answer is copied into the
// response projection and the output member, and then into the contexts
// of post_model_call and output, each of which carries it twice (the
// member and target); lending all of these keeps them out of the
// allocator and the GC. Only what is made once the answer is in is lent:
// a loan made before the upstream call would be pinned for as long as the
// answer takes. And only what nothing holds past the handler may live in
// one: the emitter copies event members out, and builds a context in a
// lent buffer (EmitIn) only where every interceptor is done with it when
// the emission returns. The completion is lent too (readLent): what the
// session keeps of it (tool call ids, names, withheld arguments) it clones.
func (rn *run) buffer(n int) []byte {
	if n < lendMin {
		return make([]byte, 0, n)
	}
	p, _ := rn.s.lend.Get().(*[]byte)
	if p != nil && cap(*p) < n {
		rn.s.lend.Put(p) // too small for this one; another may fit
		p = nil
	}
	if p == nil {
		b := make([]byte, 0, n+n/8)
		p = &b
	}
	rn.lent = append(rn.lent, p)
	return (*p)[:0]
}

// free returns the lent buffers; outsized ones are left to the GC so one
// huge answer does not pin its memory.
func (rn *run) free() {
	for _, p := range rn.lent {
		if cap(*p) <= 1<<20 {
			rn.s.lend.Put(p)
		}
	}
	rn.lent = nil
	for _, b := range rn.reads {
		rn.s.putRead(b)
	}
	rn.reads = nil
	if b := rn.budget; b != nil {
		if b.charged != 0 {
			rn.s.buffered.Add(-b.charged)
			rn.s.opts.Metrics.BufferedInFlight(-b.charged)
		}
		*b = budgetReader{} // pins neither the body nor the server
		rn.s.budgets.Put(b)
		rn.budget = nil
	}
}

// errBufferBudget: an answer would take the bytes held across all requests
// past MaxTotalBufferedBytes.
var errBufferBudget = errors.New("proxy: buffered-answer budget exhausted")

// charge counts n more answer bytes against the server's budget, or
// reports false (charging nothing) when they do not fit.
func (b *budgetReader) charge(n int64) bool {
	// Compare-and-swap, so that two requests near the bound do not both
	// see the other's tentative addition and both refuse.
	for {
		cur := b.s.buffered.Load()
		if cur+n > b.s.opts.MaxTotalBufferedBytes {
			return false
		}
		if b.s.buffered.CompareAndSwap(cur, cur+n) {
			break
		}
	}
	b.charged += n
	b.s.opts.Metrics.BufferedInFlight(n)
	return true
}

// budgetReader charges what it reads of an answer to the server's budget;
// past it it fails with errBufferBudget.
type budgetReader struct {
	r io.Reader
	s *Server
	// charged is what the request holds against the budget, over all
	// its model calls.
	charged int64
	// prepaid bytes were charged before the read (a declared length,
	// charged before its buffer is made).
	prepaid int64
	// read counts this answer's bytes: past MaxBufferedResponseBytes the
	// answer is too large whatever the budget, and the size limit above
	// the reader says so (a budget refusal would invite a retry).
	read int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.read += int64(n)
		if b.read > b.s.opts.MaxBufferedResponseBytes {
			return n, err // uncharged: the size limit refuses this answer
		}
		due := int64(n)
		if b.prepaid > 0 {
			paid := min(b.prepaid, due)
			b.prepaid -= paid
			due -= paid
		}
		if due > 0 && !b.charge(due) {
			return 0, errBufferBudget
		}
	}
	return n, err
}

// overBudget answers an answer refused for the buffered-bytes budget: a
// host error (the proxy cannot hold it now), which a retry may pass.
func (rn *run) overBudget(mc modelCall) {
	rn.s.log.Warn("answer refused: buffered-answer budget in use", "session", rn.sess.ps.ID(), "request_id", rn.requestID(),
		"limit", rn.s.opts.MaxTotalBufferedBytes)
	res := rn.em.EmitHostDeny(rn.r.Context(), rn.sess.ps, mc.incomplete(), points.ReasonStreamingUnsupported,
		"the answers held across all requests are at limits.max_total_buffered_bytes; retry later")
	if rn.gone(res) {
		rn.cancelled()
		return
	}
	rn.w.Header().Set("Retry-After", "1")
	writeBlockedRetry(rn.w, res, true)
	rn.end("error", false)
}

// end closes a header-less run's session with agent_shutdown{reason}; a
// named session outlives its requests.
func (rn *run) end(reason string, force bool) {
	if !rn.sess.headerless && !force {
		return
	}
	if rn.s.sessions.end(rn.sess, reason) {
		rn.s.shutdown(rn.r.Context(), rn.em, rn.sess, reason)
	}
}

// inputsOf returns the inputsDigest of the client's messages, computed on
// first use and then remembered for the request (several links use it).
func (rn *run) inputsOf(msgs []gjson.Result) func() [32]byte {
	return func() [32]byte {
		if !rn.inputsHashed {
			rn.inputsDigest, rn.inputsHashed = inputsDigest(msgs[:min(rn.clientMsgs, len(msgs))]), true
		}
		return rn.inputsDigest
	}
}

// upstreamFailed ends a header-less run whose model call failed upstream
// (unreachable, an error status, a broken answer), except where the request
// was a tool-loop follow-up: SDKs retry such errors, and the retry carries
// the same results, so the run stays open for it (its results are not
// marked answered until its answer is released); without a retry the
// idle timeout ends it, cancelled.
func (rn *run) upstreamFailed() { rn.upstreamFailedStatus(http.StatusBadGateway) }

// upstreamFailedStatus is upstreamFailed for an error answered with status:
// only one that SDKs retry (408, 409, 429, 5xx: openai-go's and npm
// openai's rule) keeps a follow-up's run open; after any other the client
// will not come back with it, and the run ends, error.
func (rn *run) upstreamFailedStatus(status int) {
	retried := status == http.StatusRequestTimeout || status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500
	if rn.followUp && retried {
		return
	}
	rn.end("error", false)
}

// cancelled ends a run whose request context ended: its client went away,
// or the server is closing (Close cancels every request still running),
// in which case the client, still connected, is told so rather than given
// an empty 200.
func (rn *run) cancelled() {
	rn.tellClosing()
	if rn.followUp && rn.s.base.Err() == nil {
		// A tool-loop follow-up whose client gave up (an SDK timeout) is
		// retried with the same results, as after a retryable upstream
		// failure: the run stays open for the retry, and the idle timeout
		// ends it, cancelled, when none comes.
		return
	}
	rn.end("cancelled", false)
}

// tellClosing answers 503 shutting_down when the server's Close cancelled
// the request.
func (rn *run) tellClosing() { rn.s.tellClosing(rn.w) }

// tellClosing answers 503 shutting_down when Close cancelled the request.
func (s *Server) tellClosing(w http.ResponseWriter) {
	if s.base.Err() != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "hooksproxy is shutting down; nothing of this request's answer was released", "shutting_down")
	}
}

// startup runs the agent_startup of a session this request created and
// wakes the requests waiting on it. A deny answers the request and ends the
// session (agent_shutdown{error}); a startup cut by the request ending (its
// client left, or Close) is marked startCut, so waiters answer
// session_ending rather than a deny. It reports whether the session
// started.
func (s *Server) startup(ctx context.Context, w http.ResponseWriter, em *points.Emitter, sess *session, tools []string) bool {
	res := em.Emit(ctx, sess.ps, points.StartupEvent(tools))
	gone := !res.Proceed && cutShort(ctx, res)
	sess.mu.Lock()
	sess.started, sess.blocked, sess.startCut = res.Proceed, !res.Proceed && !gone, gone
	if sess.blocked {
		sess.startDeny = &res
	}
	sess.mu.Unlock()
	close(sess.startDone)
	if res.Proceed {
		return true
	}
	if gone {
		s.tellClosing(w)
	} else {
		s.logBlocked(points.RequestIDFrom(ctx), sess, res.Record)
		writeBlocked(w, res)
	}
	// §6.1a: after a combined deny at agent_startup the shutdown's reason
	// is error, also when the deny records a startup its caller cut short.
	if s.sessions.end(sess, "error") {
		s.shutdown(ctx, em, sess, "error")
	}
	return false
}

// cutShort reports whether a host-error deny came from ctx ending while a
// point was deciding (see run.gone).
func cutShort(ctx context.Context, res points.Result) bool {
	return res.HostError() && ctx.Err() != nil
}

// requestID is the request's id (X-Request-Id, the client's or ours), for
// its log lines.
func (rn *run) requestID() string { return points.RequestIDFrom(rn.r.Context()) }

// logBlocked is the log line of a blocking verdict (withheld: a tool call
// left out of an answer that is still released).
func (s *Server) logBlocked(requestID string, sess *session, rec *points.Record, extra ...any) {
	s.log.Info("blocked", append([]any{"session", sess.ps.ID(), "request_id", requestID, "point", rec.InterceptionPoint,
		"reason", rec.Verdict.Reason, "sequence", rec.Sequence}, extra...)...)
}

// blocked answers a blocking verdict and ends a header-less run.
func (rn *run) blocked(res points.Result) {
	if rn.gone(res) {
		rn.cancelled()
		return
	}
	rn.s.logBlocked(rn.requestID(), rn.sess, res.Record)
	writeBlocked(rn.w, res)
	rn.end("error", false)
}

// gone reports whether a host-error deny came from the request ending (its
// client left, or Close cancelled it) while a point was deciding: the
// emitter recorded the cut emission as failed closed, as §6.3 asks, but
// the answer and the run's end are a cancellation's, not a policy
// failure's (no 503 host error, agent_shutdown{cancelled}).
func (rn *run) gone(res points.Result) bool { return cutShort(rn.r.Context(), res) }

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	reqID := requestID(w, r) // on every answer, refusals included
	pol := s.pol.Load()
	em := pol.em
	if em == nil {
		writeError(w, http.StatusServiceUnavailable, "agent_hooks_host_error", "no policy loaded", "host_error:no_interceptor")
		return
	}
	// The handler is split so that the frames on the stack while a stream
	// is held, and while pre_model_call's interceptors run below them,
	// stay small: a request goroutine that passes 16 KiB there keeps a
	// 32 KiB stack for as long as its answer is held.
	req, ok := s.admitChat(w, r, pol.st)
	if !ok {
		return
	}
	sess, created, claimed := s.resolveSession(r, req.body, req.msgs, req.allowAgent)
	if sess == nil {
		s.writeSessionEnding(w)
		return
	}
	defer func() {
		if claimed != nil {
			s.sessions.unclaim(sess, claimed)
		}
		if s.sessions.endsWith(sess) {
			// This request's return emits a deferred /end's
			// agent_shutdown, whose policies may take their time: the
			// answer goes out first, and its last chunk is not cut by
			// the answer's write deadline.
			rc := http.NewResponseController(w)
			_ = rc.Flush()
			_ = rc.SetWriteDeadline(time.Time{})
		}
		s.sessions.release(sess, s.opts.Now()) // activity ends when the request does
	}()
	rn := &run{s: s, em: em, pol: pol, sess: sess, w: w, r: r}
	defer rn.free() // after every later defer; the session release above makes fresh contexts only
	ctx := withTraceparent(points.WithRequestID(r.Context(), reqID), r.Header)
	rn.r = r.WithContext(ctx)
	w.Header().Set("X-Agent-Hooks-Session", sess.ps.ID())
	if h := s.opts.SessionHeader; !strings.EqualFold(h, "X-Agent-Hooks-Session") {
		// A client that names sessions with a header of its own reads the
		// id back under that name too.
		w.Header().Set(h, sess.ps.ID())
	}
	body, ok := rn.open(ctx, created, req)
	if !ok {
		return
	}
	rn.turns(ctx, body, req.msgs)
}

// chatRequest is an admitted chat completion request.
type chatRequest struct {
	body []byte
	msgs []gjson.Result
	ins  []turnInput
	// allowAgent is the agent header setting the request was checked
	// under.
	allowAgent bool
}

// admitFraming checks a request body's Content-Type: sent once, with
// Content-Encoding at most once, and UTF-8 if it names a charset; with
// requireJSON it must be application/json (the host API takes a body
// without one, as curl -d sends). When it returns false the refusal has
// been written.
func (s *Server) admitFraming(w http.ResponseWriter, r *http.Request, requireJSON bool) bool {
	// One Content-Type and at most one Content-Encoding line: the checks
	// below read the first, and the upstream, which gets them all, might
	// honour another (a second charset=utf-7 line).
	if len(r.Header.Values("Content-Type")) > 1 || len(r.Header.Values("Content-Encoding")) > 1 {
		s.refuse(w, http.StatusBadRequest, "Content-Type and Content-Encoding may each be sent once", "invalid_content_type")
		return false
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && !requireJSON {
		return true
	}
	mt, params, err := mime.ParseMediaType(ct)
	if requireJSON && (err != nil || mt != "application/json") {
		s.refuse(w, http.StatusBadRequest, "Content-Type must be application/json", "invalid_content_type")
		return false
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") && !strings.EqualFold(cs, "us-ascii") {
		// The points judge the body as UTF-8; an upstream honouring
		// charset=utf-7 would read "+AHM-ecret" as the "secret" a deny
		// rule looked for and did not find.
		s.refuse(w, http.StatusUnsupportedMediaType, "charset "+strconv.Quote(cs)+" is not supported; send the request body as UTF-8", "unsupported_charset")
		return false
	}
	return true
}

// admitEncoding refuses a compressed request body: bodies are not
// decoded, as the points judge JSON text.
func (s *Server) admitEncoding(w http.ResponseWriter, r *http.Request) bool {
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		s.refuse(w, http.StatusUnsupportedMediaType, "Content-Encoding "+strconv.Quote(ce)+" is not supported; send the request body uncompressed", "unsupported_content_encoding")
		return false
	}
	return true
}

// admitChat reads and checks a chat completion request; when it returns
// false the refusal has been written.
func (s *Server) admitChat(w http.ResponseWriter, r *http.Request, st *Settings) (chatRequest, bool) {
	if !s.admitFraming(w, r, true) {
		return chatRequest{}, false
	}
	if r.ContentLength > s.opts.MaxRequestBytes {
		// Refused before the body is read (and before net/http answers an
		// Expect: 100-continue, which would invite the client to send it).
		w.Header().Set("Connection", "close")
		s.refuse(w, http.StatusRequestEntityTooLarge,
			"request body exceeds max_request_bytes ("+strconv.FormatInt(s.opts.MaxRequestBytes, 10)+")", "request_too_large")
		return chatRequest{}, false
	}
	if !s.admitEncoding(w, r) {
		return chatRequest{}, false
	}
	body, err := s.readBounded(w, r.ContentLength, s.opts.MaxRequestBytes, func() ([]byte, error) {
		return s.readBody(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes), r.ContentLength, s.opts.MaxRequestBytes)
	})
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.refuse(w, http.StatusRequestEntityTooLarge,
				"request body exceeds max_request_bytes ("+strconv.FormatInt(s.opts.MaxRequestBytes, 10)+")", "request_too_large")
			return chatRequest{}, false
		}
		s.refuse(w, http.StatusBadRequest, "could not read request body", "unreadable_body")
		return chatRequest{}, false
	}
	if msg := checkChatRequest(body); msg != "" {
		s.refuse(w, http.StatusBadRequest, msg, "invalid_request")
		return chatRequest{}, false
	}
	msgs := messagesOf(body)
	ins := turnInputs(msgs)
	if len(ins) > maxTurnInputs {
		// Each new message judged is an input emission and a record: a
		// request of thousands would flood the record sink.
		msg := "a request may open a turn with at most " + strconv.Itoa(maxTurnInputs) + " user (or, without one, system) messages after the last assistant message"
		s.refuse(w, http.StatusBadRequest, msg, "invalid_request")
		return chatRequest{}, false
	}

	if msg := headerName(r.Header.Values(s.opts.SessionHeader), "session", true); msg != "" { // empty: no session named
		s.refuse(w, http.StatusBadRequest, msg+" ("+s.opts.SessionHeader+")", "invalid_request")
		return chatRequest{}, false
	}
	allowAgent := st.AllowAgentHeader
	if vs := r.Header.Values("X-Agent-Hooks-Agent"); allowAgent && len(vs) > 0 {
		if msg := headerName(vs, "agent", false); msg != "" {
			s.refuse(w, http.StatusBadRequest, msg+" (X-Agent-Hooks-Agent)", "invalid_request")
			return chatRequest{}, false
		}
	}
	return chatRequest{body: body, msgs: msgs, ins: ins, allowAgent: allowAgent}, true
}

// refuse answers a request refused before any emission (it is not
// mediated: no point saw it, no record is written) and counts it, by code,
// so that a client sending what the proxy cannot take shows in the metrics.
func (s *Server) refuse(w http.ResponseWriter, status int, msg, code string) {
	writeError(w, status, "invalid_request_error", msg, code)
	s.opts.Metrics.RequestRefused(code)
	// A refusal may leave the body unread (a 413 by its declared length,
	// a 404 or 415 before reading): net/http would then wait for it,
	// without a deadline, to drain or reuse the connection, and a client
	// that never sends it (Expect: 100-continue) held a goroutine and a
	// descriptor for good. The next request on the connection gets a
	// fresh header deadline from the server.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(refusedBodyGrace))
}

// refusedBodyGrace is how long a refused request's unread body may take
// to arrive and be drained before the connection is closed.
const refusedBodyGrace = 2 * time.Second

// headerName checks the values of a header naming the session (or agent):
// what is wrong with them, or "" when they are fine, or all empty where
// empty names nothing (emptyNone: the session header). Two different
// names are refused, as they leave it to chance which one the request is
// judged under (the first is the one read).
func headerName(vs []string, what string, emptyNone bool) string {
	named := false
	for _, v := range vs {
		if v != vs[0] {
			return "the " + what + " is named more than once, differently"
		}
		named = named || v != ""
	}
	if !named && emptyNone {
		return ""
	}
	return checkIdent(what+" id", vs[0])
}

// open runs what precedes a request's model calls: the session's
// agent_startup when the request made it, input for each new user message
// unless the request continues a turn, and the tool results and withheld
// calls its history replays. It returns the body as those verdicts left
// it; when it returns false the answer has been written.
func (rn *run) open(ctx context.Context, created bool, req chatRequest) ([]byte, bool) {
	s, em, sess, w := rn.s, rn.em, rn.sess, rn.w
	body, msgs := req.body, req.msgs
	if !created && !s.awaitStartup(ctx, sess) {
		rn.tellClosing()
		return nil, false // the client went away while the session was starting
	}
	sess.mu.Lock()
	blocked, cut, deny := sess.blocked, sess.startCut, sess.startDeny
	sess.mu.Unlock()
	if cut {
		s.writeSessionEnding(w)
		return nil, false
	}
	if blocked {
		// §6.1a: after a startup deny only agent_shutdown may follow. The
		// request is refused with that deny, as the one that ran it was.
		writeStartupDeny(w, deny)
		return nil, false
	}
	if created {
		_, names := toolDecls(body)
		if !s.startup(ctx, w, em, sess, names) {
			return nil, false
		}
	}

	// input (§3: on the ingress of each external request), except for a
	// tool-loop follow-up that answers calls this session issued: that is
	// the same turn going on. Any other request is judged, whatever its
	// last message, so that a trailing system or assistant message, or
	// results for calls the proxy never saw, cannot skip the point.
	rn.clientMsgs = len(msgs)
	rn.followUp = s.continuesTurn(sess, msgs)
	var judged []int               // messages input judged now
	var edits map[int]inputVerdict // what verdicts make of messages, written in one rebuild
	if !rn.followUp {
		for _, in := range req.ins {
			iv, transformed, ok := rn.judgeInput(ctx, msgs, in)
			if !ok {
				return nil, false
			}
			judged = append(judged, in.index)
			if transformed {
				edits = addEdit(edits, in.index, iv)
			}
		}
	}
	// Messages an earlier request's input verdict changed, replayed as
	// the agent first wrote them: the model sees what the verdict made of
	// them, as it did then.
	if !s.inputs.empty() {
		var ok bool
		if edits, ok = rn.replayInputs(ctx, msgs, judged, edits); !ok {
			return nil, false
		}
	}
	if edits != nil {
		var ok bool
		if body, ok = rn.writeInputs(body, msgs, edits); !ok {
			return nil, false
		}
	}

	// Tool results and withheld calls in the history the agent replays.
	if b, res := s.applyToolHistory(ctx, rn.pol, sess, body); res != nil {
		rn.blocked(*res)
		return nil, false
	} else if ctx.Err() != nil {
		// The client left while a result's verdict (another request's
		// pre or post) was pending: that result is still unjudged in
		// body, so no point is handed it.
		rn.cancelled()
		return nil, false
	} else {
		body = b
	}
	for _, m := range msgs {
		if m.Get("role").Str == "tool" {
			rn.pendingAnswered = append(rn.pendingAnswered, m.Get("tool_call_id").Str)
		}
	}
	return body, true
}

// judgeInput runs input over message in of the request and returns what
// a transform makes of it (remembered for the session's later histories);
// ok is false when the request was answered (denied, or a value with no
// chat form).
func (rn *run) judgeInput(ctx context.Context, msgs []gjson.Result, in turnInput) (_ inputVerdict, transformed, ok bool) {
	em, sess := rn.em, rn.sess
	msg := msgs[in.index]
	content := msg.Get("content").Raw
	res := em.Emit(ctx, sess.ps, points.InputEvent([]byte(orNull(content)), in.role))
	if !res.Proceed {
		rn.blocked(res)
		return inputVerdict{}, false, false
	}
	if !res.Transformed {
		return inputVerdict{}, false, true
	}
	// A verdict that has no chat form (WriteBack refused what has none in
	// the fold already) is the input's failure, recorded over the message
	// as it came (which builds, as it did).
	v, role, detail := inputVerdictOf(in, res.Target(), content)
	if detail != "" {
		rn.failClosed(points.InputEvent([]byte(orNull(content)), in.role), detail)
		return inputVerdict{}, false, false
	}
	rn.s.inputs.remember(sess.ps.ID(), msg.Get("role").Str, msg.Get("content"), v, role)
	return inputVerdict{content: v, role: role}, true, true
}

func addEdit(edits map[int]inputVerdict, i int, iv inputVerdict) map[int]inputVerdict {
	if edits == nil {
		edits = map[int]inputVerdict{}
	}
	edits[i] = iv
	return edits
}

// replayInputs adds to edits, for each message of the history that an
// earlier input verdict of this session changed (not one judged now), what
// the verdict made of it; one another session's verdict changed, or whose
// verdict was too large to keep, is judged again.
func (rn *run) replayInputs(ctx context.Context, msgs []gjson.Result, judged []int, edits map[int]inputVerdict) (map[int]inputVerdict, bool) {
	// Judged again once per distinct message, whatever the copies, and no
	// more of them than a turn may open with: a history repeating another
	// session's changed message must not buy an emission per copy.
	type again struct {
		iv          inputVerdict
		transformed bool
	}
	var agains map[string]again
	for i, m := range msgs {
		role := m.Get("role").Str
		if (role != "user" && role != "system" && role != "developer") || slices.Contains(judged, i) {
			continue
		}
		iv, ok, changed := rn.s.inputs.lookup(rn.sess.ps.ID(), role, m.Get("content"))
		if !changed {
			continue
		}
		if !ok {
			// Changed in another session, or too large to keep: judged
			// here and now.
			k := inputKey(role, m.Get("content"))
			a, seen := agains[k]
			if !seen {
				if len(agains)+len(judged) >= maxTurnInputs {
					rn.blocked(rn.em.EmitHostDeny(ctx, rn.sess.ps, points.InputEvent([]byte(orNull(m.Get("content").Raw)), "user"), points.ReasonAdapterUnsupported,
						"request carries more messages to judge again than one request judges ("+strconv.Itoa(maxTurnInputs)+")"))
					return nil, false
				}
				in := turnInput{index: i, role: "user"}
				if role != "user" {
					in.role = "system"
				}
				if a.iv, a.transformed, ok = rn.judgeInput(ctx, msgs, in); !ok {
					return nil, false
				}
				if agains == nil {
					agains = map[string]again{}
				}
				agains[k] = a
			}
			if !a.transformed {
				continue
			}
			iv = a.iv
		}
		edits = addEdit(edits, i, iv)
	}
	return edits, true
}

// writeInputs writes what input verdicts made of messages into body, in
// one rebuild of the messages (one sjson write per message over the whole
// body would cost the body's size per message).
func (rn *run) writeInputs(body []byte, msgs []gjson.Result, edits map[int]inputVerdict) ([]byte, bool) {
	failed := -1
	out, err := editMessages(body, func(i int, m []byte) ([]byte, error) {
		iv, ok := edits[i]
		if !ok {
			return nil, nil
		}
		failed = i
		m, err := sjson.SetRawBytes(m, "content", iv.content)
		if err == nil && iv.role != "" {
			m, err = sjson.SetBytes(m, "role", iv.role)
		}
		return m, err
	})
	if err != nil {
		content := ""
		if failed >= 0 && failed < len(msgs) {
			content = msgs[failed].Get("content").Raw
		}
		rn.failClosed(points.InputEvent([]byte(orNull(content)), "user"), "input write-back failed")
		return nil, false
	}
	return out, true
}

// spent is the usage of the model calls the proxy made on its own
// (continuations after every tool call was denied), added to the answer's
// usage so a client's accounting sees every call made for its request.
type spent struct {
	// usage sums every integer member of those calls' usage objects,
	// one level of *_details included, by path: cached and reasoning
	// tokens are priced apart, so they add up as the totals do.
	usage map[string]int64
	// hostErrTurns counts automatic turns that ended in a tool-seam host
	// error.
	hostErrTurns int
}

// turns runs the request's model calls: one, and more while the proxy
// continues on its own after every tool call of a turn was denied.
func (rn *run) turns(ctx context.Context, body []byte, msgs []gjson.Result) {
	var sp spent
	var t turn
	for n := 0; ; n++ {
		if n > 0 && ctx.Err() != nil {
			// The client left while the proxy was deciding tool calls: no
			// model call on its behalf, and the run ends as cancelled.
			rn.cancelled()
			return
		}
		t = turn{}
		if !rn.modelTurn(ctx, body, &t) {
			return
		}
		defer rn.s.recycle(t.held) // after the answer is written
		next, more := rn.finishTurnCounted(ctx, &t, body, msgs, n, &sp)
		if !more {
			return
		}
		body = next
	}
}

// finishTurnCounted is finishTurn with the turn's stream let go by the
// held-streams gauge when it returns: released, refused, or discarded for
// a continuation the proxy makes on its own.
func (rn *run) finishTurnCounted(ctx context.Context, t *turn, body []byte, msgs []gjson.Result, n int, sp *spent) ([]byte, bool) {
	if t.counted {
		defer rn.s.opts.Metrics.HeldStreams(-1)
	}
	return rn.finishTurn(ctx, t, body, msgs, n, sp)
}

// finishTurn decides a permitted model answer: output over its text, the
// tool seam over its calls, and its release. n counts the model calls
// before it. It returns the body of the next model call and true when the
// proxy continues on its own.
func (rn *run) finishTurn(ctx context.Context, t *turn, body []byte, msgs []gjson.Result, n int, sp *spent) ([]byte, bool) {
	s, sess, w := rn.s, rn.sess, rn.w
	completion, modified := t.completion, t.modified
	calls := gjson.ParseBytes(t.view.toolCalls).Array()
	final := len(calls) == 0
	if !final {
		ids := make([]string, 0, len(calls))
		for _, c := range calls {
			ids = append(ids, c.Get("id").Str)
		}
		inputs := rn.inputsOf(msgs)
		s.sessions.linkWith(sess, ids, rn.clientMsgs, inputs)
		// Text the model sends beside its tool calls reaches the
		// caller as much as a final answer does, so it passes output
		// too (no released byte of model text skips that point), and
		// before the calls' pre_tool_call, so a denied text spends no
		// tool verdict on calls that are then not released.
		if cv := viewCompletion(completion); hasText(cv.answerText()) || hasElements(cv.content) && cv.content[0] == '[' {
			var ok, changed bool
			if completion, changed, ok = rn.output(ctx, completion, cv.answerText()); !ok {
				return nil, false
			}
			modified = modified || changed
		}
		if !rn.pol.st.TransparentToolSeam {
			for i := range rn.sigs {
				args := rn.sigs[i].args
				for _, c := range calls {
					if c.Get("id").Str == rn.sigs[i].id {
						args = c.Get("function.arguments").Str // as a transform left them
					}
				}
				s.signatures.keep(rn.sigScope(), rn.sigs[i].id, rn.sigs[i].name, args, &rn.sigs[i])
			}
		} else {
			history := map[string]bool{}
			ids, _ := toolCallIDsIn(body)
			for _, id := range ids {
				history[id] = true
			}
			out, kept, withheld, halt, lastDeny := s.releaseCalls(ctx, rn.pol, sess, completion, history, rn.sigs, rn.sigScope())
			if halt != nil {
				rn.blocked(*halt)
				return nil, false
			}
			if kept == 0 && len(withheld) > 0 {
				// Every call was denied: ask the model again with the
				// control errors, within the configured bound. A
				// host error (an approval that timed out, a failing
				// policy) is handed to the model once, as the posture
				// says; a second in a row ends the request, rather
				// than wait the same failure out once per turn.
				if lastDeny != nil && lastDeny.HostError() {
					if sp.hostErrTurns++; sp.hostErrTurns > 1 {
						rn.blocked(*lastDeny)
						return nil, false
					}
				}
				if n >= rn.pol.st.MaxAutoTurns {
					if lastDeny != nil {
						rn.blocked(*lastDeny)
						return nil, false
					}
					w.Header().Set("X-Should-Retry", "false")
					writeError(w, http.StatusForbidden, "agent_hooks_denied",
						"every tool call the model asked for was denied, and the automatic continuation limit was reached", "tool_calls_denied")
					rn.end("error", false)
					return nil, false
				}
				sp.add(t.view.usage)
				return continuation(body, completion, withheld, sess), true
			}
			if len(withheld) > 0 || !bytes.Equal(out, completion) {
				completion, modified = out, true
				// Calls released under fresh ids link the run too.
				s.sessions.linkWith(sess, toolCallIDsOf(completion), rn.clientMsgs, inputs)
				s.sessions.linkWith(sess, withheld, rn.clientMsgs, inputs)
			}
		}
	} else {
		// output: the turn's final answer.
		var ok, changed bool
		if completion, changed, ok = rn.output(ctx, completion, t.view.answerText()); !ok {
			return nil, false
		}
		modified = modified || changed
	}
	if len(sp.usage) > 0 {
		if c, ok := addUsage(completion, sp.usage); ok {
			completion, modified = c, true
		}
	}
	if !final {
		s.sessions.noteReleased(sess, completion)
		// Only the ids the agent gets (after the seam renamed any it
		// reused) are what its follow-up carries back.
		s.sessions.guard(sess, toolCallIDsOf(completion), func() [32]byte { return historyHash(msgs) })
	}
	rn.release(t, body, completion, modified, final)
	return nil, false
}

// output emits output over text, the answer text of completion, and
// writes a transform back. When ok is false the answer has been written
// (a block or a failed write-back).
func (rn *run) output(ctx context.Context, completion, text []byte) (out []byte, changed, ok bool) {
	res := rn.em.EmitIn(ctx, rn.sess.ps, points.OutputEventIn(rn.buffer(len(text)+16), text), rn.buffer)
	if !res.Proceed {
		rn.blocked(res)
		return nil, false, false
	}
	if !res.Transformed {
		return completion, false, true
	}
	out, err := setAnswerText(completion, []byte(orNull(res.Target().Get("content").Raw)))
	if err != nil {
		rn.failClosed(points.OutputEvent(nil), "output write-back failed")
		return nil, false, false
	}
	return out, true, true
}

// turn is one permitted model call, held.
type turn struct {
	resp       *http.Response
	held       *heldStream
	completion []byte
	view       completionView // of completion
	modified   bool
	post       points.Event
	// omitUsage: the proxy asked the upstream for the usage chunk the
	// client did not ask for, so its replay leaves it out.
	omitUsage bool
	// counted: the held-streams gauge still counts this stream, until
	// the turn is done.
	counted bool
	// upstreamCode and upstreamTime: a json answer's status and time,
	// counted in the upstream metrics once postModel has read it.
	upstreamCode int
	upstreamTime time.Duration
}

// modelCall is one model call the proxy is about to make.
type modelCall struct {
	// body is the request as pre_model_call left it.
	body []byte
	// model is the model the request names; reqID the call's id, which
	// pairs its pre_model_call and post_model_call records.
	model, reqID string
}

// incomplete is the post_model_call event of a call whose answer could not
// be judged, for the host deny that answers it.
func (mc *modelCall) incomplete() points.Event {
	return points.PostModelCallEvent(mc.model, []byte(`{"content":null,"tool_calls":[],"finish_reason":"stream_incomplete"}`)).With("request_id", quoteJSON(mc.reqID))
}

// modelTurn runs pre_model_call, the upstream call and post_model_call.
// When it returns false the answer has been written. Its parts are
// functions of their own so that the frames below a held stream are small
// (see chat).
func (rn *run) modelTurn(ctx context.Context, body []byte, t *turn) bool {
	mc, ok := rn.preModel(ctx, body)
	if !ok {
		return false
	}
	s, w := rn.s, rn.w
	body = mc.body
	var err error
	uctx, cancel := context.WithTimeout(ctx, s.opts.UpstreamTimeout)
	defer cancel()
	stream := bodyGet(body, "stream").Bool()
	resp, upStart, ok := rn.callUpstream(ctx, uctx, body, t, stream)
	if !ok {
		return false
	}
	defer resp.Body.Close()
	noteUpstreamID(w, resp)
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		// Not followed, and not passed on either: a client following its
		// Location would send the prompt to another host unmediated, and
		// one without a Location (300, 304) is no answer either: openai-go
		// counts every status below 400 as a success and would decode the
		// body as a completion (or an empty stream), silently.
		s.opts.Metrics.UpstreamRequest(resp.StatusCode, stream, time.Since(upStart))
		rn.logRefused("upstream answered with a redirect, which hooksproxy does not follow", "upstream_redirect", nil)
		writeError(w, http.StatusBadGateway, "upstream_error", "upstream answered with a redirect, which hooksproxy does not follow", "upstream_redirect")
		rn.end("error", false)
		return false
	}
	if resp.StatusCode < 200 || resp.StatusCode > 599 {
		// A 101 (the only 1xx the transport hands back: its body is the
		// raw connection) or a status HTTP does not have: no answer, and
		// not one a client could take as final either. The body is not
		// read.
		s.opts.Metrics.UpstreamRequest(0, stream, time.Since(upStart))
		rn.refuseAnswer("upstream answered with status "+strconv.Itoa(resp.StatusCode)+", which is no answer to a chat completion; nothing of it was released", "upstream_invalid_response", nil)
		return false
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		s.opts.Metrics.UpstreamRequest(resp.StatusCode, stream, time.Since(upStart))
		// Upstream errors are not model output: pass them through.
		relayError(w, resp, s.opts.MaxBufferedResponseBytes, s.mask)
		// The SDKs obey X-Should-Retry ("true" or "false", exactly)
		// before the status, so the run waits for a retry only if one
		// comes.
		status := resp.StatusCode
		switch resp.Header.Get("X-Should-Retry") {
		case "false":
			status = http.StatusBadRequest
		case "true":
			status = http.StatusServiceUnavailable
		}
		rn.upstreamFailedStatus(status)
		return false
	}

	// Hold the whole response, headers included.
	t.resp = resp
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if sse := ct == "text/event-stream"; sse != stream {
		// Answered in the other framing than asked: the client's SDK
		// could not decode it, whatever the points said.
		// No usable answer arrived: counted as the upstream's error.
		s.opts.Metrics.UpstreamRequest(0, stream, time.Since(upStart))
		msg := "upstream answered a stream to a request without stream: true; nothing of it was released"
		if stream {
			msg = "upstream answered a streaming request with a body that is not text/event-stream; nothing of it was released"
			if e := jsonErrorBody(resp); e != nil {
				// A provider failure answered as a 200 JSON error (as
				// OpenRouter and LiteLLM do) to a streaming request: its
				// message is passed on, as for a json request.
				rn.refuseUpstreamError(e)
				return false
			}
		}
		rn.refuseAnswer(msg, "upstream_invalid_response", nil)
		return false
	}
	answer, length, ok := rn.decodedBody(ctx, resp, stream, upStart)
	if !ok {
		return false
	}
	if rn.budget == nil {
		rn.budget, _ = s.budgets.Get().(*budgetReader)
		if rn.budget == nil {
			rn.budget = new(budgetReader)
		}
	}
	budget := rn.budget
	budget.r, budget.s, budget.prepaid, budget.read = answer, s, 0, 0
	if !stream && length > 0 && length <= s.opts.MaxBufferedResponseBytes {
		// readLent makes a buffer of the declared length at once: it is
		// charged first, so a refused answer costs no allocation.
		if !budget.charge(length) {
			s.opts.Metrics.UpstreamRequest(resp.StatusCode, stream, time.Since(upStart))
			rn.overBudget(mc)
			return false
		}
		budget.prepaid = length
	}
	if !stream && length > s.opts.MaxBufferedResponseBytes {
		// Declared too large: the size limit refuses it, not retryable;
		// none of it counts against the budget.
		budget.read = length
	}
	answer = budget
	if ct == "text/event-stream" {
		// A stream counts as held from its first byte until it is
		// released or refused: past post_model_call, through output and
		// its approvals, turns lets it go (t.counted).
		s.opts.Metrics.HeldStreams(1)
		defer func() {
			if !t.counted {
				s.opts.Metrics.HeldStreams(-1)
			}
		}()
		t.held, t.completion, err = s.holdStream(answer, rn.buffer)
		code := resp.StatusCode
		if err != nil && ctx.Err() == nil && upstreamAtFault(err) {
			code = 0 // no complete, usable response arrived: counted as the upstream's error
		}
		s.opts.Metrics.UpstreamRequest(code, true, time.Since(upStart))
		if err == nil {
			drainAfterDone(resp.Body, cancel)
		}
		if err != nil {
			rn.streamFailed(ctx, mc, err)
			return false
		}
	} else {
		t.completion, err = rn.readLent(io.LimitReader(answer, s.opts.MaxBufferedResponseBytes+1), length, s.opts.MaxBufferedResponseBytes)
		code := resp.StatusCode
		if err != nil && ctx.Err() == nil && !errors.Is(err, errBufferBudget) {
			code = 0 // the body was cut or timed out: no response arrived, as for a stream
		}
		elapsed := time.Since(upStart)
		if err != nil || int64(len(t.completion)) > s.opts.MaxBufferedResponseBytes {
			s.opts.Metrics.UpstreamRequest(code, false, elapsed)
			rn.bodyFailed(ctx, mc, t.completion, err)
			return false
		}
		// Counted once the body is read as an answer: not JSON, or an
		// error in a 200 (postModel), is the upstream's error.
		t.upstreamCode, t.upstreamTime = code, elapsed
		// A UTF-8 byte order mark before the JSON (RFC 8259 §8.1 lets a
		// reader ignore it; a stream's is already skipped) is not part of
		// the answer.
		t.completion = bytes.TrimPrefix(t.completion, []byte("\xef\xbb\xbf"))
		if encErr := points.CheckEncoding(t.completion, 0); encErr != nil {
			s.opts.Metrics.UpstreamRequest(0, false, elapsed)
			if d := outOfDomain(encErr); d != "" {
				// JSON, but with a value no context can carry (a lone
				// surrogate, 1e400, a duplicate member): no post_model_call
				// context can be built, which §10.3 asks to record, so the
				// session's trail does not end at pre_model_call. The
				// client is told it is the upstream's answer at fault.
				rn.em.RecordHostFailure(ctx, points.PostModelCall, rn.sess.ps, "model answer outside the value domain: "+d)
			}
			rn.bodyFailed(ctx, mc, t.completion, nil)
			return false
		}
	}
	ok = rn.postModel(ctx, t, &mc)
	t.counted = ok && t.held != nil
	return ok
}

// inputVerdictOf is the content and chat role (role "" when kept) an
// input transform's target gives message in, or a payload-free detail when
// it has no chat form.
func inputVerdictOf(in turnInput, target gjson.Result, content string) (v []byte, role, detail string) {
	v, ok := inputContent(target.Get("content"), content)
	if !ok {
		return nil, "", "input transform value has no chat message form"
	}
	if r := target.Get("role"); r.Str != in.role {
		if role, ok = chatRole(r); !ok {
			return nil, "", "input role has no chat message form"
		}
	}
	return v, role, ""
}

// decodedBody is the answer's body as the points read it, and its length
// when known. The proxy asks for no coding (Accept-Encoding: identity), but
// an upstream that gzips anyway is read through gzip (limits count the
// decoded bytes); any other coding is refused, naming it, rather than
// misread as a broken body.
func (rn *run) decodedBody(ctx context.Context, resp *http.Response, stream bool, upStart time.Time) (io.Reader, int64, bool) {
	ce := strings.TrimSpace(resp.Header.Get("Content-Encoding"))
	var msg string
	switch {
	case ce == "" || strings.EqualFold(ce, "identity"):
		return resp.Body, resp.ContentLength, true
	case strings.EqualFold(ce, "gzip") || strings.EqualFold(ce, "x-gzip"):
		zr, err := gzip.NewReader(resp.Body)
		if err == nil {
			return zr, -1, true
		}
		if ctx.Err() != nil {
			rn.cancelled()
			return nil, 0, false
		}
		msg = "upstream answered a gzip body that does not decode; nothing of it was released"
	default:
		msg = "upstream answered with Content-Encoding " + strconv.Quote(ce) + ", which hooksproxy does not decode; nothing of it was released"
	}
	rn.s.opts.Metrics.UpstreamRequest(0, stream, time.Since(upStart)) // no answer it can read
	rn.refuseAnswer(msg, "upstream_invalid_response", nil)
	return nil, 0, false
}

// preModel runs pre_model_call over body; when it returns false the answer
// has been written.
func (rn *run) preModel(ctx context.Context, body []byte) (modelCall, bool) {
	em, sess := rn.em, rn.sess
	model := bodyGet(body, "model").Str
	reqID := newID("req_")
	ev := points.PreModelCallEvent(model, projectMessages(body)).With("request_id", quoteJSON(reqID))
	if decls, _ := toolDecls(body); decls != nil {
		ev = ev.With("tools", decls)
	}
	// Not lent: a lent buffer stays the request's until its handler
	// returns, and this context (the whole message history, twice) would
	// then be pinned while the answer is awaited and held.
	res := em.Emit(ctx, sess.ps, ev)
	if !res.Proceed {
		rn.blocked(res)
		return modelCall{}, false
	}
	var err error
	if res.Transformed {
		if body, err = sjson.SetRawBytes(body, "messages", []byte(res.Target().Raw)); err != nil {
			rn.failClosed(ev, "messages write-back failed")
			return modelCall{}, false
		}
	}
	return modelCall{body: body, model: model, reqID: reqID}, true
}

// jsonErrorBody reads an uncompressed JSON answer of at most 64 KiB and
// returns its error when it is one ({"error": ...} and no choices) with a
// message; nil otherwise.
func jsonErrorBody(resp *http.Response) *UpstreamStreamError {
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" {
		return nil
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return nil
	}
	const limit = 64 << 10
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil || len(b) > limit || !gjson.ValidBytes(b) || !utf8.Valid(b) {
		return nil
	}
	if !gjson.GetBytes(b, "error").Exists() || gjson.GetBytes(b, "choices").Exists() {
		return nil
	}
	if e := newUpstreamStreamError(0, b); e.Message != "" {
		return e
	}
	return nil
}

// streamFailed answers a held stream that ended in err.
func (rn *run) streamFailed(ctx context.Context, mc modelCall, err error) {
	s, em, sess, w := rn.s, rn.em, rn.sess, rn.w
	if ctx.Err() != nil {
		rn.cancelled()
		return
	}
	if errors.Is(err, errBufferBudget) {
		rn.overBudget(mc)
		return
	}
	if !upstreamAtFault(err) {
		// The upstream's own failures are logged as refused answers
		// below, as a json answer's are.
		s.log.Warn("stream could not be assembled", "session", sess.ps.ID(), "request_id", rn.requestID(), "error", err)
	}
	var upErr *UpstreamStreamError
	var chunkErr *ChunkError
	switch {
	case errors.As(err, &upErr):
		// The upstream failed inside its 200 stream: an upstream
		// error, not model output and not a host failure. Nothing
		// of the stream is released; its error is passed on.
		rn.logRefused("upstream sent an error inside its 200 stream (its message is passed to the client, not logged)", upErr.code(), err)
		msg := s.mask.string(upErr.Message)
		if msg == "" {
			msg = "upstream reported an error inside the stream"
		}
		writeError(w, http.StatusBadGateway, "upstream_error", msg, s.mask.code(upErr.code()))
		rn.upstreamFailed()
	case errors.Is(err, context.DeadlineExceeded):
		rn.streamBroken("upstream timed out during its stream", "upstream_unavailable", err)
	case streamBroke(err):
		rn.streamBroken("upstream stream ended before data: [DONE]", "upstream_stream_incomplete", err)
	case errors.As(err, &chunkErr) && chunkErr.Reason == reasonUnsupportedTool:
		// Well formed, but a tool no point can judge: fail closed as a
		// json answer with one does.
		rn.blocked(em.EmitHostDeny(ctx, sess.ps, mc.incomplete(), points.ReasonAdapterUnsupported, "tool calls other than function calls are not mediated"))
	case errors.As(err, &chunkErr) && chunkErr.Reason == reasonTooManySlots:
		rn.blocked(em.EmitHostDeny(ctx, sess.ps, mc.incomplete(), points.ReasonStreamingUnsupported, "stream carries more choices and tool calls than the proxy holds"))
	case errors.Is(err, ErrMalformedChunk):
		// Not a chat completion stream, like a json body that is not
		// acceptable JSON. The reason is the proxy's own words (one that
		// quotes a member name of the upstream's is left out).
		why := ""
		if errors.As(err, &chunkErr) && chunkErr.Reason != "" && !strings.ContainsAny(chunkErr.Reason, "\"\\") {
			why = " (" + chunkErr.Reason + ")"
		}
		rn.logRefused("upstream stream is not a chat completion stream", "upstream_invalid_response", err)
		writeError(w, http.StatusBadGateway, "upstream_error", "upstream stream is not a chat completion stream"+why+"; nothing of it was released", "upstream_invalid_response")
		rn.upstreamFailed()
	case errors.Is(err, ErrBufferLimit):
		// The proxy cannot hold it: said as the json answer's refusal
		// says it, so an operator tells a limit from a broken upstream.
		rn.blocked(em.EmitHostDeny(ctx, sess.ps, mc.incomplete(), points.ReasonStreamingUnsupported, "upstream stream is over max_buffered_response_bytes"))
	default:
		rn.blocked(em.EmitHostDeny(ctx, sess.ps, mc.incomplete(), points.ReasonStreamingUnsupported, "upstream stream could not be assembled"))
	}
}

// streamBroke reports whether a held stream failed because the upstream
// did not finish it: cut short, reset, unreadable or timed out.
func streamBroke(err error) bool {
	return errors.Is(err, ErrMissingDone) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrStreamRead) ||
		errors.Is(err, context.DeadlineExceeded)
}

// upstreamAtFault reports whether a stream that failed to hold brought no
// usable answer through the upstream's fault: cut or timed out, an error
// inside the 200, or not a chat completion stream. A well-formed stream
// that only the proxy cannot mediate (a tool type, too many slots) or
// that the buffer limits refused is an answer, counted by its status.
func upstreamAtFault(err error) bool {
	var chunkErr *ChunkError
	switch {
	case streamBroke(err), errors.Is(err, ErrUpstreamStreamError):
		return true
	case errors.As(err, &chunkErr):
		return chunkErr.Reason != reasonUnsupportedTool && chunkErr.Reason != reasonTooManySlots
	}
	return false
}

// streamBroken answers a stream the upstream did not finish: an errored
// model call (§12.1), whose post_model_call is not emitted, as there is
// no response to judge; the stream_incomplete shape is for a stream the
// host received but cannot hold. Nothing of it is released; the client
// is answered 502, which SDKs retry, and the upstream metrics count the
// call as an error (code "error").
func (rn *run) streamBroken(detail, code string, cause error) {
	rn.logRefused(detail, code, cause)
	writeError(rn.w, http.StatusBadGateway, "upstream_error", detail+"; nothing of it was released", code)
	rn.upstreamFailed()
}

// refuseAnswer answers 502 for an upstream answer that is neither passed
// on nor judged (cut, not JSON, in the other framing, an error in a 200,
// an encoding not decoded) and logs why: the client's error body and the
// upstream metrics say that it happened, the log line says to which
// session and request, and the cause.
func (rn *run) refuseAnswer(msg string, code any, cause error) {
	rn.logRefused(msg, code, cause)
	writeError(rn.w, http.StatusBadGateway, "upstream_error", msg, code)
	rn.upstreamFailed()
}

// refuseUpstreamError is refuseAnswer for the upstream's own error in a
// 200: its message goes to the client, as an upstream error's does, but
// not to the log, since a provider may quote the input it refused there.
func (rn *run) refuseUpstreamError(e *UpstreamStreamError) {
	rn.logRefused("upstream answered 200 with an error (its message is passed to the client, not logged)", e.code(), e)
	writeError(rn.w, http.StatusBadGateway, "upstream_error", rn.s.mask.string(e.Message), rn.s.mask.code(e.code()))
	rn.upstreamFailed()
}

func (rn *run) logRefused(msg string, code any, cause error) {
	if c, ok := code.(string); ok {
		code = logToken(c)
	}
	args := []any{"session", rn.sess.ps.ID(), "request_id", rn.requestID(), "code", code, "reason", msg}
	if cause != nil {
		args = append(args, "error", cause)
	}
	rn.s.log.Warn("upstream answer refused", args...)
}

// code is the error's code for an OpenAI-shaped body, or nil.
func (e *UpstreamStreamError) code() any {
	if e.Code == "" {
		return nil
	}
	return e.Code
}

// bodyFailed answers a json answer that could not be read whole, is not
// acceptable JSON or is over the buffer limit.
func (rn *run) bodyFailed(ctx context.Context, mc modelCall, completion []byte, err error) {
	s, em, sess := rn.s, rn.em, rn.sess
	if ctx.Err() != nil {
		rn.cancelled()
		return
	}
	if errors.Is(err, errBufferBudget) {
		rn.overBudget(mc)
		return
	}
	if int64(len(completion)) <= s.opts.MaxBufferedResponseBytes {
		// Cut short, or not acceptable JSON: the upstream's fault,
		// answered as such; nothing of it is released.
		msg, code := "upstream answered a body that is not acceptable JSON; nothing of it was released", "upstream_invalid_response"
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			msg, code = "upstream timed out during its body; nothing of it was released", "upstream_unavailable"
		case err != nil:
			msg = "upstream body could not be read whole; nothing of it was released"
		}
		rn.refuseAnswer(msg, code, err)
		return
	}
	rn.blocked(em.EmitHostDeny(ctx, sess.ps, mc.incomplete(), points.ReasonStreamingUnsupported, "upstream response unreadable or over max_buffered_response_bytes"))
}

// callUpstream makes the model call of modelTurn: the body as the points
// left it, with the usage chunk asked for on a stream and the upstream's
// thought signatures put back; false when the request was answered (the
// call failed). Apart from modelTurn so that its frame, which is on the
// stack while pre_model_call runs and while a stream is held, stays small.
func (rn *run) callUpstream(ctx, uctx context.Context, body []byte, t *turn, stream bool) (*http.Response, time.Time, bool) {
	s, sess, w := rn.s, rn.sess, rn.w
	upBody, forced := body, false
	if stream && bodyGet(body, "stream_options.include_usage").Type != gjson.True {
		// The client did not ask: whatever the upstream is sent, the
		// usage chunk and "usage" members stay out of its stream.
		t.omitUsage = true
		// A stream carries usage only when asked for it, and the points
		// (token budgets, rules over usage) need it as a JSON answer has
		// it. Only the JSON boolean true asks: a 1 or "true" that gjson
		// reads as truthy is, to an upstream that reads a boolean, not a
		// request. An upstream that refused it is not sent it again.
		if !s.noStreamOptions.Load() {
			b, err := sjson.SetBytes(body, "stream_options.include_usage", true)
			if err != nil {
				// stream_options is not an object ([]): replaced whole, as
				// a string or null already is.
				b, err = sjson.SetRawBytes(body, "stream_options", []byte(`{"include_usage":true}`))
			}
			if err == nil {
				upBody, forced = b, true
			}
		}
	}
	upBody = s.signatures.attach(rn.sigScope(), upBody)
	// An errored model call (no answer, an error status, an error inside
	// the stream) has no post_model_call: §12.1, there is no response to
	// evaluate and post_model_call is not the vehicle for the provider's
	// error. Nothing of it is released; the error is answered as such.
	out, err := s.upstreamRequest(uctx, rn.r, upBody)
	if err != nil {
		writeError(w, http.StatusBadGateway, "upstream_error", "could not build upstream request", nil)
		rn.end("error", false)
		return nil, time.Time{}, false
	}
	upStart := time.Now()
	resp, err := s.rt.RoundTrip(out)
	if err == nil && forced && (resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnprocessableEntity) {
		resp, upStart, err = rn.withoutStreamOptions(uctx, resp, upStart, body, stream)
	}
	if errors.Is(err, errBuildRequest) {
		writeError(w, http.StatusBadGateway, "upstream_error", "could not build upstream request", nil)
		rn.end("error", false)
		return nil, time.Time{}, false
	}
	if err != nil {
		if ctx.Err() != nil {
			// The client went away, or the server is closing: the call was
			// abandoned before any answer, which says nothing of the
			// upstream's health, so it is not counted as its error.
			rn.cancelled()
			return nil, time.Time{}, false
		}
		s.opts.Metrics.UpstreamRequest(0, stream, time.Since(upStart))
		s.log.Warn("upstream call failed", "session", sess.ps.ID(), "request_id", rn.requestID(), "error", err)
		writeError(w, http.StatusBadGateway, "upstream_error", "upstream unreachable or timed out", "upstream_unavailable")
		rn.upstreamFailed()
		return nil, time.Time{}, false
	}
	return resp, upStart, true
}

// noteUpstreamID adds the upstream's own request id, for a support ticket,
// whatever the answer turns out to be: one header line listing every
// upstream call's id in order, the proxy's own continuations and retries
// included (a client that reads one line of a repeated header would miss
// some). An id that is not a sane token (or holds the list's comma) is
// left out: the header reaches the client even on a deny, so it must not
// carry the upstream's text.
func noteUpstreamID(w http.ResponseWriter, resp *http.Response) {
	if id := resp.Header.Get("X-Request-Id"); saneID(id) && !strings.Contains(id, ",") {
		if have := w.Header().Get("X-Upstream-Request-Id"); have != "" {
			id = have + ", " + id
		}
		w.Header().Set("X-Upstream-Request-Id", id)
	}
}

// errBuildRequest: the upstream request could not be built.
var errBuildRequest = errors.New("proxy: could not build upstream request")

// withoutStreamOptions looks at a 400 or 422 to a streamed request the
// proxy added stream_options to (the client sent none): when the upstream
// names it (some strict OpenAI-compatible servers refuse it), the request
// is sent once more as the client wrote it (plain, with the signatures),
// and when that one is answered, the upstream is not sent stream_options
// again until the process restarts; such a stream then carries no usage,
// which a token budget with require_usage refuses. Any other refusal is
// returned to be relayed whole. Apart from modelTurn so that its frames
// are on the stack only in that case.
func (rn *run) withoutStreamOptions(ctx context.Context, resp *http.Response, upStart time.Time, plain []byte, stream bool) (*http.Response, time.Time, error) {
	s := rn.s
	if bodyGet(plain, "stream_options").Exists() {
		return resp, upStart, nil // the client's own: its refusal is the client's
	}
	peek, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if rerr != nil || !bytes.Contains(peek, []byte("stream_options")) {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(peek), resp.Body), resp.Body}
		return resp, upStart, nil
	}
	noteUpstreamID(rn.w, resp)
	resp.Body.Close()
	status := resp.StatusCode
	s.opts.Metrics.UpstreamRequest(status, stream, time.Since(upStart))
	out, err := s.upstreamRequest(ctx, rn.r, s.signatures.attach(rn.sigScope(), plain))
	if err != nil {
		return nil, time.Time{}, errBuildRequest
	}
	upStart = time.Now()
	resp, err = s.rt.RoundTrip(out)
	// Only an answer to the request without it shows the upstream refuses
	// stream_options (an error that merely echoed the body fails again):
	// then it is left out from now on, for every session.
	if err == nil && resp.StatusCode >= 200 && resp.StatusCode <= 299 && s.noStreamOptions.CompareAndSwap(false, true) {
		s.log.Warn("upstream refused stream_options; streams are sent without it from now on, and carry no usage unless the client asks", "status", status)
	}
	return resp, upStart, err
}

// outOfDomain returns the value-free "path: problem" of an encoding error
// that is about a value rather than the JSON itself (not JSON, or not
// UTF-8, is the upstream's error), or "".
func outOfDomain(err error) string {
	var de *points.DomainError
	if !errors.As(err, &de) {
		return ""
	}
	switch de.Problem {
	case points.ProblemSurrogate, points.ProblemNonFinite, points.ProblemDuplicateKey, points.ProblemDepth:
		return de.Error()
	}
	return ""
}

// postModel checks a held answer and runs post_model_call over it; when it
// returns false the answer has been written.
func (rn *run) postModel(ctx context.Context, t *turn, mc *modelCall) bool {
	s, em, sess := rn.s, rn.em, rn.sess
	model, reqID := mc.model, mc.reqID
	var err error
	if t.held != nil {
		s.opts.Metrics.BufferedResponseBytes(int(t.held.cs.Size()))
	} else {
		s.opts.Metrics.BufferedResponseBytes(len(t.completion))
	}
	v := viewCompletion(t.completion)
	if t.held == nil && (v.choices == nil || string(v.choices) == "null") && slices.Contains(v.unjudgedTop, "error") {
		s.opts.Metrics.UpstreamRequest(0, false, t.upstreamTime)
		// A 200 whose body is an error (OpenRouter and LiteLLM answer
		// provider failures so): the upstream's failure, passed on as a
		// stream's error event is, not a response to judge.
		e := newUpstreamStreamError(0, t.completion)
		if e.Message == "" {
			e.Message = "upstream answered 200 with an error body"
		}
		rn.refuseUpstreamError(e)
		return false
	}
	if t.held == nil {
		code := t.upstreamCode
		if v.badShape || v.badToolShape || v.choices == nil || string(v.choices) == "null" {
			// No chat completion ({}, {"detail": ...}, a member of the
			// wrong type): refused below, and the upstream's error, as
			// a stream's malformed chunk is.
			code = 0
		}
		s.opts.Metrics.UpstreamRequest(code, false, t.upstreamTime)
	}
	if u := gjson.ParseBytes(v.usage); u.IsObject() {
		s.opts.Metrics.Tokens(u.Get("prompt_tokens").Int(), u.Get("completion_tokens").Int())
	}

	if v.badShape {
		// Refused as a stream with such a chunk is: a member released as
		// sent that the points could not have judged as sent.
		rn.refuseAnswer("upstream answered a choice, message, finish_reason, logprobs, index, id, object, created, service_tier or system_fingerprint of a type the chat wire does not have; nothing of it was released", "upstream_invalid_response", nil)
		return false
	}

	// Only choice 0 is judged, so a response with more choices fails closed
	// rather than release an unjudged one.
	if v.nChoices != 1 {
		rn.blocked(em.EmitHostDeny(ctx, sess.ps, mc.incomplete(), points.ReasonAdapterUnsupported, "response must carry exactly one choice"))
		return false
	}

	// Legacy function calls and custom tools would bypass the tool seam:
	// fail closed.
	if v.foreignTool {
		rn.blocked(em.EmitHostDeny(ctx, sess.ps, mc.incomplete(), points.ReasonAdapterUnsupported, "tool calls other than function calls are not mediated"))
		return false
	}
	if !isNull(v.fnCall) {
		rn.blocked(em.EmitHostDeny(ctx, sess.ps, mc.incomplete(), points.ReasonAdapterUnsupported, "legacy function_call responses are not mediated"))
		return false
	}
	// An answer whose text is only in a member the chat wire does not
	// have (a choice's text, as the legacy completions API puts it, or a
	// message in a stream's chunks) would be released empty once that
	// member is removed: refused, rather than a silent empty answer.
	if v.answerEmpty() && (v.answerElsewhere() || t.held != nil && t.held.cs.AnswerElsewhere()) {
		rn.blocked(em.EmitHostDeny(ctx, sess.ps, mc.incomplete(), points.ReasonAdapterUnsupported, "the answer's text is in members the chat wire does not have"))
		return false
	}
	rewrote := false
	if v.objectArgs && !v.badToolShape {
		if t.completion, err = stringifyObjectArgs(t.completion); err != nil {
			rn.blocked(em.EmitHostDeny(ctx, sess.ps, mc.incomplete(), points.ReasonAdapterUnsupported, "tool call arguments could not be rewritten"))
			return false
		}
		v = viewCompletion(t.completion)
		rewrote = true
	}
	if v.badToolShape {
		// arguments that are a number or an array, or an id or name not a
		// string: not the chat wire, which the points would judge as empty
		// while the client gets it as sent. Refused as a stream with it is.
		rn.refuseAnswer("upstream answered a tool call that is not an object, or whose id, name or arguments is not a string; nothing of it was released", "upstream_invalid_response", nil)
		return false
	}
	// A tool call without an id (vLLM streams some so; Gemini's layer
	// sends "") could be neither judged as one call nor answered by the
	// agent: it gets one of the proxy's, which post_model_call judges.
	if v.missingCallID {
		if t.completion, err = fillCallIDs(t.completion); err != nil {
			rn.blocked(em.EmitHostDeny(ctx, sess.ps, mc.incomplete(), points.ReasonAdapterUnsupported, "tool call ids could not be written"))
			return false
		}
		v = viewCompletion(t.completion)
		rewrote = true
	}
	// The upstream's extra_content (Gemini's thought signatures) and
	// reasoning members (DeepSeek's reasoning_content, OpenRouter's
	// reasoning_details) are kept for the requests
	// that carry these calls back, under the ids they are released with;
	// the client never gets them.
	rn.sigs = nil
	if len(v.toolCalls) > 0 && (v.toolExtras || slices.ContainsFunc(v.unjudged, isReasoningMember)) {
		rn.sigs = pendingSignatures(t.completion, v.toolExtras)
	}
	// Members no point judges never reach the client.
	var stripped bool
	if t.completion, stripped, err = stripUnjudged(t.completion, &v); err != nil {
		rn.blocked(em.EmitHostDeny(ctx, sess.ps, mc.incomplete(), points.ReasonAdapterUnsupported, "response members could not be removed"))
		return false
	}
	// A stream that carried members its completion leaves out is
	// re-derived rather than replayed, like one whose message had some.
	t.modified = rewrote || stripped || t.held != nil && t.held.cs.Unjudged()

	// post_model_call.
	respModel := gjson.ParseBytes(v.model).Str
	if respModel == "" {
		respModel = model
	}
	response, _ := v.projectResponse(rn.buffer(len(v.answerText()) + 96))
	t.post = points.PostModelCallEvent(respModel, response).With("request_id", quoteJSON(reqID))
	if u := v.usageMember(); u != nil {
		t.post = t.post.With("usage", u)
	}
	res := em.EmitIn(ctx, sess.ps, t.post, rn.buffer)
	if !res.Proceed {
		rn.blocked(res)
		return false
	}
	if res.Transformed {
		if t.completion, err = writeBackResponse(t.completion, res.Target()); err != nil {
			rn.failClosed(t.post, "response write-back failed")
			return false
		}
		t.modified = true
		v = viewCompletion(t.completion)
	}
	t.view = v
	return true
}

// Bounds of drainAfterDone: what may follow data: [DONE] and how long the
// upstream may take to end its body.
const (
	drainMax  = 64 << 10
	drainWait = 50 * time.Millisecond
)

// drainAfterDone reads what follows data: [DONE], normally only the end of
// the chunked body, so that the transport can reuse the upstream
// connection: a body closed before its end closes the connection, and every
// stream then paid for a new one (with a real upstream, a TLS handshake).
// It is bounded: an upstream that sends more than drainMax or keeps the
// body open past drainWait loses its connection (cancel aborts the read)
// instead of holding the answer. What it reads is discarded, as the stream
// reader ignores anything after [DONE].
func drainAfterDone(body io.Reader, cancel context.CancelFunc) {
	t := time.AfterFunc(drainWait, cancel)
	_, _ = io.CopyN(io.Discard, body, drainMax)
	t.Stop()
}

// release writes the permitted response: the upstream events one for one
// when nothing changed, otherwise events re-derived from the verdicted
// completion (rendered first, so a failure is known before any byte).
//
// A final answer ends a header-less run, and its agent_shutdown is emitted
// before the answer is written: a client that has any byte of the answer
// finds the run's records complete, and a slow shutdown policy cannot be
// cut by the answer's write deadline (which starts with the write). The
// answer then goes out with the handler's return, in as few writes as the
// server's buffer allows.
func (rn *run) release(t *turn, body, completion []byte, modified, final bool) {
	w := rn.w
	// The request is answered: so are the results it carried (a replay of
	// them now opens a turn). Not before: a model call of the proxy's own
	// continuation may still fail, and the client's retry is the same
	// follow-up.
	if rn.pendingAnswered != nil {
		rn.s.sessions.answer(rn.sess, rn.pendingAnswered)
		rn.pendingAnswered = nil
	}
	var rendered []byte
	var err error
	if modified {
		// Token log-probabilities carry the original text, not the verdicted one.
		if lp := gjson.Get(view(completion), "choices.0.logprobs"); lp.Exists() && lp.Type != gjson.Null {
			if completion, err = sjson.SetRawBytes(completion, "choices.0.logprobs", []byte("null")); err != nil {
				rn.failClosed(t.post, "logprobs could not be removed")
				return
			}
		}
	}
	if t.held != nil && modified {
		if rendered, err = t.held.render(completion, !t.omitUsage); err != nil {
			rn.failClosed(t.post, "verdicted response could not be re-derived as a stream")
			return
		}
	}
	if final {
		rn.end("completed", false)
	}
	copyHeaders(w.Header(), t.resp.Header)
	rn.s.mask.header(w.Header())
	if t.held != nil {
		keepMediaType(w.Header(), "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Accel-Buffering", "no")
		if modified {
			err = writeWhole(w, t.resp.StatusCode, rendered)
		} else {
			err = t.held.replay(w, t.resp.StatusCode, &rn.s.writers, t.omitUsage)
		}
	} else {
		keepMediaType(w.Header(), "application/json")
		err = writeWhole(w, t.resp.StatusCode, completion)
	}
	if err != nil {
		rn.s.log.Warn("client write failed", "session", rn.sess.ps.ID(), "request_id", rn.requestID(), "error", err)
	}
}

// maxTurnInputs bounds the input emissions one request makes.
const maxTurnInputs = 256

// bodyReadTimeout bounds reading one request body: a client that stalls
// mid-body holds a connection and a buffer no longer than this, and a
// second more per 64 KiB the body may carry (its declared length, or the
// limit when none is declared), so a large upload over a slow link is not
// cut (8 MiB: 3 min 8 s).
const bodyReadTimeout = time.Minute

// bodyDeadline is how long reading a body of declared bytes (negative:
// unknown) may take when it may carry at most limit.
func bodyDeadline(declared, limit int64) time.Duration {
	if declared < 0 || declared > limit {
		declared = limit
	}
	return bodyReadTimeout + perSize(declared)
}

// perSize is a second per 64 KiB of n bytes, at most an hour (a limit near
// int64's range would otherwise overflow the duration into the past).
func perSize(n int64) time.Duration {
	return time.Duration(min(max(n, 0)>>16, 3600)) * time.Second
}

// readBounded runs read (of a request body of declared bytes, at most
// limit) under the body deadline, then lifts it: left on, it would cut the
// connection's watch for a client going away, and with it the request,
// during a long model call. A failed read keeps it and marks the answer
// Connection: close, or net/http would wait, with no deadline, for the
// rest of the body before it sends the error (its drain of an unread
// body), and a client that stalled mid-body would hold the connection
// for as long as it liked.
func (s *Server) readBounded(w http.ResponseWriter, declared, limit int64, read func() ([]byte, error)) ([]byte, error) {
	rc := http.NewResponseController(w)
	d := bodyDeadline(declared, limit)
	if s.bodyTimeout > 0 {
		d = s.bodyTimeout
	}
	_ = rc.SetReadDeadline(time.Now().Add(d)) // unsupported writers (tests) have none
	b, err := read()
	if err != nil {
		w.Header().Set("Connection", "close")
		return nil, err
	}
	_ = rc.SetReadDeadline(time.Time{})
	return b, nil
}

// writeDeadline bounds writing a held answer of n bytes: a minute, and a
// second per 64 KiB beyond, so a client that stops reading frees the
// answer's memory instead of pinning it for as long as its socket stays
// open. net/http lifts it once the response is done.
func writeDeadline(w http.ResponseWriter, n int) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute + perSize(int64(n))))
}

// keepMediaType keeps the upstream's Content-Type when it is media type mt
// as the points judged it: bare, or with charset=utf-8 alone (another
// charset would have a client decode the judged bytes into other text).
// Anything else is set to mt.
func keepMediaType(h http.Header, mt string) {
	ct := h.Get("Content-Type")
	if ct == mt {
		return
	}
	if got, params, err := mime.ParseMediaType(ct); err == nil && got == mt && len(params) == 1 && strings.EqualFold(params["charset"], "utf-8") {
		return
	}
	h.Set("Content-Type", mt)
}

// writeWhole sends a held answer in one write. It sets no Content-Length
// and does not flush: the answer then ends only when the handler returns,
// after what follows it (a session end deferred to this request emits
// agent_shutdown on the way out), so a client that has the whole answer
// also finds the records of its run complete.
func writeWhole(w http.ResponseWriter, status int, body []byte) error {
	writeDeadline(w, len(body))
	w.WriteHeader(status)
	_, err := w.Write(body)
	return err
}

// failClosed answers a host-side failure after a permitted verdict (a
// write-back that could not be applied) and records it.
func (rn *run) failClosed(ev points.Event, detail string) {
	res := rn.em.EmitHostDeny(rn.r.Context(), rn.sess.ps, ev, points.ReasonTransformInvalid, detail)
	rn.blocked(res)
}

// readBody is io.ReadAll into one exactly sized allocation: with a declared
// length within limit it reads straight into a buffer of that size;
// otherwise it reads into a pooled buffer and copies the result out. (A
// doubling series from 512 bytes allocates about four times the body.)
func (s *Server) readBody(r io.Reader, declared, limit int64) ([]byte, error) {
	if declared > 0 && declared <= limit {
		b := bytes.NewBuffer(make([]byte, 0, declared+bytes.MinRead))
		_, err := b.ReadFrom(r)
		return b.Bytes(), err
	}
	b := s.getRead()
	defer s.putRead(b)
	_, err := b.ReadFrom(r)
	return bytes.Clone(b.Bytes()), err
}

// readLent is readBody into memory the request borrows until its handler
// returns, instead of a copy of its own.
func (rn *run) readLent(r io.Reader, declared, limit int64) ([]byte, error) {
	if declared > 0 && declared <= limit {
		b := bytes.NewBuffer(rn.buffer(int(declared) + bytes.MinRead))
		_, err := b.ReadFrom(r)
		return b.Bytes(), err
	}
	b := rn.s.getRead()
	rn.reads = append(rn.reads, b)
	_, err := b.ReadFrom(r)
	return b.Bytes(), err
}

func (s *Server) getRead() *bytes.Buffer {
	if b, _ := s.reads.Get().(*bytes.Buffer); b != nil {
		return b
	}
	return bytes.NewBuffer(make([]byte, 0, 64<<10))
}

func (s *Server) putRead(b *bytes.Buffer) {
	if b.Cap() <= 1<<20 { // do not pin outsized buffers
		b.Reset()
		s.reads.Put(b)
	}
}

// checkChatRequest validates the parts of a chat request the proxy relies
// on; it returns a message for the client or "".
func checkChatRequest(body []byte) string {
	// One validating pass (vectorised over string bodies, several times
	// gjson.Valid's speed on a long history) that also refuses duplicate
	// member names at any depth: gjson reads the first of two equal names
	// and the upstream most likely the last, so a duplicate would let the
	// model act on a value no point judged.
	if err := points.CheckEncoding(body, 0); err != nil {
		return "request body is not acceptable JSON: " + err.Error()
	}
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return "request body must be a JSON object"
	}
	// The top level in one walk that jumps over values: each gjson Get of
	// a member after messages would read the whole history again.
	var msgs, model, fns, fnCall, n, stream, tools []byte
	variant := ""
	points.ForEachMember(body, func(name string, v []byte) bool {
		if variant == "" {
			variant = caseVariant(name, requestMembers)
		}
		if variant == "" && len(v) > 0 {
			switch {
			case name == "tools" && v[0] == '[':
				// pre_model_call's tools are read from these.
				variant = nestedCaseVariant(v, toolMembers, toolInner)
			case name == "tool_choice" && v[0] == '{':
				variant = nestedCaseVariant(append(append([]byte{'['}, v...), ']'), toolMembers, toolInner)
			}
		}
		switch name {
		case "stream":
			stream = v
		case "messages":
			msgs = v
		case "model":
			model = v
		case "functions":
			fns = v
		case "function_call":
			fnCall = v
		case "n":
			n = v
		case "tools":
			tools = v
		}
		return true
	})
	if variant != "" {
		return variant
	}
	if r := checkTools(tools); r != "" {
		return r
	}
	if msgs == nil {
		return "missing required parameter: 'messages'"
	}
	if model == nil {
		// Left to the upstream's default, the model would be one no
		// pre_model_call judged (a models binding sees "").
		return "missing required parameter: 'model'"
	}
	if msgs[0] != '[' || len(bytes.TrimLeft(msgs[1:], " \t\r\n")) < 2 {
		return "'messages' must be a non-empty array"
	}
	// A tool result must answer a call of an earlier assistant message:
	// the tool points need the call's name and arguments, and a result for
	// a call nobody made has no point to pass through (OpenAI refuses it
	// too). Legacy function results have no id to pair them by.
	bad := ""
	var calls map[string]struct{}
	points.ForEachElement(msgs, func(m []byte) bool {
		if m[0] != '{' {
			bad = "each message must be an object with a string 'role'"
			return false
		}
		role, toolCallID, toolCalls, content, variant := checkedMessageFields(m, true)
		if variant != "" {
			bad = variant
			return false
		}
		if len(role) == 0 || role[0] != '"' {
			bad = "each message must be an object with a string 'role'"
			return false
		}
		switch r := gjson.ParseBytes(role).Str; r {
		case "assistant":
			if len(toolCalls) > 0 && toolCalls[0] != '[' && string(toolCalls) != "null" {
				bad = "an assistant message's 'tool_calls' must be an array"
				return false
			}
			if len(toolCalls) > 0 && toolCalls[0] == '[' {
				points.ForEachElement(toolCalls, func(c []byte) bool {
					if c[0] != '{' {
						bad = "each of an assistant message's 'tool_calls' must be an object"
						return false
					}
					if bad = historyCallShape(c); bad != "" {
						return false
					}
					if id := gjson.GetBytes(c, "id"); id.Type == gjson.String && id.Str != "" {
						if calls == nil {
							calls = map[string]struct{}{}
						}
						calls[id.Str] = struct{}{}
					}
					return true
				})
			}
		case "tool":
			id := gjson.ParseBytes(toolCallID)
			if id.Type != gjson.String || id.Str == "" {
				bad = "each 'tool' message must carry a string 'tool_call_id'"
			} else if _, ok := calls[id.Str]; !ok {
				bad = "a 'tool' message must answer a tool call of an earlier 'assistant' message (its 'tool_call_id' matches none)"
			}
		case "function":
			bad = "'function' messages (legacy function calling) are not mediated; use 'tools' and 'tool' messages"
		case "system", "developer", "user":
			// The text input judges: a number, or parts that are not
			// objects, is no content a point could read (the chat API
			// refuses it too), and a lenient upstream might still show
			// it to the model.
			if !textOrParts(content) {
				bad = "each " + r + " message's 'content' must be a string or an array of content parts"
			}
		default:
			// A role the points do not know ("User", "human") would reach
			// a lenient upstream without input judging it, as the chat
			// API refuses it too.
			bad = "each message's 'role' must be one of system, developer, user, assistant or tool"
		}
		return bad == ""
	})
	if bad != "" {
		return bad
	}
	if model != nil && model[0] != '"' {
		return "'model' must be a string"
	}
	if stream != nil && string(stream) != "true" && string(stream) != "false" && string(stream) != "null" {
		// Read as false, a "yes" the upstream takes for true would stream
		// an answer the proxy holds as a JSON body.
		return "'stream' must be a boolean"
	}
	for _, kv := range []struct {
		k string
		v []byte
	}{{"functions", fns}, {"function_call", fnCall}} {
		if kv.v != nil && string(kv.v) != "null" {
			return "'" + kv.k + "' (legacy function calling) is not mediated; use 'tools', which every tool point governs"
		}
	}
	if n != nil && string(n) != "null" && gjson.ParseBytes(n).Int() != 1 {
		return "hooksproxy mediates one choice per request: 'n' must be 1"
	}
	return ""
}

// historyCallShape refuses a tool call in the history whose function the
// tool points would misread: the points judge its result with the call's
// name and arguments read as strings (the chat API's types), so an object,
// number or array there would be judged as no arguments (or no name) while
// a lenient upstream read the value itself.
func historyCallShape(c []byte) string {
	fn := gjson.GetBytes(c, "function")
	switch {
	case !fn.Exists() || fn.Type == gjson.Null:
		return ""
	case !fn.IsObject():
		return "each tool call's 'function' must be an object"
	}
	if name := fn.Get("name"); name.Exists() && name.Type != gjson.String {
		return "each tool call's 'function.name' must be a string"
	}
	if args := fn.Get("arguments"); args.Exists() && args.Type != gjson.String && args.Type != gjson.Null {
		return "each tool call's 'function.arguments' must be a string (the JSON text of the arguments)"
	}
	return ""
}

// textOrParts reports whether raw (a message's content, nil when absent)
// is a string or an array of objects, read from the raw bytes (no copy of
// a long content).
func textOrParts(raw []byte) bool {
	switch {
	case len(raw) == 0:
		return false
	case raw[0] == '"':
		return true
	case raw[0] != '[':
		return false
	}
	ok := true
	points.ForEachElement(raw, func(e []byte) bool {
		ok = len(e) > 0 && e[0] == '{'
		return ok
	})
	return ok
}

// checkTools refuses a tools member whose tools pre_model_call could not
// name: not an array, an element that is not an object, or a function tool
// without a string name (such a tool would reach the model unnamed in
// tools_registered, so no tool policy would see it).
func checkTools(tools []byte) string {
	if tools == nil || string(tools) == "null" {
		return ""
	}
	if tools[0] != '[' {
		return "'tools' must be an array"
	}
	bad := ""
	points.ForEachElement(tools, func(t []byte) bool {
		if t[0] != '{' {
			bad = "each of 'tools' must be an object"
			return false
		}
		tr := gjson.Parse(view(t))
		switch typ := tr.Get("type"); {
		case typ.Exists() && typ.Type != gjson.String:
			bad = "each tool's 'type' must be a string"
			return false
		case typ.Str != "" && typ.Str != "function":
			return true // another kind of tool (custom): not named by a function
		}
		if name := tr.Get("function.name"); name.Type != gjson.String || name.Str == "" {
			bad = "each function tool must have a string 'function.name'"
		}
		return bad == ""
	})
	return bad
}

// The request and message members the proxy or the points read. Go's
// encoding/json, which Ollama, LocalAI and one-api decode requests with,
// matches member names case-insensitively (and folds ſ to s, K to k), so
// "Model" or "meſſages" beside or instead of these would reach such an
// upstream as the member while no point judged it.
var (
	requestMembers = []string{"model", "messages", "stream", "stream_options", "n", "tools",
		"tool_choice", "functions", "function_call", "parallel_tool_calls", "response_format", "max_tokens",
		"max_completion_tokens"}
	messageMembers  = []string{"role", "content", "name", "tool_calls", "tool_call_id", "function_call", "refusal"}
	partMembers     = []string{"type", "text", "image_url", "input_audio", "file", "refusal"}
	toolCallMembers = []string{"id", "type", "function"}
	functionMembers = []string{"name", "arguments"}
	// toolMembers and toolFunctionMembers: a request's tools and
	// tool_choice, which pre_model_call's tools (name, description,
	// parameters) are read from.
	toolMembers   = []string{"type", "function"}
	toolInner     = map[string][]string{"function": {"name", "description", "parameters", "strict"}}
	toolCallInner = map[string][]string{"function": functionMembers}
	partInner     = map[string][]string{
		"image_url":   {"url", "detail"},
		"input_audio": {"data", "format"},
		"file":        {"file_id", "filename", "file_data"},
	}
)

// nestedCaseVariant is caseVariant over the members of each object in the
// array arr (content parts, tool calls) and over the members of those of
// their members inner names (a tool call's function, a part's image_url).
func nestedCaseVariant(arr []byte, names []string, inner map[string][]string) string {
	bad := ""
	points.ForEachElement(arr, func(el []byte) bool {
		points.ForEachMember(el, func(name string, v []byte) bool {
			if bad = caseVariant(name, names); bad == "" && len(v) > 0 && v[0] == '{' {
				if innerNames, ok := inner[name]; ok {
					points.ForEachMember(v, func(n string, _ []byte) bool {
						bad = caseVariant(n, innerNames)
						return bad == ""
					})
				}
			}
			return bad == ""
		})
		return bad == ""
	})
	return bad
}

// caseVariant is the client's message for a member name that equals one of
// names only when case is folded, or "".
func caseVariant(name string, names []string) string {
	for _, k := range names {
		if len(name) >= len(k) && name != k && strings.EqualFold(name, k) {
			return "member '" + name + "' differs from '" + k + "' only in case; member names are case-sensitive"
		}
	}
	return ""
}

// resolveSession finds or creates the session of a request: the session
// header names it; without it, a follow-up that answers an open run's tool
// calls joins that run, and anything else starts a new run.
func (s *Server) resolveSession(r *http.Request, body []byte, msgs []gjson.Result, allowAgent bool) (_ *session, created bool, claimed []string) {
	now := s.opts.Now()
	agentID := ""
	if allowAgent {
		agentID = r.Header.Get("X-Agent-Hooks-Agent")
	}
	if id := r.Header.Get(s.opts.SessionHeader); id != "" {
		sess, created := s.sessions.getAs(id, agentID, false, now)
		return sess, created, nil
	}
	ids, names := toolCallIDsIn(body)
	hashes := map[int][32]byte{}
	prefixAt := func(n int) [32]byte {
		if h, ok := hashes[n]; ok {
			return h
		}
		h := historyHash(msgs[:min(n, len(msgs))])
		hashes[n] = h
		return h
	}
	if sess, claimed := s.sessions.byToolCall(ids, names, prefixAt, now); sess != nil {
		return sess, false, claimed
	}
	sess, created := s.sessions.getAs(newID("run_"), agentID, true, now)
	return sess, created, nil
}

func quoteJSON(s string) []byte { return appendString(make([]byte, 0, len(s)+2), s) }

// fillCallIDs gives each tool call of choice 0 whose id is missing, null
// or empty a fresh one of the proxy's.
func fillCallIDs(completion []byte) ([]byte, error) {
	var err error
	gjson.Get(view(completion), "choices.0.message.tool_calls").ForEach(func(k, c gjson.Result) bool {
		if c.Get("id").Str == "" {
			completion, err = sjson.SetBytes(completion, "choices.0.message.tool_calls."+k.String()+".id", freshCallID("call"))
		}
		return err == nil
	})
	if err != nil {
		return nil, fmt.Errorf("fill tool call ids: %w", err)
	}
	return completion, nil
}

// toolCallIDsOf lists the ids of a completion's tool calls (choice 0).
func toolCallIDsOf(completion []byte) []string {
	var ids []string
	calls := gjson.Get(view(completion), "choices.0.message.tool_calls")
	if !calls.IsArray() {
		return nil // null is no call, and gjson would visit it once
	}
	calls.ForEach(func(_, c gjson.Result) bool {
		ids = append(ids, c.Get("id").Str)
		return true
	})
	return ids
}

// addUsage adds the counts spent (by path under usage) to a completion's
// usage where it holds a count or nothing; ok is false when the
// completion has no usage object.
func addUsage(completion []byte, spent map[string]int64) ([]byte, bool) {
	u := gjson.Get(view(completion), "usage")
	if !u.IsObject() {
		return completion, false
	}
	out := completion
	for _, k := range slices.Sorted(maps.Keys(spent)) {
		cur := u.Get(k)
		n, ok := usageCount(cur)
		if cur.Exists() && !ok {
			continue // not a count this answer keeps (a fraction, text)
		}
		if parent, _, nested := strings.Cut(k, "."); nested {
			if p := u.Get(parent); p.Exists() && !p.IsObject() {
				continue // its details are not an object here
			}
		}
		var err error
		if out, err = sjson.SetBytes(out, "usage."+k, satAdd(n, spent[k])); err != nil {
			return completion, false
		}
	}
	return out, true
}

// satAdd is a+b for non-negative counts, saturating rather than wrapping.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// add sums usage (a usage object's JSON, or nothing) into s.usage: its
// integer members and those of its objects one level down. Names that
// sjson would read as path syntax are left out.
func (s *spent) add(usage []byte) {
	u := gjson.ParseBytes(usage)
	if !u.IsObject() {
		return
	}
	// A name sjson reads as path syntax, or as an array index (digits
	// first), is left out.
	plain := func(k string) bool {
		return k != "" && (k[0] < '0' || k[0] > '9') && !strings.ContainsAny(k, ".*?|#@\\:!=<>%")
	}
	put := func(path string, v gjson.Result) {
		if n, ok := usageCount(v); ok {
			if s.usage == nil {
				s.usage = map[string]int64{}
			}
			s.usage[path] = satAdd(s.usage[path], n)
		}
	}
	if !u.Get("total_tokens").Exists() {
		// A server that reports no total: the call's tokens still count
		// in the answer's total, as its prompt and completion do.
		p, _ := usageCount(u.Get("prompt_tokens"))
		c, _ := usageCount(u.Get("completion_tokens"))
		if p+c > 0 {
			put("total_tokens", gjson.Parse(strconv.FormatInt(satAdd(p, c), 10)))
		}
	}
	u.ForEach(func(k, v gjson.Result) bool {
		if !plain(k.Str) {
			return true
		}
		if v.IsObject() {
			v.ForEach(func(k2, v2 gjson.Result) bool {
				if plain(k2.Str) {
					put(k.Str+"."+k2.Str, v2)
				}
				return true
			})
			return true
		}
		put(k.Str, v)
		return true
	})
}

// usageCount is v as a token count: a non-negative integer.
func usageCount(v gjson.Result) (int64, bool) {
	if v.Type != gjson.Number || strings.ContainsAny(v.Raw, ".eE-") {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Raw, 10, 64)
	return n, err == nil
}

// hasText reports whether an answer text (JSON) is a non-empty string.
func hasText(text []byte) bool {
	t := gjson.ParseBytes(text)
	return t.Type == gjson.String && t.Str != ""
}

// requestID takes the client's X-Request-Id when it is a sane token, or
// makes one, and echoes it on the response.
func requestID(w http.ResponseWriter, r *http.Request) string {
	id := r.Header.Get("X-Request-Id")
	if !saneID(id) {
		id = newID("hpr_")
	}
	w.Header().Set("X-Request-Id", id)
	return id
}

// saneID reports whether id is a request id worth passing on: 1 to 128
// visible ASCII characters.
func saneID(id string) bool {
	return len(id) > 0 && len(id) <= 128 && !strings.ContainsFunc(id, func(c rune) bool { return c < 0x21 || c > 0x7e })
}

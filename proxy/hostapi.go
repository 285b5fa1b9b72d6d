package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// The host API lets a cooperating agent run the tool seam explicitly:
//
//	POST /agent-hooks/v1/sessions/{sid}/tool-calls/{cid}/pre   {name, args}
//	POST /agent-hooks/v1/sessions/{sid}/tool-calls/{cid}/post  {name, args, result, is_error}
//	POST /agent-hooks/v1/sessions/{sid}/end                    {reason}
func (s *Server) mountHostAPI(r chi.Router) {
	r.Route("/agent-hooks/v1/sessions/{sid}", func(r chi.Router) {
		r.Use(func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// The tool call id is checked by the handlers: this
				// middleware runs before the inner routes bind {cid}.
				if msg := checkIdent("session id", pathParam(r, "sid")); msg != "" {
					s.refuse(w, http.StatusBadRequest, msg, "invalid_request")
					return
				}
				next.ServeHTTP(w, r)
			})
		})
		r.Post("/tool-calls/{cid}/pre", s.hostPre)
		r.Post("/tool-calls/{cid}/post", s.hostPost)
		r.Post("/end", s.hostEnd)
	})
}

// maxIdent bounds the ids clients name sessions, agents and tool calls
// by: they go into every context and record.
const maxIdent = 256

// checkIdent returns why v cannot name a session, agent or tool call, or
// "": it must be 1 to maxIdent bytes of UTF-8 without control characters,
// so that two different ids never print alike in records.
func checkIdent(what, v string) string {
	if v == "" || len(v) > maxIdent {
		return what + " must be 1 to " + strconv.Itoa(maxIdent) + " bytes"
	}
	if !utf8.ValidString(v) {
		return what + " must be UTF-8"
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 || unicode.Is(unicode.Cf, r) {
			return what + " must not hold control or format characters"
		}
	}
	return ""
}

// hostBody reads a small JSON object body.
// pathParam is a route parameter decoded: chi matches on the escaped path
// when the request has one, so a session id holding "/" (sent as %2F)
// arrives escaped.
func pathParam(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

func (s *Server) hostBody(w http.ResponseWriter, r *http.Request, max int64) (gjson.Result, bool) {
	return s.hostBodyOr(w, r, max, "")
}

// hostBodyOr is hostBody where an empty body stands for empty (a JSON
// object; "" refuses it).
func (s *Server) hostBodyOr(w http.ResponseWriter, r *http.Request, max int64, empty string) (gjson.Result, bool) {
	// Framed as the chat route's bodies are, except that no Content-Type
	// or another one than application/json is taken.
	if !s.admitFraming(w, r, false) || !s.admitEncoding(w, r) {
		return gjson.Result{}, false
	}
	b, err := s.readBounded(w, r.ContentLength, max, func() ([]byte, error) { return io.ReadAll(http.MaxBytesReader(w, r.Body, max)) })
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			s.refuse(w, http.StatusRequestEntityTooLarge, "request body exceeds "+strconv.FormatInt(max, 10)+" bytes", "request_too_large")
		} else {
			s.refuse(w, http.StatusBadRequest, "could not read request body", "unreadable_body")
		}
		return gjson.Result{}, false
	}
	if len(bytes.TrimSpace(b)) == 0 && empty != "" {
		b = []byte(empty)
	}
	var problem string
	switch {
	case !points.DepthWithin(b, points.DefaultMaxDepth):
		problem = "request body nests deeper than " + strconv.Itoa(points.DefaultMaxDepth) + " levels"
	case !gjson.ValidBytes(b):
		problem = "request body is not valid JSON"
	case !gjson.ParseBytes(b).IsObject():
		problem = "request body must be a JSON object"
	}
	if problem != "" {
		s.refuse(w, http.StatusBadRequest, problem, "invalid_request")
		return gjson.Result{}, false
	}
	if err := points.CheckEncoding(b, 0); err != nil { // duplicates, as checkChatRequest
		s.refuse(w, http.StatusBadRequest, "request body is not acceptable JSON: "+err.Error(), "invalid_request")
		return gjson.Result{}, false
	}
	return gjson.ParseBytes(b), true
}

// hostSession finds the session named sid, starting it (agent_startup) if
// it is new; with onlyOpen it never starts one, and answers 409 for a
// session that is not open.
func (s *Server) hostSession(w http.ResponseWriter, r *http.Request, onlyOpen bool) (*session, *policy, bool) {
	pol := s.pol.Load()
	em := pol.em
	if em == nil {
		writeError(w, http.StatusServiceUnavailable, "agent_hooks_host_error", "no policy loaded", "host_error:no_interceptor")
		return nil, nil, false
	}
	sid := pathParam(r, "sid")
	var sess *session
	var created bool
	if onlyOpen {
		var ending bool
		if sess, ending = s.sessions.existing(sid, s.opts.Now()); sess == nil {
			if ending {
				s.writeSessionEnding(w)
			} else {
				// No session, so no permitted pre: refused without starting one.
				s.refuse(w, http.StatusConflict, "post_tool_call needs a permitted pre_tool_call for this id first", "tool_call_state")
			}
			return nil, nil, false
		}
	} else if sess, created = s.sessions.get(sid, false, s.opts.Now()); sess == nil {
		s.writeSessionEnding(w)
		return nil, nil, false
	}
	if !created && !s.awaitStartup(r.Context(), sess) {
		s.sessions.release(sess, s.opts.Now())
		writeError(w, http.StatusServiceUnavailable, "agent_hooks_host_error", "request cancelled while the session was starting", "cancelled")
		return nil, nil, false
	}
	if created {
		if !s.startup(r.Context(), w, em, sess, nil) {
			s.sessions.release(sess, s.opts.Now())
			return nil, nil, false
		}
	}
	sess.mu.Lock()
	blocked, cut, deny := sess.blocked, sess.startCut, sess.startDeny
	sess.mu.Unlock()
	if cut {
		s.sessions.release(sess, s.opts.Now())
		s.writeSessionEnding(w)
		return nil, nil, false
	}
	if blocked {
		s.sessions.release(sess, s.opts.Now())
		writeStartupDeny(w, deny)
		return nil, nil, false
	}
	return sess, pol, true
}

// toolSeamAnswer writes the outcome of a tool-seam emission: the control
// error for a policy deny (the agent hands it to the model, the loop goes
// on) and, under the terminate posture, 503 for a host error.
func (s *Server) toolSeamBlocked(w http.ResponseWriter, r *http.Request, pol *policy, sess *session, res *points.Result, control json.RawMessage) {
	if res != nil && terminates(pol.st, *res) {
		writeBlocked(w, *res)
		if s.sessions.end(sess, "error") {
			s.shutdown(r.Context(), pol.em, sess, "error")
		}
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"proceed": false, "control_error": control})
}

func (s *Server) hostPre(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(withTraceparent(points.WithRequestID(r.Context(), requestID(w, r)), r.Header))
	if msg := checkIdent("tool call id", pathParam(r, "cid")); msg != "" {
		s.refuse(w, http.StatusBadRequest, msg, "invalid_request")
		return
	}
	body, ok := s.hostBody(w, r, s.opts.MaxRequestBytes)
	if !ok {
		return
	}
	name := body.Get("name")
	args := body.Get("args")
	if name.Type != gjson.String || name.Str == "" || hasControl(name.Str) {
		s.refuse(w, http.StatusBadRequest, "'name' must be a non-empty string without control characters", "invalid_request")
		return
	}
	var argsRaw []byte
	switch {
	case !args.Exists() || args.Type == gjson.Null:
		argsRaw = []byte("{}")
	case args.IsObject():
		argsRaw = []byte(args.Raw)
	case args.Type == gjson.String:
		argsRaw = argsObject(args.Str)
	default:
		s.refuse(w, http.StatusBadRequest, "'args' must be an object", "invalid_request")
		return
	}
	sess, pol, ok := s.hostSession(w, r, false)
	if !ok {
		return
	}
	defer func() { s.sessions.release(sess, s.opts.Now()) }() // activity ends when the request does
	cid := pathParam(r, "cid")
	// Linked before the pre runs: a chat follow-up carrying this call's
	// result while its pre waits (an approval) is the same turn going on.
	s.sessions.link(sess, []string{cid}, -1)
	ctx, done := s.outlive(r.Context())
	defer done()
	out, res, existing := s.preTool(ctx, pol.em, sess, cid, name.Str, argsRaw)
	if existing && (out.name != name.Str || (!points.JSONEqual(string(out.reqArgs), string(argsRaw)) && !points.JSONEqual(string(out.args), string(argsRaw)))) {
		// The remembered verdict covers that call only, not a different one.
		s.refuse(w, http.StatusConflict, "tool call id already used for a different call", "tool_call_conflict")
		return
	}
	if !out.proceed {
		s.toolSeamBlocked(w, r, pol, sess, res, out.control)
		return
	}
	resArgs := json.RawMessage(out.args)
	if args.Type == gjson.String {
		// Arguments sent as the OpenAI string come back as a string: as
		// sent when nothing changed them (judged as an object, or as
		// raw_arguments when they are not one, but not rewritten), else
		// the transformed object's text.
		if points.JSONEqual(string(out.args), string(argsRaw)) {
			resArgs = json.RawMessage(args.Raw)
		} else {
			resArgs = appendString(nil, argsString(gjson.ParseBytes(out.args)))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"proceed": true, "args": resArgs})
}

func (s *Server) hostPost(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(withTraceparent(points.WithRequestID(r.Context(), requestID(w, r)), r.Header))
	if msg := checkIdent("tool call id", pathParam(r, "cid")); msg != "" {
		s.refuse(w, http.StatusBadRequest, msg, "invalid_request")
		return
	}
	body, ok := s.hostBody(w, r, s.opts.MaxRequestBytes)
	if !ok {
		return
	}
	isErrV := body.Get("is_error")
	if isErrV.Exists() && isErrV.Type != gjson.True && isErrV.Type != gjson.False && isErrV.Type != gjson.Null {
		s.refuse(w, http.StatusBadRequest, "'is_error' must be a boolean", "invalid_request")
		return
	}
	if n := body.Get("name"); n.Exists() && n.Type != gjson.String && n.Type != gjson.Null {
		s.refuse(w, http.StatusBadRequest, "'name' must be a string", "invalid_request")
		return
	}
	sess, pol, ok := s.hostSession(w, r, true)
	if !ok {
		return
	}
	defer func() { s.sessions.release(sess, s.opts.Now()) }() // activity ends when the request does
	cid := pathParam(r, "cid")
	if n := body.Get("name"); n.Type == gjson.String && n.Str != "" {
		sess.mu.Lock()
		tc := sess.tools[cid]
		differs := tc != nil && tc.name != "" && tc.name != n.Str
		sess.mu.Unlock()
		if differs {
			// The result belongs to the call its pre judged, not another.
			s.refuse(w, http.StatusConflict, "tool call id was judged for a different tool", "tool_call_conflict")
			return
		}
	}
	value := []byte(orNull(body.Get("result").Raw))
	isError := isErrV.Type == gjson.True
	var sum [32]byte
	sum = resultSum(value, isError)
	ctx, done := s.outlive(r.Context())
	defer done()
	res, ran, already := s.postTool(ctx, pol.em, sess, cid, value, isError, nil, &sum)
	if !ran {
		msg := "post_tool_call needs a permitted pre_tool_call for this id first"
		if already {
			again, why := s.postAgain(r.Context(), sess, cid, sum, value)
			if again != nil {
				// The same post retried: its verdict, not a second emission.
				writeRawJSON(w, http.StatusOK, again)
				return
			}
			msg = why
		}
		s.refuse(w, http.StatusConflict, msg, "tool_call_state")
		return
	}
	// Retries waiting for this post's answer are woken whatever happens
	// below (posted is idempotent; the answer, when there is one, comes
	// first).
	defer s.posted(sess, cid, nil)
	if !res.Proceed && terminates(pol.st, *res) {
		s.toolSeamBlocked(w, r, pol, sess, res, controlError(points.PostToolCall, res.Verdict)) // the session ends: nothing to answer again
		return
	}
	b := postAnswer(res, value)
	s.posted(sess, cid, b)
	writeRawJSON(w, http.StatusOK, b)
}

// resultSum is the SHA-256 a post's result is known by: its JSON and
// whether it is an error.
func resultSum(value []byte, isError bool) (sum [32]byte) {
	h := sha256.New()
	h.Write(value)
	if isError {
		h.Write([]byte{1})
	}
	h.Sum(sum[:0])
	return sum
}

// postAnswer is the host API's answer to a post_tool_call outcome for
// result value: {proceed, result} or {proceed: false, control_error}.
func postAnswer(res *points.Result, value []byte) []byte {
	switch {
	case !res.Proceed:
		return postAnswerJSON(false, controlError(points.PostToolCall, res.Verdict))
	case res.Transformed:
		return postAnswerJSON(true, json.RawMessage(res.Target().Raw))
	}
	return postAnswerJSON(true, value)
}

// postAnswerJSON is a post's answer: {proceed: true, result: payload} or
// {proceed: false, control_error: payload}.
func postAnswerJSON(proceed bool, payload json.RawMessage) []byte {
	key := "result"
	if !proceed {
		key = "control_error"
	}
	b, _ := json.Marshal(map[string]any{"proceed": proceed, key: payload})
	return b
}

// posted keeps a host post's answer for its retries and wakes those
// waiting for it.
func (s *Server) posted(sess *session, cid string, answer []byte) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if tc := sess.tools[cid]; tc != nil && tc.posted != nil && !tc.hostDone {
		tc.hostAnswer, tc.hostDone = answer, true
		close(tc.posted)
	}
}

// postAgain is the answer to a host post for an id whose post already ran:
// the first post's answer when this one carries the same result (waiting
// for it while the first still decides), or nil and why it is refused.
func (s *Server) postAgain(ctx context.Context, sess *session, cid string, sum [32]byte, value []byte) ([]byte, string) {
	sess.mu.Lock()
	tc := sess.tools[cid]
	if tc != nil && tc.seamPost {
		// The transparent seam ran it: the same result gets its verdict.
		defer sess.mu.Unlock()
		if tc.hostSum != sum {
			return nil, "post_tool_call already ran for this id, from the tool message the agent sent, with another result"
		}
		if a := tc.seamAnswer(value); a != nil {
			return a, ""
		}
		return nil, "post_tool_call for this id is still deciding"
	}
	if tc == nil || !tc.hostPost {
		// A result judged elsewhere (another session of the run).
		sess.mu.Unlock()
		return nil, "post_tool_call already ran for this id, from the tool message the agent sent"
	}
	if tc.hostSum != sum {
		sess.mu.Unlock()
		return nil, "post_tool_call already ran for this id with another result"
	}
	posted := tc.posted
	sess.mu.Unlock()
	select {
	case <-posted:
	case <-ctx.Done():
		return nil, "post_tool_call for this id is still deciding"
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if tc.hostAnswer == nil {
		return nil, "post_tool_call for this id blocked and ended the session"
	}
	return tc.hostAnswer, ""
}

func (s *Server) hostEnd(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(withTraceparent(points.WithRequestID(r.Context(), requestID(w, r)), r.Header))
	body, ok := s.hostBodyOr(w, r, 1<<16, "{}")
	if !ok {
		return
	}
	rv := body.Get("reason")
	if rv.Exists() && rv.Type != gjson.String && rv.Type != gjson.Null {
		s.refuse(w, http.StatusBadRequest, "'reason' must be completed, error or cancelled", "invalid_request")
		return
	}
	reason := rv.Str
	if reason == "" {
		reason = "completed"
	}
	switch reason {
	case "completed", "error", "cancelled":
	default:
		s.refuse(w, http.StatusBadRequest, "'reason' must be completed, error or cancelled", "invalid_request")
		return
	}
	em := s.Emitter()
	if em == nil {
		writeError(w, http.StatusServiceUnavailable, "agent_hooks_host_error", "no policy loaded", "host_error:no_interceptor")
		return
	}
	sid := pathParam(r, "sid")
	s.sessions.mu.Lock()
	sess := s.sessions.byID[sid]
	s.sessions.mu.Unlock()
	var open, deferred bool
	if sess != nil {
		open, deferred = s.sessions.endLater(sess, reason)
	}
	if !open {
		if s.sessions.isEnding(sid) {
			// Already ending: the end asked for is under way.
			writeJSON(w, http.StatusAccepted, map[string]any{"ended": true, "pending": true})
			return
		}
		s.refuse(w, http.StatusNotFound, "no open session with that id", "session_not_found")
		return
	}
	if deferred {
		// Requests are still running: agent_shutdown follows the last one.
		writeJSON(w, http.StatusAccepted, map[string]any{"ended": true, "pending": true})
		return
	}
	res, _ := s.shutdown(r.Context(), em, sess, reason)
	writeJSON(w, http.StatusOK, map[string]any{"ended": true, "decision": res.Verdict.Decision})
}

// adminOnly guards admin routes with the bearer token; an unset token
// disables them.
func (s *Server) adminOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := s.AdminToken()
		if want == "" {
			writeError(w, http.StatusForbidden, "permission_error", "The admin API is disabled: no admin token is configured (HOOKSPROXY_ADMIN_TOKEN).", "admin_disabled")
			return
		}
		// The scheme is case-insensitive (RFC 9110 §11.1); the answers are
		// the approvals API's, so a client handles both alike.
		scheme, got, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		got = strings.TrimSpace(got)
		if !ok || !strings.EqualFold(scheme, "Bearer") || got == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hooksproxy-admin"`)
			writeError(w, http.StatusUnauthorized, "authentication_error", "Missing admin token: send Authorization: Bearer <token>.", "missing_admin_token")
			return
		}
		// Digests compared, so that neither content nor length leaks in
		// timing.
		if a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want)); subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hooksproxy-admin", error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, "authentication_error", "Invalid admin token.", "invalid_admin_token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// outlive returns a context for a host API emission that goes on when its
// client leaves (it still ends with the server): a pre or post waiting for
// an approval stays queued through an HTTP client's timeout, and the
// client's retry of the same call waits for that same decision (one
// emission per id) instead of finding the call withdrawn for good. The
// emission's own bounds (interceptor and resolver timeouts) end it.
//
// Only the emission outlives the client: a wait for another request's
// outcome (a retry's) still ends with the client (waitCtx), or every
// retry an SDK gives up on would stay in its handler until the decision.
func (s *Server) outlive(ctx context.Context) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(s.base, cancel)
	out = context.WithValue(out, clientCtxKey{}, ctx)
	return out, func() { stop(); cancel() }
}

type clientCtxKey struct{}

// waitCtx is the context a wait for another request's outcome ends with:
// the client's own when ctx is outlive's, else ctx.
func waitCtx(ctx context.Context) context.Context {
	if c, ok := ctx.Value(clientCtxKey{}).(context.Context); ok {
		return c
	}
	return ctx
}

// AdminToken returns the admin token of the settings in force, "" when the
// admin API is disabled. Guards mounted by other packages call it per
// request, so a reload that rotates the token applies to them too.
func (s *Server) AdminToken() string {
	if f := s.cur().AdminToken; f != nil {
		return f()
	}
	return ""
}

// AdminOnly exposes the admin guard for routes mounted by other packages.
func (s *Server) AdminOnly(next http.Handler) http.Handler { return s.adminOnly(next) }

// awaitStartup waits until the session's agent_startup has a verdict; false
// when ctx ended first.
func (s *Server) awaitStartup(ctx context.Context, sess *session) bool {
	select {
	case <-sess.startDone:
		return true
	case <-ctx.Done():
		return false
	}
}

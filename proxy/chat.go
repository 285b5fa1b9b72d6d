package proxy

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// run carries one mediated request through its points.
type run struct {
	s    *Server
	em   *points.Emitter
	sess *session
	w    http.ResponseWriter
	r    *http.Request
}

// end closes a header-less run's session with agent_shutdown{reason}; a
// named session outlives its requests.
func (rn *run) end(reason string, force bool) {
	if !rn.sess.headerless && !force {
		return
	}
	if rn.s.sessions.end(rn.sess) {
		rn.s.shutdown(rn.r.Context(), rn.em, rn.sess, reason)
	}
}

// blocked answers a blocking verdict and ends a header-less run.
func (rn *run) blocked(res points.Result) {
	rn.s.log.Info("blocked", "session", rn.sess.ps.ID(), "point", res.Record.InterceptionPoint,
		"reason", res.Record.Verdict.Reason, "sequence", res.Record.Sequence)
	writeBlocked(rn.w, res)
	rn.end("error", false)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	em := s.Emitter()
	if em == nil {
		writeError(w, http.StatusServiceUnavailable, "agent_hooks_host_error", "no policy loaded", "host_error:no_interceptor")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "Content-Type must be application/json", "invalid_content_type")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error",
				"request body exceeds max_request_bytes ("+strconv.FormatInt(s.opts.MaxRequestBytes, 10)+")", "request_too_large")
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "could not read request body", nil)
		return
	}
	if msg := checkChatRequest(body); msg != "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", msg, "invalid_request")
		return
	}

	sess, created := s.resolveSession(r, body)
	defer s.sessions.release(sess, s.opts.Now())
	rn := &run{s: s, em: em, sess: sess, w: w, r: r}
	ctx := r.Context()

	sess.mu.Lock()
	blocked := sess.blocked
	sess.mu.Unlock()
	if blocked {
		// §6.1a: after a startup deny only agent_shutdown may follow.
		writeError(w, http.StatusForbidden, "agent_hooks_denied", "session was denied at agent_startup", "session_blocked")
		return
	}
	if created {
		_, names := toolDecls(body)
		res := em.Emit(ctx, sess.ps, points.StartupEvent(names))
		sess.mu.Lock()
		if res.Proceed {
			sess.started = true
		} else {
			sess.blocked = true
		}
		sess.mu.Unlock()
		if !res.Proceed {
			writeBlocked(w, res)
			if s.sessions.end(sess) {
				s.shutdown(ctx, em, sess, "error")
			}
			return
		}
	}

	// input: a new user turn.
	msgs := gjson.GetBytes(body, "messages").Array()
	last := len(msgs) - 1
	if msgs[last].Get("role").Str == "user" {
		content := msgs[last].Get("content").Raw
		res := em.Emit(ctx, sess.ps, points.InputEvent([]byte(orNull(content)), "user"))
		if !res.Proceed {
			rn.blocked(res)
			return
		}
		if res.Transformed {
			if body, err = sjson.SetRawBytes(body, "messages."+strconv.Itoa(last)+".content", []byte(orNull(res.Target().Get("content").Raw))); err != nil {
				rn.failClosed(points.PreModelCallEvent("", nil), "input write-back failed")
				return
			}
		}
	}

	// pre_model_call.
	model := gjson.GetBytes(body, "model").Str
	reqID := newID("req_")
	ev := points.PreModelCallEvent(model, projectMessages(body)).With("request_id", quoteJSON(reqID))
	if decls, _ := toolDecls(body); decls != nil {
		ev = ev.With("tools", decls)
	}
	res := em.Emit(ctx, sess.ps, ev)
	if !res.Proceed {
		rn.blocked(res)
		return
	}
	if res.Transformed {
		if body, err = sjson.SetRawBytesOptions(body, "messages", []byte(res.Target().Raw), nil); err != nil {
			rn.failClosed(points.PreModelCallEvent(model, nil), "messages write-back failed")
			return
		}
	}

	// The upstream call.
	uctx, cancel := context.WithTimeout(ctx, s.opts.UpstreamTimeout)
	defer cancel()
	out, err := s.upstreamRequest(uctx, r, body)
	if err != nil {
		writeError(w, http.StatusBadGateway, "upstream_error", "could not build upstream request", nil)
		rn.end("error", false)
		return
	}
	resp, err := s.client.Do(out)
	if err != nil {
		if ctx.Err() != nil {
			rn.end("cancelled", false) // the client went away
			return
		}
		s.log.Warn("upstream call failed", "session", sess.ps.ID(), "error", errors.Unwrap(err))
		writeError(w, http.StatusBadGateway, "upstream_error", "upstream unreachable or timed out", "upstream_unavailable")
		rn.end("error", false)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Upstream errors are not model output: pass them through.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, s.opts.MaxBufferedResponseBytes))
		copyHeaders(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
		rn.end("error", false)
		return
	}

	// Hold the whole response, headers included.
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var held *heldStream
	var completion []byte
	if ct == "text/event-stream" {
		held, completion, err = s.holdStream(resp.Body)
		if err != nil {
			s.log.Warn("stream could not be assembled", "session", sess.ps.ID(), "error", err)
			ev := points.PostModelCallEvent(model, []byte(`{"content":null,"tool_calls":[],"finish_reason":"stream_incomplete"}`)).With("request_id", quoteJSON(reqID))
			rn.blocked(em.EmitHostDeny(ctx, sess.ps, ev, points.ReasonStreamingUnsupported, "upstream stream could not be assembled"))
			return
		}
	} else {
		completion, err = io.ReadAll(io.LimitReader(resp.Body, s.opts.MaxBufferedResponseBytes+1))
		if err != nil || int64(len(completion)) > s.opts.MaxBufferedResponseBytes || !gjson.ValidBytes(completion) {
			if ctx.Err() != nil {
				rn.end("cancelled", false)
				return
			}
			ev := points.PostModelCallEvent(model, []byte(`{"content":null,"tool_calls":[],"finish_reason":"stream_incomplete"}`)).With("request_id", quoteJSON(reqID))
			rn.blocked(em.EmitHostDeny(ctx, sess.ps, ev, points.ReasonStreamingUnsupported, "upstream response unreadable or over max_buffered_response_bytes"))
			return
		}
	}

	// post_model_call.
	respModel := gjson.GetBytes(completion, "model").Str
	if respModel == "" {
		respModel = model
	}
	response, _ := projectResponse(completion)
	pev := points.PostModelCallEvent(respModel, response).With("request_id", quoteJSON(reqID))
	if u := usageMember(completion); u != nil {
		pev = pev.With("usage", u)
	}
	res = em.Emit(ctx, sess.ps, pev)
	if !res.Proceed {
		rn.blocked(res)
		return
	}
	modified := false
	if res.Transformed {
		if completion, err = writeBackResponse(completion, res.Target()); err != nil {
			rn.failClosed(pev, "response write-back failed")
			return
		}
		modified = true
	}

	calls := gjson.GetBytes(completion, "choices.0.message.tool_calls").Array()
	final := len(calls) == 0
	if !final {
		ids := make([]string, 0, len(calls))
		for _, c := range calls {
			ids = append(ids, c.Get("id").Str)
		}
		s.sessions.link(sess, ids)
	} else {
		// output: the turn's final answer.
		content := gjson.GetBytes(completion, "choices.0.message.content").Raw
		res = em.Emit(ctx, sess.ps, points.OutputEvent([]byte(orNull(content))))
		if !res.Proceed {
			rn.blocked(res)
			return
		}
		if res.Transformed {
			if completion, err = sjson.SetRawBytes(completion, "choices.0.message.content", []byte(orNull(res.Target().Get("content").Raw))); err != nil {
				rn.failClosed(points.OutputEvent(nil), "output write-back failed")
				return
			}
			modified = true
		}
	}

	// Release.
	var rendered []byte
	if held != nil && modified {
		if rendered, err = held.render(completion, gjson.GetBytes(body, "stream_options.include_usage").Bool()); err != nil {
			rn.failClosed(pev, "verdicted response could not be re-derived as a stream")
			return
		}
	}
	copyHeaders(w.Header(), resp.Header)
	if held != nil {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Accel-Buffering", "no")
		w.WriteHeader(resp.StatusCode)
		if modified {
			_, err = w.Write(rendered)
			if err == nil {
				err = http.NewResponseController(w).Flush()
			}
		} else {
			err = held.replay(w)
		}
		if err != nil {
			s.log.Warn("client write failed", "session", sess.ps.ID(), "error", err)
		}
	} else {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(completion)
	}
	if final {
		rn.end("completed", false)
	}
}

// failClosed answers a host-side failure after a permitted verdict (a
// write-back that could not be applied) and records it.
func (rn *run) failClosed(ev points.Event, detail string) {
	res := rn.em.EmitHostDeny(rn.r.Context(), rn.sess.ps, ev, points.ReasonTransformInvalid, detail)
	rn.blocked(res)
}

// checkChatRequest validates the parts of a chat request the proxy relies
// on; it returns a message for the client or "".
func checkChatRequest(body []byte) string {
	if !gjson.ValidBytes(body) {
		return "request body is not valid JSON"
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return "request body must be a JSON object"
	}
	msgs := root.Get("messages")
	if !msgs.Exists() {
		return "missing required parameter: 'messages'"
	}
	if !msgs.IsArray() || len(msgs.Array()) == 0 {
		return "'messages' must be a non-empty array"
	}
	bad := ""
	msgs.ForEach(func(_, m gjson.Result) bool {
		if !m.IsObject() || m.Get("role").Type != gjson.String {
			bad = "each message must be an object with a string 'role'"
		}
		return bad == ""
	})
	if bad != "" {
		return bad
	}
	if m := root.Get("model"); m.Exists() && m.Type != gjson.String {
		return "'model' must be a string"
	}
	if n := root.Get("n"); n.Exists() && n.Type != gjson.Null && n.Int() != 1 {
		return "hooksproxy mediates one choice per request: 'n' must be 1"
	}
	return ""
}

// resolveSession finds or creates the session of a request: the session
// header names it; without it, a follow-up that answers an open run's tool
// calls joins that run, and anything else starts a new run.
func (s *Server) resolveSession(r *http.Request, body []byte) (*session, bool) {
	now := s.opts.Now()
	if id := r.Header.Get(s.opts.SessionHeader); id != "" {
		return s.sessions.get(id, false, now)
	}
	if sess := s.sessions.byToolCall(toolCallIDsIn(body), now); sess != nil {
		return sess, false
	}
	return s.sessions.get(newID("run_"), true, now)
}

func quoteJSON(s string) []byte { return appendString(nil, s) }

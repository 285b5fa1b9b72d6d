package proxy

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// toolCall is what a session remembers of one tool call id, so that each id
// gets exactly one pre_tool_call and one post_tool_call whichever seam sees
// it first, and so that rewrites stay applied to the history the agent
// replays on every request.
type toolCall struct {
	name string
	// pre_tool_call outcome.
	preDone bool
	proceed bool
	args    []byte          // arguments after transform (what the tool gets)
	control json.RawMessage // control error when withheld
	// post_tool_call outcome. postReady is closed once result is set by
	// the post that ran: a request carrying the same result meanwhile
	// waits for it rather than pass the result unjudged (§6.1).
	postDone  bool
	postReady chan struct{}
	// hostAnswer is the host API's answer to the post that ran, kept with
	// the SHA-256 of the result it was asked about (hostSum, set as the
	// post starts, with hostPost true), so that the same post retried (its
	// answer lost, or given up on while an approval waited) is answered
	// again instead of refused; posted is closed once hostAnswer is set.
	hostAnswer []byte
	hostSum    [32]byte
	hostPost   bool
	hostDone   bool
	posted     chan struct{}
	// seamPost: the post ran for a role:tool message (the transparent
	// seam), with hostSum its result's; a host API post of the same
	// result is answered from it (seamAnswer), built only then.
	// seamTarget is the transformed result's JSON, kept only when a
	// transform changed it.
	seamPost   bool
	seamTarget []byte
	postDenied bool // the post that ran blocked the result
	// result is the content the model gets for this call: the control
	// error of a blocked pre or post, or the result post_tool_call
	// permitted (after its transform). A role:tool message that says
	// anything else is rewritten to it; nil leaves the message alone.
	result *string
	// released: the transparent seam judged this call in a model's
	// answer (and released or withheld it), so the agent's history is
	// made to name it as the model did.
	released bool
	// sentArgs is the arguments string the seam released to the agent,
	// byte for byte: the history is compared with it, so a call released
	// as the model wrote it goes back upstream unchanged (prompt caches
	// key on exact bytes).
	sentArgs string
	// adopted: the call was first seen answered (its pre ran elsewhere,
	// or before a restart), so only its post was emitted here.
	adopted bool
	idKey   string // the call id, owned
	// withheld calls hang off the permitted sibling that anchors them;
	// rawArgs is the model's own arguments string of a withheld call,
	// replayed to the model only.
	withheld []string
	// order is, on an anchor, the ids of all the calls of its answer in
	// the model's order, released and withheld: a withheld call goes back
	// upstream at its place (Gemini checks its thought signature on the
	// first call of a turn).
	order   []string
	rawArgs string
	// ready is closed once the pre outcome is known; reqArgs are the
	// arguments the first pre was asked about.
	ready   chan struct{}
	reqArgs []byte
}

// controlError is the spec's control error handed to the model instead of a
// blocked tool call or result; it never carries the denied payload.
func controlError(p points.Point, v points.Verdict) json.RawMessage {
	reason := v.Reason
	if reason == "" {
		reason = "deny"
	}
	b := []byte(`{"error":"Tool call blocked by agent-hooks at ` + string(p) + `.","reason":`)
	b = appendString(b, reason)
	// Bounded as on the record and a 403 (their projection).
	msg := points.Project(v).Message
	if msg != "" && reason != string(points.ReasonContextInvalid) {
		// As on a 403 (writeBlockedRetry): context_invalid's detail names
		// a path into the call or result it refused, so it stays on the
		// record.
		b = append(b, `,"message":`...)
		b = appendString(b, msg)
	}
	return append(b, '}')
}

// terminates reports whether a blocking verdict at the tool seam halts the
// run: only host errors, and only under the terminate posture (§6.2).
func terminates(st *Settings, res points.Result) bool {
	return res.HostError() && st.ToolSeamHostError == "terminate"
}

// preOutcome is a pre_tool_call outcome copied out under the session lock.
type preOutcome struct {
	name    string
	proceed bool
	args    []byte
	control json.RawMessage
	reqArgs []byte
}

// preTool runs pre_tool_call once for id. A call for an id that already
// had (or is having) its pre waits for that outcome and reports existing:
// exactly one emission per id, even under concurrent callers.
func (s *Server) preTool(ctx context.Context, em *points.Emitter, sess *session, id, name string, args []byte) (out preOutcome, res *points.Result, existing bool) {
	sess.mu.Lock()
	if tc := sess.tools[id]; tc != nil {
		ready := tc.ready
		sess.mu.Unlock()
		if ready != nil {
			select {
			case <-ready:
			case <-waitCtx(ctx).Done():
				return preOutcome{name: name, control: controlError(points.PreToolCall, points.Deny("cancelled", ""))}, nil, true
			}
		}
		sess.mu.Lock()
		defer sess.mu.Unlock()
		return tc.outcome(), nil, true
	}
	// id and name may be views into the completion (gjson on view), which
	// the request only borrows: the session keeps clones. args is the
	// caller's own (argsObject's copy, a host API body).
	tc := &toolCall{name: strings.Clone(name), ready: make(chan struct{}), reqArgs: args, idKey: strings.Clone(id)}
	sess.addTool(tc.idKey, tc)
	sess.mu.Unlock()
	r := em.Emit(ctx, sess.ps, points.PreToolCallEvent(id, name, args))
	sess.mu.Lock()
	defer sess.mu.Unlock()
	tc.preDone = true
	tc.proceed = r.Proceed
	if r.Proceed {
		tc.args = args
		if r.Transformed {
			tc.args = []byte(r.Target().Raw)
		}
	} else {
		tc.control = controlError(points.PreToolCall, r.Verdict)
		c := string(tc.control)
		tc.result = &c // §6.2: no result of a blocked call reaches the model
		s.judged.remember(em, tc.idKey, tc.name, args, "", false, c)
	}
	close(tc.ready)
	return tc.outcome(), &r, false
}

// outcome copies the pre outcome; call with the session lock held.
func (tc *toolCall) outcome() preOutcome {
	return preOutcome{name: tc.name, proceed: tc.proceed, args: tc.args, control: tc.control, reqArgs: tc.reqArgs}
}

// seenCall is a tool call as the request's history shows it, for a result
// whose call this session never saw (adopted by postTool).
type seenCall struct {
	name    string
	argsRaw string // the model's arguments string
}

// postTool runs post_tool_call once for id with the tool's result. ran is
// false when no permitted pre precedes it or its post already ran
// (already tells which). With seen set, a result for an id the session
// does not know is adopted: the call is remembered as seen and its post
// emitted, since nothing shows that the result was ever judged. (Its pre
// is not emitted: the call has run already, out of this proxy's sight,
// so a pre could neither stop nor change it; what the model sees of it,
// its result, is what post_tool_call judges.) With hostSum (a host API
// post) the answer is kept for retries.
func (s *Server) postTool(ctx context.Context, em *points.Emitter, sess *session, id string, value []byte, isError bool, seen *seenCall, hostSum *[32]byte) (res *points.Result, ran, already bool) {
	sess.mu.Lock()
	tc := sess.tools[id]
	if tc == nil && seen != nil {
		tc = &toolCall{name: strings.Clone(seen.name), preDone: true, proceed: true, args: argsObject(seen.argsRaw), adopted: true,
			sentArgs: strings.Clone(seen.argsRaw)} // the history's bytes stay as they are
		sess.addTool(strings.Clone(id), tc)
	}
	if tc != nil && !tc.preDone && tc.ready != nil {
		// Its pre is still deciding (an approval, say): the result waits
		// for that outcome rather than pass without a post (§6.2: a
		// blocked call's result must not reach the model).
		ready := tc.ready
		sess.mu.Unlock()
		select {
		case <-ready:
		case <-waitCtx(ctx).Done():
			return nil, false, false
		}
		sess.mu.Lock()
	}
	if tc != nil && tc.postDone && tc.result == nil && tc.postReady != nil {
		// Its post is still deciding (another request carrying the same
		// result, or the host API): what the model may see of the result
		// is that verdict, so wait for it.
		ready := tc.postReady
		sess.mu.Unlock()
		select {
		case <-ready:
		case <-waitCtx(ctx).Done():
			return nil, false, true
		}
		sess.mu.Lock()
	}
	if tc == nil || !tc.preDone || !tc.proceed || tc.postDone {
		already = tc != nil && tc.postDone
		sess.mu.Unlock()
		return nil, false, already
	}
	tc.postDone = true
	tc.postReady = make(chan struct{})
	defer close(tc.postReady) // after the result is set below
	if hostSum != nil {
		tc.hostSum, tc.hostPost, tc.posted = *hostSum, true, make(chan struct{})
	}
	name, args := tc.name, tc.args
	sess.mu.Unlock()
	r := em.Emit(ctx, sess.ps, points.PostToolCallEvent(id, name, args, value, isError))
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sent := sentContent(value)
	switch {
	case !r.Proceed:
		// §6.1: the result is not incorporated; the model gets the control error.
		c := string(controlError(points.PostToolCall, r.Verdict))
		tc.result, tc.postDenied = &c, true
	case r.Transformed:
		c := contentOf(r.Target())
		tc.result = &c
	default:
		tc.result = &sent
	}
	s.judged.remember(em, id, name, args, sent, true, *tc.result)
	if hostSum == nil && tc.posted == nil {
		// A result the transparent seam judged: a host API post of the
		// same result later gets this verdict, as a host pre after the
		// release gets the release's (one emission per id, whichever
		// seam sees it first). Only a digest and a transformed result
		// are kept; the answer is built if such a post comes.
		tc.hostSum, tc.seamPost = resultSum(value, isError), true
		if r.Proceed && r.Transformed {
			tc.seamTarget = []byte(strings.Clone(r.Target().Raw))
		}
	}
	return &r, true, false
}

// seamAnswer is the host API's answer for a result the transparent seam
// judged, to a post that carries that same result (value); call with the
// session lock held.
func (tc *toolCall) seamAnswer(value []byte) []byte {
	switch {
	case tc.result == nil:
		return nil
	case tc.postDenied:
		return postAnswerJSON(false, json.RawMessage(*tc.result))
	case tc.seamTarget != nil:
		return postAnswerJSON(true, tc.seamTarget)
	}
	return postAnswerJSON(true, value)
}

// sessionKnows reports whether sess already has a tool call id.
func (s *Server) sessionKnows(sess *session, id string) bool {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.tools[id] != nil
}

// freshCallID derives an id for a call whose model-chosen id is taken.
func freshCallID(id string) string { return id + "_" + newID("")[:12] }

// judgedHere reports whether a result this session does not know was
// judged before (another session of the same agent run, an earlier turn
// of a header-less agent) and says what the model was to see then: it is
// then not judged again.
func (s *Server) judgedHere(em *points.Emitter, sess *session, id string, call seenCall, content gjson.Result) bool {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.tools[id] != nil {
		return false
	}
	judged, replace := s.judged.lookup(em, id, call.name, argsObject(call.argsRaw), contentOf(content))
	if judged && replace != nil {
		// The original of a result a verdict changed: the model gets the
		// verdicted content again (the rebuild below applies it).
		sess.addTool(strings.Clone(id), &toolCall{preDone: true, proceed: true, postDone: true, result: replace, adopted: true, idKey: strings.Clone(id)})
	}
	return judged
}

// sentContent is the role:tool content a tool_result.value came from,
// exactly: a JSON string as itself, other JSON as its bytes (untrimmed,
// so a replay of the same message matches it).
func sentContent(value []byte) string {
	if v := gjson.ParseBytes(value); v.Type == gjson.String {
		return v.Str
	}
	return string(value)
}

// contentOf is the role:tool content that carries a tool_result.value:
// a string as itself, anything else as its JSON (toolResultValue's inverse).
func contentOf(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	return v.Raw
}

// contentIs reports whether a role:tool message's content c already says want.
func contentIs(c gjson.Result, want string) bool {
	if c.Type == gjson.String {
		return c.Str == want
	}
	return c.Raw == want
}

// releaseCalls runs the transparent seam over a permitted response's tool
// calls (history holds the tool-call ids of the request that asked): pre_tool_call for each, arguments rewritten by transforms, denied
// calls withheld (remembered for splicing). It returns the rewritten
// completion, how many calls remain, and a blocking result when the run
// must halt (terminate posture).
func (s *Server) releaseCalls(ctx context.Context, pol *policy, sess *session, completion []byte, history map[string]bool, sigs []sigEntry, scope sigScope) ([]byte, int, []string, *points.Result, *points.Result) {
	em := pol.em
	calls := gjson.Get(view(completion), "choices.0.message.tool_calls").Array()
	kept := make([]gjson.Result, 0, len(calls))
	var lastDeny *points.Result
	var keptIDs, withheld, order []string
	changed := false
	newArgs := map[int][]byte{}
	newIDs := map[int]string{}
	for _, c := range calls {
		// Views into the completion, which the request only borrows: what
		// the session keeps of them is cloned.
		id := c.Get("id").Str
		name := c.Get("function.name").Str
		argsStr := c.Get("function.arguments").Str
		if s.sessionKnows(sess, id) || history[id] {
			// The model reused an id this session already judged, or one
			// the conversation it was shown already has (an earlier turn
			// of a header-less agent; some OpenAI-compatible servers
			// number calls per response): the
			// old verdict must not cover a new call, so the call is
			// released under a fresh id of its own, which the agent then
			// answers and replays.
			id = freshCallID(id)
			changed = true
		}
		fresh := id != c.Get("id").Str
		out, res, existing := s.preTool(ctx, em, sess, id, name, argsObject(argsStr))
		if existing && !fresh && ctx.Err() == nil {
			// Another request of this session registered the same id
			// between the check above and here (two answers of one model
			// that numbers its calls alike): this call is a reused id too.
			id, fresh, changed = freshCallID(id), true, true
			out, res, existing = s.preTool(ctx, em, sess, id, name, argsObject(argsStr))
		}
		if existing {
			// Even a fresh id was taken, or the client left while another
			// request's verdict on the id was pending: fail closed rather
			// than let one verdict cover two calls.
			detail := "tool call id reused by the model"
			if ctx.Err() != nil {
				detail = "request ended while the call id's verdict was pending"
			}
			r := em.RecordHostFailure(ctx, points.PreToolCall, sess.ps, detail)
			return nil, 0, nil, &r, nil
		}
		keepSig := func(args string) {
			if e := findSig(sigs, c.Get("id").Str); e != nil {
				// Kept under the id and arguments the call goes out
				// with, released or withheld (a withheld call is
				// spliced back upstream).
				s.signatures.keep(scope, id, name, args, e)
			}
		}
		if res != nil && !res.Proceed && terminates(pol.st, *res) {
			return nil, 0, nil, res, nil
		}
		if !out.proceed {
			lastDeny = res
			if res != nil {
				// Withheld: the answer goes out without the call, so this
				// line is the log's only trace of the deny.
				s.logBlocked(points.RequestIDFrom(ctx), sess, res.Record, "withheld", true)
			}
			sess.mu.Lock()
			tc := sess.tools[id]
			tc.rawArgs, tc.released = strings.Clone(argsStr), true
			sess.mu.Unlock()
			keepSig(argsStr)
			withheld = append(withheld, strings.Clone(id))
			order = append(order, withheld[len(withheld)-1])
			changed = true
			continue
		}
		sent := strings.Clone(argsStr)
		if res != nil && res.Transformed {
			newArgs[len(kept)] = out.args
			sent = argsString(gjson.Parse(view(out.args)))
			changed = true
		}
		keepSig(sent)
		sess.mu.Lock()
		tc := sess.tools[id]
		tc.sentArgs, tc.released = sent, true
		sess.mu.Unlock()
		if fresh {
			newIDs[len(kept)] = id
		}
		kept = append(kept, c)
		keptIDs = append(keptIDs, id)
		order = append(order, strings.Clone(id))
	}
	if !changed {
		return completion, len(calls), nil, nil, nil
	}
	if len(withheld) > 0 && len(keptIDs) > 0 {
		sess.mu.Lock()
		anchor := sess.tools[keptIDs[0]]
		anchor.withheld = append(anchor.withheld, withheld...)
		anchor.order = append(anchor.order, order...)
		sess.mu.Unlock()
	}
	if len(kept) == 0 {
		return completion, 0, withheld, nil, lastDeny
	}
	arr := []byte{'['}
	for i, c := range kept {
		if i > 0 {
			arr = append(arr, ',')
		}
		raw := []byte(c.Raw)
		if a, ok := newArgs[i]; ok {
			raw, _ = sjson.SetBytes(raw, "function.arguments", argsString(gjson.Parse(view(a))))
		}
		if id, ok := newIDs[i]; ok {
			raw, _ = sjson.SetBytes(raw, "id", id)
		}
		arr = append(arr, raw...)
	}
	arr = append(arr, ']')
	out, err := sjson.SetRawBytes(completion, "choices.0.message.tool_calls", arr)
	if err != nil {
		r := em.RecordHostFailure(ctx, points.PreToolCall, sess.ps, "tool calls could not be rewritten")
		return nil, 0, nil, &r, nil
	}
	return out, len(kept), withheld, nil, lastDeny
}

// applyToolHistory prepares an agent's request before it goes upstream:
// every role:tool message answering a call the proxy saw passes
// post_tool_call once (its rewrite or control error re-applied on later
// requests, since agents replay history), and calls the proxy withheld are
// spliced back with their control errors so the model sees a consistent
// conversation. It returns the new body, or a blocking result when the run
// must halt.
func (s *Server) applyToolHistory(ctx context.Context, pol *policy, sess *session, body []byte) ([]byte, *points.Result) {
	em := pol.em
	msgs, tools := messageFields(body)
	if !tools {
		return body, nil // no tool call or result anywhere: nothing to do
	}
	// Emit post_tool_call for results seen for the first time, including
	// results of calls this session never saw (checkChatRequest made sure
	// every result answers a call in the history).
	if pol.st.TransparentToolSeam {
		var first *points.Result
		var calls map[string]seenCall
		for _, m := range msgs {
			switch m.role {
			case "assistant":
				m.toolCalls.ForEach(func(_, c gjson.Result) bool {
					if calls == nil {
						calls = map[string]seenCall{}
					}
					calls[c.Get("id").Str] = seenCall{name: c.Get("function.name").Str, argsRaw: c.Get("function.arguments").Str}
					return true
				})
				continue
			case "tool":
			default:
				continue
			}
			id := m.toolCallID
			value := toolResultValue(m.content)
			var seen *seenCall
			if c, ok := calls[id]; ok && !s.judgedHere(em, sess, id, c, m.content) {
				seen = &c
			}
			if ctx.Err() != nil {
				// The client left: the results not yet judged are judged
				// when its retry brings them.
				break
			}
			// The emission outlives the client, as a host API post's does:
			// a result held for an approval (or a slow policy) is decided
			// once, and the client's retry of the same follow-up waits for
			// that decision instead of finding the result refused as
			// cancelled for good (one post_tool_call per id).
			octx, done := s.outlive(ctx)
			res, ran, _ := s.postTool(octx, em, sess, id, value, false, seen, nil)
			done()
			if ran && !res.Proceed && terminates(pol.st, *res) {
				first = res
				break
			}
		}
		if first != nil {
			return nil, first
		}
	}
	// Rebuild the messages array only when something must change.
	changed := false
	sess.mu.Lock()
	for _, m := range msgs {
		switch m.role {
		case "tool":
			if tc := sess.tools[m.toolCallID]; tc != nil && tc.result != nil && !contentIs(m.content, *tc.result) {
				changed = true
			}
		case "assistant":
			m.toolCalls.ForEach(func(_, c gjson.Result) bool {
				if tc := sess.tools[c.Get("id").Str]; tc != nil && (len(tc.withheld) > 0 || renamed(tc, c) ||
					(tc.proceed && tc.args != nil && c.Get("function.arguments").Str != tc.releasedArgs()) ||
					(!tc.proceed && tc.released && c.Get("function.arguments").Str != orEmptyObject(tc.rawArgs))) {
					changed = true
				}
				return true
			})
		}
		if changed {
			break
		}
	}
	if !changed {
		sess.mu.Unlock()
		return body, nil
	}
	out := make([]byte, 0, len(body)+512)
	out = append(out, '[')
	n := 0
	add := func(raw []byte) {
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, raw...)
		n++
	}
	// The control errors of withheld calls follow the agent's own results
	// for that assistant turn, in the order of its tool_calls (the
	// withheld calls are appended last), as strict backends expect.
	var pending [][]byte
	flush := func() {
		for _, tm := range pending {
			add(tm)
		}
		pending = pending[:0]
	}
	for _, m := range msgs {
		raw := []byte(m.msg.Raw)
		switch m.role {
		case "tool":
			if tc := sess.tools[m.toolCallID]; tc != nil && tc.result != nil && !contentIs(m.content, *tc.result) {
				raw, _ = sjson.SetBytes(raw, "content", *tc.result)
			}
			add(raw)
		case "assistant":
			var spliced, unanswered, order []string
			calls := m.toolCalls.Array()
			carries := func(id string) bool { // the agent replayed this call itself
				for _, c := range calls {
					if c.Get("id").Str == id {
						return true
					}
				}
				return false
			}
			for i, c := range calls {
				tc := sess.tools[c.Get("id").Str]
				if tc == nil {
					continue
				}
				if len(tc.withheld) > 0 {
					order = append(order, tc.order...)
				}
				for _, wid := range tc.withheld {
					// A call the agent carries is not spliced again
					// (backends refuse an id twice); its result is its own
					// tool message, whose content is replaced by the control
					// error above, or, when it sent none, the control error.
					switch {
					case !carries(wid):
						spliced = append(spliced, wid)
					case !answeredIn(msgs, wid):
						unanswered = append(unanswered, wid)
					}
				}
				at := "tool_calls." + strconv.Itoa(i) + ".function."
				switch {
				case tc.proceed && tc.args != nil && c.Get("function.arguments").Str != tc.releasedArgs():
					raw, _ = sjson.SetBytes(raw, at+"arguments", tc.releasedArgs())
				case !tc.proceed && tc.released:
					raw, _ = sjson.SetBytes(raw, at+"arguments", orEmptyObject(tc.rawArgs))
				}
				if renamed(tc, c) {
					// The model sees the call it made and the points
					// judged, not another tool under its id.
					raw, _ = sjson.SetBytes(raw, at+"name", tc.name)
				}
			}
			for _, wid := range spliced {
				w := sess.tools[wid]
				call := []byte(`{"id":`)
				call = appendString(call, wid)
				call = append(call, `,"type":"function","function":{"name":`...)
				call = appendString(call, w.name)
				call = append(call, `,"arguments":`...)
				call = appendString(call, orEmptyObject(w.rawArgs))
				call = append(call, `}}`...)
				raw, _ = sjson.SetRawBytes(raw, "tool_calls.-1", call)
			}
			if len(spliced) > 0 && len(order) > 0 {
				raw = inOrder(raw, order)
			}
			flush()
			add(raw)
			for _, wid := range append(spliced, unanswered...) {
				w := sess.tools[wid]
				tm := []byte(`{"role":"tool","tool_call_id":`)
				tm = appendString(tm, wid)
				tm = append(tm, `,"content":`...)
				tm = appendString(tm, string(w.control))
				tm = append(tm, '}')
				pending = append(pending, tm)
			}
		default:
			flush()
			add(raw)
		}
	}
	flush()
	sess.mu.Unlock()
	out = append(out, ']')
	nb, err := sjson.SetRawBytes(body, "messages", out)
	if err != nil {
		return body, nil
	}
	return nb, nil
}

// inOrder puts an assistant message's tool calls in the order the model
// gave them (order, by id), calls it does not name keeping theirs after.
func inOrder(msg []byte, order []string) []byte {
	calls := gjson.GetBytes(msg, "tool_calls").Array()
	used := make([]bool, len(calls))
	arr := []byte{'['}
	add := func(i int) {
		if len(arr) > 1 {
			arr = append(arr, ',')
		}
		arr = append(arr, calls[i].Raw...)
		used[i] = true
	}
	for _, id := range order {
		for i, c := range calls {
			if !used[i] && c.Get("id").Str == id {
				add(i)
				break
			}
		}
	}
	for i := range calls {
		if !used[i] {
			add(i)
		}
	}
	out, err := sjson.SetRawBytes(msg, "tool_calls", append(arr, ']'))
	if err != nil {
		return msg
	}
	return out
}

// releasedArgs is the arguments string the agent got for the call: the
// seam's, byte for byte, or else (the host API) the permitted arguments
// as a JSON string.
func (tc *toolCall) releasedArgs() string {
	if tc.sentArgs != "" || tc.released {
		return tc.sentArgs
	}
	return argsString(gjson.ParseBytes(tc.args))
}

// renamed reports whether the agent's history names call c otherwise than
// the model's call that the seam judged and released (or withheld) under
// its id. Calls the host API registered keep the agent's naming.
func renamed(tc *toolCall, c gjson.Result) bool {
	return tc.released && tc.name != "" && c.Get("function.name").Str != tc.name
}

// answeredIn reports whether a tool message in msgs answers call id.
func answeredIn(msgs []msgFields, id string) bool {
	for _, m := range msgs {
		if m.role == "tool" && m.toolCallID == id {
			return true
		}
	}
	return false
}

// continuation appends the assistant turn with the withheld calls and
// their control errors, for the proxy to ask the model again itself.
func continuation(body, completion []byte, withheld []string, sess *session) []byte {
	msg := []byte(`{"role":"assistant","content":null,"tool_calls":[`)
	sess.mu.Lock()
	for i, id := range withheld {
		if i > 0 {
			msg = append(msg, ',')
		}
		msg = append(msg, `{"id":`...)
		msg = appendString(msg, id)
		msg = append(msg, `,"type":"function","function":{"name":`...)
		msg = appendString(msg, sess.tools[id].name)
		msg = append(msg, `,"arguments":`...)
		msg = appendString(msg, orEmptyObject(sess.tools[id].rawArgs))
		msg = append(msg, `}}`...)
	}
	msg = append(msg, `]}`...)
	body, _ = sjson.SetRawBytes(body, "messages.-1", msg)
	for _, id := range withheld {
		tm := []byte(`{"role":"tool","tool_call_id":`)
		tm = appendString(tm, id)
		tm = append(tm, `,"content":`...)
		tm = appendString(tm, string(sess.tools[id].control))
		tm = append(tm, '}')
		body, _ = sjson.SetRawBytes(body, "messages.-1", tm)
	}
	sess.mu.Unlock()
	return body
}

func orEmptyObject(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}

// toolResultValue is tool_result.value for a role:tool message: OpenAI
// clients send results as strings, so a string that holds a JSON object or
// array is that value; any other string stays a string. JSON outside the
// contract's value domain (a duplicate member name, a number beyond a
// double, a lone surrogate) is kept as it is, so the emission refuses it
// (host_error:context_invalid) rather than judging its text, whose escapes
// would hide from the patterns what the model reads.
func toolResultValue(c gjson.Result) []byte {
	if c.Type == gjson.String {
		if v := gjson.Parse(c.Str); v.IsObject() || v.IsArray() {
			b := bytesOf(c.Str)
			if !points.DepthWithin(b, points.DefaultMaxDepth) {
				return tooDeep // refused, not judged as text
			}
			if points.ValidJSON(b) || gjson.Valid(c.Str) {
				return []byte(c.Str)
			}
		}
	}
	return []byte(orNull(c.Raw))
}

// msgFields are the members of one request message the tool seam reads,
// as views of the body.
type msgFields struct {
	msg                gjson.Result // the whole message
	role, toolCallID   string
	toolCalls, content gjson.Result
}

// messageFields reads every message's fields in one walk that jumps over
// string bodies (gjson reads a long content a byte at a time, for every
// member after it). tools reports whether any message is a tool result
// or carries tool calls.
func messageFields(body []byte) (ms []msgFields, tools bool) {
	points.ForEachElement(points.MemberValue(body, "messages"), func(m []byte) bool {
		f := msgFields{msg: gjson.Parse(view(m))}
		points.ForEachMember(m, func(name string, v []byte) bool {
			switch name {
			case "role":
				f.role = gjson.Parse(view(v)).Str
			case "tool_call_id":
				f.toolCallID = gjson.Parse(view(v)).Str
			case "tool_calls":
				// Only an array holds calls: gjson visits a null once.
				if tc := gjson.Parse(view(v)); tc.IsArray() {
					f.toolCalls = tc
				}
			case "content":
				f.content = gjson.Parse(view(v))
			}
			return true
		})
		tools = tools || f.role == "tool" || f.toolCalls.IsArray()
		ms = append(ms, f)
		return true
	})
	return ms, tools
}

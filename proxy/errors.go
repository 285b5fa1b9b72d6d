package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/hooksproxy/hooksproxy/points"
)

// openAIError is the OpenAI error envelope clients already parse.
type openAIError struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Message    string      `json:"message"`
	Type       string      `json:"type"`
	Code       any         `json:"code"`
	Param      any         `json:"param"`
	AgentHooks *hooksFacts `json:"agent_hooks,omitempty"`
}

// hooksFacts tells the caller which decision blocked it, never the payload.
type hooksFacts struct {
	InterceptionPoint points.Point `json:"interception_point"`
	Reason            any          `json:"reason"` // the verdict's reason, or null
	DecidedBy         *int         `json:"decided_by"`
	SessionID         string       `json:"session_id"`
	Sequence          int64        `json:"sequence"`
	Liftable          bool         `json:"liftable"`
}

// writeError answers an OpenAI-shaped error. code may be nil.
func writeError(w http.ResponseWriter, status int, typ, message string, code any) {
	writeJSON(w, status, openAIError{Error: errorBody{Message: message, Type: typ, Code: code}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	writeRawJSON(w, status, b)
}

// writeRawJSON answers b, which is JSON.
func writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b) // b may be shared (a remembered answer): not appended to
	_, _ = w.Write([]byte{'\n'})
}

// writeBlocked answers a blocking verdict: 403 for a policy deny, 503 for a
// fail-closed host error. The body names the decision, not the payload.
func writeBlocked(w http.ResponseWriter, res points.Result) { writeBlockedRetry(w, res, false) }

// writeStartupDeny refuses a request of a session whose agent_startup
// was denied while it waited, with that deny (§6.1a: nothing but
// agent_shutdown follows it, so the request has no emission of its own).
func writeStartupDeny(w http.ResponseWriter, deny *points.Result) {
	if deny == nil || deny.Record == nil {
		w.Header().Set("X-Should-Retry", "false")
		writeError(w, http.StatusForbidden, "agent_hooks_denied", "session was denied at agent_startup", "session_blocked")
		return
	}
	writeBlocked(w, *deny)
}

// writeBlockedRetry is writeBlocked saying whether the SDKs may retry
// (X-Should-Retry, which they read before the status): a policy deny or a
// host failure is not retried, a refusal for load (the buffer budget) may
// pass a moment later.
func writeBlockedRetry(w http.ResponseWriter, res points.Result, retry bool) {
	rec := res.Record
	reason := rec.Verdict.Reason
	status, typ := http.StatusForbidden, "agent_hooks_denied"
	msg := "Request blocked by agent-hooks at " + string(rec.InterceptionPoint) + "."
	if reason != "" && !points.IsHostError(reason) {
		// The reason in the message too: some clients (langchaingo) show
		// a 403's message and nothing else.
		msg = "Request blocked by agent-hooks at " + string(rec.InterceptionPoint) + " (" + reason + ")."
	}
	if points.IsHostError(reason) {
		status, typ = http.StatusServiceUnavailable, "agent_hooks_host_error"
		msg = "Request failed closed by agent-hooks at " + string(rec.InterceptionPoint) + " (" + reason + ")."
	}
	if rec.Verdict.Message != "" && reason != string(points.ReasonContextInvalid) {
		// An interceptor's message is policy text, and a host error's the
		// host's own payload-free detail ("response must carry exactly
		// one choice"); the record projection bounds both the same way.
		// context_invalid's detail names a path, whose member names may
		// come from a model answer not released: it stays on the record.
		msg += " " + rec.Verdict.Message
	}
	// A deny without a reason says so (null), as its record does: a code
	// of our own here would be a reason no record carries.
	var code any
	if reason != "" {
		code = reason
	}
	w.Header().Set("X-Should-Retry", strconv.FormatBool(retry))
	writeJSON(w, status, openAIError{Error: errorBody{
		Message: msg, Type: typ, Code: code,
		AgentHooks: &hooksFacts{
			InterceptionPoint: rec.InterceptionPoint, Reason: code, DecidedBy: rec.DecidedBy,
			SessionID: rec.SessionID, Sequence: rec.Sequence, Liftable: rec.Liftable(),
		},
	}})
}

// writeSessionEnding answers a request for a session whose end is pending
// (agent_shutdown waits for its requests in flight): 409, which clients
// retry after a moment, by when the id names a new session.
func (s *Server) writeSessionEnding(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	s.refuse(w, http.StatusConflict, "the session is ending: its agent_shutdown waits for requests still in flight; retry in a moment", "session_ending")
}

// logToken is an upstream-supplied identifier (an error's type or code) as
// a log line may carry it: a provider may put anything there, the input it
// refused included, so only what reads as an identifier is kept: up to 64
// letters, digits and _ . : -, with no run of more than 24 letters and
// digits (a key or token is one long run). Anything else is named by its
// length only.
func logToken(s string) string {
	if s == "" {
		return ""
	}
	ok := len(s) <= 64
	for i, run := 0, 0; ok && i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			run++
			ok = run <= 24
		case c == '_', c == '.', c == ':', c == '-':
			run = 0
		default:
			ok = false
		}
	}
	if ok {
		return s
	}
	return "[elided: " + strconv.Itoa(len(s)) + " bytes]"
}

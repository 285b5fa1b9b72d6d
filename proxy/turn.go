package proxy

import (
	"github.com/tidwall/gjson"
)

// turnInput is one message an input emission judges: its index in the
// request's messages and the input.role it is presented with.
type turnInput struct {
	index int
	role  string
}

// turnInputs picks what input judges in a request that opens a turn. The
// new turn is what follows the last assistant message: every user message
// there gets its own emission (normally exactly one). A request with no
// user message after the last assistant one (an assistant prefill, say)
// is judged on its last user message; one with no user message at all on
// its last system or developer message (as role system), and failing that
// on its last message (as role external). So every such request has at
// least one input, and the one a chat client sends has exactly one.
func turnInputs(msgs []gjson.Result) []turnInput {
	lastAssistant := -1
	lastUser, lastSystem := -1, -1
	for i, m := range msgs {
		switch m.Get("role").Str {
		case "assistant":
			lastAssistant = i
		case "user":
			lastUser = i
		case "system", "developer":
			lastSystem = i
		}
	}
	var out []turnInput
	for i := lastAssistant + 1; i < len(msgs); i++ {
		if msgs[i].Get("role").Str == "user" {
			out = append(out, turnInput{index: i, role: "user"})
		}
	}
	switch {
	case len(out) > 0:
	case lastUser >= 0:
		out = append(out, turnInput{index: lastUser, role: "user"})
	case lastSystem >= 0:
		out = append(out, turnInput{index: lastSystem, role: "system"})
	case len(msgs) > 0:
		out = append(out, turnInput{index: len(msgs) - 1, role: "external"})
	}
	return out
}

// continuesTurn reports whether a request is a tool-loop follow-up of
// sess: it ends with role:tool messages right after an assistant message,
// those results answer calls this session issued in its answer to the
// request made of exactly the messages before that assistant message, and
// at least one of them arrives for the first time. Such a request carries
// no new input. A request that replays answered results, or inserts
// messages before the assistant turn, opens a turn and is judged.
func (s *Server) continuesTurn(sess *session, msgs []gjson.Result) bool {
	n := len(msgs)
	k := n
	var ids []string
	for k > 0 && msgs[k-1].Get("role").Str == "tool" {
		k--
		ids = append(ids, msgs[k].Get("tool_call_id").Str)
	}
	if k == n || k == 0 || msgs[k-1].Get("role").Str != "assistant" {
		return false
	}
	return s.sessions.followUp(sess, ids, k-1)
}

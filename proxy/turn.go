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
// user message after the last assistant one is judged on the system or
// developer messages there (new text the agent added mid-loop), and with
// none of those either (an assistant prefill, say) on its last user
// message; one with no user message at all on
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
	if len(out) == 0 && lastAssistant >= 0 {
		for i := lastAssistant + 1; i < len(msgs); i++ {
			if r := msgs[i].Get("role").Str; r == "system" || r == "developer" {
				out = append(out, turnInput{index: i, role: "system"})
			}
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
// sess: it ends with role:tool messages answering calls this session
// issued in its answer to the request made of exactly the messages before
// that answer, at least one of them for the first time. The answer is the
// assistant message before the trailing results, or, for clients that
// send one answer back as one assistant message per call (langchaingo's
// agent: assistant{call_0}, tool{call_0}, assistant{call_1},
// tool{call_1}), a run of assistant-with-calls and tool messages. Such a
// request carries no new input. A request that replays answered results,
// or inserts messages before the answer, opens a turn and is judged.
func (s *Server) continuesTurn(sess *session, msgs []gjson.Result) bool {
	n := len(msgs)
	if n == 0 || msgs[n-1].Get("role").Str != "tool" {
		return false
	}
	var ids []string
	// The walk below crosses only tool and assistant messages, which the
	// digest leaves out, so it is the same at every step: computed once,
	// and only if some call id has one to compare (a long run of
	// assistant/tool pairs must not rehash the history per pair).
	var digest [32]byte
	hashed := false
	inputs := func() [32]byte {
		if !hashed {
			digest, hashed = inputsDigest(msgs), true
		}
		return digest
	}
	for j := n - 1; j > 0; j-- {
		switch m := msgs[j]; m.Get("role").Str {
		case "tool":
			ids = append(ids, m.Get("tool_call_id").Str)
			continue
		case "assistant":
			if !m.Get("tool_calls").IsArray() || len(m.Get("tool_calls").Array()) == 0 {
				return false
			}
			// msgs[j] may be the answer: the results after it answer
			// calls issued to the request of the j messages before it.
			if s.sessions.followUp(sess, ids, j, inputs) {
				return true
			}
			continue
		}
		return false
	}
	return false
}

// inputsDigest identifies the messages of a history that input judges
// (user, system and developer ones), whatever their JSON formatting: a
// follow-up must carry the same ones before its calls as the request
// whose answer issued them, or it opens a turn (a rewritten user message
// cannot ride a tool result past input). Tool results and assistant
// messages, the bulk of a long history, are left out.
func inputsDigest(msgs []gjson.Result) [32]byte {
	in := make([]gjson.Result, 0, len(msgs))
	for _, m := range msgs {
		switch m.Get("role").Str {
		case "user", "system", "developer":
			in = append(in, m)
		}
	}
	return historyHash(in)
}

package ctk

import (
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"
)

// requiredCore is the §4.1 required core of every context.
var requiredCore = []string{"spec", "interception_point", "timestamp", "sequence", "agent", "session", "target"}

// conditional lists the §4.2 per-point members and the subfields each
// must carry.
var conditional = map[string][]struct {
	key  string
	subs []string
}{
	"agent_startup":   {{"agent_init", []string{"tools_registered"}}},
	"input":           {{"input", []string{"content", "role"}}},
	"pre_model_call":  {{"model", []string{"id"}}, {"messages", nil}},
	"post_model_call": {{"model", []string{"id"}}, {"response", []string{"content", "tool_calls", "finish_reason"}}},
	"pre_tool_call":   {{"tool_call", []string{"id", "name", "args"}}},
	"post_tool_call":  {{"tool_call", []string{"id", "name", "args"}}, {"tool_result", []string{"value", "is_error"}}},
	"output":          {{"output", []string{"content"}}},
	"agent_shutdown":  {{"summary", []string{"reason"}}},
}

// CheckEnvelope validates a recorded context against the §4 envelope: the
// required core with its types and the per-point conditional members,
// the same presence-and-type check the reference engine runs on every
// recorded context. It is written independently of the points emitter so
// the kit does not grade the emitter with its own validator. Details name
// paths, never values.
func CheckEnvelope(ctx []byte) []string {
	if !gjson.ValidBytes(ctx) {
		return []string{"context is not JSON"}
	}
	root := gjson.ParseBytes(ctx)
	if !root.IsObject() {
		return []string{"context is not an object"}
	}
	var out []string
	for _, k := range requiredCore {
		if _, ok := member(root, k); !ok {
			out = append(out, fmt.Sprintf("missing required field %q", k))
		}
	}
	if err := envelopeTypes(root); err != "" {
		out = append(out, "context fails §4 validation: "+err)
	}
	return out
}

func envelopeTypes(root gjson.Result) string {
	bad := func(path, want string) string { return fmt.Sprintf("$.%s: missing or not %s", path, want) }
	spec, _ := member(root, "spec")
	if spec.Type != gjson.String || !specVersionOK(spec.Str) {
		return bad("spec", "an agent-hooks/<maj>.<min> string")
	}
	ipv, _ := member(root, "interception_point")
	if ipv.Type != gjson.String {
		return bad("interception_point", "a string")
	}
	subs, known := conditional[ipv.Str]
	if !known {
		return "$.interception_point: not one of the eight closed values"
	}
	if ts, _ := member(root, "timestamp"); ts.Type != gjson.String {
		return bad("timestamp", "a string")
	}
	if seq, _ := member(root, "sequence"); !nonNegativeInt(seq) {
		return bad("sequence", "an integer >= 0")
	}
	agent, ok := member(root, "agent")
	if !ok || !agent.IsObject() {
		return bad("agent", "an object")
	}
	if id, _ := member(agent, "id"); id.Type != gjson.String || id.Str == "" {
		return bad("agent.id", "a non-empty string")
	}
	if fw, _ := member(agent, "framework"); fw.Type != gjson.String || !frameworkOK(fw.Str) {
		return bad("agent.framework", "a ^[a-z0-9_-]+$ string")
	}
	session, ok := member(root, "session")
	sid, _ := member(session, "id")
	if !ok || sid.Type != gjson.String || sid.Str == "" {
		return bad("session.id", "a non-empty string")
	}
	if _, ok := member(root, "target"); !ok {
		return bad("target", "present")
	}
	for _, c := range subs {
		v, ok := member(root, c.key)
		if !ok {
			return bad(c.key, "present at this interception point")
		}
		if c.subs == nil {
			continue
		}
		if !v.IsObject() {
			return bad(c.key, "an object")
		}
		for _, s := range c.subs {
			if _, ok := member(v, s); !ok {
				return fmt.Sprintf("$.%s.%s: missing", c.key, s)
			}
		}
	}
	return ""
}

func specVersionOK(s string) bool {
	const prefix = "agent-hooks/"
	if len(s) <= len(prefix) || s[:len(prefix)] != prefix {
		return false
	}
	ver := s[len(prefix):]
	dot := -1
	for i := 0; i < len(ver); i++ {
		if ver[i] == '.' {
			dot = i
			break
		}
	}
	if dot <= 0 || dot == len(ver)-1 {
		return false
	}
	return allDigits(ver[:dot]) && allDigits(ver[dot+1:])
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func frameworkOK(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// nonNegativeInt accepts an integer literal within int64 that is >= 0.
func nonNegativeInt(v gjson.Result) bool {
	if v.Type != gjson.Number {
		return false
	}
	n, err := strconv.ParseInt(v.Raw, 10, 64)
	return err == nil && n >= 0
}

package proxy

import (
	"errors"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// WriteBack is the proxy's points.TargetChecker: a transform is applied
// only if the proxy can write its target back into the chat request or
// answer it mediates (§4.3: the transform must be observable in the
// action). The emitter asks it inside the fold, so a value with no chat
// form is that emission's host_error:transform_invalid, with the next
// interceptors and any approver never shown a context that cannot be
// honoured. The details are payload-free.
type WriteBack struct{}

// CheckTarget implements points.TargetChecker.
func (WriteBack) CheckTarget(p points.Point, original, transformed []byte) error {
	t := gjson.ParseBytes(transformed)
	o := gjson.ParseBytes(original)
	switch p {
	case points.Input:
		if !t.IsObject() {
			return errors.New("input target must stay an object")
		}
		if !contentWritable(t.Get("content"), o.Get("content"), true) {
			return errors.New("input transform value has no chat message form")
		}
		if r := t.Get("role"); r.Raw != o.Get("role").Raw {
			if o.Get("role").Str == "external" {
				// The message is an assistant's or a tool's: as a user or
				// system message it would keep members those cannot have.
				return errors.New("an external input's role cannot be rewritten")
			}
			if _, ok := chatRole(r); !ok {
				return errors.New("input role has no chat message form (user or system)")
			}
		}
	case points.PreModelCall:
		ok := t.IsArray()
		t.ForEach(func(_, m gjson.Result) bool {
			ok = m.IsObject() && m.Get("role").Type == gjson.String
			return ok
		})
		if !ok {
			return errors.New("messages must stay an array of messages with a role")
		}
	case points.PostModelCall:
		if !t.IsObject() {
			return errors.New("response target must stay an object")
		}
		if !contentWritable(t.Get("content"), o.Get("content"), false) {
			return errAnswerShape
		}
		if fr := t.Get("finish_reason"); fr.Type != gjson.String {
			return errors.New("response finish_reason must be a string")
		}
		switch calls := t.Get("tool_calls"); {
		case calls.Type == gjson.Null || !calls.Exists():
		case !calls.IsArray():
			return errors.New("response tool_calls must be an array")
		default:
			var err error
			// The envelope's rules (an answer may carry a call without an
			// id, or with an empty name, and the proxy releases it so),
			// which is what the wire's tool_calls can take.
			calls.ForEach(func(_, c gjson.Result) bool {
				id := c.Get("id")
				switch {
				case !c.IsObject():
					err = errors.New("a response tool call must be an object")
				case id.Exists() && id.Type != gjson.String && id.Type != gjson.Null:
					err = errors.New("a response tool call's id must be a string")
				case c.Get("name").Type != gjson.String:
					err = errors.New("a response tool call must keep a string name")
				case !c.Get("args").IsObject():
					err = errors.New("a response tool call's args must be an object")
				}
				return err == nil
			})
			return err
		}
	case points.Output:
		if !t.IsObject() || !contentWritable(t.Get("content"), o.Get("content"), false) {
			return errAnswerShape
		}
	case points.PreToolCall:
		if !t.IsObject() {
			return errors.New("tool call args must stay an object")
		}
	}
	return nil
}

// contentWritable reports whether a transformed content value has a chat
// form: a string; an object (sent as its JSON text); content parts where
// the original had parts; null for an answer (a request message needs
// content).
func contentWritable(v, orig gjson.Result, request bool) bool {
	switch {
	case v.Type == gjson.String, v.IsObject():
		return true
	case v.Type == gjson.Null && v.Exists():
		return !request
	case v.IsArray():
		return orig.IsArray()
	}
	return false
}

// chatRole is the message role an input.role is written back as.
func chatRole(r gjson.Result) (string, bool) {
	switch r.Str {
	case "user", "system":
		return r.Str, r.Type == gjson.String
	}
	return "", false
}

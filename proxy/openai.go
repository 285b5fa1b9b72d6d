package proxy

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// projectMessages returns the request's messages as pre_model_call wants
// them: every message has a content member (an assistant message that only
// carries tool_calls gets content: null). The bytes are shared with the
// body unless a message needs patching.
func projectMessages(body []byte) []byte {
	msgs := gjson.Get(view(body), "messages")
	raw := []byte(msgs.Raw)
	needs := false
	msgs.ForEach(func(_, m gjson.Result) bool {
		if !m.Get("content").Exists() {
			needs = true
			return false
		}
		return true
	})
	if !needs {
		return raw
	}
	out := append([]byte(nil), raw...)
	i := 0
	msgs.ForEach(func(_, m gjson.Result) bool {
		if !m.Get("content").Exists() {
			out, _ = sjson.SetRawBytes(out, strconv.Itoa(i)+".content", []byte("null"))
		}
		i++
		return true
	})
	return out
}

// toolDecls projects the request's tools to [{name, description?, schema?}].
func toolDecls(body []byte) ([]byte, []string) {
	tools := gjson.Get(view(body), "tools")
	if !tools.IsArray() {
		return nil, nil
	}
	var names []string
	out := []byte{'['}
	tools.ForEach(func(_, t gjson.Result) bool {
		fn := t.Get("function")
		name := fn.Get("name")
		if name.Type != gjson.String {
			name = t.Get("name")
		}
		if name.Type != gjson.String {
			return true
		}
		names = append(names, name.Str)
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, `{"name":`...)
		out = append(out, name.Raw...)
		if d := fn.Get("description"); d.Type == gjson.String {
			out = append(out, `,"description":`...)
			out = append(out, d.Raw...)
		}
		if p := fn.Get("parameters"); p.IsObject() {
			out = append(out, `,"schema":`...)
			out = append(out, p.Raw...)
		}
		out = append(out, '}')
		return true
	})
	return append(out, ']'), names
}

// argsObject turns an OpenAI arguments string into the object the contract
// wants; anything that is not a JSON object is kept as raw_arguments.
func argsObject(s string) []byte {
	if gjson.Valid(s) {
		if r := gjson.Parse(s); r.IsObject() {
			return compact([]byte(s))
		}
	}
	b, _ := json.Marshal(map[string]string{"raw_arguments": s})
	return b
}

// argsString is the inverse of argsObject for write-back.
func argsString(args gjson.Result) string {
	if args.IsObject() {
		if ra := args.Get("raw_arguments"); ra.Type == gjson.String && len(args.Map()) == 1 {
			return ra.Str
		}
	}
	return string(compact([]byte(args.Raw)))
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// projectResponse builds post_model_call's response member from a
// chat.completion (choice 0): {content, tool_calls:[{id,name,args}], finish_reason}.
func projectResponse(completion []byte) (response []byte, callIDs []string) {
	msg := gjson.Get(view(completion), "choices.0.message")
	out := []byte(`{"content":`)
	out = append(out, answerText(completion)...)
	out = append(out, `,"tool_calls":[`...)
	n := 0
	msg.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		if n > 0 {
			out = append(out, ',')
		}
		n++
		id := tc.Get("id").Str
		callIDs = append(callIDs, id)
		out = append(out, `{"id":`...)
		out = appendString(out, id)
		out = append(out, `,"name":`...)
		out = appendString(out, tc.Get("function.name").Str)
		out = append(out, `,"args":`...)
		out = append(out, argsObject(tc.Get("function.arguments").Str)...)
		out = append(out, '}')
		return true
	})
	out = append(out, `],"finish_reason":`...)
	fr := gjson.Get(view(completion), "choices.0.finish_reason")
	if fr.Type == gjson.String {
		out = append(out, fr.Raw...)
	} else {
		out = append(out, `"stop"`...)
	}
	return append(out, '}'), callIDs
}

// usageMember projects usage to {prompt_tokens, completion_tokens}.
func usageMember(completion []byte) []byte {
	u := gjson.Get(view(completion), "usage")
	if !u.IsObject() {
		return nil
	}
	pt, ct := u.Get("prompt_tokens"), u.Get("completion_tokens")
	if pt.Type != gjson.Number || ct.Type != gjson.Number {
		return nil
	}
	return []byte(`{"prompt_tokens":` + pt.Raw + `,"completion_tokens":` + ct.Raw + `}`)
}

// writeBackResponse applies a transformed post_model_call response to the
// chat.completion the client receives.
func writeBackResponse(completion []byte, resp gjson.Result) ([]byte, error) {
	var err error
	if completion, err = setAnswerText(completion, []byte(orNull(resp.Get("content").Raw))); err != nil {
		return nil, err
	}
	if fr := resp.Get("finish_reason"); fr.Type == gjson.String {
		if completion, err = sjson.SetBytes(completion, "choices.0.finish_reason", fr.Str); err != nil {
			return nil, err
		}
	}
	calls := resp.Get("tool_calls").Array()
	if len(calls) == 0 {
		if gjson.Get(view(completion), "choices.0.message.tool_calls").Exists() {
			completion, err = sjson.DeleteBytes(completion, "choices.0.message.tool_calls")
		}
		return completion, err
	}
	arr := []byte{'['}
	for i, c := range calls {
		if i > 0 {
			arr = append(arr, ',')
		}
		arr = append(arr, `{"id":`...)
		arr = appendString(arr, c.Get("id").Str)
		arr = append(arr, `,"type":"function","function":{"name":`...)
		arr = appendString(arr, c.Get("name").Str)
		arr = append(arr, `,"arguments":`...)
		arr = appendString(arr, argsString(c.Get("args")))
		arr = append(arr, `}}`...)
	}
	arr = append(arr, ']')
	return sjson.SetRawBytes(completion, "choices.0.message.tool_calls", arr)
}

func orNull(raw string) string {
	if raw == "" {
		return "null"
	}
	return raw
}

func appendString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

// toolCallIDsIn lists the tool-call ids a request refers back to: its tool
// messages' tool_call_id and its assistant messages' tool_calls ids.
func toolCallIDsIn(body []byte) []string {
	var ids []string
	gjson.Get(view(body), "messages").ForEach(func(_, m gjson.Result) bool {
		switch m.Get("role").Str {
		case "tool":
			if id := m.Get("tool_call_id").Str; id != "" {
				ids = append(ids, id)
			}
		case "assistant":
			m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
				if id := tc.Get("id").Str; id != "" {
					ids = append(ids, id)
				}
				return true
			})
		}
		return true
	})
	return ids
}

// view reads b as a string without copying it, for gjson. The proxy never
// writes a body or completion slice in place (sjson returns new slices), so
// results stay valid.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// refusalAnswer reports whether the answer's text is its refusal: content
// is null and refusal is a string. Points judge that text as the content.
func refusalAnswer(completion []byte) bool {
	msg := gjson.Get(view(completion), "choices.0.message")
	c := msg.Get("content")
	return (!c.Exists() || c.Type == gjson.Null) && msg.Get("refusal").Type == gjson.String
}

// answerText is the text the points judge: content, or the refusal when
// the model refused.
func answerText(completion []byte) []byte {
	if refusalAnswer(completion) {
		return []byte(gjson.Get(view(completion), "choices.0.message.refusal").Raw)
	}
	return []byte(orNull(gjson.Get(view(completion), "choices.0.message.content").Raw))
}

// setAnswerText writes a verdicted text back where answerText read it.
func setAnswerText(completion, text []byte) ([]byte, error) {
	if refusalAnswer(completion) {
		return sjson.SetRawBytes(completion, "choices.0.message.refusal", text)
	}
	return sjson.SetRawBytes(completion, "choices.0.message.content", text)
}

// judgedMembers are the message members the points see; anything else a
// model returns (reasoning text, audio, annotations) would reach the client
// unjudged, so it is removed before release.
var judgedMembers = map[string]bool{"role": true, "content": true, "tool_calls": true, "refusal": true}

// stripUnjudged removes message members no point judged; changed reports
// whether it removed any (the stream must then be re-derived).
func stripUnjudged(completion []byte) ([]byte, bool, error) {
	var drop []string
	refusal := refusalAnswer(completion)
	gjson.Get(view(completion), "choices.0.message").ForEach(func(k, v gjson.Result) bool {
		// A refusal is judged only when it is the answer (content null).
		if (!judgedMembers[k.Str] || (k.Str == "refusal" && !refusal)) && v.Type != gjson.Null {
			drop = append(drop, k.Str)
		}
		return true
	})
	if len(drop) == 0 {
		return completion, false, nil
	}
	esc := strings.NewReplacer(".", `\.`, "*", `\*`, "?", `\?`, "|", `\|`, "#", `\#`, "@", `\@`)
	var err error
	for _, k := range drop {
		if completion, err = sjson.DeleteBytes(completion, "choices.0.message."+esc.Replace(k)); err != nil {
			return nil, false, err
		}
	}
	return completion, true, nil
}

package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// projectMessages returns the request's messages as pre_model_call wants
// them: every message has a content member (an assistant message that only
// carries tool_calls gets content: null). The bytes are shared with the
// body unless a message needs patching.
func projectMessages(body []byte) []byte {
	raw := points.MemberValue(body, "messages")
	var missing []int // messages without content
	i := 0
	points.ForEachElement(raw, func(m []byte) bool {
		has := false
		points.ForEachMember(m, func(name string, _ []byte) bool {
			has = name == "content"
			return !has
		})
		if !has {
			missing = append(missing, i)
		}
		i++
		return true
	})
	if len(missing) == 0 {
		return raw
	}
	out := append([]byte(nil), raw...)
	for _, i := range missing {
		out, _ = sjson.SetRawBytes(out, strconv.Itoa(i)+".content", []byte("null"))
	}
	return out
}

// rawMessageFields are the raw role, tool_call_id and tool_calls of one
// message (nil when absent), read in one member walk.
func rawMessageFields(m []byte) (role, toolCallID, toolCalls []byte) {
	role, toolCallID, toolCalls, _, _ = checkedMessageFields(m, false)
	return role, toolCallID, toolCalls
}

// checkedMessageFields is rawMessageFields that, with check, also names the first
// member that differs from a mediated one only in case, in the message,
// its content parts or its tool calls (bad; the walk stops there).
func checkedMessageFields(m []byte, check bool) (role, toolCallID, toolCalls, content []byte, bad string) {
	points.ForEachMember(m, func(name string, v []byte) bool {
		switch name {
		case "role":
			role = v
		case "tool_call_id":
			toolCallID = v
		case "tool_calls":
			toolCalls = v
			if check {
				bad = nestedCaseVariant(v, toolCallMembers, toolCallInner)
			}
		case "content":
			if content == nil {
				content = v
			}
			if check && len(v) > 0 && v[0] == '[' {
				bad = nestedCaseVariant(v, partMembers, partInner)
			}
		default:
			if check {
				bad = caseVariant(name, messageMembers)
			}
		}
		return bad == ""
	})
	return role, toolCallID, toolCalls, content, bad
}

// messagesOf returns the request's messages, each a gjson view of its own
// bytes, found by the member and element walks (one gjson pass over a
// long history costs what several of these do).
func messagesOf(body []byte) []gjson.Result {
	var out []gjson.Result
	points.ForEachElement(points.MemberValue(body, "messages"), func(m []byte) bool {
		out = append(out, gjson.Parse(view(m)))
		return true
	})
	return out
}

// bodyGet reads a dotted path of plain names from a request body: the
// top-level member by the member walk (a gjson read of a member after the
// messages reads them all), the rest by gjson inside it.
func bodyGet(body []byte, path string) gjson.Result {
	head, rest, nested := strings.Cut(path, ".")
	v := points.MemberValue(body, head)
	if v == nil {
		return gjson.Result{}
	}
	if !nested {
		return gjson.Parse(view(v))
	}
	return gjson.Get(view(v), rest)
}

// toolDecls projects the request's tools to [{name, description?, schema?}].
func toolDecls(body []byte) ([]byte, []string) {
	tools := bodyGet(body, "tools")
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
// wants. Arguments a JSON parser reads as an object but that lie outside
// the contract's value domain (a duplicate member name, a number beyond a
// double, a lone surrogate) are kept as they are, so the emission refuses
// them (host_error:context_invalid): judged as a wrapper of their text,
// escapes such as \u0050 or \/ would hide from every pattern what the
// agent's parser then reads. Anything else (truncated or non-object JSON)
// is kept as raw_arguments, in the text a lenient decoder would read
// (points.MinimalEscapes), for the same reason.
//
// An object a model wrote in the wrapper's own shape ({"raw_arguments":
// "<text>"} and nothing else) is wrapped as text too: argsString unwraps
// the shape on write-back, and would otherwise release <text> (say
// {"cmd":"rm -rf /"}) as the arguments, which no point judged as such.
func argsObject(s string) []byte {
	b := bytesOf(s)
	if points.ValidJSON(b) {
		if r := gjson.Parse(s); r.IsObject() && !standInShaped(r) {
			return compact(b)
		}
	} else if !points.DepthWithin(b, points.DefaultMaxDepth) {
		// Nested past the bound (§12.3): judged as text, a member a rule
		// names would resolve to nothing; refused instead.
		return tooDeep
	} else if gjson.Valid(s) && gjson.Parse(s).IsObject() {
		return compact(b)
	}
	out, _ := json.Marshal(map[string]string{"raw_arguments": points.MinimalEscapes(s)})
	return out
}

// tooDeep stands in for a value nested past the contract's depth bound: a
// JSON value the emission refuses (host_error:context_invalid), whatever
// the original's syntax. It is an object, so that it passes for arguments
// and the record names the depth, not the arguments' type.
var tooDeep = []byte(strings.Repeat(`{"":`, points.DefaultMaxDepth+1) + "0" + strings.Repeat("}", points.DefaultMaxDepth+1))

// standInShaped reports whether args is an object of the raw_arguments
// wrapper's shape, the one argsString unwraps.
func standInShaped(args gjson.Result) bool {
	if !args.IsObject() {
		return false
	}
	n, str := 0, false
	args.ForEach(func(k, v gjson.Result) bool {
		n++
		str = k.Str == "raw_arguments" && v.Type == gjson.String
		return n < 2
	})
	return n == 1 && str
}

// argsString is the inverse of argsObject for write-back.
func argsString(args gjson.Result) string {
	if standInShaped(args) {
		return args.Get("raw_arguments").Str
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

// completionView indexes the parts of a chat.completion the proxy reads,
// in one walk: a 32 KB answer is skipped a few times instead of once per
// gjson.Get. Raw slices share the completion's memory; a nil slice is an
// absent member.
type completionView struct {
	model, choices, usage               []byte
	nChoices                            int
	finishReason, logprobs              []byte
	message                             []byte
	content, refusal, toolCalls, fnCall []byte
	// unjudged lists the non-null message members no point sees;
	// unjudgedTop and unjudgedChoice those of the completion and of
	// choice 0 (citations, vendor extras), which no point sees either.
	unjudged, unjudgedTop, unjudgedChoice []string
	// foreignTool: a tool call whose type is not function (a custom
	// tool), which no tool point can judge; toolExtras: a tool call or
	// its function carries members beyond id, name and arguments;
	// badToolShape: an id, name or arguments that is not a string (or
	// null), which the points would read as empty and the client as sent;
	// objectArgs: arguments sent as a JSON object (llama.cpp's server can),
	// which the proxy turns into the string the chat wire has.
	foreignTool, toolExtras, badToolShape, objectArgs bool
	// badShape: a member the release keeps as sent has a type the chat
	// wire does not (a choice or message that is not an object, a
	// finish_reason object, an object id): the points would judge it as
	// empty or as a default while the client got it whole.
	badShape      bool
	missingCallID bool // a tool call with no id, a null or an empty one
	// roleFix: message.role is not "assistant" (no point judges it, so
	// it is released as "assistant"); usageText: usage holds a string
	// somewhere, which no point judges (its counts are projected), so
	// usage is released with its strings left out.
	roleFix, usageText bool
}

// viewCompletion indexes completion, which must be valid JSON.
func viewCompletion(completion []byte) completionView {
	var v completionView
	points.ForEachMember(completion, func(name string, val []byte) bool {
		switch name {
		case "model":
			if !stringOrNull(val) {
				// An object or number: post_model_call judges the
				// request's model instead, so this one is not released.
				v.unjudgedTop = append(v.unjudgedTop, name)
				break
			}
			v.model = firstOf(v.model, val)
		case "choices":
			v.choices = firstOf(v.choices, val)
		case "usage":
			if len(val) > 0 && val[0] == '"' {
				v.unjudgedTop = append(v.unjudgedTop, name) // text, not counts
				break
			}
			v.usage = firstOf(v.usage, val)
			v.usageText = v.usageText || hasStringValue(val)
		case "id", "object", "service_tier", "system_fingerprint":
			v.badShape = v.badShape || !stringOrNull(val)
		case "created":
			v.badShape = v.badShape || !numberOrNull(val)
		case "prompt_filter_results":
		default:
			if string(val) != "null" {
				v.unjudgedTop = append(v.unjudgedTop, name)
			}
		}
		return true
	})
	var choice0 []byte
	points.ForEachElement(v.choices, func(el []byte) bool {
		if v.nChoices == 0 {
			choice0 = el
		}
		v.nChoices++
		return true
	})
	if v.nChoices > 0 && (len(choice0) == 0 || choice0[0] != '{') {
		v.badShape = true
	}
	points.ForEachMember(choice0, func(name string, val []byte) bool {
		switch name {
		case "message":
			v.badShape = v.badShape || !objectOrNull(val)
			v.message = firstOf(v.message, val)
		case "finish_reason":
			v.badShape = v.badShape || !stringOrNull(val)
			v.finishReason = firstOf(v.finishReason, val)
		case "logprobs":
			v.badShape = v.badShape || !objectOrNull(val)
			v.logprobs = firstOf(v.logprobs, val)
		case "index":
			v.badShape = v.badShape || !numberOrNull(val)
		case "content_filter_results":
		default:
			if string(val) != "null" {
				v.unjudgedChoice = append(v.unjudgedChoice, name)
			}
		}
		return true
	})
	points.ForEachMember(v.message, func(name string, val []byte) bool {
		switch name {
		case "role":
			v.roleFix = v.roleFix || string(val) != `"assistant"` && string(val) != "null"
		case "content":
			v.content = firstOf(v.content, val)
		case "refusal":
			v.refusal = firstOf(v.refusal, val)
		case "tool_calls":
			v.toolCalls = firstOf(v.toolCalls, val)
		default:
			if name == "function_call" {
				v.fnCall = firstOf(v.fnCall, val)
			}
			if string(val) != "null" {
				v.unjudged = append(v.unjudged, name)
			}
		}
		return true
	})
	// A refusal is judged only when it is the answer (content null or "").
	if !isNull(v.refusal) && !v.refusalAnswer() {
		v.unjudged = append(v.unjudged, "refusal")
	}
	// "tool_calls": null (Mistral, LiteLLM) is no call; anything else
	// that is not an array is no shape the points could judge.
	switch {
	case isNull(v.toolCalls):
		v.toolCalls = nil
	case v.toolCalls[0] != '[':
		v.badToolShape = true
		v.toolCalls = nil
	}
	// Tool calls: only function calls are judged, and of them only id,
	// name and arguments; other members are released only re-built.
	points.ForEachElement(v.toolCalls, func(c []byte) bool {
		if len(c) == 0 || c[0] != '{' {
			v.badToolShape = true // a call that is not an object: nothing to judge
			return false
		}
		var id []byte
		points.ForEachMember(c, func(name string, val []byte) bool {
			switch name {
			case "index":
			case "id":
				v.badToolShape = v.badToolShape || !stringOrNull(val)
				id = firstOf(id, val)
			case "type":
				if string(val) != `"function"` {
					v.foreignTool = true
				}
			case "function":
				if len(val) == 0 || val[0] != '{' {
					v.badToolShape = true // not an object: nothing the points could judge
				}
				points.ForEachMember(val, func(fname string, fv []byte) bool {
					switch fname {
					case "arguments":
						if len(fv) > 0 && fv[0] == '{' {
							v.objectArgs = true
						} else {
							v.badToolShape = v.badToolShape || !stringOrNull(fv)
						}
					case "name":
						v.badToolShape = v.badToolShape || !stringOrNull(fv) || controlInName(fv)
					default:
						v.toolExtras = true
					}
					return true
				})
			default:
				v.toolExtras = true
			}
			return true
		})
		v.missingCallID = v.missingCallID || isNull(id) || string(id) == `""`
		return true
	})
	return v
}

// firstOf keeps the first occurrence of a member, as gjson reads it.
func firstOf(have, val []byte) []byte {
	if have != nil {
		return have
	}
	return val
}

// stringifyObjectArgs rewrites tool-call arguments sent as a JSON object
// into the JSON string the chat wire carries (compact text of the object),
// so the points judge, and the client gets, the same arguments.
func stringifyObjectArgs(completion []byte) ([]byte, error) {
	var err error
	gjson.GetBytes(completion, "choices.0.message.tool_calls").ForEach(func(k, c gjson.Result) bool {
		if a := c.Get("function.arguments"); a.IsObject() {
			completion, err = sjson.SetBytes(completion, "choices.0.message.tool_calls."+k.String()+".function.arguments", string(compact([]byte(a.Raw))))
		}
		return err == nil
	})
	return completion, err
}

// stringOrNull reports whether raw is a JSON string or null.
func stringOrNull(raw []byte) bool { return len(raw) > 0 && (raw[0] == '"' || string(raw) == "null") }

// controlInName reports whether raw, a JSON string, holds a control
// character (only escaped ones can be there): no tool is named so, and a
// host that cuts a name at NUL would run another tool than the one judged.
func controlInName(raw []byte) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return false
	}
	return hasControl(gjson.ParseBytes(raw).Str)
}

// hasControl reports whether s holds a C0 control character or DEL.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(c rune) bool { return c < 0x20 || c == 0x7f })
}

// objectOrNull reports whether raw is a JSON object or null.
func objectOrNull(raw []byte) bool { return len(raw) > 0 && (raw[0] == '{' || string(raw) == "null") }

// numberOrNull reports whether raw is a JSON number or null.
func numberOrNull(raw []byte) bool {
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9' || string(raw) == "null")
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw []byte) bool { return raw == nil || string(raw) == "null" }

// refusalAnswer reports whether the answer's text is its refusal: content
// is null or "" and refusal is a string. Points judge that text as the
// content. ("": OpenAI opens every stream with content "" beside refusal
// null, so a streamed refusal assembles to both.)
func (v *completionView) refusalAnswer() bool {
	return (isNull(v.content) || string(v.content) == `""`) && len(v.refusal) > 0 && v.refusal[0] == '"'
}

// answerEmpty reports whether the answer has no text, no refusal and no
// tool calls.
func (v *completionView) answerEmpty() bool {
	return (isNull(v.content) || string(v.content) == `""` || string(v.content) == "[]") &&
		!v.refusalAnswer() && !hasElements(v.toolCalls) && isNull(v.fnCall)
}

// hasElements reports whether the raw JSON array has an element.
func hasElements(raw []byte) bool {
	n := 0
	points.ForEachElement(raw, func([]byte) bool { n++; return false })
	return n > 0
}

// answerElsewhere reports whether a member the chat wire does not have,
// which is removed, may hold the answer's text: a choice's text, message
// or delta beside or instead of its message, or a message's text.
func (v *completionView) answerElsewhere() bool {
	for _, n := range v.unjudgedChoice {
		if (n == "text" || n == "delta" || n == "message") && mayHoldText(gjson.Get(view(v.choices), "0."+n)) {
			return true
		}
	}
	return slices.Contains(v.unjudged, "text") && mayHoldText(gjson.Get(view(v.message), "text"))
}

// mayHoldText reports whether a member the chat wire lacks may hold answer
// text: anything but null, "" and an object whose content and text are
// null or "" ({"role":"assistant","content":""}).
func mayHoldText(m gjson.Result) bool {
	switch {
	case !m.Exists() || m.Type == gjson.Null:
		return false
	case m.Type == gjson.String:
		return m.Str != ""
	case m.IsObject():
		has := false
		m.ForEach(func(k, x gjson.Result) bool {
			if k.Str == "role" {
				return true
			}
			has = x.Type != gjson.Null && !(x.Type == gjson.String && x.Str == "") && x.Raw != "[]"
			return !has
		})
		return has
	}
	return true
}

// answerText is the text the points judge: content, or the refusal when
// the model refused.
func (v *completionView) answerText() []byte {
	if v.refusalAnswer() {
		return v.refusal
	}
	if v.content == nil {
		return []byte("null")
	}
	return v.content
}

// projectResponse builds post_model_call's response member from a
// chat.completion (choice 0): {content, tool_calls:[{id,name,args}],
// finish_reason}, appended to dst[:0].
func (v *completionView) projectResponse(dst []byte) (response []byte, callIDs []string) {
	text := v.answerText()
	out := append(dst[:0], `{"content":`...)
	out = append(out, text...)
	out = append(out, `,"tool_calls":[`...)
	n := 0
	gjson.ParseBytes(v.toolCalls).ForEach(func(_, tc gjson.Result) bool {
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
	if len(v.finishReason) > 0 && v.finishReason[0] == '"' {
		out = append(out, v.finishReason...)
	} else {
		out = append(out, `"stop"`...)
	}
	return append(out, '}'), callIDs
}

// usageMember projects usage to {prompt_tokens, completion_tokens}.
func (v *completionView) usageMember() []byte {
	u := gjson.ParseBytes(v.usage)
	if !u.IsObject() {
		return nil
	}
	// The contract's usage holds integers >= 0: an upstream's -1 or 1.5
	// would make the context invalid, so such a count is left out, and a
	// usage with neither count is left out whole (a budget with
	// require_usage then refuses the answer). One valid count is kept, so
	// a token budget still counts it.
	p, pok := tokenCount(u.Get("prompt_tokens"))
	c, cok := tokenCount(u.Get("completion_tokens"))
	switch {
	case pok && cok:
		return []byte(`{"prompt_tokens":` + p + `,"completion_tokens":` + c + `}`)
	case pok:
		return []byte(`{"prompt_tokens":` + p + `}`)
	case cok:
		return []byte(`{"completion_tokens":` + c + `}`)
	}
	return nil
}

// tokenCount is v as a count for the context's usage: a JSON number that
// is an integer from 0 to 2^53-1, however written (12, 12.0, 1.2e1), in
// its plain form.
func tokenCount(v gjson.Result) (string, bool) {
	if v.Type != gjson.Number {
		return "", false
	}
	if plain := len(v.Raw) > 0 && len(v.Raw) <= 15 && strings.Trim(v.Raw, "0123456789") == ""; plain {
		return v.Raw, true // the usual form, without an allocation
	}
	f := v.Num
	if f < 0 || f > 1<<53-1 || f != math.Trunc(f) {
		return "", false
	}
	return strconv.FormatInt(int64(f), 10), true
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
			if completion, err = sjson.DeleteBytes(completion, "choices.0.message.tool_calls"); err != nil {
				return nil, err
			}
		}
		if gjson.Get(view(completion), "choices.0.finish_reason").Str == "tool_calls" {
			// No call is left to make: agent loops that branch on the
			// reason would look for calls that are not there.
			completion, err = sjson.SetBytes(completion, "choices.0.finish_reason", "stop")
		}
		return completion, err
	}
	// A call the transform left as it was keeps the model's arguments
	// text byte for byte (spacing, escapes): only a changed one, or one
	// judged as text (the stand-in), is written from the context.
	sent := map[string]string{}
	gjson.Get(view(completion), "choices.0.message.tool_calls").ForEach(func(_, c gjson.Result) bool {
		if id := c.Get("id").Str; id != "" {
			if _, dup := sent[id]; !dup {
				sent[id] = c.Get("function.arguments").Str
			}
		}
		return true
	})
	arr := []byte{'['}
	for i, c := range calls {
		if i > 0 {
			arr = append(arr, ',')
		}
		id, args := c.Get("id").Str, c.Get("args")
		text, ok := sent[id]
		if !ok || standInShaped(args) || args.Raw != string(argsObject(text)) {
			text = argsString(args)
		}
		arr = append(arr, `{"id":`...)
		arr = appendString(arr, id)
		arr = append(arr, `,"type":"function","function":{"name":`...)
		arr = appendString(arr, c.Get("name").Str)
		arr = append(arr, `,"arguments":`...)
		arr = appendString(arr, text)
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

// appendString appends s as encoding/json writes it.
func appendString(dst []byte, s string) []byte { return points.AppendJSONString(dst, s) }

// toolCallIDsIn lists the tool-call ids a request refers back to (its
// tool messages' tool_call_id and its assistant messages' tool_calls ids),
// and maps those of the assistant calls to their function names and
// arguments strings.
func toolCallIDsIn(body []byte) (ids []string, names map[string]callSeen) {
	points.ForEachElement(points.MemberValue(body, "messages"), func(m []byte) bool {
		role, toolCallID, toolCalls := rawMessageFields(m)
		switch gjson.ParseBytes(role).Str {
		case "tool":
			if id := gjson.ParseBytes(toolCallID).Str; id != "" {
				ids = append(ids, id)
			}
		case "assistant":
			points.ForEachElement(toolCalls, func(c []byte) bool {
				r := gjson.ParseBytes(c)
				if id := r.Get("id").Str; id != "" {
					ids = append(ids, id)
					if names == nil {
						names = map[string]callSeen{}
					}
					names[id] = callSeen{name: r.Get("function.name").Str, args: r.Get("function.arguments").Str}
				}
				return true
			})
		}
		return true
	})
	return ids, names
}

// callSeen is an assistant message's tool call as a request carries it
// back: its function name and arguments string.
type callSeen struct{ name, args string }

// historyHash identifies msgs, a conversation's messages, whatever their
// spacing and member order: SHA-256 over each message's canonical JSON.
func historyHash(msgs []gjson.Result) [32]byte {
	h := sha256.New()
	var n [8]byte
	for _, m := range msgs {
		c, err := points.CanonicalJSON(bytesOf(m.Raw))
		if err != nil {
			c = bytesOf(m.Raw)
		}
		binary.BigEndian.PutUint64(n[:], uint64(len(c)))
		h.Write(n[:])
		h.Write(c)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// view reads b as a string without copying it, for gjson. The proxy never
// writes a body or completion slice in place (sjson returns new slices), so
// results stay valid.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// bytesOf is view's inverse, for reading a string as bytes; never write it.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// setAnswerText writes a verdicted text back where answerText read it.
// errAnswerShape: a transform left the answer text neither a string nor null.
var errAnswerShape = errors.New("proxy: answer text must be a string or null")

func setAnswerText(completion, text []byte) ([]byte, error) {
	// A chat message's content (or refusal) is a string or null, or, where
	// the model answered with content parts, an array of them (a masking
	// transform keeps the parts); an object is sent as its JSON text; any
	// other verdicted value has no chat.completion form to be sent in.
	v := viewCompletion(completion)
	t := gjson.ParseBytes(text)
	if t.IsObject() {
		// The contract's content may be an object; the chat wire's is a
		// string, so the object goes out as its JSON text.
		text = appendString(nil, string(compact([]byte(t.Raw))))
	} else if t.Type != gjson.String && t.Type != gjson.Null &&
		!(t.IsArray() && len(v.content) > 0 && v.content[0] == '[') {
		return nil, errAnswerShape
	}
	if v.refusalAnswer() {
		return sjson.SetRawBytes(completion, "choices.0.message.refusal", text)
	}
	return sjson.SetRawBytes(completion, "choices.0.message.content", text)
}

// inputContent is the request form of an input transform's content value:
// a string as is, content parts where the message had parts (a masking
// transform keeps them), an object as its JSON text, as the answer's
// write-back does. A number, a boolean, null or a missing member has no
// form a chat request accepts for a user or system message, so there is
// none (the caller fails closed rather than send the upstream a body it
// refuses).
func inputContent(v gjson.Result, orig string) ([]byte, bool) {
	switch {
	case v.Type == gjson.String:
		return []byte(v.Raw), true
	case v.IsArray() && len(orig) > 0 && orig[0] == '[':
		return []byte(v.Raw), true
	case v.IsObject():
		return appendString(nil, string(compact([]byte(v.Raw)))), true
	}
	return nil, false
}

// stripUnjudged removes message members no point judged (v.unjudged) and
// re-indexes v; changed reports whether it removed any (the stream must
// then be re-derived).
func stripUnjudged(completion []byte, v *completionView) ([]byte, bool, error) {
	if len(v.unjudged) == 0 && len(v.unjudgedTop) == 0 && len(v.unjudgedChoice) == 0 && !v.toolExtras && !v.roleFix && !v.usageText {
		return completion, false, nil
	}
	var err error
	if v.roleFix {
		if completion, err = sjson.SetRawBytes(completion, "choices.0.message.role", []byte(`"assistant"`)); err != nil {
			return nil, false, err
		}
	}
	if v.usageText {
		if completion, err = sjson.SetRawBytes(completion, "usage", withoutStrings(gjson.ParseBytes(v.usage))); err != nil {
			return nil, false, err
		}
	}
	for _, del := range []struct {
		prefix string
		names  []string
	}{{"choices.0.message.", v.unjudged}, {"choices.0.", v.unjudgedChoice}, {"", v.unjudgedTop}} {
		for _, k := range del.names {
			if completion, err = sjson.DeleteBytes(completion, del.prefix+escapePathKey(k)); err != nil {
				return nil, false, err
			}
		}
	}
	if v.toolExtras {
		// Re-built from what the points judged: id, name, arguments.
		arr := []byte{'['}
		gjson.Get(view(completion), "choices.0.message.tool_calls").ForEach(func(_, c gjson.Result) bool {
			if len(arr) > 1 {
				arr = append(arr, ',')
			}
			arr = append(arr, `{"id":`...)
			arr = appendString(arr, c.Get("id").Str)
			arr = append(arr, `,"type":"function","function":{"name":`...)
			arr = appendString(arr, c.Get("function.name").Str)
			arr = append(arr, `,"arguments":`...)
			arr = appendString(arr, c.Get("function.arguments").Str)
			arr = append(arr, `}}`...)
			return true
		})
		if completion, err = sjson.SetRawBytes(completion, "choices.0.message.tool_calls", append(arr, ']')); err != nil {
			return nil, false, err
		}
	}
	*v = viewCompletion(completion)
	if len(v.unjudged) > 0 || len(v.unjudgedTop) > 0 || len(v.unjudgedChoice) > 0 || v.roleFix || v.usageText {
		// A name the path syntax could not reach: fail closed rather than
		// release a member no point judged.
		return nil, false, errUnremovable
	}
	return completion, true, nil
}

// hasStringValue reports whether a string value (not a member name) sits
// anywhere in raw, valid JSON: one pass, no allocation, as every answer's
// usage goes through it.
func hasStringValue(raw []byte) bool {
	var stack [64]byte // container kinds; deeper nesting is read as an object
	depth := 0
	key := false // the next string is a member name
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '{':
			if depth < len(stack) {
				stack[depth] = '{'
			}
			depth++
			key = true
		case '[':
			if depth < len(stack) {
				stack[depth] = '['
			}
			depth++
			key = false
		case '}', ']':
			depth--
			key = false
		case ',':
			key = depth > 0 && (depth > len(stack) || stack[depth-1] == '{')
		case ':':
			key = false
		case '"':
			if !key {
				return true
			}
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
			key = false
		}
	}
	return false
}

// withoutStrings is r (an object or array) with every string value left
// out, at any depth: usage's counts and flags stay, its text does not.
func withoutStrings(r gjson.Result) []byte {
	out := []byte{'['}
	if r.IsObject() {
		out[0] = '{'
	}
	n := 0
	r.ForEach(func(k, v gjson.Result) bool {
		if v.Type == gjson.String {
			return true
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		if r.IsObject() {
			out = appendString(out, k.Str)
			out = append(out, ':')
		}
		if v.IsObject() || v.IsArray() {
			out = append(out, withoutStrings(v)...)
		} else {
			out = append(out, v.Raw...)
		}
		return true
	})
	if r.IsObject() {
		return append(out, '}')
	}
	return append(out, ']')
}

// errUnremovable: a member no point judges could not be removed.
var errUnremovable = errors.New("proxy: unjudged response member could not be removed")

// escapePathKey escapes every character of a member name that is not a
// letter, digit or underscore, so gjson/sjson read it as one literal key
// (a leading { or [ would otherwise be a multipath, \ an escape).
func escapePathKey(k string) string {
	var b strings.Builder
	for _, r := range k {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r >= 0x80 {
			b.WriteRune(r)
			continue
		}
		b.WriteByte('\\')
		b.WriteRune(r)
	}
	return b.String()
}

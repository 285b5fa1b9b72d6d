package proxy

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/hooksproxy/hooksproxy/points"
	"github.com/hooksproxy/hooksproxy/sse"
	"github.com/tidwall/gjson"
)

// Errors of chat stream buffering and assembly. The proxy fails closed on
// every one of them. Use errors.Is: most are returned wrapped or as the
// typed errors below.
var (
	// ErrBufferLimit means the upstream stream is larger than the byte
	// limit the ChatStream was given.
	ErrBufferLimit = errors.New("proxy: upstream stream exceeds the buffer limit")
	// ErrMissingDone means the stream ended (or was cut inside an event)
	// before "data: [DONE]".
	ErrMissingDone = errors.New("proxy: upstream stream ended without data: [DONE]")
	// ErrMalformedChunk is matched by every *ChunkError.
	ErrMalformedChunk = errors.New("proxy: malformed chat completion chunk")
	// ErrStreamRead means the upstream body failed before its end (a
	// reset, a broken connection).
	ErrStreamRead = errors.New("proxy: reading upstream stream")
	// ErrUpstreamStreamError is matched by every *UpstreamStreamError.
	ErrUpstreamStreamError = errors.New("proxy: upstream reported an error inside the stream")
	// ErrInvalidCompletion means RederiveChatStream was given something
	// that is not a chat.completion it can re-emit.
	ErrInvalidCompletion = errors.New("proxy: invalid chat.completion")
)

// ChunkError reports an event that is not a valid chat.completion.chunk:
// not JSON, fields of the wrong type, duplicate keys, an id that changes
// mid-stream, an unsupported tool call type, and the like.
type ChunkError struct {
	// Event is the zero-based index of the offending event in the stream.
	Event int
	// Reason says what is wrong; it never contains payload text.
	Reason string
}

// Reasons of a ChunkError for an event that is well formed but beyond what
// the proxy mediates: the stream fails closed as a host error, not as the
// upstream's fault.
const (
	reasonUnsupportedTool = "unsupported tool call type"
	reasonTooManySlots    = "too many choices and tool calls"
)

func (e *ChunkError) Error() string {
	return fmt.Sprintf("proxy: malformed chat completion chunk (event %d): %s", e.Event, e.Reason)
}

// Unwrap lets errors.Is(err, ErrMalformedChunk) match.
func (e *ChunkError) Unwrap() error { return ErrMalformedChunk }

// UpstreamStreamError reports an error the upstream sent inside a 200
// stream: an event of type "error", or a data object with a top-level
// "error" key (even null, as openai-go treats it).
type UpstreamStreamError struct {
	// Event is the zero-based index of the error event.
	Event int
	// Type, Code and Message are error.type, error.code and error.message
	// when the data had them.
	Type, Code, Message string
	// Data is a copy of the event's data, for a caller that wants to pass
	// the upstream error on.
	Data []byte
}

func (e *UpstreamStreamError) Error() string {
	// Logged: the type and code are the upstream's, so only identifiers.
	return fmt.Sprintf("proxy: upstream error event %d (type %q, code %q)", e.Event, logToken(e.Type), logToken(e.Code))
}

// Unwrap lets errors.Is(err, ErrUpstreamStreamError) match.
func (e *UpstreamStreamError) Unwrap() error { return ErrUpstreamStreamError }

// Bounds on what one stream may declare, so that a hostile upstream cannot
// make the assembler allocate without limit (openai-go's accumulator uses
// the same order of magnitude).
const (
	maxChatIndex = 1 << 10 // largest choice or tool call index
	maxChatSlots = 1 << 10 // choices plus tool calls per stream
)

// ChatStream buffers an upstream Chat Completions stream and assembles it
// into the equivalent non-streaming chat.completion, which is what the
// post_model_call interception point inspects. After the verdict the
// original events can be replayed ([ChatStream.WriteOriginal]) or a
// transformed completion re-emitted as chunks ([RederiveChatStream]).
//
// Events are checked and accumulated as they arrive, so an upstream error
// or a malformed chunk is reported at once. The data of every event is kept
// in one contiguous buffer, each event as the bytes that differ from the
// event before it: consecutive chunks repeat their id, model, fingerprint
// and choice framing, and only the delta text changes, so a held 32 KB
// answer takes about a fifth of its wire size. A ChatStream can be Reset
// and reused (for example from a sync.Pool) without giving that memory
// back.
//
// A ChatStream is not safe for concurrent use.
type ChatStream struct {
	limit  int64
	size   int64
	data   []byte // what each stored event adds to the one before, back to back
	events []storedEvent
	meta   []eventMeta // the rare events with a type, id or retry
	last   []byte      // the previous event's data, whole
	// fullParse turns off the template fast path (tests compare the two).
	fullParse bool
	done      bool
	err       error
	rd        *sse.Reader
	acc       chatAcc
}

// storedEvent is one event's data as the previous event's first pre bytes,
// then data[off:off+mid], then the previous event's last suf bytes.
type storedEvent struct {
	off, mid, pre, suf uint32
	meta               int32 // index in ChatStream.meta, or -1
	usageOnly          bool  // a chunk with usage and no choices (include_usage)
}

type eventMeta struct {
	typ, id  string
	retry    time.Duration
	hasID    bool
	hasRetry bool
}

// sharedEnds returns the lengths of the longest common prefix of a and b
// and of the longest common suffix of what remains.
func sharedEnds(a, b []byte) (pre, suf int) {
	n := min(len(a), len(b))
	for pre+8 <= n {
		if x := binary.LittleEndian.Uint64(a[pre:]) ^ binary.LittleEndian.Uint64(b[pre:]); x != 0 {
			pre += bits.TrailingZeros64(x) >> 3
			goto suffix
		}
		pre += 8
	}
	for pre < n && a[pre] == b[pre] {
		pre++
	}
suffix:
	// Same word-at-a-time walk from the ends: the tails of successive
	// chunks (finish_reason, usage, closing braces) are usually identical.
	for suf+8 <= n-pre {
		if x := binary.LittleEndian.Uint64(a[len(a)-suf-8:]) ^ binary.LittleEndian.Uint64(b[len(b)-suf-8:]); x != 0 {
			return pre, suf + bits.LeadingZeros64(x)>>3
		}
		suf += 8
	}
	for suf < n-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	return pre, suf
}

// NewChatStream returns an empty ChatStream that buffers at most limit raw
// bytes of upstream events (comments and framing included). A non-positive
// limit admits nothing, so a missing setting fails closed.
func NewChatStream(limit int64) *ChatStream {
	return &ChatStream{limit: limit}
}

// Reset empties s and sets a new limit, keeping allocated buffers.
func (s *ChatStream) Reset(limit int64) {
	s.limit = limit
	s.size = 0
	s.data = s.data[:0]
	s.events = s.events[:0]
	clear(s.meta) // drop string references
	s.meta = s.meta[:0]
	s.last = s.last[:0]
	s.done = false
	s.err = nil
	s.acc.reset()
}

// Unjudged reports whether the stream carried members its assembled
// completion leaves out, or events with an id or retry field: replaying
// it as it came would release bytes no point judged, so it must be
// re-derived from the completion instead.
func (s *ChatStream) Unjudged() bool {
	if s.acc.unjudged || s.acc.irregular {
		return true
	}
	for _, m := range s.meta {
		if m.hasID || m.hasRetry || (m.typ != "" && m.typ != "message") {
			return true
		}
	}
	return false
}

// AnswerElsewhere reports whether a chunk's choice carried a message or a
// text member (the shapes of a completion and of the legacy completions
// API), which the assembled completion leaves out: where the completion
// has no answer, the text may have been there.
func (s *ChatStream) AnswerElsewhere() bool { return s.acc.elsewhere }

// Done reports whether "data: [DONE]" has been seen.
func (s *ChatStream) Done() bool { return s.done }

// Err returns the first error that Add or ReadFrom reported, if any.
func (s *ChatStream) Err() error { return s.err }

// Len returns the number of buffered events, [DONE] included.
func (s *ChatStream) Len() int { return len(s.events) }

// Size returns the raw bytes accounted against the limit so far.
func (s *ChatStream) Size() int64 { return s.size }

func (s *ChatStream) fail(err error) error {
	s.err = err
	return err
}

// ReadFrom reads events from r until "data: [DONE]" and returns without
// reading further; it does not wait for EOF, so the caller should close
// (or drain) the body. It returns the raw bytes consumed and an error
// matching ErrMissingDone if the stream ends first (io.ErrUnexpectedEOF is
// also matched when it ended inside an event), ErrBufferLimit when the limit
// is exceeded, or the error Add reported. Errors are sticky. The reader's
// buffer is bounded by the remaining limit, so memory stays within about
// twice the limit even for one endless line.
func (s *ChatStream) ReadFrom(r io.Reader) (int64, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.done {
		return 0, nil
	}
	if s.rd == nil {
		s.rd = sse.NewReader(r, 0)
	} else {
		s.rd.Reset(r)
	}
	var n int64
	for {
		// The reader's own limit stops one oversized event before it is
		// fully buffered.
		s.rd.SetMaxEventBytes(int(max(s.limit-s.size, 1)))
		ev, err := s.rd.Next()
		if err != nil {
			switch {
			case errors.Is(err, sse.ErrTooLarge):
				err = fmt.Errorf("%w: %w", ErrBufferLimit, err)
			case err == io.EOF && s.acc.finished():
				// Closed cleanly between events after every choice's
				// finish_reason, without "data: [DONE]" (ik_llama.cpp,
				// llama.cpp and TGI before mid-2024): the model said it was
				// done and nothing is cut. The client gets the [DONE].
				done := []byte("data: [DONE]\n\n")
				n += int64(len(done))
				return n, s.Add(sse.Event{Data: done[6:12], Raw: done})
			case err == io.EOF:
				err = ErrMissingDone
			case errors.Is(err, io.ErrUnexpectedEOF):
				if last, ok := s.rd.Unclosed(); ok && last.Type == "" && string(last.Data) == "[DONE]" {
					// "data: [DONE]" and its line break, then the server
					// closed: every byte of the answer is here, and
					// its end is not in doubt.
					n += int64(len(last.Raw))
					return n, s.Add(last)
				}
				if line, ok := s.rd.PartialLine(); ok && (string(line) == "data: [DONE]" || string(line) == "data:[DONE]") {
					// The same without even the line break: nothing
					// could follow that changes what came.
					n += int64(len(line))
					return n, s.Add(sse.Event{Data: []byte("[DONE]"), Raw: line})
				}
				err = fmt.Errorf("%w: %w", ErrMissingDone, err)
			default:
				err = fmt.Errorf("%w: %w", ErrStreamRead, err)
			}
			return n, s.fail(err)
		}
		n += int64(len(ev.Raw))
		if err := s.Add(ev); err != nil {
			return n, err
		}
		if s.done {
			return n, nil
		}
	}
}

// Add buffers one event (copying its bytes) and accumulates it. It returns
// ErrBufferLimit if the event does not fit; an *UpstreamStreamError for an
// error event; a *ChunkError for an event that is not a valid chunk or that
// follows [DONE]. The offending event is kept (except over the limit), so
// WriteOriginal can still pass an upstream error on. Errors are sticky.
func (s *ChatStream) Add(ev sse.Event) error {
	if s.err != nil {
		return s.err
	}
	idx := len(s.events)
	if s.done {
		return s.fail(&ChunkError{Event: idx, Reason: "event after data: [DONE]"})
	}
	n := int64(len(ev.Raw))
	if n == 0 {
		n = int64(len(ev.Data)) // an event built by hand has no Raw
	}
	if s.size+n > s.limit {
		return s.fail(fmt.Errorf("%w: %d bytes buffered, limit %d", ErrBufferLimit, s.size+n, s.limit))
	}
	if len(ev.Data) > math.MaxUint32 || len(s.data)+len(ev.Data) > math.MaxUint32 {
		return s.fail(fmt.Errorf("%w: event offsets beyond 4 GiB", ErrBufferLimit))
	}
	s.size += n
	pre, suf := sharedEnds(s.last, ev.Data)
	se := storedEvent{off: uint32(len(s.data)), mid: uint32(len(ev.Data) - pre - suf), pre: uint32(pre), suf: uint32(suf), meta: -1}
	s.data = append(s.data, ev.Data[pre:len(ev.Data)-suf]...)
	if ev.Type != "" || ev.HasID || ev.HasRetry {
		se.meta = int32(len(s.meta))
		s.meta = append(s.meta, eventMeta{typ: ev.Type, id: ev.ID, retry: ev.Retry, hasID: ev.HasID, hasRetry: ev.HasRetry})
	}
	s.events = append(s.events, se)
	s.last = append(s.last[:0], ev.Data...)
	data := s.last[:len(s.last):len(s.last)]
	if ev.Type == "error" {
		return s.fail(newUpstreamStreamError(idx, data))
	}
	if string(data) == "[DONE]" {
		s.done = true
		return nil
	}
	var usageOnly bool
	var err error
	if s.fullParse {
		usageOnly, err = s.acc.addChunk(idx, data)
	} else {
		usageOnly, err = s.acc.addChunkFast(idx, data, pre, suf)
	}
	if err != nil {
		return s.fail(err)
	}
	if !utf8.Valid(data) {
		// gjson's validator does not look at UTF-8. A chunk that is not
		// UTF-8 is not acceptable JSON (RFC 8259 §8.1), as a json answer
		// with such bytes is not: the upstream's fault (502), not a
		// context the host cannot build (503), and never replayed, since
		// clients decode those bytes as U+FFFD while the points would
		// judge the bytes joined across chunks.
		return s.fail(&ChunkError{Event: idx, Reason: "data is not valid UTF-8"})
	}
	s.events[idx].usageOnly = usageOnly
	return nil
}

func newUpstreamStreamError(idx int, data []byte) *UpstreamStreamError {
	e := &UpstreamStreamError{Event: idx, Data: slices.Clone(data)}
	if !points.DepthWithin(data, points.DefaultMaxDepth) || !gjson.ValidBytes(data) {
		return e
	}
	obj := gjson.GetBytes(data, "error")
	switch {
	case obj.Type == gjson.String:
		e.Message = obj.Str
		return e
	case !obj.IsObject():
		// Responses-style {"type":"error","code","message"} or a bare object.
		obj = gjson.ParseBytes(data)
	}
	e.Type = obj.Get("type").String()
	e.Code = obj.Get("code").String()
	e.Message = obj.Get("message").String()
	return e
}

// ReplayOptions adjusts [ChatStream.Replay].
type ReplayOptions struct {
	// OmitUsageChunk drops chunks that carry usage and no choices. Set it
	// when the proxy forced stream_options.include_usage for its own
	// metrics but the client did not ask for usage: such a chunk has
	// "choices":[] and breaks clients that index choices[0].
	OmitUsageChunk bool
}

// WriteOriginal writes the buffered upstream events one for one, in
// canonical SSE framing (LF line ends, one data line per line of data),
// with the original data bytes, except that a JSON payload spread over
// several data lines is compacted onto one. Comments are not replayed.
func (s *ChatStream) WriteOriginal(w io.Writer) error {
	return s.Replay(w, ReplayOptions{})
}

// Replay is WriteOriginal with options.
func (s *ChatStream) Replay(w io.Writer, opts ReplayOptions) error {
	sw := sse.NewWriter(w)
	var prev, cur []byte // each event is rebuilt from the one before
	var compacted bytes.Buffer
	for _, e := range s.events {
		cur = append(cur[:0], prev[:e.pre]...)
		cur = append(cur, s.data[e.off:e.off+e.mid]...)
		cur = append(cur, prev[len(prev)-int(e.suf):]...)
		prev, cur = cur, prev
		if opts.OmitUsageChunk && e.usageOnly {
			continue
		}
		ev := sse.Event{Data: prev}
		if bytes.IndexByte(prev, '\n') >= 0 {
			// A JSON payload the upstream spread over several data lines
			// goes out as one: langchaingo parses each data line on its
			// own (CLIENTS-AND-SSE C3). Raw newlines in JSON can only be
			// whitespace, so compacting changes no value.
			compacted.Reset()
			if json.Compact(&compacted, prev) == nil {
				ev.Data = compacted.Bytes()
			}
		}
		if e.meta >= 0 {
			m := &s.meta[e.meta]
			ev.Type, ev.ID, ev.HasID, ev.Retry, ev.HasRetry = m.typ, m.id, m.hasID, m.retry, m.hasRetry
		}
		if err := sw.WriteEvent(ev); err != nil {
			return fmt.Errorf("proxy: replaying stream: %w", err)
		}
	}
	return nil
}

// Assemble returns the chat.completion equivalent to the stream:
//
//	{"id","object":"chat.completion","created","model",
//	 "choices":[{"index","message":{"role","content","refusal",
//	    <other delta fields>,"function_call"?,"tool_calls"?},
//	  "logprobs","finish_reason"}],
//	 "usage"?,"service_tier"?,"system_fingerprint"?}
//
// Choices and tool calls are merged by index and sorted by it; content,
// refusal, tool call names and arguments are concatenated; content and
// refusal are null when no delta carried them. Other string fields of a
// delta (reasoning_content, for example) are concatenated too, arrays are
// joined, and other values must not change across chunks; they appear after
// refusal, strings first. finish_reason is the last non-null value. usage is
// the last non-null usage (the include_usage chunk). obfuscation and other
// top-level extras are dropped. The output is compact JSON.
//
// Assemble fails with the error that Add reported, ErrMissingDone before
// [DONE], or a *ChunkError when no chunk carried a choice.
func (s *ChatStream) Assemble() ([]byte, error) {
	return s.AppendAssembled(nil)
}

// AssembledSizeHint is about the length Assemble will return: the
// accumulated strings and arrays plus room for the members around them.
func (s *ChatStream) AssembledSizeHint() int {
	a := &s.acc
	n := 512 + len(a.id) + len(a.model) + len(a.usage) + len(a.fprint) + len(a.tier)
	for i := range a.choices {
		c := &a.choices[i]
		n += 128 + len(c.content) + len(c.parts) + len(c.tail) + len(c.refusal) + len(c.lpContent) + len(c.lpRefusal) + len(c.fn.name) + len(c.fn.args)
		for _, t := range c.tools {
			n += 96 + len(t.id) + len(t.name) + len(t.args)
		}
		for _, e := range c.extras {
			n += 16 + len(e.rawKey) + len(e.val)
		}
	}
	return n
}

// AppendAssembled is Assemble appending to dst.
func (s *ChatStream) AppendAssembled(dst []byte) ([]byte, error) {
	if s.err != nil {
		return dst, s.err
	}
	if !s.done {
		return dst, ErrMissingDone
	}
	if len(s.acc.choices) == 0 {
		// Nothing for the hook to judge and nothing a client could use.
		return dst, &ChunkError{Event: len(s.events) - 1, Reason: "no choice before [DONE]"}
	}
	return s.acc.appendCompletion(dst), nil
}

// chatAcc accumulates chunks. Strings are kept in their escaped JSON form:
// concatenating the insides of JSON string literals yields the literal of
// the concatenated string, so nothing is decoded and re-encoded.
type chatAcc struct {
	// tpl describes the previous chunk when it was a plain content delta
	// (see addChunkFast); cur is being filled while a chunk is parsed.
	tpl, cur chunkTemplate
	curData  []byte // the chunk being parsed, for noteContent

	deltas int // sequence number of the delta being applied
	// unjudged: a chunk carried a member the assembled completion leaves
	// out (an unknown top-level, choice, tool call or function member), so
	// the original events hold bytes no point judged (Unjudged).
	unjudged bool
	// irregular: the stream has a shape the clients' own accumulators
	// read differently from this one (a chunk with an empty id, which
	// openai-go's accumulator drops; a choice or tool call without an
	// index; several choices in one chunk; a tool call's name, type or id
	// given again): replayed as it came, a client could assemble text or
	// a call other than the one judged, so it is re-derived (Unjudged).
	irregular bool
	// elsewhere: a choice carried a message or text member, which chunks
	// do not have and the completion leaves out (AnswerElsewhere).
	elsewhere bool
	id        []byte
	model     []byte
	created   []byte
	tier      []byte // raw; nil when never present
	fprint    []byte
	usage     []byte
	choices   []choiceAcc
	slots     int
	scratch   []byte
	hasTier   bool
	hasPrint  bool
}

type choiceAcc struct {
	index            int
	role             []byte // raw JSON string
	content, refusal []byte // escaped string contents
	hasContent       bool
	hasRefusal       bool
	// parts: content given as an array of parts (Mistral's Magistral
	// streams thinking parts, then text): the closed parts, comma-joined
	// compact JSON; the last part is open in tail (its kind and escaped
	// text) while the next delta may extend it. Once there are parts,
	// string deltas are text parts and content is that array.
	parts        []byte
	tail         []byte
	tailClosed   string // a thinking part's "closed" (true, false) or ""
	tailKind     partKind
	hasParts     bool
	finish       []byte // raw JSON string; nil is null
	lpContent    []byte // comma-joined raw array elements
	lpRefusal    []byte
	hasLP        bool
	hasLPContent bool
	hasLPRefusal bool
	fn           toolAcc // legacy function_call
	hasFn        bool
	tools        []toolAcc
	extras       []extraAcc
	// typed is the wire index of the tool call whose delta last carried a
	// type, or -1: langchaingo appends every untyped delta to the call it
	// opened last, whatever its index.
	typed int
}

type toolAcc struct {
	// index orders the call in the completion; wire is the index its
	// deltas carry. They differ for a call that reused a taken index.
	index, wire int
	id, typ     []byte // raw JSON strings
	name, args  []byte // escaped string contents
	// extra is the call's extra_content object (Gemini's thought
	// signature), last one given: in the completion, where the points
	// never see it and the release strips it, so that the proxy can hand
	// it back to the upstream with the agent's next request (signatures).
	extra []byte
}

// extraAcc is a delta field the assembler does not know by name.
type extraAcc struct {
	name   string
	rawKey []byte
	kind   gjson.Type // String, JSON (array) or other: decides the merge
	array  bool
	val    []byte
	seq    int
	// dropped: a value that changed from chunk to chunk (Together's
	// token_id, audio objects), which a client would keep only one of; it
	// is left out of the completion, so the stream is re-derived without it.
	dropped bool
}

// finished reports whether the stream has choices and each has its
// finish_reason. An empty one is none: some servers (sglang 0.4, GLM
// routes) send "" on every chunk before the last.
func (a *chatAcc) finished() bool {
	for i := range a.choices {
		if len(a.choices[i].finish) <= len(`""`) {
			return false
		}
	}
	return len(a.choices) > 0
}

func (a *chatAcc) reset() {
	choices := a.choices[:0]
	*a = chatAcc{choices: choices, scratch: a.scratch[:0]}
}

// chunkTemplate is a chunk whose only effect was to append its content
// string to one choice: no usage, one choice, no finish_reason, logprobs,
// tool calls or other delta fields. body is the content's string body
// (inside the quotes) in the chunk's bytes; n is the chunk's length.
type chunkTemplate struct {
	ok             bool
	choice         int // index in chatAcc.choices
	bodyLo, bodyHi int
	n              int
}

// addChunkFast applies a chunk that repeats the previous one byte for byte
// except inside the content string, which is what almost every chunk of a
// streamed answer is: the chunk is then that template with another string
// body, so it is valid, has the same keys and the same effect except for
// the appended text, and needs no parse. pre and suf are the bytes it
// shares with the previous chunk at each end. Anything else, or a body
// that is not a plain valid string body, takes the full parse.
func (a *chatAcc) addChunkFast(ev int, data []byte, pre, suf int) (bool, error) {
	t := a.tpl
	if t.ok && pre >= t.bodyLo && suf >= t.n-t.bodyHi {
		hi := len(data) - (t.n - t.bodyHi)
		if body := data[t.bodyLo:hi]; hi >= t.bodyLo && plainStringBody(body) {
			a.deltas++
			c := &a.choices[t.choice]
			c.content = append(c.content, body...)
			c.hasContent = true
			a.tpl.bodyHi, a.tpl.n = hi, len(data)
			return false, nil
		}
	}
	a.cur = chunkTemplate{ok: true, choice: -1}
	a.curData = data
	usageOnly, err := a.addChunk(ev, data)
	a.curData = nil
	a.tpl = a.cur
	a.tpl.ok = err == nil && a.cur.ok && a.cur.choice >= 0
	a.tpl.n = len(data)
	return usageOnly, err
}

// noteContent records where a string content delta lies in the chunk being
// parsed, for the template; any other content ends the template.
func (a *chatAcc) noteContent(c *choiceAcc, v gjson.Result) {
	if v.Type != gjson.String || a.cur.choice >= 0 || len(a.curData) == 0 {
		a.cur.ok = false
		return
	}
	off := int(uintptr(unsafe.Pointer(unsafe.StringData(v.Raw))) - uintptr(unsafe.Pointer(unsafe.SliceData(a.curData))))
	if off < 0 || off+len(v.Raw) > len(a.curData) {
		a.cur.ok = false
		return
	}
	for k := range a.choices {
		if &a.choices[k] == c {
			a.cur.choice = k
		}
	}
	a.cur.bodyLo, a.cur.bodyHi = off+1, off+len(v.Raw)-1
}

// plainStringBody reports whether b can stand between two quotes as a JSON
// string: valid UTF-8, no control character or bare quote, and only
// complete escapes. It is stricter than gjson (\u escapes must not be
// surrogates), so anything unusual goes to the full parse instead.
func plainStringBody(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"' || c < 0x20:
			return false
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+6 > len(b) {
					return false
				}
				var d [2]byte
				if _, err := hex.Decode(d[:], b[i+2:i+6]); err != nil || d[0] >= 0xD8 && d[0] <= 0xDF {
					return false // not hex, or a surrogate (U+D800..U+DFFF)
				}
				i += 5
			default:
				return false
			}
		case c >= 0x80:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return false
			}
			i += size - 1
		}
	}
	return true
}

// bytesToString views b as a string without copying. Safe here because
// the stored event data is never modified and no Result outlives the call
// that parsed it: whatever is kept is copied.
func bytesToString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Key bits for duplicate-key detection: encoding/json (openai-go) keeps
// the last duplicate and gjson the first, so a chunk with duplicate keys
// could show the hook one thing and the client another.
const (
	ckID = 1 << iota
	ckObject
	ckCreated
	ckModel
	ckTier
	ckFprint
	ckUsage
	ckChoices
)

func (a *chatAcc) addChunk(ev int, data []byte) (usageOnly bool, err error) {
	// gjson's validator, after a depth bound: a chunk's text may end in
	// half of a surrogate pair (the next chunk has the rest), which
	// points.ValidJSON refuses, and gjson's recursion needs the bound.
	if !points.DepthWithin(data, points.DefaultMaxDepth) || !gjson.ValidBytes(data) {
		return false, &ChunkError{Event: ev, Reason: "data is not JSON"}
	}
	root := gjson.Parse(bytesToString(data))
	if !root.IsObject() {
		return false, &ChunkError{Event: ev, Reason: "data is not a JSON object"}
	}
	bad := func(reason string) (bool, error) { return false, &ChunkError{Event: ev, Reason: reason} }
	var seen int
	var choices, usage gjson.Result
	var reason string
	var isError bool
	root.ForEach(func(k, v gjson.Result) bool {
		if k.Str == "error" {
			// Like openai-go: any top-level "error" key, null included,
			// ends the stream as an error, whatever else the chunk has.
			isError = true
			return false
		}
		if reason != "" {
			return true // keep looking for an "error" key
		}
		var bit int
		switch k.Str {
		case "id":
			bit = ckID
			if v.Type != gjson.String {
				reason = "id is not a string"
			} else if v.Str == "" {
				a.irregular = true
			} else {
				// Azure sends a first chunk with an empty id; skip it.
				if a.id == nil {
					a.id = append(a.id[:0], v.Raw...)
				} else if string(a.id) != v.Raw {
					// LiteLLM (for providers without an id) and older
					// llama.cpp servers give every chunk its own id; npm
					// and Python openai ignore it, openai-go drops the
					// chunks that differ. Re-derived under the first id.
					a.irregular = true
				}
			}
		case "object":
			bit = ckObject
			if v.Type != gjson.String || (v.Str != "chat.completion.chunk" && v.Str != "") {
				reason = "object is not chat.completion.chunk"
			}
		case "created":
			bit = ckCreated
			if v.Type != gjson.Number {
				reason = "created is not a number"
			} else if a.created == nil && v.Raw != "0" {
				a.created = append(a.created, v.Raw...)
			}
		case "model":
			bit = ckModel
			if v.Type != gjson.String {
				reason = "model is not a string"
			} else if a.model == nil && v.Str != "" {
				a.model = append(a.model, v.Raw...)
			}
		case "service_tier":
			bit = ckTier
			reason = a.keepLastNonNull(&a.tier, &a.hasTier, v, "service_tier")
		case "system_fingerprint":
			bit = ckFprint
			reason = a.keepLastNonNull(&a.fprint, &a.hasPrint, v, "system_fingerprint")
		case "usage":
			bit = ckUsage
			usage = v
			if v.Type != gjson.Null && !v.IsObject() {
				reason = "usage is not an object"
			}
		case "choices":
			bit = ckChoices
			choices = v
			if v.Type != gjson.Null && !v.IsArray() {
				reason = "choices is not an array"
			}
		case "obfuscation", "prompt_filter_results":
			// Random padding against length side channels (OpenAI) and a
			// content filter's labels (Azure): no model text.
		default:
			a.unjudged = true
		}
		if bit != 0 {
			if seen&bit != 0 {
				reason = "duplicate key " + k.Raw
			}
			seen |= bit
		}
		return true
	})
	if isError {
		return false, newUpstreamStreamError(ev, data)
	}
	if reason != "" {
		return bad(reason)
	}
	if seen&ckID == 0 || !choices.IsArray() {
		// openai-go's accumulator drops a chunk whose id differs from the
		// first one's, a missing id included; npm openai's final
		// completion iterates choices and fails on null.
		a.irregular = true
	}
	if usage.IsObject() {
		a.usage = appendCompact(a.usage[:0], usage.Raw)
		a.cur.ok = false
	}
	nChoices := 0
	if choices.IsArray() {
		n := 0
		choices.ForEach(func(_, _ gjson.Result) bool { n++; return n < 2 })
		a.irregular = a.irregular || n > 1
	}
	if choices.IsArray() {
		var err error
		choices.ForEach(func(_, c gjson.Result) bool {
			nChoices++
			err = a.addChoice(ev, c)
			return err == nil
		})
		if err != nil {
			return false, err
		}
	}
	if nChoices != 1 {
		a.cur.ok = false
	}
	return nChoices == 0 && usage.IsObject(), nil
}

// keepLastNonNull records a string-or-null header field: the last string
// wins, and null is kept only if nothing else came.
func (a *chatAcc) keepLastNonNull(dst *[]byte, has *bool, v gjson.Result, name string) string {
	switch v.Type {
	case gjson.Null:
		if !*has {
			*dst = append((*dst)[:0], "null"...)
			*has = true
		}
	case gjson.String:
		*dst = append((*dst)[:0], v.Raw...)
		*has = true
	default:
		return name + " is not a string"
	}
	return ""
}

// index parses a non-negative JSON integer index below maxChatIndex; a
// negative one is reported as -1 so callers can decide.
func jsonIndex(v gjson.Result) (int, bool) {
	if v.Type != gjson.Number {
		return 0, false
	}
	raw := v.Raw
	neg := len(raw) > 0 && raw[0] == '-'
	if neg {
		raw = raw[1:]
	}
	if len(raw) == 0 || len(raw) > 7 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		return -1, true
	}
	if n > maxChatIndex {
		return 0, false
	}
	return n, true
}

func (a *chatAcc) choice(i int) (*choiceAcc, bool) {
	for k := range a.choices {
		if a.choices[k].index == i {
			return &a.choices[k], true
		}
	}
	if a.slots >= maxChatSlots {
		return nil, false
	}
	a.slots++
	if len(a.choices) < cap(a.choices) {
		// Reuse a pooled element's buffers.
		a.choices = a.choices[:len(a.choices)+1]
		c := &a.choices[len(a.choices)-1]
		c.reset(i)
		return c, true
	}
	a.choices = append(a.choices, choiceAcc{index: i, typed: -1})
	return &a.choices[len(a.choices)-1], true
}

func (c *choiceAcc) reset(i int) {
	tools := c.tools[:0]
	extras := c.extras[:0]
	*c = choiceAcc{
		index: i, content: c.content[:0], refusal: c.refusal[:0],
		parts: c.parts[:0], tail: c.tail[:0],
		lpContent: c.lpContent[:0], lpRefusal: c.lpRefusal[:0],
		tools: tools, extras: extras, typed: -1,
	}
}

func (a *chatAcc) addChoice(ev int, v gjson.Result) error {
	bad := func(reason string) error { return &ChunkError{Event: ev, Reason: reason} }
	if !v.IsObject() {
		return bad("choice is not an object")
	}
	var m [4]gjson.Result
	reason := pickMembers(v, m[:], "index", "delta", "finish_reason", "logprobs")
	idx, delta, finish, logprobs := m[0], m[1], m[2], m[3]
	if reason != "" {
		return bad(reason)
	}
	if hasOtherMembers(v, "index", "delta", "finish_reason", "logprobs", "content_filter_results") {
		a.unjudged = true
		for _, n := range [...]string{"message", "text"} {
			if m := v.Get(n); mayHoldText(m) {
				a.elsewhere = true
			}
		}
	}
	i := 0 // openai-go reads a missing index as 0
	if !idx.Exists() {
		a.irregular = true
	} else {
		var ok bool
		if i, ok = jsonIndex(idx); !ok || i < 0 {
			return bad("choice index is not a small non-negative integer")
		}
		if i != 0 {
			// A request has one choice (n is 1): a server that numbers
			// it otherwise leaves openai-go's choices[0] empty;
			// re-derived, it is choice 0 (appendCompletion).
			a.irregular = true
		}
	}
	switch {
	case delta.Exists() && delta.Type != gjson.Null && !delta.IsObject():
		return bad("delta is not an object")
	case finish.Exists() && finish.Type != gjson.Null && finish.Type != gjson.String:
		return bad("finish_reason is not a string")
	case logprobs.Exists() && logprobs.Type != gjson.Null && !logprobs.IsObject():
		return bad("logprobs is not an object")
	}
	c, ok := a.choice(i)
	if !ok {
		return bad(reasonTooManySlots)
	}
	if finish.Type == gjson.String {
		c.finish = append(c.finish[:0], finish.Raw...)
		a.cur.ok = false
	}
	if logprobs.IsObject() {
		a.cur.ok = false
		if r := c.addLogprobs(logprobs); r != "" {
			return bad(r)
		}
	}
	if delta.IsObject() {
		a.deltas++
		if r := a.addDelta(c, delta); r != "" {
			return bad(r)
		}
	}
	return nil
}

func (c *choiceAcc) addLogprobs(v gjson.Result) string {
	c.hasLP = true
	var reason string
	var seen int
	v.ForEach(func(k, v gjson.Result) bool {
		var dst *[]byte
		var has *bool
		var bit int
		switch k.Str {
		case "content":
			dst, has, bit = &c.lpContent, &c.hasLPContent, 1
		case "refusal":
			dst, has, bit = &c.lpRefusal, &c.hasLPRefusal, 2
		default:
			return true
		}
		if seen&bit != 0 {
			reason = "duplicate key " + k.Raw
			return false
		}
		seen |= bit
		switch {
		case v.Type == gjson.Null:
		case v.IsArray():
			*has = true
			*dst = appendArrayElems(*dst, v)
		default:
			reason = "logprobs." + k.Str + " is not an array"
		}
		return reason == ""
	})
	return reason
}

// appendArrayElems appends the compacted elements of array v to a
// comma-joined list.
func appendArrayElems(dst []byte, v gjson.Result) []byte {
	v.ForEach(func(_, e gjson.Result) bool {
		if len(dst) > 0 {
			dst = append(dst, ',')
		}
		dst = appendCompact(dst, e.Raw)
		return true
	})
	return dst
}

const (
	cdRole = 1 << iota
	cdContent
	cdRefusal
	cdTools
	cdFunction
)

func (a *chatAcc) addDelta(c *choiceAcc, delta gjson.Result) string {
	var seen int
	var reason string
	delta.ForEach(func(k, v gjson.Result) bool {
		var bit int
		switch k.Str {
		case "role":
			bit = cdRole
			switch v.Type {
			case gjson.String:
				if c.role == nil && v.Str != "" {
					c.role = append(c.role, v.Raw...)
				}
			case gjson.Null:
			default:
				reason = "delta.role is not a string"
			}
		case "content":
			bit = cdContent
			if v.IsArray() || c.hasParts {
				a.cur.ok = false
				reason = c.addParts(v)
				break
			}
			reason = appendStringDelta(&c.content, &c.hasContent, v, "delta.content")
			a.noteContent(c, v)
		case "refusal":
			bit = cdRefusal
			a.cur.ok = false
			reason = appendStringDelta(&c.refusal, &c.hasRefusal, v, "delta.refusal")
		case "tool_calls":
			bit = cdTools
			a.cur.ok = false
			switch {
			case v.Type == gjson.Null:
			case v.IsArray():
				v.ForEach(func(_, t gjson.Result) bool {
					reason = a.addToolDelta(c, t)
					return reason == ""
				})
			default:
				reason = "delta.tool_calls is not an array"
			}
		case "function_call":
			bit = cdFunction
			a.cur.ok = false
			switch {
			case v.Type == gjson.Null:
			case v.IsObject():
				c.hasFn = true
				reason = addFunctionDelta(&c.fn, v, "delta.function_call", false, nil)
			default:
				reason = "delta.function_call is not an object"
			}
		default:
			a.cur.ok = false
			reason = a.addExtra(c, k, v)
		}
		if bit != 0 {
			if seen&bit != 0 {
				reason = "duplicate key " + k.Raw
			}
			seen |= bit
		}
		return reason == ""
	})
	return reason
}

func appendStringDelta(dst *[]byte, has *bool, v gjson.Result, name string) string {
	switch v.Type {
	case gjson.String:
		*has = true
		*dst = append(*dst, v.Raw[1:len(v.Raw)-1]...)
	case gjson.Null:
	default:
		return name + " is not a string"
	}
	return ""
}

// partKind is the kind of a choice's open content part: text and
// thinking parts of plain text are extended by the next chunk's first part
// of their kind, as Mistral's client merges them; any other part is kept
// as it came.
type partKind uint8

const (
	partNone partKind = iota
	partText
	partThinking
)

// addParts applies a delta.content of a choice whose content is parts: an
// array of part objects, or a string (a text part), or null.
func (c *choiceAcc) addParts(v gjson.Result) string {
	switch {
	case v.Type == gjson.Null:
		return ""
	case v.Type != gjson.String && !v.IsArray():
		return "delta.content is not a string or an array"
	}
	if !c.hasParts {
		// Text that came as strings before the first array is the
		// first text part.
		c.hasParts = true
		c.parts, c.tail, c.tailKind, c.tailClosed = c.parts[:0], c.tail[:0], partNone, ""
		if len(c.content) > 0 {
			c.tailKind = partText
			c.tail = append(c.tail, c.content...)
		}
		c.content, c.hasContent = c.content[:0], false
	}
	if v.Type == gjson.String {
		if len(v.Raw) == 2 {
			return "" // "" adds no text and keeps the open part open
		}
		c.addPart(partText, stringContents(v), "", "", true)
		return ""
	}
	reason := ""
	first := true
	v.ForEach(func(_, p gjson.Result) bool {
		if !p.IsObject() {
			reason = "delta.content part is not an object"
			return false
		}
		kind, text, closed := classifyPart(p)
		c.addPart(kind, text, closed, p.Raw, first)
		first = false
		return true
	})
	return reason
}

// classifyPart tells a text part ({"type":"text","text":s}) and a thinking
// part of one text ({"type":"thinking","thinking":[{"type":"text",
// "text":s}]}, with a boolean "closed" or none) from any other, and gives
// their text's escaped contents and the closed flag's raw value.
func classifyPart(p gjson.Result) (kind partKind, text, closed string) {
	var m [4]gjson.Result
	if pickMembers(p, m[:], "type", "text", "thinking", "closed") != "" || hasOtherMembers(p, "type", "text", "thinking", "closed") {
		return partNone, "", ""
	}
	typ, txt, thinking, cl := m[0], m[1], m[2], m[3]
	if typ.Type != gjson.String {
		return partNone, "", ""
	}
	switch {
	case typ.Str == "text" && txt.Type == gjson.String && !thinking.Exists() && !cl.Exists():
		return partText, stringContents(txt), ""
	case typ.Str == "thinking" && !txt.Exists() && thinking.IsArray() && (!cl.Exists() || cl.IsBool()):
		var inner gjson.Result
		n := 0
		thinking.ForEach(func(_, e gjson.Result) bool {
			inner, n = e, n+1
			return n < 2
		})
		if n != 1 || !inner.IsObject() {
			return partNone, "", ""
		}
		if k, t, _ := classifyPart(inner); k == partText {
			return partThinking, t, cl.Raw
		}
	}
	return partNone, "", ""
}

// addPart adds one part: text (escaped contents) of kind extends the open
// part when merge is set and the kinds match (a thinking part's last
// closed flag is kept); raw is kept as it came for a part of no mergeable
// kind.
func (c *choiceAcc) addPart(kind partKind, text, closed, raw string, merge bool) {
	// closed is a view of the chunk's buffer, which the next chunk
	// overwrites: kept as a constant.
	switch closed {
	case "true":
		closed = "true"
	case "false":
		closed = "false"
	default:
		closed = ""
	}
	if merge && kind != partNone && kind == c.tailKind {
		c.tail = append(c.tail, text...)
		if closed != "" {
			c.tailClosed = closed
		}
		return
	}
	c.closeTail()
	if kind == partNone {
		if len(c.parts) > 0 {
			c.parts = append(c.parts, ',')
		}
		c.parts = appendCompact(c.parts, raw)
		return
	}
	c.tailKind, c.tailClosed = kind, closed
	c.tail = append(c.tail[:0], text...)
}

// closeTail moves the open part, if any, into parts.
func (c *choiceAcc) closeTail() {
	if c.tailKind == partNone {
		return
	}
	if len(c.parts) > 0 {
		c.parts = append(c.parts, ',')
	}
	c.parts = appendPart(c.parts, c.tailKind, c.tail, c.tailClosed)
	c.tailKind, c.tail, c.tailClosed = partNone, c.tail[:0], ""
}

func appendPart(dst []byte, kind partKind, escaped []byte, closed string) []byte {
	if kind == partThinking {
		dst = append(dst, `{"type":"thinking","thinking":[{"type":"text","text":"`...)
		dst = append(dst, escaped...)
		dst = append(dst, `"}]`...)
		if closed != "" {
			dst = append(dst, `,"closed":`...)
			dst = append(dst, closed...)
		}
		return append(dst, '}')
	}
	dst = append(dst, `{"type":"text","text":"`...)
	dst = append(dst, escaped...)
	return append(dst, `"}`...)
}

// appendParts writes the content parts, the open one last, without
// closing it (assembly may be asked for again).
func (c *choiceAcc) appendParts(dst []byte) []byte {
	dst = append(dst, '[')
	dst = append(dst, c.parts...)
	if c.tailKind != partNone {
		if len(c.parts) > 0 {
			dst = append(dst, ',')
		}
		dst = appendPart(dst, c.tailKind, c.tail, c.tailClosed)
	}
	return append(dst, ']')
}

func (a *chatAcc) addToolDelta(c *choiceAcc, t gjson.Result) string {
	if !t.IsObject() {
		return "tool call delta is not an object"
	}
	var m [4]gjson.Result
	reason := pickMembers(t, m[:], "index", "id", "type", "function")
	idx, id, typ, fn := m[0], m[1], m[2], m[3]
	if reason != "" {
		return reason
	}
	other := hasOtherMembers(t, "index", "id", "type", "function")
	if other || fn.IsObject() && hasOtherMembers(fn, "name", "arguments") {
		a.unjudged = true
	}
	i := 0
	if !idx.Exists() {
		a.irregular = true
	} else {
		var ok bool
		if i, ok = jsonIndex(idx); !ok {
			return "tool call index is not a small integer"
		}
		if i < 0 {
			// openai-go clamps -1, which some servers send; npm openai
			// stores the call under "-1" and loses it.
			a.irregular = true
			i = 0
		}
	}
	switch {
	case id.Exists() && id.Type != gjson.Null && id.Type != gjson.String:
		return "tool call id is not a string"
	case typ.Exists() && typ.Type != gjson.Null && typ.Type != gjson.String:
		return "tool call type is not a string"
	case typ.Type == gjson.String && typ.Str != "" && typ.Str != "function":
		return reasonUnsupportedTool
	case fn.Exists() && fn.Type != gjson.Null && !fn.IsObject():
		return "tool call function is not an object"
	}
	tc, pos := c.tool(i), i
	if tc != nil && id.Type == gjson.String && id.Str != "" && len(tc.id) > 0 && string(tc.id) != id.Raw &&
		len(tc.name) > 0 && fn.IsObject() && fn.Get("name").Str != "" && completeArgs(tc.args) {
		// A head with another id and a name at a taken index, after a call
		// whose arguments are complete, is another call (Ollama sends each
		// parallel call whole, all at index 0); merged, two calls would be
		// judged as one the model never made. A server that renames the
		// id on every fragment leaves the arguments incomplete until the
		// last one, and is merged as before.
		tc, pos = nil, c.maxToolIndex()+1
		a.irregular = true
	}
	if tc == nil {
		if a.slots >= maxChatSlots {
			return reasonTooManySlots
		}
		a.slots++
		if i != len(c.tools) {
			// Indexes that skip (0, 2) or come out of order: openai-go
			// fills the hole with an empty call and npm openai's final
			// completion fails on it; re-derived, calls are numbered
			// from 0 in order.
			a.irregular = true
		}
		c.tools = append(c.tools, toolAcc{index: pos, wire: i})
		tc = &c.tools[len(c.tools)-1]
	}
	if id.Type == gjson.String && id.Str != "" {
		if len(tc.id) > 0 && string(tc.id) != id.Raw {
			a.irregular = true
		}
		tc.id = append(tc.id[:0], id.Raw...)
	}
	if other {
		if x := t.Get("extra_content"); x.IsObject() && len(x.Raw) <= maxSignatureBytes {
			tc.extra = append(tc.extra[:0], x.Raw...)
		}
	}
	if typ.Type == gjson.String && typ.Str != "" {
		if len(tc.typ) > 0 {
			a.irregular = true // langchaingo starts a new call on a type
		}
		tc.typ = append(tc.typ[:0], typ.Raw...)
		c.typed = i
	} else if c.typed != i || !fn.IsObject() || fn.Get("arguments").Str == "" {
		// langchaingo appends an untyped delta's arguments to the call it
		// opened last, whatever the index (interleaved calls, a head
		// without a type), and takes an untyped delta without arguments
		// for a new call (an empty fragment, {"index":0} alone).
		a.irregular = true
	}
	if fn.IsObject() {
		repeat := false
		if n := fn.Get("name"); n.Exists() && n.Type == gjson.String && n.Str != "" && len(tc.name) > 0 {
			a.irregular = true // a name given again: clients replace or split it
			// Servers that repeat the whole name in every delta mean one
			// name; only a different fragment is appended.
			repeat = len(n.Raw) >= 2 && string(tc.name) == n.Raw[1:len(n.Raw)-1]
		}
		return addFunctionDelta(tc, fn, "tool call function", repeat, &a.irregular)
	}
	return ""
}

// completeArgs reports whether escaped arguments (a JSON string's inside)
// hold a whole JSON value.
func completeArgs(escaped []byte) bool {
	if len(escaped) == 0 {
		return false
	}
	v := gjson.Parse(`"` + string(escaped) + `"`)
	return v.Type == gjson.String && gjson.Valid(v.Str)
}

// tool is the call that deltas at wire index i extend: the last one
// opened there.
func (c *choiceAcc) tool(i int) *toolAcc {
	for k := len(c.tools) - 1; k >= 0; k-- {
		if c.tools[k].wire == i {
			return &c.tools[k]
		}
	}
	return nil
}

func (c *choiceAcc) maxToolIndex() int {
	m := -1
	for k := range c.tools {
		m = max(m, c.tools[k].index)
	}
	return m
}

// addFunctionDelta merges {"name","arguments"} fragments; names are
// concatenated like arguments, as openai-go does, except that a name
// repeating the whole name so far (skipName) is not appended again.
func addFunctionDelta(tc *toolAcc, fn gjson.Result, what string, skipName bool, objectArgs *bool) string {
	var seen int
	var reason string
	fn.ForEach(func(k, v gjson.Result) bool {
		var dst *[]byte
		var bit int
		switch k.Str {
		case "name":
			dst, bit = &tc.name, 1
		case "arguments":
			dst, bit = &tc.args, 2
		default:
			return true
		}
		if seen&bit != 0 {
			reason = "duplicate key " + k.Raw
			return false
		}
		seen |= bit
		if bit == 1 && skipName {
			return true
		}
		if bit == 2 && v.IsObject() && objectArgs != nil {
			// Arguments as an object (llama.cpp's server can send them
			// so): its JSON text, as a json answer's are rewritten; the
			// stream is then re-derived with a string.
			q := appendString(nil, string(compact([]byte(v.Raw))))
			*dst = append(*dst, q[1:len(q)-1]...)
			*objectArgs = true
			return true
		}
		var ignored bool
		reason = appendStringDelta(dst, &ignored, v, what+"."+k.Str)
		return reason == ""
	})
	return reason
}

// addExtra merges a delta field that has no dedicated handling, so that
// the hook sees everything the client will: strings are concatenated
// (reasoning_content and the like), arrays joined, and any other value must
// stay the same, because a client would only keep one of them.
func (a *chatAcc) addExtra(c *choiceAcc, k, v gjson.Result) string {
	if v.Type == gjson.Null {
		return ""
	}
	var x *extraAcc
	for i := range c.extras {
		if c.extras[i].name == k.Str {
			x = &c.extras[i]
			break
		}
	}
	isArray := v.IsArray()
	if x == nil {
		c.extras = append(c.extras, extraAcc{
			name: strings.Clone(k.Str), rawKey: []byte(k.Raw), kind: v.Type, array: isArray, seq: a.deltas,
		})
		x = &c.extras[len(c.extras)-1]
		switch {
		case v.Type == gjson.String:
			x.val = append(x.val, v.Raw[1:len(v.Raw)-1]...)
		case isArray:
			x.val = appendArrayElems(x.val, v)
		default:
			x.val = appendCompact(x.val, v.Raw)
		}
		return ""
	}
	if x.seq == a.deltas {
		return "duplicate key " + k.Raw
	}
	x.seq = a.deltas
	if x.dropped {
		return ""
	}
	if x.kind != v.Type || x.array != isArray {
		x.drop()
		a.unjudged = true
		return ""
	}
	switch {
	case v.Type == gjson.String:
		x.val = append(x.val, v.Raw[1:len(v.Raw)-1]...)
	case isArray:
		x.val = appendArrayElems(x.val, v)
	default:
		a.scratch = appendCompact(a.scratch[:0], v.Raw)
		if string(a.scratch) != string(x.val) {
			x.drop()
			a.unjudged = true
		}
	}
	return ""
}

func (x *extraAcc) drop() {
	x.dropped = true
	x.val = x.val[:0]
}

// appendCompletion writes the assembled chat.completion.
func (a *chatAcc) appendCompletion(dst []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendOr(dst, a.id, `""`)
	dst = append(dst, `,"object":"chat.completion","created":`...)
	dst = appendOr(dst, a.created, `0`)
	dst = append(dst, `,"model":`...)
	dst = appendOr(dst, a.model, `""`)
	dst = append(dst, `,"choices":[`...)
	slices.SortStableFunc(a.choices, func(x, y choiceAcc) int { return x.index - y.index })
	if len(a.choices) == 1 {
		a.choices[0].index = 0 // the one choice a request asks for (n is 1)
	}
	for i := range a.choices {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = a.choices[i].appendChoice(dst)
	}
	dst = append(dst, ']')
	if a.usage != nil {
		dst = append(dst, `,"usage":`...)
		dst = append(dst, a.usage...)
	}
	if a.hasTier {
		dst = append(dst, `,"service_tier":`...)
		dst = append(dst, a.tier...)
	}
	if a.hasPrint {
		dst = append(dst, `,"system_fingerprint":`...)
		dst = append(dst, a.fprint...)
	}
	return append(dst, '}')
}

func appendOr(dst, v []byte, def string) []byte {
	if v == nil {
		return append(dst, def...)
	}
	return append(dst, v...)
}

func appendStringOrNull(dst, escaped []byte, has bool) []byte {
	if !has {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = append(dst, escaped...)
	return append(dst, '"')
}

func (c *choiceAcc) appendChoice(dst []byte) []byte {
	dst = append(dst, `{"index":`...)
	dst = appendIndex(dst, c.index)
	dst = append(dst, `,"message":{"role":`...)
	dst = appendOr(dst, c.role, `"assistant"`)
	dst = append(dst, `,"content":`...)
	if c.hasParts {
		dst = c.appendParts(dst)
	} else {
		dst = appendStringOrNull(dst, c.content, c.hasContent)
	}
	dst = append(dst, `,"refusal":`...)
	dst = appendStringOrNull(dst, c.refusal, c.hasRefusal)
	// Strings first, then other values: the order RederiveChatStream emits
	// them in, so that assembly is stable under a round trip.
	for _, strings := range [2]bool{true, false} {
		for i := range c.extras {
			x := &c.extras[i]
			if x.dropped || (x.kind == gjson.String) != strings {
				continue
			}
			dst = append(dst, ',')
			dst = append(dst, x.rawKey...)
			dst = append(dst, ':')
			switch {
			case x.kind == gjson.String:
				dst = appendStringOrNull(dst, x.val, true)
			case x.array:
				dst = append(dst, '[')
				dst = append(dst, x.val...)
				dst = append(dst, ']')
			default:
				dst = append(dst, x.val...)
			}
		}
	}
	if c.hasFn {
		dst = append(dst, `,"function_call":{"name":"`...)
		dst = append(dst, c.fn.name...)
		dst = append(dst, `","arguments":"`...)
		dst = append(dst, c.fn.args...)
		dst = append(dst, `"}`...)
	}
	if len(c.tools) > 0 {
		slices.SortStableFunc(c.tools, func(x, y toolAcc) int { return x.index - y.index })
		dst = append(dst, `,"tool_calls":[`...)
		for i := range c.tools {
			t := &c.tools[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			dst = appendOr(dst, t.id, `""`)
			dst = append(dst, `,"type":`...)
			dst = appendOr(dst, t.typ, `"function"`)
			dst = append(dst, `,"function":{"name":"`...)
			dst = append(dst, t.name...)
			dst = append(dst, `","arguments":"`...)
			dst = append(dst, t.args...)
			dst = append(dst, `"}`...)
			if len(t.extra) > 0 {
				dst = append(dst, `,"extra_content":`...)
				dst = append(dst, t.extra...)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `},"logprobs":`...)
	if c.hasLP {
		dst = append(dst, `{"content":`...)
		dst = appendArrayOrNull(dst, c.lpContent, c.hasLPContent)
		dst = append(dst, `,"refusal":`...)
		dst = appendArrayOrNull(dst, c.lpRefusal, c.hasLPRefusal)
		dst = append(dst, '}')
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"finish_reason":`...)
	dst = appendOr(dst, c.finish, "null")
	return append(dst, '}')
}

func appendArrayOrNull(dst, elems []byte, has bool) []byte {
	if !has {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	dst = append(dst, elems...)
	return append(dst, ']')
}

func appendIndex(dst []byte, n int) []byte {
	var b [20]byte
	i := len(b)
	if n == 0 {
		return append(dst, '0')
	}
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return append(dst, b[i:]...)
}

// appendCompact appends valid JSON raw without insignificant whitespace, so
// values copied from multi-line or pretty-printed input stay on one line.
func appendCompact(dst []byte, raw string) []byte {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			// Copy the whole string literal; escapes cannot end it early.
			j := i + 1
			for j < len(raw) && raw[j] != '"' {
				if raw[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(raw))
			dst = append(dst, raw[i:j]...)
			i = j - 1
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

// DefaultPieceBytes is the default size bound of one re-emitted content or
// arguments fragment, in escaped JSON bytes. It keeps every SSE line far
// below the 64 KiB line limit of langchaingo's scanner.
const DefaultPieceBytes = 4096

// RederiveOptions adjusts [RederiveChatStream].
type RederiveOptions struct {
	// IncludeUsage emits the usage chunk ("choices":[] plus usage) and
	// "usage":null on every other chunk, as OpenAI does when the client
	// sent stream_options.include_usage. Leave it false otherwise: clients
	// that did not ask may index choices[0] of every chunk.
	IncludeUsage bool
	// MaxPieceBytes bounds one content, refusal, string field or arguments
	// fragment in escaped JSON bytes; 0 means DefaultPieceBytes. Fragments
	// never split a UTF-8 sequence or an escape.
	MaxPieceBytes int
}

// RederiveChatStream writes completion, a chat.completion such as Assemble
// returns (possibly transformed), as a Chat Completions stream shaped like
// OpenAI's, in canonical SSE framing. For each choice, in order:
//
//  1. a chunk with delta {"role","content":"" (null when the content is
//     null),"refusal":"" or null} and the choice's logprobs;
//  2. other string fields of the message (reasoning_content, ...) in
//     pieces, then content pieces, then refusal pieces;
//  3. other non-null message fields, each in one chunk;
//  4. function_call (legacy): name with empty arguments, then arguments
//     pieces;
//  5. each tool call k, in order: {"index":k,"id","type":"function",
//     "function":{"name","arguments":""}}, then chunks carrying only index
//     and an arguments piece (no type, so langchaingo's merge by
//     type == "" appends them to the right call);
//  6. a chunk with delta {} and the finish_reason, if it is not null.
//
// Then the usage chunk if opts.IncludeUsage and the completion has usage,
// then "data: [DONE]". Every chunk has the completion's id, created, model
// (and service_tier and system_fingerprint when present), object
// "chat.completion.chunk", compact JSON on one data line, and never a
// top-level "error" key. Each event reaches w in its own Write call.
//
// A completion that is not a JSON object with a choices array, or whose
// fields have the wrong types, returns an error matching
// ErrInvalidCompletion before anything is written.
func RederiveChatStream(w io.Writer, completion []byte, opts RederiveOptions) error {
	if !points.ValidJSON(completion) {
		return fmt.Errorf("%w: not JSON", ErrInvalidCompletion)
	}
	var p rdPlan
	if err := p.parse(gjson.Parse(bytesToString(completion))); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidCompletion, err)
	}
	r := rederiver{sw: sse.NewWriter(w), opts: opts}
	if r.opts.MaxPieceBytes <= 0 {
		r.opts.MaxPieceBytes = DefaultPieceBytes
	}
	r.prefix = append(r.prefix, `{"id":`...)
	r.prefix = appendRawOr(r.prefix, p.id, `""`)
	r.prefix = append(r.prefix, `,"object":"chat.completion.chunk","created":`...)
	r.prefix = appendRawOr(r.prefix, p.created, `0`)
	r.prefix = append(r.prefix, `,"model":`...)
	r.prefix = appendRawOr(r.prefix, p.model, `""`)
	if p.tier.Exists() {
		r.prefix = append(r.prefix, `,"service_tier":`...)
		r.prefix = append(r.prefix, p.tier.Raw...)
	}
	if p.fprint.Exists() {
		r.prefix = append(r.prefix, `,"system_fingerprint":`...)
		r.prefix = append(r.prefix, p.fprint.Raw...)
	}
	r.prefix = append(r.prefix, `,"choices":[`...)
	for i := range p.choices {
		if err := r.choice(&p.choices[i]); err != nil {
			return err
		}
	}
	if opts.IncludeUsage && p.usage.IsObject() {
		r.buf = append(r.buf[:0], r.prefix...)
		r.buf = append(r.buf, `],"usage":`...)
		r.buf = appendCompact(r.buf, p.usage.Raw)
		r.buf = append(r.buf, '}')
		if err := r.sw.WriteEvent(sse.Event{Data: r.buf}); err != nil {
			return fmt.Errorf("proxy: re-deriving stream: %w", err)
		}
	}
	if err := r.sw.WriteEvent(sse.Event{Data: []byte("[DONE]")}); err != nil {
		return fmt.Errorf("proxy: re-deriving stream: %w", err)
	}
	return nil
}

func appendRawOr(dst []byte, v gjson.Result, def string) []byte {
	if !v.Exists() {
		return append(dst, def...)
	}
	return appendCompact(dst, v.Raw)
}

// rdPlan is a completion parsed and validated in one pass, so that a bad
// completion fails before any byte is written and each value (content in
// particular) is scanned once.
type rdPlan struct {
	id, created, model, tier, fprint, usage gjson.Result
	choices                                 []rdChoice
}

type rdChoice struct {
	index                  int
	role, content, refusal gjson.Result
	finish, logprobs       gjson.Result
	hasFn                  bool
	fn                     rdTool
	tools                  []rdTool
	extras                 []gjson.Result // key, value pairs
}

type rdTool struct {
	id, name, args gjson.Result
}

// forEachKey iterates an object's members and rejects duplicate keys among
// names: hooks read completions with gjson, which takes the first of two
// duplicates, while clients take the last.
func forEachKey(obj gjson.Result, fn func(k, v gjson.Result) error, names ...string) error {
	var seen uint32
	var err error
	obj.ForEach(func(k, v gjson.Result) bool {
		if i := slices.Index(names, k.Str); i >= 0 {
			if seen&(1<<i) != 0 {
				err = errors.New("duplicate key " + k.Raw)
				return false
			}
			seen |= 1 << i
		}
		err = fn(k, v)
		return err == nil
	})
	return err
}

func isType(v gjson.Result, nullable bool, types ...gjson.Type) bool {
	return (nullable && v.Type == gjson.Null) || slices.Contains(types, v.Type)
}

func (p *rdPlan) parse(root gjson.Result) error {
	if !root.IsObject() {
		return errors.New("not a JSON object")
	}
	var choices gjson.Result
	err := forEachKey(root, func(k, v gjson.Result) error {
		ok := true
		switch k.Str {
		case "id":
			p.id, ok = v, isType(v, false, gjson.String)
		case "created":
			p.created, ok = v, isType(v, false, gjson.Number)
		case "model":
			p.model, ok = v, isType(v, false, gjson.String)
		case "service_tier":
			p.tier, ok = v, isType(v, true, gjson.String)
		case "system_fingerprint":
			p.fprint, ok = v, isType(v, true, gjson.String)
		case "usage":
			p.usage, ok = v, v.Type == gjson.Null || v.IsObject()
		case "choices":
			choices, ok = v, v.IsArray()
		}
		if !ok {
			return errors.New(k.Str + " has the wrong type")
		}
		return nil
	}, "id", "created", "model", "service_tier", "system_fingerprint", "usage", "choices")
	if err != nil {
		return err
	}
	if !choices.Exists() {
		return errors.New("no choices")
	}
	pos := 0
	choices.ForEach(func(_, c gjson.Result) bool {
		err = p.parseChoice(c, pos)
		pos++
		return err == nil
	})
	return err
}

func (p *rdPlan) parseChoice(c gjson.Result, pos int) error {
	if !c.IsObject() {
		return errors.New("choice is not an object")
	}
	rc := rdChoice{index: pos}
	var msg gjson.Result
	err := forEachKey(c, func(k, v gjson.Result) error {
		switch k.Str {
		case "index":
			i, ok := jsonIndex(v)
			if !ok || i < 0 {
				return errors.New("choice index is not a small non-negative integer")
			}
			rc.index = i
		case "message":
			if !isType(v, true) && !v.IsObject() {
				return errors.New("message is not an object")
			}
			msg = v
		case "finish_reason":
			if !isType(v, true, gjson.String) {
				return errors.New("finish_reason is not a string")
			}
			rc.finish = v
		case "logprobs":
			if !isType(v, true) && !v.IsObject() {
				return errors.New("logprobs is not an object")
			}
			rc.logprobs = v
		}
		return nil
	}, "index", "message", "finish_reason", "logprobs")
	if err != nil {
		return err
	}
	for i := range p.choices {
		if p.choices[i].index == rc.index {
			return errors.New("duplicate choice index")
		}
	}
	if msg.IsObject() {
		if err := rc.parseMessage(msg); err != nil {
			return err
		}
	}
	p.choices = append(p.choices, rc)
	return nil
}

func (rc *rdChoice) parseMessage(m gjson.Result) error {
	return forEachKey(m, func(k, v gjson.Result) error {
		switch k.Str {
		case "role", "content", "refusal":
			if !isType(v, true, gjson.String) && !(k.Str == "content" && v.IsArray() && textOrParts(bytesOf(v.Raw))) {
				return errors.New("message." + k.Str + " is not a string")
			}
			switch k.Str {
			case "role":
				rc.role = v
			case "content":
				rc.content = v
			default:
				rc.refusal = v
			}
		case "function_call":
			if v.Type == gjson.Null {
				return nil
			}
			rc.hasFn = true
			return parseFunction(&rc.fn, v, "message.function_call")
		case "tool_calls":
			if v.Type == gjson.Null {
				return nil
			}
			if !v.IsArray() {
				return errors.New("message.tool_calls is not an array")
			}
			var err error
			v.ForEach(func(_, t gjson.Result) bool {
				var tc rdTool
				tc, err = parseTool(t)
				rc.tools = append(rc.tools, tc)
				return err == nil
			})
			return err
		default:
			if v.Type != gjson.Null {
				rc.extras = append(rc.extras, k, v)
			}
		}
		return nil
	}, "role", "content", "refusal", "function_call", "tool_calls")
}

func parseTool(t gjson.Result) (rdTool, error) {
	var tc rdTool
	if !t.IsObject() {
		return tc, errors.New("tool call is not an object")
	}
	err := forEachKey(t, func(k, v gjson.Result) error {
		switch k.Str {
		case "id":
			if !isType(v, false, gjson.String) {
				return errors.New("tool call id is not a string")
			}
			tc.id = v
		case "type":
			if v.Type != gjson.String || v.Str != "function" {
				return errors.New("unsupported tool call type")
			}
		case "function":
			return parseFunction(&tc, v, "tool call function")
		}
		return nil
	}, "id", "type", "function")
	return tc, err
}

func parseFunction(tc *rdTool, fn gjson.Result, what string) error {
	if !fn.IsObject() {
		return errors.New(what + " is not an object")
	}
	return forEachKey(fn, func(k, v gjson.Result) error {
		switch k.Str {
		case "name", "arguments":
			if v.Type != gjson.String {
				return errors.New(what + "." + k.Str + " is not a string")
			}
			if k.Str == "name" {
				tc.name = v
			} else {
				tc.args = v
			}
		}
		return nil
	}, "name", "arguments")
}

type rederiver struct {
	sw      *sse.Writer
	opts    RederiveOptions
	prefix  []byte // chunk JSON up to and including `"choices":[`
	buf     []byte
	choice0 []byte // `{"index":N,"delta":`
}

// emit writes one chunk of the current choice; delta appends its delta
// object, logprobs and finish are raw JSON values.
func (r *rederiver) emit(delta func([]byte) []byte, logprobs string, finish string) error {
	r.buf = append(r.buf[:0], r.prefix...)
	r.buf = append(r.buf, r.choice0...)
	r.buf = delta(r.buf)
	r.buf = append(r.buf, `,"logprobs":`...)
	r.buf = appendCompact(r.buf, logprobs)
	r.buf = append(r.buf, `,"finish_reason":`...)
	r.buf = append(r.buf, finish...)
	r.buf = append(r.buf, `}]`...)
	if r.opts.IncludeUsage {
		r.buf = append(r.buf, `,"usage":null`...)
	}
	r.buf = append(r.buf, '}')
	if err := r.sw.WriteEvent(sse.Event{Data: r.buf}); err != nil {
		return fmt.Errorf("proxy: re-deriving stream: %w", err)
	}
	return nil
}

// pieces calls fn with consecutive fragments of the escaped string contents
// s, each at most max bytes unless a single character is longer. It never
// splits a UTF-8 sequence, an escape, or a surrogate pair of \u escapes.
func eachPiece(s string, maxBytes int, fn func(string) error) error {
	for len(s) > 0 {
		n := 0
		for n < len(s) {
			t := escapedTokenLen(s[n:])
			if n > 0 && n+t > maxBytes {
				break
			}
			n += t
		}
		if err := fn(s[:n]); err != nil {
			return err
		}
		s = s[n:]
	}
	return nil
}

// tokenLen is the length of the indivisible unit at the start of the
// escaped JSON string contents s.
func escapedTokenLen(s string) int {
	c := s[0]
	switch {
	case c == '\\':
		if len(s) >= 6 && s[1] == 'u' {
			if isHighSurrogate(s[2:6]) && len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
				return 12
			}
			return 6
		}
		return min(2, len(s))
	case c < 0x80:
		return 1
	case c >= 0xF0:
		return min(4, len(s))
	case c >= 0xE0:
		return min(3, len(s))
	case c >= 0xC0:
		return min(2, len(s))
	}
	return 1
}

func isHighSurrogate(hex string) bool {
	return (hex[0] == 'd' || hex[0] == 'D') && len(hex) == 4 &&
		(hex[1] == '8' || hex[1] == '9' || hex[1] == 'a' || hex[1] == 'A' || hex[1] == 'b' || hex[1] == 'B')
}

func stringContents(v gjson.Result) string { return v.Raw[1 : len(v.Raw)-1] }

func (r *rederiver) choice(c *rdChoice) error {
	r.choice0 = append(r.choice0[:0], `{"index":`...)
	r.choice0 = appendIndex(r.choice0, c.index)
	r.choice0 = append(r.choice0, `,"delta":`...)

	logprobs := "null"
	if c.logprobs.IsObject() {
		logprobs = c.logprobs.Raw
	}
	err := r.emit(func(b []byte) []byte {
		b = append(b, `{"role":`...)
		if c.role.Type == gjson.String {
			b = append(b, c.role.Raw...)
		} else {
			b = append(b, `"assistant"`...)
		}
		b = append(b, `,"content":`...)
		b = append(b, emptyOrNull(c.content)...)
		b = append(b, `,"refusal":`...)
		b = append(b, emptyOrNull(c.refusal)...)
		return append(b, '}')
	}, logprobs, "null")
	if err != nil {
		return err
	}

	// Other string fields of the message, then content and refusal.
	for j := 0; j < len(c.extras); j += 2 {
		if c.extras[j+1].Type == gjson.String {
			if err := r.stringPieces(c.extras[j].Raw, c.extras[j+1], true); err != nil {
				return err
			}
		}
	}
	if err := r.stringPieces(`"content"`, c.content, false); err != nil {
		return err
	}
	if c.content.IsArray() {
		if err := r.parts(c.content); err != nil {
			return err
		}
	}
	if err := r.stringPieces(`"refusal"`, c.refusal, false); err != nil {
		return err
	}
	for j := 0; j < len(c.extras); j += 2 {
		if k, v := c.extras[j], c.extras[j+1]; v.Type != gjson.String {
			err := r.emit(func(b []byte) []byte {
				b = append(b, '{')
				b = append(b, k.Raw...)
				b = append(b, ':')
				b = appendCompact(b, v.Raw)
				return append(b, '}')
			}, "null", "null")
			if err != nil {
				return err
			}
		}
	}

	if c.hasFn {
		err := r.emit(func(b []byte) []byte {
			b = append(b, `{"function_call":{"name":`...)
			b = appendRawOr(b, c.fn.name, `""`)
			return append(b, `,"arguments":""}}`...)
		}, "null", "null")
		if err != nil {
			return err
		}
		if c.fn.args.Type == gjson.String {
			err := eachPiece(stringContents(c.fn.args), r.opts.MaxPieceBytes, func(p string) error {
				return r.emit(func(b []byte) []byte {
					b = append(b, `{"function_call":{"arguments":"`...)
					b = append(b, p...)
					return append(b, `"}}`...)
				}, "null", "null")
			})
			if err != nil {
				return err
			}
		}
	}

	for k := range c.tools {
		if err := r.toolCall(k, &c.tools[k]); err != nil {
			return err
		}
	}

	if c.finish.Type == gjson.String {
		return r.emit(func(b []byte) []byte { return append(b, `{}`...) }, "null", c.finish.Raw)
	}
	return nil
}

// parts emits content parts so that a client that merges a chunk's first
// part into the previous one of its kind (as Assemble does) assembles them
// as they are: a text or thinking part of plain text goes out in pieces
// (the closed flag on the last), each piece after the first opening a
// chunk, so it is merged into its own part; a part opens a chunk only
// where it could not be merged into the one before (another kind, or
// none), else it follows that part in the same chunk. Any other part goes
// out as it is. So no chunk carries a long text part on one line (one
// whose text part has other members still does).
func (r *rederiver) parts(content gjson.Result) error {
	var elems []byte // the open chunk's content elements, comma-joined
	flush := func() error {
		if len(elems) == 0 {
			return nil
		}
		err := r.emit(func(b []byte) []byte {
			b = append(b, `{"content":[`...)
			b = append(b, elems...)
			return append(b, `]}`...)
		}, "null", "null")
		elems = elems[:0]
		return err
	}
	sep := func() {
		if len(elems) > 0 {
			elems = append(elems, ',')
		}
	}
	prev := partNone
	var err error
	content.ForEach(func(_, p gjson.Result) bool {
		kind, text, closed := classifyPart(p)
		if kind == partNone || kind != prev {
			if err = flush(); err != nil {
				return false
			}
		}
		prev = kind
		if kind == partNone || text == "" {
			sep()
			elems = appendCompact(elems, p.Raw)
			return true
		}
		n := 0
		_ = eachPiece(text, r.opts.MaxPieceBytes, func(string) error { n++; return nil })
		k := 0
		err = eachPiece(text, r.opts.MaxPieceBytes, func(piece string) error {
			if k++; k > 1 {
				if err := flush(); err != nil {
					return err
				}
			}
			cl := ""
			if k == n {
				cl = closed
			}
			sep()
			elems = appendPart(elems, kind, bytesOf(piece), cl)
			return nil
		})
		return err == nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// emptyOrNull gives the role chunk's placeholder: "" for a string field,
// null otherwise, as OpenAI sends content "" for text and null for tools.
func emptyOrNull(v gjson.Result) string {
	if v.Type == gjson.String {
		return `""`
	}
	return "null"
}

// stringPieces emits the escaped contents of string v under rawKey in
// pieces. An empty string is emitted only when always is set: the role
// chunk already carries "" for content and refusal.
func (r *rederiver) stringPieces(rawKey string, v gjson.Result, always bool) error {
	if v.Type != gjson.String || (len(v.Raw) == 2 && !always) {
		return nil
	}
	emitPiece := func(p string) error {
		return r.emit(func(b []byte) []byte {
			b = append(b, '{')
			b = append(b, rawKey...)
			b = append(b, `:"`...)
			b = append(b, p...)
			return append(b, `"}`...)
		}, "null", "null")
	}
	if len(v.Raw) == 2 {
		return emitPiece("")
	}
	return eachPiece(stringContents(v), r.opts.MaxPieceBytes, emitPiece)
}

func (r *rederiver) toolCall(k int, t *rdTool) error {
	err := r.emit(func(b []byte) []byte {
		b = append(b, `{"tool_calls":[{"index":`...)
		b = appendIndex(b, k)
		if t.id.Type == gjson.String {
			b = append(b, `,"id":`...)
			b = append(b, t.id.Raw...)
		}
		b = append(b, `,"type":"function","function":{"name":`...)
		b = appendRawOr(b, t.name, `""`)
		return append(b, `,"arguments":""}}]}`...)
	}, "null", "null")
	if err != nil || t.args.Type != gjson.String {
		return err
	}
	return eachPiece(stringContents(t.args), r.opts.MaxPieceBytes, func(p string) error {
		return r.emit(func(b []byte) []byte {
			b = append(b, `{"tool_calls":[{"index":`...)
			b = appendIndex(b, k)
			b = append(b, `,"function":{"arguments":"`...)
			b = append(b, p...)
			return append(b, `"}}]}`...)
		}, "null", "null")
	})
}

// pickMembers reads the named members of obj into out (by position) in one
// pass, and reports a duplicate of any of them: gjson reads the first,
// clients the last, so a duplicate fails closed.
// hasOtherMembers reports whether obj has a member not named in known.
func hasOtherMembers(obj gjson.Result, known ...string) bool {
	other := false
	obj.ForEach(func(k, _ gjson.Result) bool {
		other = !slices.Contains(known, k.Str)
		return !other
	})
	return other
}

func pickMembers(obj gjson.Result, out []gjson.Result, names ...string) string {
	var seen uint64
	var reason string
	obj.ForEach(func(k, v gjson.Result) bool {
		for i, n := range names {
			if k.Str != n {
				continue
			}
			if seen&(1<<i) != 0 {
				reason = "duplicate key " + k.Raw
				return false
			}
			seen |= 1 << i
			out[i] = v
		}
		return true
	})
	return reason
}

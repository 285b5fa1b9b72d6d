package points

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// Context is one AgentContext (§4) held as its wire JSON. An interceptor
// gets its own copy, so reading and even scribbling on Raw cannot affect
// other interceptors or the host.
type Context struct {
	raw   []byte
	point Point
	// top indexes the top-level members on first use, so that reading a
	// member after megabytes of messages does not walk them on every Get.
	once sync.Once
	top  envMembers
}

// Raw returns the context's wire JSON. It belongs to the receiver.
func (c *Context) Raw() []byte { return c.raw }

// Point returns the interception point of the context.
func (c *Context) Point() Point { return c.point }

// Get reads a member with gjson path syntax, e.g. "tool_call.name". The
// result shares Raw's memory, so Raw must not be modified while it is used.
func (c *Context) Get(path string) gjson.Result {
	head, rest, nested := strings.Cut(path, ".")
	if !plainName(head) {
		// Escapes, wildcards and modifiers need gjson's whole path syntax.
		return gjson.Get(c.view(), path)
	}
	var v string
	if len(c.raw) < indexContextsFrom {
		// A small context is read faster than it is indexed, and faster
		// by the vectorised member walk than by gjson, which reads every
		// string before the member (target comes after them all) a byte
		// at a time: 2 KB, 1.2 µs against 0.3.
		v = firstMember(c.raw, head)
	} else {
		c.once.Do(func() { c.top = envIndexInto(make(envMembers, 0, 16), c.raw) })
		v = c.top.Raw(head)
	}
	if v == "" {
		return gjson.Result{}
	}
	for nested {
		// Down through objects by plain names with the vectorised member
		// walk: gjson reads every string before the member a byte at a
		// time, and response.tool_calls comes after the whole answer.
		path = rest
		var name string
		name, rest, nested = strings.Cut(path, ".")
		if !plainName(name) || v[0] != '{' {
			return gjson.Get(v, path) // array indexes, wildcards, modifiers
		}
		if v = firstMember(viewBytes(v), name); v == "" {
			return gjson.Result{}
		}
	}
	return gjson.Parse(v)
}

// firstMember is the raw value of obj's first member called name, as a
// view of obj, or "" (the first, as gjson reads duplicates).
func firstMember(obj []byte, name string) string {
	v := MemberValue(obj, name)
	return unsafe.String(unsafe.SliceData(v), len(v))
}

// MemberValue is the raw value of the first member called name of obj, a JSON
// object already checked valid, as a view of obj (nil when absent). It
// finds it with the member walk, which jumps over string bodies, where a
// gjson read reads every string before the member a byte at a time.
func MemberValue(obj []byte, name string) []byte {
	var found []byte
	ForEachMember(obj, func(k string, val []byte) bool {
		if k == name {
			found = val
			return false
		}
		return true
	})
	return found
}

// Target returns the context's target member.
func (c *Context) Target() gjson.Result { return c.Get("target") }

// TargetBytes returns the target member's raw JSON, or nil when there is
// none. It is part of Raw, not a copy: read it, do not write it.
func (c *Context) TargetBytes() []byte {
	r := c.Target()
	if !r.Exists() {
		return nil
	}
	return viewBytes(r.Raw) // Get's results are views of Raw
}

// indexContextsFrom is the context size from which Get indexes members.
const indexContextsFrom = 8 << 10

func (c *Context) view() string { return unsafe.String(unsafe.SliceData(c.raw), len(c.raw)) }

// plainName reports whether s is a member name gjson reads literally.
func plainName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ParseContext wraps wire JSON received from elsewhere (a test or a remote
// host) after the §4 envelope check.
func ParseContext(raw []byte) (*Context, error) {
	if !ValidJSON(raw) {
		return nil, fmt.Errorf("points: context is not valid JSON")
	}
	p, err := ParsePoint(gjson.GetBytes(raw, "interception_point").Str)
	if err != nil {
		return nil, err
	}
	if err := ValidateEnvelope(raw); err != nil {
		return nil, err
	}
	return &Context{raw: raw, point: p}, nil
}

// Member is one top-level context member as raw JSON.
type Member struct {
	Key   string
	Value json.RawMessage
}

// Event is what a host hands the emitter for one emission: the point and its
// conditional and optional members as raw JSON. The emitter adds the
// required core (spec, timestamp, sequence, agent, session) and target.
type Event struct {
	Point   Point
	Members []Member
}

// With returns ev with one more member (an optional well-known field such as
// request_id, tools, usage, trace or extensions).
func (ev Event) With(key string, value json.RawMessage) Event {
	ms := make([]Member, len(ev.Members), len(ev.Members)+1)
	copy(ms, ev.Members)
	ev.Members = append(ms, Member{Key: key, Value: value})
	return ev
}

// The builders below size their buffers for the member they write when
// nothing needs escaping: each member is then one allocation, not one per
// doubling (an event's members used to take 2 to 4 each).

func quote(s string) json.RawMessage { return appendQuoted(make([]byte, 0, len(s)+2), s) }

// StartupEvent builds agent_startup with the registered tool names.
func StartupEvent(tools []string) Event {
	n := len(`{"tools_registered":[]}`)
	for _, t := range tools {
		n += len(t) + 3
	}
	v := append(make([]byte, 0, n), `{"tools_registered":[`...)
	for i, t := range tools {
		if i > 0 {
			v = append(v, ',')
		}
		v = appendQuoted(v, t) // as encoding/json writes a []string
	}
	v = append(v, "]}"...)
	return Event{Point: AgentStartup, Members: []Member{{"agent_init", v}}}
}

// InputEvent builds input; content is a JSON string or object, role is
// user, system or external.
func InputEvent(content json.RawMessage, role string) Event {
	v := append(make([]byte, 0, len(`{"content":,"role":""}`)+len(content)+len(role)), `{"content":`...)
	v = append(v, content...)
	v = append(v, `,"role":`...)
	v = appendQuoted(v, role)
	v = append(v, '}')
	return Event{Point: Input, Members: []Member{{"input", v}}}
}

// PreModelCallEvent builds pre_model_call over the model id and the messages array.
func PreModelCallEvent(modelID string, messages json.RawMessage) Event {
	return Event{Point: PreModelCall, Members: []Member{
		{"model", stringObject("id", modelID)},
		{"messages", messages},
	}}
}

// PostModelCallEvent builds post_model_call over the model id and the
// assembled response {content, tool_calls, finish_reason}.
func PostModelCallEvent(modelID string, response json.RawMessage) Event {
	return Event{Point: PostModelCall, Members: []Member{
		{"model", stringObject("id", modelID)},
		{"response", response},
	}}
}

// PreToolCallEvent builds pre_tool_call; args is a JSON object.
func PreToolCallEvent(id, name string, args json.RawMessage) Event {
	return Event{Point: PreToolCall, Members: []Member{{"tool_call", toolCall(id, name, args)}}}
}

// PostToolCallEvent builds post_tool_call; args are the arguments actually
// passed (after any pre_tool_call transform).
func PostToolCallEvent(id, name string, args, value json.RawMessage, isError bool) Event {
	if value == nil {
		value = json.RawMessage("null")
	}
	r := append(make([]byte, 0, len(`{"value":,"is_error":false}`)+len(value)), `{"value":`...)
	r = append(r, value...)
	r = append(r, `,"is_error":`...)
	r = strconv.AppendBool(r, isError)
	r = append(r, '}')
	return Event{Point: PostToolCall, Members: []Member{{"tool_call", toolCall(id, name, args)}, {"tool_result", r}}}
}

// OutputEvent builds output over the final answer's content.
func OutputEvent(content json.RawMessage) Event {
	return OutputEventIn(nil, content)
}

// OutputEventIn is OutputEvent writing its member into dst's spare
// capacity, for a host that lends a buffer for a long answer. dst must
// not change while the event is in use.
func OutputEventIn(dst []byte, content json.RawMessage) Event {
	return Event{Point: Output, Members: []Member{{"output", appendObject(dst[:0], "content", content)}}}
}

// ShutdownEvent builds agent_shutdown; reason is completed, error or cancelled.
func ShutdownEvent(reason string) Event {
	return Event{Point: AgentShutdown, Members: []Member{{"summary", stringObject("reason", reason)}}}
}

func toolCall(id, name string, args json.RawMessage) json.RawMessage {
	if args == nil {
		args = json.RawMessage("{}")
	}
	v := append(make([]byte, 0, len(`{"id":"","name":"","args":}`)+len(id)+len(name)+len(args)), `{"id":`...)
	v = appendQuoted(v, id)
	v = append(v, `,"name":`...)
	v = appendQuoted(v, name)
	v = append(v, `,"args":`...)
	v = append(v, args...)
	return append(v, '}')
}

func jsonObject(key string, value json.RawMessage) json.RawMessage {
	return appendObject(make([]byte, 0, len(`{"":}`)+len(key)+len(value)), key, value)
}

// stringObject is jsonObject(key, quote(s)) in one allocation.
func stringObject(key, s string) json.RawMessage {
	v := appendQuoted(append(make([]byte, 0, len(`{"":""}`)+len(key)+len(s)), '{'), key)
	v = append(v, ':')
	v = appendQuoted(v, s)
	return append(v, '}')
}

// appendObject appends the one-member object {key: value} to dst.
func appendObject(dst []byte, key string, value json.RawMessage) json.RawMessage {
	v := appendQuoted(append(dst, '{'), key)
	v = append(v, ':')
	v = append(v, value...)
	return append(v, '}')
}

// AppendJSONString appends s as a JSON string, byte for byte as
// encoding/json writes it, without its allocation for the plain printable
// ASCII of ids, names and models.
func AppendJSONString(dst []byte, s string) []byte { return appendQuoted(dst, s) }

// appendQuoted appends s as a JSON string. Invalid UTF-8 is kept as the
// replacement character only because Go strings from the host may carry it;
// the domain check rejects lone surrogates that arrive escaped.
func appendQuoted(dst []byte, s string) []byte {
	// Plain printable ASCII (the usual id, name or model) needs no
	// escaping; anything else goes through encoding/json, whose output
	// (HTML-safe escapes included) the fast path reproduces byte for byte.
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// Agent names the agent in every context (agent.id, agent.framework and the
// optional name and version).
type Agent struct {
	ID, Framework, Name, Version string
}

// Session owns the per-session facts of every context: the agent, the
// session id and the strictly increasing, atomically assigned sequence
// (§3.1, §12.2). It is safe for concurrent emissions.
type Session struct {
	agent Agent
	id    string
	extra []Member
	head  []byte // pre-rendered "agent" and "session" members
	seq   *atomic.Int64
	// ownSeq is seq for a session that continues none (NewSession), so
	// that starting one is an allocation fewer; a session continuing it
	// shares it, and so keeps this (small) Session reachable.
	ownSeq  atomic.Int64
	started time.Time

	headOnce sync.Once
	headErr  error // checkHead's verdict on head
}

// NewSession starts a session whose first emission gets sequence 0.
func NewSession(agent Agent, sessionID string, extra ...Member) *Session {
	return newSession(agent, sessionID, nil, extra)
}

// Continue starts a session under s's id whose sequence goes on from s's
// (shared, so an emission s still makes stays in order): a host that lets
// an ended session's id be used again keeps (session_id, sequence) unique
// and strictly increasing in the record stream (§3.1).
func (s *Session) Continue(agent Agent, extra ...Member) *Session {
	return newSession(agent, s.id, s.seq, extra)
}

// newSession starts a session on seq (nil: a sequence of its own).
func newSession(agent Agent, sessionID string, seq *atomic.Int64, extra []Member) *Session {
	s := &Session{agent: agent, id: sessionID, extra: extra, started: time.Now(), seq: seq}
	if seq == nil {
		s.seq = &s.ownSeq
	}
	// Sized for the members below when nothing needs escaping, so that
	// head is made in one allocation, not grown in four.
	n := len(`,"agent":{"id":"","framework":"","name":"","version":""},"session":{"id":""}`) +
		len(agent.ID) + len(agent.Framework) + len(agent.Name) + len(agent.Version) + len(sessionID)
	h := append(make([]byte, 0, n), `,"agent":{"id":`...)
	h = appendQuoted(h, agent.ID)
	h = append(h, `,"framework":`...)
	h = appendQuoted(h, agent.Framework)
	if agent.Name != "" {
		h = append(h, `,"name":`...)
		h = appendQuoted(h, agent.Name)
	}
	if agent.Version != "" {
		h = append(h, `,"version":`...)
		h = appendQuoted(h, agent.Version)
	}
	h = append(h, `},"session":{"id":`...)
	h = appendQuoted(h, sessionID)
	h = append(h, '}')
	s.head = h
	return s
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// Agent returns the session's agent.
func (s *Session) Agent() Agent { return s.agent }

// Started returns when the session was created.
func (s *Session) Started() time.Time { return s.started }

// nextSequence reserves the next sequence number.
func (s *Session) nextSequence() int64 { return s.seq.Add(1) - 1 }

// Sequence reports how many sequence numbers were handed out.
func (s *Session) Sequence() int64 { return s.seq.Load() }

// TimestampLayout is the RFC 3339 UTC form with milliseconds used in contexts.
const TimestampLayout = "2006-01-02T15:04:05.000Z"

// ParseTimestamp parses a context's timestamp as time.Parse with
// time.RFC3339Nano does, with a fast path for TimestampLayout (what this
// package writes), which interceptors read on every call.
func ParseTimestamp(s string) (time.Time, error) {
	if len(s) == len(TimestampLayout) && s[4] == '-' && s[7] == '-' && s[10] == 'T' && s[13] == ':' &&
		s[16] == ':' && s[19] == '.' && s[23] == 'Z' {
		num := func(i, n int) int {
			v := 0
			for _, c := range []byte(s[i : i+n]) {
				if c < '0' || c > '9' {
					return -1
				}
				v = v*10 + int(c-'0')
			}
			return v
		}
		y, mo, d, h, mi, sec, ms := num(0, 4), num(5, 2), num(8, 2), num(11, 2), num(14, 2), num(17, 2), num(20, 3)
		if y >= 0 && mo >= 1 && mo <= 12 && d >= 1 && h >= 0 && h < 24 && mi >= 0 && mi < 60 && sec >= 0 && sec < 60 && ms >= 0 {
			t := time.Date(y, time.Month(mo), d, h, mi, sec, ms*1e6, time.UTC)
			if t.Day() == d { // not normalised past the month's end
				return t, nil
			}
		}
	}
	return time.Parse(time.RFC3339Nano, s)
}

// appendTimestamp appends t in TimestampLayout. It is time.AppendFormat's
// output for years 0..9999 (tested), at a fraction of its cost: every
// emission formats one.
func appendTimestamp(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, TimestampLayout)
	}
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	var d [24]byte
	put := func(at, v, n int) {
		for i := at + n - 1; i >= at; i-- {
			d[i] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, year, 4)
	d[4] = '-'
	put(5, int(month), 2)
	d[7] = '-'
	put(8, day, 2)
	d[10] = 'T'
	put(11, hour, 2)
	d[13] = ':'
	put(14, minute, 2)
	d[16] = ':'
	put(17, sec, 2)
	d[19] = '.'
	put(20, ms, 3)
	d[23] = 'Z'
	return append(b, d[:]...)
}

// build renders the wire context of ev, in lend(size) when lend is not
// nil. The target aliases the point's field: it is a second copy of the
// same bytes, kept equal by write-back.
func (s *Session) build(ev Event, seq int64, now time.Time, lend func(n int) []byte) ([]byte, error) {
	var target []byte
	field := ev.Point.Field()
	size := 256 + len(s.head)
	for _, m := range ev.Members {
		size += len(m.Key) + len(m.Value) + 4
	}
	// Locate the target among the members: top-level field or one level down.
	top, sub := field, ""
	for i := 0; i < len(field); i++ {
		if field[i] == '.' {
			top, sub = field[:i], field[i+1:]
			break
		}
	}
	for _, m := range ev.Members {
		if m.Key == top {
			if sub == "" {
				target = m.Value
			} else if r := gjson.GetBytes(m.Value, sub); r.Exists() {
				target = []byte(r.Raw)
			}
		}
	}
	if target == nil {
		return nil, fmt.Errorf("points: %s requires member %s", ev.Point, field)
	}
	size += len(target)
	var b []byte
	if lend != nil {
		b = lend(size)[:0]
	} else {
		b = make([]byte, 0, size)
	}
	b = append(b, `{"spec":"`+SpecVersion+`","interception_point":"`...)
	b = append(b, ev.Point...)
	b = append(b, `","timestamp":"`...)
	b = appendTimestamp(b, now)
	b = append(b, `","sequence":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, s.head...)
	for _, m := range s.extra {
		b = appendMember(b, m)
	}
	for _, m := range ev.Members {
		b = appendMember(b, m)
	}
	b = append(b, `,"target":`...)
	b = append(b, target...)
	b = append(b, '}')
	return b, nil
}

func appendMember(b []byte, m Member) []byte {
	b = append(b, ',')
	b = appendQuoted(b, m.Key)
	b = append(b, ':')
	if len(m.Value) == 0 {
		return append(b, "null"...)
	}
	return append(b, m.Value...)
}

var (
	hashPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// EnvelopeError says which §4 envelope rule a context broke; its message
// names the member, never its value.
type EnvelopeError struct{ Path, Problem string }

func (e *EnvelopeError) Error() string {
	return "context envelope invalid at " + e.Path + ": " + e.Problem
}

func envErr(path, problem string) error { return &EnvelopeError{Path: path, Problem: problem} }

// ValidateEnvelope checks the §4 envelope: the required core, the
// conditional members of the point with their types, the closed objects
// of the per-point schemas, and target equal to the aliased member.
func ValidateEnvelope(raw []byte) error {
	if !ValidJSON(raw) {
		return envErr("$", "not valid JSON")
	}
	return validateEnvelope(raw)
}

// validateEnvelope is ValidateEnvelope for bytes already known to be valid
// JSON (the emitter checks the encoding first, more strictly).
func validateEnvelope(raw []byte) error {
	if b := trimWS(raw); len(b) == 0 || b[0] != '{' {
		return envErr("$", "not an object")
	}
	// One pass over the top level: later lookups touch only the member
	// they need, not the (possibly megabytes of) messages before it.
	var rootBuf [16]envMember // on the stack: indexes do not outlive the check
	root := envIndexInto(rootBuf[:0], raw)
	if s := root.Get("spec"); s.Type != gjson.String || !validSpec(s.Str) {
		return envErr("spec", "must match ^agent-hooks/N.N$")
	}
	ip := root.Get("interception_point")
	p, err := ParsePoint(ip.Str)
	if ip.Type != gjson.String || err != nil {
		return envErr("interception_point", "missing or unknown")
	}
	if ts := root.Get("timestamp"); ts.Type != gjson.String {
		return envErr("timestamp", "must be an RFC 3339 string")
	} else if _, err := ParseTimestamp(ts.Str); err != nil {
		return envErr("timestamp", "must be an RFC 3339 date-time")
	}
	if sq := root.Get("sequence"); sq.Type != gjson.Number || !isNonNegInt(sq.Raw) {
		return envErr("sequence", "must be an integer >= 0")
	}
	ag := root.Get("agent")
	if !ag.IsObject() {
		return envErr("agent", "must be an object")
	}
	if id := ag.Get("id"); id.Type != gjson.String || id.Str == "" {
		return envErr("agent.id", "must be a non-empty string")
	}
	if fw := ag.Get("framework"); fw.Type != gjson.String || !validFramework(fw.Str) {
		return envErr("agent.framework", "must match ^[a-z0-9_-]+$")
	}
	for _, k := range []string{"name", "version"} {
		if v := ag.Get(k); v.Exists() && v.Type != gjson.String {
			return envErr("agent."+k, "must be a string")
		}
	}
	se := root.Get("session")
	if !se.IsObject() {
		return envErr("session", "must be an object")
	}
	if id := se.Get("id"); id.Type != gjson.String || id.Str == "" {
		return envErr("session.id", "must be a non-empty string")
	}
	if !root.Has("target") {
		return envErr("target", "missing")
	}
	if err := validateExtensions(root); err != nil {
		return err
	}
	if err := validateConditional(root, p); err != nil {
		return err
	}
	// §4.3: target aliases the conditional member.
	field := root.Raw(p.Field())
	if strings.Contains(p.Field(), ".") {
		field = root.Get(p.Field()).Raw
	}
	if !JSONEqual(root.Raw("target"), field) {
		return envErr("target", "must equal "+p.Field())
	}
	return nil
}

var extensionNS = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

func validateExtensions(root envMembers) error {
	e := root.Get("extensions")
	if !e.Exists() {
		return nil
	}
	if !e.IsObject() {
		return envErr("extensions", "must be an object")
	}
	var bad error
	e.ForEach(func(k, _ gjson.Result) bool {
		if !extensionNS.MatchString(k.Str) {
			bad = envErr("extensions", "namespace must match ^[a-z][a-z0-9_]*$")
		}
		return bad == nil
	})
	return bad
}

// validateBuilt is validateEnvelope, with the same errors in the same
// order, for a context s.build made from ev at now. What build writes
// itself is valid by construction (spec, a sequence number, a timestamp
// for years 0-9999, target as a copy of its member), and the agent and
// session members are checked once per session, so only the members the
// event and session brought are read, from their own bytes, with no walk
// over the whole context.
func validateBuilt(s *Session, ev Event, now time.Time) error {
	if !ev.Point.Valid() {
		return envErr("interception_point", "missing or unknown")
	}
	if y := now.UTC().Year(); y < 0 || y > 9999 {
		return envErr("timestamp", "must be an RFC 3339 date-time")
	}
	if err := s.checkHead(); err != nil {
		return err
	}
	var buf [16]envMember // on the stack, like validateEnvelope's index
	root := envMembers(buf[:0])
	for _, ms := range [2][]Member{s.extra, ev.Members} {
		for _, m := range ms {
			if !root.Has(m.Key) && !coreMember(m.Key) {
				v := m.Value
				if len(v) == 0 {
					v = []byte("null")
				}
				root = append(root, envMember{m.Key, unsafe.String(unsafe.SliceData(v), len(v))})
			}
		}
	}
	if err := validateExtensions(root); err != nil {
		return err
	}
	return validateConditional(root, ev.Point)
}

// coreMember reports whether build writes the member itself (first, so a
// copy among the event's members is the second of a duplicate name, which
// the encoding check refuses).
func coreMember(k string) bool {
	switch k {
	case "spec", "interception_point", "timestamp", "sequence", "agent", "session", "target":
		return true
	}
	return false
}

// checkHead is validateEnvelope's agent and session checks on the session's
// pre-rendered members, made once.
func (s *Session) checkHead() error {
	s.headOnce.Do(func() {
		switch {
		case s.agent.ID == "":
			s.headErr = envErr("agent.id", "must be a non-empty string")
		case !validFramework(s.agent.Framework):
			s.headErr = envErr("agent.framework", "must match ^[a-z0-9_-]+$")
		case s.id == "":
			s.headErr = envErr("session.id", "must be a non-empty string")
		}
	})
	return s.headErr
}

func isNonNegInt(raw string) bool {
	if raw == "" {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] < '0' || raw[i] > '9' {
			return false
		}
	}
	return true
}

func closed(obj envMembers, path string, allowed ...string) error {
next:
	for _, m := range obj {
		for _, a := range allowed {
			if m.key == a {
				continue next
			}
		}
		return envErr(path, "unknown member")
	}
	return nil
}

// requireObject indexes the object at path once, so that reading several
// of its members does not rescan a large one (response.content, messages).
func requireObject(buf envMembers, root envMembers, path string) (envMembers, error) {
	r := root.Raw(path)
	if len(r) == 0 || r[0] != '{' {
		return nil, envErr(path, "must be an object")
	}
	return envIndexInto(buf[:0], viewBytes(r)), nil
}

func validateConditional(root envMembers, p Point) error {
	var buf [8]envMember // the point member's index, on the stack
	switch p {
	case AgentStartup:
		ai, err := requireObject(buf[:0], root, "agent_init")
		if err != nil {
			return err
		}
		tr := ai.Get("tools_registered")
		if !tr.IsArray() {
			return envErr("agent_init.tools_registered", "must be an array of strings")
		}
		for _, t := range tr.Array() {
			if t.Type != gjson.String {
				return envErr("agent_init.tools_registered", "must be an array of strings")
			}
		}
		return closed(ai, "agent_init", "tools_registered")
	case Input:
		in, err := requireObject(buf[:0], root, "input")
		if err != nil {
			return err
		}
		if !in.Get("content").Exists() {
			return envErr("input.content", "missing")
		}
		switch in.Get("role").Str {
		case "user", "system", "external":
		default:
			return envErr("input.role", "must be user, system or external")
		}
		return closed(in, "input", "content", "role")
	case PreModelCall, PostModelCall:
		m, err := requireObject(buf[:0], root, "model")
		if err != nil {
			return err
		}
		if id := m.Get("id"); id.Type != gjson.String {
			return envErr("model.id", "must be a string")
		}
		if err := closed(m, "model", "id", "vendor", "params"); err != nil {
			return err
		}
		if p == PreModelCall {
			ms := root.Raw("messages")
			if len(ms) == 0 || ms[0] != '[' {
				return envErr("messages", "must be an array")
			}
			var bad error
			ForEachElement(viewBytes(ms), func(msg []byte) bool {
				// The first role and content count, as in envIndex.
				var role, content []byte
				ForEachMember(msg, func(k string, v []byte) bool {
					switch {
					case k == "role" && role == nil:
						role = v
					case k == "content" && content == nil:
						content = v
					}
					return true
				})
				if msg[0] != '{' || content == nil || len(role) == 0 || role[0] != '"' {
					bad = envErr("messages[]", "each message needs a string role and a content")
				}
				return bad == nil
			})
			return bad
		}
		r, err := requireObject(buf[:0], root, "response")
		if err != nil {
			return err
		}
		if !r.Has("content") {
			return envErr("response.content", "missing")
		}
		if fr := r.Get("finish_reason"); fr.Type != gjson.String {
			return envErr("response.finish_reason", "must be a string")
		}
		tc := r.Get("tool_calls")
		if !tc.IsArray() {
			return envErr("response.tool_calls", "must be an array")
		}
		var bad error
		tc.ForEach(func(_, c gjson.Result) bool {
			switch {
			case !c.IsObject(), c.Get("name").Type != gjson.String, !c.Get("args").IsObject():
				bad = envErr("response.tool_calls[]", "each call needs a string name and object args")
			case c.Get("id").Exists() && c.Get("id").Type != gjson.String:
				bad = envErr("response.tool_calls[].id", "must be a string")
			}
			return bad == nil
		})
		if bad != nil {
			return bad
		}
		return closed(r, "response", "content", "tool_calls", "finish_reason")
	case PreToolCall, PostToolCall:
		tc, err := requireObject(buf[:0], root, "tool_call")
		if err != nil {
			return err
		}
		if id := tc.Get("id"); id.Type != gjson.String || id.Str == "" {
			return envErr("tool_call.id", "must be a non-empty string")
		}
		if n := tc.Get("name"); n.Type != gjson.String || n.Str == "" {
			return envErr("tool_call.name", "must be a non-empty string")
		}
		if !tc.Get("args").IsObject() {
			return envErr("tool_call.args", "must be an object")
		}
		if h := tc.Get("content_hash"); h.Exists() && (h.Type != gjson.String || !hashPattern.MatchString(h.Str)) {
			return envErr("tool_call.content_hash", "must match ^sha256:<hex64>$")
		}
		if p == PreToolCall {
			return closed(tc, "tool_call", "id", "name", "args", "content_hash")
		}
		if err := closed(tc, "tool_call", "id", "name", "args", "content_hash"); err != nil {
			return err
		}
		var trBuf [8]envMember // tc stays valid: its index is in buf
		tr, err := requireObject(trBuf[:0], root, "tool_result")
		if err != nil {
			return err
		}
		if !tr.Has("value") {
			return envErr("tool_result.value", "missing")
		}
		if ie := tr.Get("is_error"); ie.Type != gjson.True && ie.Type != gjson.False {
			return envErr("tool_result.is_error", "must be a boolean")
		}
		if d := tr.Get("duration_ms"); d.Exists() && (d.Type != gjson.Number || d.Num < 0) {
			return envErr("tool_result.duration_ms", "must be a number >= 0")
		}
		return closed(tr, "tool_result", "value", "is_error", "duration_ms")
	case Output:
		o, err := requireObject(buf[:0], root, "output")
		if err != nil {
			return err
		}
		if !o.Has("content") {
			return envErr("output.content", "missing")
		}
		return closed(o, "output", "content")
	case AgentShutdown:
		s, err := requireObject(buf[:0], root, "summary")
		if err != nil {
			return err
		}
		switch s.Get("reason").Str {
		case "completed", "error", "cancelled":
		default:
			return envErr("summary.reason", "must be completed, error or cancelled")
		}
		return closed(s, "summary", "reason", "tool_calls", "errors", "duration_seconds")
	}
	return nil
}

// JSONEqual compares two JSON texts for value equality (numbers by value,
// members in any order) without decoding when the bytes already agree (the
// usual case: target is rendered from the same bytes as its member).
func JSONEqual(a, b string) bool {
	if a == b {
		return true
	}
	if !utf8.ValidString(a) || !utf8.ValidString(b) {
		return false
	}
	var x, y any
	da := json.NewDecoder(strings.NewReader(a))
	da.UseNumber()
	db := json.NewDecoder(strings.NewReader(b))
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	return JSONValueEqual(x, y)
}

// envMembers indexes an object's members once (a short slice: contexts
// have a dozen members, and a linear look-up beats a map allocation). It
// keeps raw values and parses one only when asked, so a member holding
// megabytes of content is never rescanned to check that it exists.
type envMembers []envMember

type envMember struct {
	key string
	raw string // a no-copy view of the context bytes, which are never written
}

// envIndex indexes obj's members; the first of duplicate names wins, as
// gjson reads it (duplicates are refused by CheckEncoding). Bytes that are
// not a valid object index as far as they go.
func envIndexInto(m envMembers, obj []byte) envMembers {
	ForEachMember(obj, func(k string, v []byte) bool {
		for _, x := range m {
			if x.key == k {
				return true
			}
		}
		m = append(m, envMember{k, unsafe.String(unsafe.SliceData(v), len(v))})
		return true
	})
	return m
}

// viewBytes is the inverse no-copy view, for walking a member's value;
// the walk never writes.
func viewBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// Raw returns the raw value of the member key (one name, not a path), or "".
func (t envMembers) Raw(key string) string {
	for _, x := range t {
		if x.key == key {
			return x.raw
		}
	}
	return ""
}

// Has reports whether the member key is present.
func (t envMembers) Has(key string) bool { return t.Raw(key) != "" }

// Get returns the member at path ("a" or "a.b.c"), parsed.
func (t envMembers) Get(path string) gjson.Result {
	head, rest, nested := strings.Cut(path, ".")
	r := t.Raw(head)
	if r == "" {
		return gjson.Result{}
	}
	v := gjson.Parse(r)
	if nested {
		return v.Get(rest)
	}
	return v
}

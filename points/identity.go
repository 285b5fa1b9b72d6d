package points

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// IdentityProvider computes context_identity (§10.1): a pure function of the
// whole wire context. An error fails the emission closed as
// host_error:context_invalid before any interceptor runs; the errors
// returned by the providers in this package are *DomainError.
type IdentityProvider interface {
	// Name is the identity_provider value written on records.
	Name() string
	// Identity returns the opaque identity of raw, the whole context JSON.
	Identity(raw []byte) (string, error)
}

// JCSSHA256Name is the name of the default provider of §10.2.
const JCSSHA256Name = "jcs-sha256"

// JCSSHA256 returns the default provider of §10.2:
// "sha256:" + lowercase hex of SHA-256 over Preimage(raw).
func JCSSHA256() IdentityProvider { return jcsSHA256{} }

type jcsSHA256 struct{}

func (jcsSHA256) Name() string { return JCSSHA256Name }

func (p jcsSHA256) Identity(raw []byte) (string, error) {
	var buf [maxIdentityLen]byte
	out, err := p.appendIdentity(buf[:0], raw, "")
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// maxIdentityLen is the longest identity this package's providers return
// ("hmac-sha256:" and 64 hex digits).
const maxIdentityLen = len("hmac-sha256:") + 2*sha256.Size

// appendIdentity is Identity appended to dst (the emitter keeps it in the
// record's own block instead of a string of its own). built, when not "",
// is the point of a context the emitter built and validateBuilt accepted,
// whose envelope checkTracked would only confirm (see preimage).
func (jcsSHA256) appendIdentity(dst, raw []byte, built Point) ([]byte, error) {
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	pre, err := c.preimage(raw, built)
	if err != nil {
		return dst, err
	}
	sum := sha256.Sum256(pre)
	dst = append(dst, "sha256:"...)
	return hex.AppendEncode(dst, sum[:]), nil
}

// hmacMinKey is the shortest accepted HMAC key: RFC 2104 §3 discourages
// keys shorter than the hash output.
const hmacMinKey = sha256.Size

// HMACSHA256 returns a keyed provider named "hmac-sha256-<keyID>", the
// naming §10.1 recommends for non-linkable records (TM-24). It computes
// "hmac-sha256:" + lowercase hex of HMAC-SHA-256(key, Preimage(raw)); the
// spec leaves the value format to the host, so this prefix is ours. keyID
// must be non-empty and made of [a-z0-9_-] so the name matches
// ^[a-z][a-z0-9_-]*$, and key must be at least 32 bytes. The key is copied.
func HMACSHA256(keyID string, key []byte) (IdentityProvider, error) {
	if keyID == "" {
		return nil, errors.New("points: hmac-sha256 key id is empty")
	}
	name := "hmac-sha256-" + keyID
	if err := CheckProviderName(name); err != nil {
		return nil, err
	}
	if len(key) < hmacMinKey {
		return nil, fmt.Errorf("points: hmac-sha256 key must be at least %d bytes", hmacMinKey)
	}
	return &hmacSHA256{name: name, key: bytes.Clone(key)}, nil
}

type hmacSHA256 struct {
	name string
	key  []byte
}

func (p *hmacSHA256) Name() string { return p.name }

func (p *hmacSHA256) Identity(raw []byte) (string, error) {
	var buf [maxIdentityLen]byte
	out, err := p.appendIdentity(buf[:0], raw, "")
	if err != nil {
		return "", err
	}
	return string(out), nil
}

func (p *hmacSHA256) appendIdentity(dst, raw []byte, built Point) ([]byte, error) {
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	pre, err := c.preimage(raw, built)
	if err != nil {
		return dst, err
	}
	m := hmac.New(sha256.New, p.key)
	m.Write(pre)
	var sum [sha256.Size]byte
	dst = append(dst, "hmac-sha256:"...)
	return hex.AppendEncode(dst, m.Sum(sum[:0])), nil
}

// CheckProviderName enforces §10.1's rule for host-defined provider names:
// ^[a-z][a-z0-9_-]*$ and not starting with "jcs" (reserved so a custom
// function can never claim golden-vector semantics).
func CheckProviderName(name string) error {
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		return errors.New("points: identity provider name must match ^[a-z][a-z0-9_-]*$")
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return errors.New("points: identity provider name must match ^[a-z][a-z0-9_-]*$")
		}
	}
	if len(name) >= 3 && name[:3] == "jcs" {
		return errors.New("points: identity provider names starting with jcs are reserved")
	}
	return nil
}

// CanonicalJSON returns the RFC 8785 form of raw, any JSON value, without
// projecting it. raw must pass CheckDomain (with DefaultMaxDepth): the
// integer bound applies to the whole value, because a beyond-2^53 integer
// would otherwise be silently rounded.
//
// The serialization is this package's canonicalizer (jcs.go), tested to be
// byte-identical to github.com/gowebpki/jcs v1.0.2, which was checked
// against RFC 8785: members sorted by UTF-16 code units, numbers per
// ECMA-262 Number::toString via correctly rounded parsing (1e21 → 1e+21,
// 1e-7 → 1e-7, -0 → 0, 9.999999999999997e+22 kept), minimal escapes with
// lowercase \u00xx. Lone surrogates, invalid UTF-8 and duplicate names are
// refused, with CheckDomain's error.
func CanonicalJSON(raw []byte) ([]byte, error) {
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	out, err := c.canonical(raw, DefaultMaxDepth, true)
	if err != nil {
		return nil, explain(CheckDomain(raw, DefaultMaxDepth))
	}
	return bytes.Clone(out), nil
}

// canonicalDepth is canonicalize's nesting allowance, gowebpki/jcs's own.
const canonicalDepth = 10000

// canonicalize returns the RFC 8785 form of raw with no domain bounds beyond
// canonicalDepth: RFC 8785 itself, for values the caller has checked.
func canonicalize(raw []byte) ([]byte, error) {
	out, err := appendCanonical(nil, raw, canonicalDepth, false)
	if err != nil {
		// Never echo input.
		return nil, &DomainError{Path: "$", Problem: "cannot be canonicalized (RFC 8785)"}
	}
	return out, nil
}

// explain turns a canonicalizer failure into the domain scanner's
// value-free error. The canonicalizer accepts exactly the scanner's
// language, so err is never nil in practice; if it were, the context still
// fails closed.
func explain(err error) error {
	if err != nil {
		return err
	}
	return &DomainError{Path: "$", Problem: "cannot be canonicalized (RFC 8785)"}
}

// Preimage returns the identity preimage of §10.2, canonical_json(ctx_rc):
// the RFC 8785 form of ProjectPreimage(raw), after the checks the reference
// core makes on its identity path: raw passes CheckEncoding (whole context,
// DefaultMaxDepth, like serde_json's parse funnel), the §4.1/§4.2 envelope
// is valid (presence and JSON type of the required core and of the point's
// conditional members, as canonical.rs validate_envelope), and the
// projection passes CheckDomain (integer bound and depth). Every failure is
// a *DomainError. Both providers in this package hash these bytes.
func Preimage(raw []byte) ([]byte, error) {
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	pre, err := c.preimage(raw, "")
	if err != nil {
		return nil, err
	}
	return bytes.Clone(pre), nil
}

// preimage is Preimage into c's buffers, in one pass over raw: the
// canonicalizer validates the whole context (CheckEncoding's language),
// counts integers beyond the §10.2 bound instead of failing on them, and
// records the canonical spans of the root's members and of their members.
// The preimage is then cut from those spans: the canonical form of a
// projection is the canonical form of the kept members, in order. The
// domain scanner runs only to explain a failure, so the errors are those of
// CheckEncoding, the envelope checks and CheckDomain(ProjectPreimage(raw)),
// in that order, exactly as the definition reads.
//
// built, when not "", says that the emitter built raw itself (Session.build)
// as an event of that point and that validateBuilt accepted it: then the
// envelope checkTracked checks holds by construction (build writes spec,
// interception_point, timestamp, sequence, agent, session and target
// itself; checkHead checked agent.id, agent.framework and session.id;
// validateConditional the point's members and their subfields), so only
// the point is taken. The canonicalizer's pass still validates the bytes.
func (c *canonicalizer) preimage(raw []byte, built Point) ([]byte, error) {
	if c.run(raw, DefaultMaxDepth, intCount, true, true) != nil {
		return nil, explain(CheckEncoding(raw, DefaultMaxDepth))
	}
	if b := trimWS(raw); b[0] != '{' {
		return nil, &DomainError{Path: "$", Problem: describe("an object")}
	}
	// The envelope is checked on the tracked members, without building
	// maps: this runs for every emission.
	p := built
	if p == "" {
		var err error
		if p, err = c.checkTracked(raw); err != nil {
			return nil, err
		}
	}

	// The kept members, as projection rules with their tracked member.
	type kept struct {
		keep
		t *trackedMember
	}
	var buf [16]kept
	ks := buf[:0]
	viol := false
	add := func(k keep) {
		t := c.findTracked(c.top, k.key)
		if t == nil {
			return
		}
		ks = append(ks, kept{k, t})
		if k.sub == nil || raw[t.raw0] != '{' {
			viol = viol || t.viol
			return
		}
		for _, s := range c.subs[t.s0:t.s1] {
			viol = viol || s.viol && hasName(k.sub, c.name(&s.canonMember))
		}
	}
	for _, k := range preimageKeeps[p] {
		add(k)
	}
	if viol {
		top, _ := topMembers(raw)
		return nil, explain(CheckDomain(appendProjection(nil, top), DefaultMaxDepth))
	}

	out := append(c.out[:0], '{')
	var subBuf [8]*trackedMember
	for n, k := range ks {
		if n > 0 {
			out = append(out, ',')
		}
		t := k.t
		if k.sub == nil || raw[t.raw0] != '{' {
			out = c.write(out, t.start, t.end, t.rec)
			continue
		}
		out = append(out, '"')
		out = append(out, k.key...)
		out = append(out, `":{`...)
		subs := subBuf[:0]
		for j := range c.subs[t.s0:t.s1] {
			if s := &c.subs[t.s0+j]; hasName(k.sub, c.name(&s.canonMember)) {
				subs = append(subs, s)
			}
		}
		slices.SortFunc(subs, func(a, b *trackedMember) int { return compareUTF16(c.name(&a.canonMember), c.name(&b.canonMember)) })
		for j, s := range subs {
			if j > 0 {
				out = append(out, ',')
			}
			out = c.write(out, s.start, s.end, s.rec)
		}
		out = append(out, '}')
	}
	c.out = append(out, '}')
	return c.out, nil
}

// hasName reports whether name is one of names.
func hasName(names []string, name []byte) bool {
	for _, n := range names {
		if n == string(name) {
			return true
		}
	}
	return false
}

// findTracked returns the member named name, or nil.
func (c *canonicalizer) findTracked(ts []trackedMember, name string) *trackedMember {
	for k := range ts {
		if string(c.name(&ts[k].canonMember)) == name {
			return &ts[k]
		}
	}
	return nil
}

// ProjectPreimage returns ctx_rc, the closed required+conditional projection of
// §10.2, as compact JSON: the required core (spec, interception_point,
// timestamp, sequence, agent.{id,framework}, session.{id}, target) and the
// point's conditional members with their subfield whitelists; everything
// else is dropped. Kept values are copied byte for byte; members are
// written in a fixed order, so ProjectPreimage is idempotent. raw must pass
// CheckEncoding and be an object whose interception_point is one of the
// eight points. It does not validate the envelope (Preimage does). (It is
// not called Project because record.go's Project projects verdicts.)
func ProjectPreimage(raw []byte) ([]byte, error) {
	if err := CheckEncoding(raw, DefaultMaxDepth); err != nil {
		return nil, err
	}
	top, err := topMembers(raw)
	if err != nil {
		return nil, err
	}
	if _, err := pointOf(top); err != nil {
		return nil, err
	}
	return appendProjection(nil, top), nil
}

// keep is a projection rule: a member and, when sub is non-nil, the only
// subfields kept when its value is an object.
type keep struct {
	key string
	sub []string
}

// requiredKeep is the required core of the preimage (§4.1, §10.2).
var requiredKeep = [...]keep{
	{"spec", nil},
	{"interception_point", nil},
	{"timestamp", nil},
	{"sequence", nil},
	{"agent", []string{"id", "framework"}},
	{"session", []string{"id"}},
	{"target", nil},
}

// conditionalKeep is the closed per-point preimage (§4.2, §10.2), mirroring
// the per-point schemas' required members.
func conditionalKeep(p Point) []keep { return conditionalKeeps[p] }

var conditionalKeeps = map[Point][]keep{
	AgentStartup:  {{"agent_init", []string{"tools_registered"}}},
	Input:         {{"input", []string{"content", "role"}}},
	PreModelCall:  {{"model", []string{"id"}}, {"messages", nil}},
	PostModelCall: {{"model", []string{"id"}}, {"response", []string{"content", "tool_calls", "finish_reason"}}},
	PreToolCall:   {{"tool_call", []string{"id", "name", "args"}}},
	PostToolCall:  {{"tool_call", []string{"id", "name", "args"}}, {"tool_result", []string{"value", "is_error"}}},
	Output:        {{"output", []string{"content"}}},
	AgentShutdown: {{"summary", []string{"reason"}}},
}

// preimageKeeps is, per point, the required and conditional rules sorted by
// name (ASCII, where byte order is UTF-16 order), so the preimage is cut in
// canonical member order without sorting per emission.
var preimageKeeps = func() map[Point][]keep {
	m := map[Point][]keep{}
	for p, cond := range conditionalKeeps {
		ks := append(append([]keep(nil), requiredKeep[:]...), cond...)
		slices.SortFunc(ks, func(a, b keep) int { return strings.Compare(a.key, b.key) })
		m[p] = ks
	}
	return m
}()

// checkTracked is checkEnvelope (same checks, same errors, same order) on
// the members the canonicalizer tracked, and returns the point.
func (c *canonicalizer) checkTracked(raw []byte) (Point, error) {
	value := func(t *trackedMember) []byte {
		if t == nil {
			return nil
		}
		return raw[t.raw0:t.raw1]
	}
	top := func(name string) []byte { return value(c.findTracked(c.top, name)) }
	// subsOf returns the tracked members of an object-valued member.
	subsOf := func(t *trackedMember) ([]trackedMember, bool) {
		if t == nil || raw[t.raw0] != '{' {
			return nil, false
		}
		return c.subs[t.s0:t.s1], true
	}
	if s, ok := stringView(top("spec")); !ok || !validSpec(s) {
		return "", &DomainError{Path: "$.spec", Problem: describe("an agent-hooks/<major>.<minor> string")}
	}
	ps, ok := stringView(top("interception_point"))
	if !ok {
		return "", &DomainError{Path: "$.interception_point", Problem: describe("a string (see spec §4.1)")}
	}
	p := Point(ps) // a view of raw, used only while raw is
	if !p.Valid() {
		return "", &DomainError{Path: "$.interception_point", Problem: "not one of the eight closed values (see spec §3)"}
	}
	if _, ok := stringView(top("timestamp")); !ok {
		return "", &DomainError{Path: "$.timestamp", Problem: describe("a string")}
	}
	if !nonNegativeInt64(top("sequence")) {
		return "", &DomainError{Path: "$.sequence", Problem: describe("an integer >= 0")}
	}
	agent, ok := subsOf(c.findTracked(c.top, "agent"))
	if !ok {
		return "", &DomainError{Path: "$.agent", Problem: describe("an object")}
	}
	if s, ok := stringView(value(c.findTracked(agent, "id"))); !ok || s == "" {
		return "", &DomainError{Path: "$.agent.id", Problem: describe("a non-empty string")}
	}
	if s, ok := stringView(value(c.findTracked(agent, "framework"))); !ok || !validFramework(s) {
		return "", &DomainError{Path: "$.agent.framework", Problem: describe("a ^[a-z0-9_-]+$ string")}
	}
	session, _ := subsOf(c.findTracked(c.top, "session"))
	if s, ok := stringView(value(c.findTracked(session, "id"))); !ok || s == "" {
		return "", &DomainError{Path: "$.session.id", Problem: describe("a non-empty string")}
	}
	if c.findTracked(c.top, "target") == nil {
		return "", &DomainError{Path: "$.target", Problem: describe("present")}
	}
	for _, k := range conditionalKeep(p) {
		t := c.findTracked(c.top, k.key)
		if t == nil {
			return "", &DomainError{Path: "$." + k.key, Problem: describe("present at this interception point")}
		}
		if k.sub == nil {
			continue
		}
		obj, ok := subsOf(t)
		if !ok {
			return "", &DomainError{Path: "$." + k.key, Problem: describe("an object")}
		}
		for _, s := range k.sub {
			if c.findTracked(obj, s) == nil {
				return "", &DomainError{Path: "$." + k.key + "." + s, Problem: "missing (see spec §4.2)"}
			}
		}
	}
	return p, nil
}

// stringView is jsonString without a copy when v has no escapes (nameOf); the
// result must not outlive v.
func stringView(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	return nameOf(v), true
}

// members maps member names (unescaped) to raw values of one object.
type members map[string][]byte

// topMembers reads the members of raw, which CheckEncoding has accepted,
// and fails unless raw is an object.
func topMembers(raw []byte) (members, error) {
	b := trimWS(raw)
	if len(b) == 0 || b[0] != '{' {
		return nil, &DomainError{Path: "$", Problem: describe("an object")}
	}
	m := members{}
	forEachMember(b, func(k string, v []byte) { m[k] = v })
	return m, nil
}

// pointOf returns the context's interception point or a value-free error.
func pointOf(top members) (Point, error) {
	s, ok := jsonString(top["interception_point"])
	if !ok {
		return "", &DomainError{Path: "$.interception_point", Problem: describe("a string (see spec §4.1)")}
	}
	p := Point(s)
	if !p.Valid() {
		return "", &DomainError{Path: "$.interception_point", Problem: "not one of the eight closed values (see spec §3)"}
	}
	return p, nil
}

// appendProjection appends the projection of an already validated object
// to dst.
func appendProjection(dst []byte, top members) []byte {
	p, _ := pointOf(top)
	b := dst
	first := true
	b = append(b, '{')
	write := func(k keep) {
		v, ok := top[k.key]
		if !ok {
			return
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = strconv.AppendQuote(b, k.key)
		b = append(b, ':')
		if k.sub == nil || v[0] != '{' {
			// Non-objects are kept whole, as the reference does; the
			// envelope check rejects them where an object is required.
			b = append(b, v...)
			return
		}
		sub := members{}
		forEachMember(v, func(name string, val []byte) { sub[name] = val })
		b = append(b, '{')
		firstSub := true
		for _, s := range k.sub {
			sv, ok := sub[s]
			if !ok {
				continue
			}
			if !firstSub {
				b = append(b, ',')
			}
			firstSub = false
			b = strconv.AppendQuote(b, s)
			b = append(b, ':')
			b = append(b, sv...)
		}
		b = append(b, '}')
	}
	for _, k := range requiredKeep {
		write(k)
	}
	for _, k := range conditionalKeep(p) {
		write(k)
	}
	return append(b, '}')
}

// validSpec matches agent-hooks/<digits>.<digits> the way the reference
// does (one dot; both parts non-empty digit runs).
func validSpec(s string) bool {
	const prefix = "agent-hooks/"
	if len(s) <= len(prefix) || s[:len(prefix)] != prefix {
		return false
	}
	ver := s[len(prefix):]
	dot := -1
	for i := 0; i < len(ver); i++ {
		switch c := ver[i]; {
		case c == '.' && dot < 0:
			dot = i
		case c < '0' || c > '9':
			return false
		}
	}
	return dot > 0 && dot < len(ver)-1
}

func validFramework(s string) bool {
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

// nonNegativeInt64 mirrors serde_json's as_i64 >= 0: an integer-syntax
// literal (no fraction or exponent, so 1.0 fails) that fits an i64 and is
// not negative; -0 parses as a double in serde_json and fails too.
func nonNegativeInt64(v []byte) bool {
	if len(v) == 0 || v[0] < '0' || v[0] > '9' {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	_, err := strconv.ParseInt(string(v), 10, 64)
	return err == nil
}

// jsonString decodes v when it is a JSON string.
func jsonString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body), true
	}
	return string(unescapeString(body)), true
}

// objectMembers returns the members of v when it is a JSON object.
func objectMembers(v []byte) (members, bool) {
	if len(v) == 0 || v[0] != '{' {
		return nil, false
	}
	m := members{}
	forEachMember(v, func(k string, val []byte) { m[k] = val })
	return m, true
}

// forEachMember calls fn with each name (unescaped) and raw value of obj, a
// valid JSON object (ForEachMember without the early stop).
func forEachMember(obj []byte, fn func(name string, val []byte)) {
	ForEachMember(obj, func(k string, v []byte) bool { fn(k, v); return true })
}

func skipWSAt(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func trimWS(b []byte) []byte {
	i := skipWSAt(b, 0)
	j := len(b)
	for j > i && (b[j-1] == ' ' || b[j-1] == '\t' || b[j-1] == '\n' || b[j-1] == '\r') {
		j--
	}
	return b[i:j]
}

// skipString returns the index just past the string starting at b[i]=='"'.
// It jumps from quote to quote with bytes.IndexByte (vectorised), since
// message content can be megabytes; a quote is the closing one when an
// even number of backslashes precedes it.
func skipString(b []byte, i int) int {
	for i++; i < len(b); {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b)
		}
		i += q
		n := 0
		for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return i + 1
		}
		i++
	}
	return len(b)
}

// skipValue returns the index just past the valid JSON value at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

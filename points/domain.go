package points

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Resource bounds of §12.3 (RECOMMENDED defaults). A breach is a
// host_error:context_invalid deny, never a crash or a truncation.
const (
	// DefaultMaxDepth bounds nesting. It counts values the way the reference
	// core's check_depth does: the root is at depth 1 and every array element
	// or object member one deeper than its container, scalars included, so
	// {"a":1} has depth 2 and an empty container at depth 128 is still fine.
	DefaultMaxDepth = 128
	// DefaultMaxContextBytes bounds the serialized context (5 MiB).
	DefaultMaxContextBytes = 5 << 20
)

// maxSafeInteger is 2^53−1, the largest integer an IEEE-754 double holds
// exactly (§4.4, §10.2), written as the digit string the scanner compares
// against.
const maxSafeInteger = "9007199254740991"

// Value-free problem classes carried by DomainError.Problem. Each names the
// constraint and, where it helps, the remedy; none ever quotes input.
const (
	ProblemSyntax       = "not valid JSON"
	ProblemUTF8         = "invalid UTF-8 in a string"
	ProblemSurrogate    = "lone UTF-16 surrogate escape (see spec §4.4)"
	ProblemNonFinite    = "number outside the finite double range (see spec §4.4)"
	ProblemInteger      = "integer exceeds 2^53; string-encode 64-bit identifiers, see spec §4.4"
	ProblemDuplicateKey = "duplicate member name (I-JSON, RFC 7493)"
	ProblemDepth        = "nests deeper than the depth bound (see spec §12.3)"
	ProblemSize         = "serialized context exceeds the size bound (see spec §12.3)"
)

// DomainError reports a context (or value) outside the §4.4/§10.2/§12.3
// domain. The emitter maps it to host_error:context_invalid. It is
// value-free by construction: Path is a JSON path whose member names are
// shown only when they are short identifiers ([*] stands for any other
// name), and Problem is one of the Problem* classes or an envelope
// constraint. Neither ever contains the offending value.
type DomainError struct {
	Path    string // e.g. "$.tool_call.args.id" or "$.messages[3]"
	Problem string // the class of problem
}

// Error renders "path: problem".
func (e *DomainError) Error() string { return e.Path + ": " + e.Problem }

// CheckSize rejects a serialized context larger than maxBytes (§12.3);
// maxBytes <= 0 means DefaultMaxContextBytes.
func CheckSize(raw []byte, maxBytes int) error {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxContextBytes
	}
	if len(raw) > maxBytes {
		return &DomainError{Path: "$", Problem: ProblemSize}
	}
	return nil
}

// ValidJSON reports whether raw is one JSON value that CheckEncoding
// accepts at DefaultMaxDepth. Unlike gjson.Valid it is bounded in depth
// (its recursion stops at the bound), so it is the check for bytes that
// come from a client, an upstream or a webhook: gjson's recursive
// validator overflows the goroutine stack on a few MB of "[", which is a
// fatal error no recover catches.
func ValidJSON(raw []byte) bool { return validJSON(raw, DefaultMaxDepth, false) }

// DepthWithin reports whether raw, read as JSON, nests arrays and objects
// at most max deep (strings skipped, so brackets inside them do not
// count). It validates nothing else: it is the guard to run before a
// recursive validator (gjson.Valid) where ValidJSON's stricter language
// does not fit, as for one chunk of a stream, whose text may end in half
// of a surrogate pair that the next chunk completes.
func DepthWithin(raw []byte, max int) bool {
	depth := 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '[', '{':
			if depth++; depth > max {
				return false
			}
		case ']', '}':
			depth--
		case '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		}
	}
	return true
}

// CheckEncoding is the provider-independent half of the value domain, the
// Go equivalent of the reference core's JSON parse funnel. The emitter runs
// it on every whole context (after CheckSize) whatever the identity
// provider, and again after a transform changed the context. raw must be
// one JSON value with valid UTF-8, no lone surrogate escapes, only finite
// numbers (a literal that overflows a double is rejected, as serde_json
// does), no duplicate member names, and nesting within maxDepth
// (maxDepth <= 0 means DefaultMaxDepth).
//
// Duplicate member names are a deliberate addition to the reference core,
// which silently keeps the last one: gjson reads the first, so accepting
// them would let interceptors see one value while the identity hashes
// another, and §4.4 forbids silent normalization.
func CheckEncoding(raw []byte, maxDepth int) error {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	// The fast validator accepts exactly what the scanner accepts (fuzzed
	// against it); the scanner runs only to name the problem.
	if validJSON(raw, maxDepth, false) {
		return nil
	}
	return scanValue(raw, maxDepth, false)
}

// CheckDomain is the full value-domain check over the whole of raw: every
// CheckEncoding rule plus the I-JSON integer bound of §10.2. An
// integer-syntax number (no fraction, no exponent) whose magnitude exceeds
// 2^53−1 is rejected, 2^53 itself included and however many digits it has;
// a number written with a fraction or exponent (9007199254740993.0, 1e300)
// is a genuine double and is accepted, exactly as the reference core's
// check_i_json and scan_raw_integer_domain do.
//
// The jcs-sha256 provider applies the integer bound to the identity
// projection only (canonical.rs scopes it there, so a big integer in an
// optional or extension field never rejects); it runs CheckDomain on
// ProjectPreimage's output itself. The emitter should therefore call CheckSize and
// CheckEncoding on the whole context and leave the integer bound to the
// provider. CheckDomain on a whole value is what CanonicalJSON uses.
func CheckDomain(raw []byte, maxDepth int) error {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if validJSON(raw, maxDepth, true) {
		return nil
	}
	return scanValue(raw, maxDepth, true)
}

// scanFrame is one open container on the scanner's explicit stack. The
// scanner is iterative so that depth bounds, not the goroutine stack, limit
// what it accepts.
type scanFrame struct {
	object bool
	index  int      // element index (arrays)
	key    []byte   // current member name, unescaped (objects)
	hasKey bool     // key is set (false while the name itself is being read)
	keys   [][]byte // names seen so far, for duplicate detection
	set    map[string]struct{}
}

// dupLinearMax is how many names an object may hold before duplicate
// detection switches from a linear scan to a map.
const dupLinearMax = 16

func (f *scanFrame) addKey(k []byte) bool {
	if f.set != nil {
		if _, dup := f.set[string(k)]; dup {
			return false
		}
		f.set[string(k)] = struct{}{}
		return true
	}
	for _, s := range f.keys {
		if bytes.Equal(s, k) {
			return false
		}
	}
	f.keys = append(f.keys, k)
	if len(f.keys) > dupLinearMax {
		f.set = make(map[string]struct{}, 2*len(f.keys))
		for _, s := range f.keys {
			f.set[string(s)] = struct{}{}
		}
	}
	return true
}

type scanner struct {
	raw      []byte
	pos      int
	maxDepth int // 0 = unbounded (internal use only)
	intBound bool
	stack    []scanFrame
	n        int // live frames in stack
}

// scanValue validates raw as exactly one JSON value under the given bounds.
func scanValue(raw []byte, maxDepth int, intBound bool) error {
	s := scanner{raw: raw, maxDepth: maxDepth, intBound: intBound}
	return s.run()
}

func (s *scanner) fail(problem string) error {
	return &DomainError{Path: s.path(), Problem: problem}
}

// maxPathSegments bounds the segments path renders: a value nested past
// the depth bound would otherwise name a hundred of them, and the record's
// message would be cut before the problem.
const maxPathSegments = 16

// path renders the location of the scanner's current value.
func (s *scanner) path() string {
	var b strings.Builder
	b.WriteByte('$')
	for i := 0; i < s.n; i++ {
		if i == maxPathSegments {
			b.WriteString("…")
			break
		}
		f := &s.stack[i]
		if !f.object {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(f.index))
			b.WriteByte(']')
			continue
		}
		if !f.hasKey {
			break // the error is in the member name itself: stop at its object
		}
		writeMember(&b, f.key)
	}
	return b.String()
}

// writeMember appends a member segment. Only names the contract and the
// chat wire define are shown: any other name is the agent's or the model's
// own data (a tool argument, a JSON answer's key), and a name can itself
// be payload, which a record and a control error must not carry (§10.3,
// §6.3). The rest read "[*]".
func writeMember(b *strings.Builder, name []byte) {
	if !pathNames[string(name)] {
		b.WriteString("[*]")
		return
	}
	b.WriteByte('.')
	b.Write(name)
}

// pathNames are the member names a domain error's path may show: those of
// the spec's context schema and of the OpenAI chat messages and tool
// definitions the proxy puts in contexts.
var pathNames = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(`actor agent agent_init args budgets completion_tokens content
		content_hash cost_usd description duration_ms duration_seconds elapsed_seconds errors
		extensions finish_reason framework id input interception_point is_error kind messages model
		name output params prompt_tokens reason request_id response role schema sequence session
		span_id spec started_at summary target tenant timestamp token_count tool_call
		tool_call_count tool_calls tool_result tools tools_registered trace trace_id turn usage
		value vendor version
		tool_call_id type function arguments refusal text image_url url detail audio input_audio
		data format file file_id filename parameters strict total_tokens`) {
		m[n] = true
	}
	return m
}()

func (s *scanner) push(object bool) {
	if s.n == len(s.stack) {
		s.stack = append(s.stack, scanFrame{})
	}
	f := &s.stack[s.n]
	f.object, f.index, f.key, f.hasKey = object, 0, nil, false
	f.keys, f.set = f.keys[:0], nil
	s.n++
}

func (s *scanner) skipWS() {
	for s.pos < len(s.raw) {
		switch s.raw[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) run() error {
	s.skipWS()
	for {
		// A value starts here, one deeper than the open containers.
		if s.maxDepth > 0 && s.n+1 > s.maxDepth {
			return s.fail(ProblemDepth)
		}
		if s.pos >= len(s.raw) {
			return s.fail(ProblemSyntax)
		}
		switch c := s.raw[s.pos]; {
		case c == '{':
			s.pos++
			s.push(true)
			s.skipWS()
			if s.pos < len(s.raw) && s.raw[s.pos] == '}' {
				s.pos++
				s.n--
				break
			}
			if err := s.memberName(); err != nil {
				return err
			}
			continue
		case c == '[':
			s.pos++
			s.push(false)
			s.skipWS()
			if s.pos < len(s.raw) && s.raw[s.pos] == ']' {
				s.pos++
				s.n--
				break
			}
			continue
		case c == '"':
			if _, err := s.str(); err != nil {
				return err
			}
		case c == '-' || (c >= '0' && c <= '9'):
			if err := s.number(); err != nil {
				return err
			}
		case c == 't':
			if err := s.literal("true"); err != nil {
				return err
			}
		case c == 'f':
			if err := s.literal("false"); err != nil {
				return err
			}
		case c == 'n':
			if err := s.literal("null"); err != nil {
				return err
			}
		default:
			return s.fail(ProblemSyntax)
		}
		// A value ended: close containers until one expects another value.
		for {
			s.skipWS()
			if s.n == 0 {
				if s.pos != len(s.raw) {
					return s.fail(ProblemSyntax)
				}
				return nil
			}
			if s.pos >= len(s.raw) {
				return s.fail(ProblemSyntax)
			}
			f := &s.stack[s.n-1]
			c := s.raw[s.pos]
			if f.object && c == '}' || !f.object && c == ']' {
				s.pos++
				s.n--
				continue
			}
			if c != ',' {
				return s.fail(ProblemSyntax)
			}
			s.pos++
			s.skipWS()
			if f.object {
				if err := s.memberName(); err != nil {
					return err
				}
			} else {
				f.index++
			}
			break
		}
	}
}

// memberName reads `"name" :` in the innermost (object) frame.
func (s *scanner) memberName() error {
	f := &s.stack[s.n-1]
	f.hasKey = false
	if s.pos >= len(s.raw) || s.raw[s.pos] != '"' {
		return s.fail(ProblemSyntax)
	}
	start := s.pos + 1
	escaped, err := s.str()
	if err != nil {
		return err
	}
	name := s.raw[start : s.pos-1]
	if escaped {
		name = unescapeString(name)
	}
	if !f.addKey(name) {
		return s.fail(ProblemDuplicateKey)
	}
	f.key, f.hasKey = name, true
	s.skipWS()
	if s.pos >= len(s.raw) || s.raw[s.pos] != ':' {
		return s.fail(ProblemSyntax)
	}
	s.pos++
	s.skipWS()
	return nil
}

// str consumes a string starting at the opening quote and reports whether
// it contained escapes.
func (s *scanner) str() (escaped bool, err error) {
	s.pos++ // opening quote
	for s.pos < len(s.raw) {
		c := s.raw[s.pos]
		switch {
		case c == '"':
			s.pos++
			return escaped, nil
		case c == '\\':
			escaped = true
			if err := s.escape(); err != nil {
				return escaped, err
			}
		case c < 0x20:
			return escaped, s.fail(ProblemSyntax)
		case c < utf8.RuneSelf:
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.raw[s.pos:])
			if r == utf8.RuneError && size <= 1 {
				return escaped, s.fail(ProblemUTF8)
			}
			s.pos += size
		}
	}
	return escaped, s.fail(ProblemSyntax)
}

// escape consumes one escape sequence at a backslash. A high surrogate must
// be followed at once by an escaped low surrogate; anything else is a lone
// surrogate, which serde_json (and RFC 8785) refuse.
func (s *scanner) escape() error {
	if s.pos+1 >= len(s.raw) {
		return s.fail(ProblemSyntax)
	}
	switch s.raw[s.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.pos += 2
		return nil
	case 'u':
	default:
		return s.fail(ProblemSyntax)
	}
	u, ok := hex4(s.raw, s.pos+2)
	if !ok {
		return s.fail(ProblemSyntax)
	}
	s.pos += 6
	switch {
	case u >= 0xDC00 && u <= 0xDFFF:
		return s.fail(ProblemSurrogate)
	case u >= 0xD800 && u <= 0xDBFF:
		if s.pos+1 >= len(s.raw) || s.raw[s.pos] != '\\' || s.raw[s.pos+1] != 'u' {
			return s.fail(ProblemSurrogate)
		}
		lo, ok := hex4(s.raw, s.pos+2)
		if !ok {
			return s.fail(ProblemSyntax)
		}
		if lo < 0xDC00 || lo > 0xDFFF {
			return s.fail(ProblemSurrogate)
		}
		s.pos += 6
	}
	return nil
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number consumes a number token per RFC 8259 §6 and applies the finite
// and (when enabled) integer-bound rules.
func (s *scanner) number() error {
	start := s.pos
	b := s.raw
	i := s.pos
	if b[i] == '-' {
		i++
	}
	digits := i
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		s.pos = i
		return s.fail(ProblemSyntax)
	}
	intEnd := i
	integer := true
	if i < len(b) && b[i] == '.' {
		integer = false
		i++
		n := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == n {
			s.pos = i
			return s.fail(ProblemSyntax)
		}
	}
	exp := false
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer, exp = false, true
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		n := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == n {
			s.pos = i
			return s.fail(ProblemSyntax)
		}
	}
	s.pos = i
	if integer && s.intBound {
		d := b[digits:intEnd]
		if len(d) > len(maxSafeInteger) || len(d) == len(maxSafeInteger) && string(d) > maxSafeInteger {
			return s.fail(ProblemInteger)
		}
		return nil
	}
	// Only an exponent or ~309 integer digits can overflow a double.
	if exp || intEnd-digits > 300 {
		f, _ := strconv.ParseFloat(string(b[start:i]), 64)
		if math.IsInf(f, 0) {
			return s.fail(ProblemNonFinite)
		}
	}
	return nil
}

func (s *scanner) literal(lit string) error {
	if !bytes.HasPrefix(s.raw[s.pos:], []byte(lit)) {
		return s.fail(ProblemSyntax)
	}
	s.pos += len(lit)
	return nil
}

// unescapeString decodes the body of a valid JSON string (between the
// quotes). The scanner has already checked it, so it never fails.
func unescapeString(body []byte) []byte { return AppendUnescaped(make([]byte, 0, len(body)), body) }

// AppendUnescaped appends the decoded body of a JSON string (the bytes
// between its quotes) to dst. On a valid string it decodes as
// encoding/json and gjson do; a high surrogate escape pairs only with a
// low one after it, and an unpaired surrogate becomes U+FFFD. On bytes
// that are not a valid body it stops at a malformed escape and never
// panics. Runs without escapes are copied whole.
func AppendUnescaped(dst, body []byte) []byte {
	for len(body) > 0 {
		k := bytes.IndexByte(body, '\\')
		if k < 0 {
			return append(dst, body...)
		}
		dst = append(dst, body[:k]...)
		if k+1 >= len(body) {
			return dst
		}
		c := body[k+1]
		body = body[k+2:]
		switch c {
		case '\\', '/', '"':
			dst = append(dst, c)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(body, 0)
			if !ok {
				return dst
			}
			body = body[4:]
			if r >= 0xD800 && r < 0xDC00 && len(body) >= 6 && body[0] == '\\' && body[1] == 'u' {
				if lo, ok := hex4(body, 2); ok && lo >= 0xDC00 && lo < 0xE000 {
					r = utf16.DecodeRune(r, lo)
					body = body[6:]
				}
			}
			dst = utf8.AppendRune(dst, r) // a lone surrogate is not a rune: U+FFFD
		default:
			return dst
		}
	}
	return dst
}

// describe is a value-free fmt helper for envelope problems.
func describe(want string) string { return fmt.Sprintf("missing or not %s (see spec §4)", want) }

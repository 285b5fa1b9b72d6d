package points

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// This file is an RFC 8785 (JCS) canonicalizer over raw JSON bytes. It
// replaces github.com/gowebpki/jcs on the identity path, which builds a tree
// of strings and costs ~70 ms and ~200k allocations per MB; the tests keep
// that package as the oracle and require byte-identical output.
//
// Phase 1 makes one pass over the input and writes every value in canonical
// form (minimal escapes, ECMA-262 numbers, no whitespace) into c.buf, with
// object members still in source order. An object whose names are already
// in UTF-16 order (checked as it is read) needs nothing more. One that is not
// is recorded with its member spans sorted; phase 2 then copies c.buf to the
// output once, writing those objects' members in sorted order. Every byte is
// thus written at most twice whatever the nesting, and an input with no
// unsorted object is returned straight from c.buf. Names are compared as
// UTF-8 bytes, with a fix-up at the first differing byte only where UTF-16
// order differs (compareUTF16), so ASCII names cost a byte comparison.
//
// Two variants share the pass: validation only (validJSON: strings are not
// copied, numbers not formatted, no phase 2), and the identity preimage
// (identity.go), which also records where the root's members and their
// members lie so that the projection can be cut from the canonical form.
//
// The accepted language is exactly that of the domain scanner (scanValue):
// the same syntax, UTF-8, surrogate, finiteness, duplicate-name, depth and
// (optionally) integer rules. Callers therefore run the scanner only after a
// failure here, to get its value-free error path; FuzzJCSMatchesReference
// checks the equivalence.

// errCanon is the only error of this file: callers rerun the domain scanner
// for the precise, value-free DomainError.
var errCanon = errors.New("points: not canonicalizable")

// intRule is what the canonicalizer does with an integer-syntax literal
// beyond ±(2^53−1), the §10.2 bound.
type intRule uint8

const (
	intAny    intRule = iota // RFC 8785 alone: format it as a double
	intReject                // fail
	intCount                 // count it in c.viol; the caller decides (preimage)
)

// objRec is an object whose member order phase 2 may have to change.
// Records are appended when an object opens, so they are in document
// order; a sorted object with no unsorted descendant is dropped again.
type objRec struct {
	start, end int // span of the object in c.buf ('{' through '}')
	next       int // index of the first record after this object's subtree
	p0, p1     int // sorted member spans, c.perm[p0:p1]; unused when sorted
	sorted     bool
}

// span is one member, `"name":value`, in c.buf; rec is the index of the
// first object record that may lie inside it.
type span struct {
	start, end, rec int
}

// canonMember is a span and where its decoded name is, for sorting: the
// name is c.raw[n0:n1], or c.names[n0:n1] when it had escapes. Offsets
// rather than a slice keep the member free of pointers, so that the
// frames, top and subs, which copy members around on every emission,
// need no write barriers while the collector runs.
type canonMember struct {
	n0, n1  int32
	escaped bool
	span
}

// name is m's decoded name.
func (c *canonicalizer) name(m *canonMember) []byte {
	if m.escaped {
		return c.names[m.n0:m.n1]
	}
	return c.raw[m.n0:m.n1]
}

// trackedMember is a member of the root object (depth 1) or of an object
// that is the value of one (depth 2), kept when c.track is set so that the
// identity projection can be cut from the canonical form (identity.go).
type trackedMember struct {
	canonMember
	raw0, raw1 int  // the value's raw bytes, c.raw[raw0:raw1]
	viol       bool // the value holds an integer beyond the §10.2 bound
	s0, s1     int  // depth 1 only: an object value's members, c.subs[s0:s1]
}

// canonicalizer holds the reusable buffers of one canonicalization.
type canonicalizer struct {
	raw      []byte
	maxDepth int // 0 = unbounded
	ints     intRule
	emit     bool // false: validate only (no strings, numbers or phase 2)
	track    bool // record c.top and c.subs
	viol     int  // integers beyond the bound seen (intCount)

	buf    []byte          // phase 1 output
	out    []byte          // phase 2 output
	names  []byte          // decoded names that had escapes
	recs   []objRec        // objects that may need reordering, in document order
	perm   []span          // sorted member spans of unsorted objects
	frames [][]canonMember // members of the open object at each depth
	top    []trackedMember // members of the root object (track)
	subs   []trackedMember // members of its object-valued members (track)
	memo   []memoValue     // the root's member values, for reuse

	// What putCanonicalizer must clear, so that it clears what was used
	// rather than every buffer's whole capacity (which cost more than a
	// small context's canonicalization): frames[d][:len] holds the most
	// members written at depth d since the last put unless a run failed
	// (failed: an object may have stopped before recording its count);
	// topUsed and subsUsed are the most top and subs entries of a run.
	failed            bool
	topUsed, subsUsed int
}

// memoValue is a root member's value: its raw bytes, its phase-1 form
// c.buf[buf0:buf1], the records of its objects c.recs[rec0:rec1], its
// tracked members c.subs[s0:s1] and its count of out-of-bound integers.
type memoValue struct {
	raw0, raw1, buf0, buf1, rec0, rec1, s0, s1, viol int
}

// minMemo is the smallest value worth comparing against earlier ones.
const minMemo = 16

// reuse handles a root member whose value repeats an earlier one byte for
// byte: a context's target is a copy of its point's member, and for a big
// answer or history canonicalizing it twice doubled the identity's cost.
// Equal bytes at the same depth canonicalize to equal bytes, with the same
// errors (none, since the first succeeded) and the same integer count.
// Only self-delimiting values (objects, arrays, strings) qualify, so the
// equal prefix is the whole value.
func (c *canonicalizer) reuse(depth, v0 int) (int, bool) {
	if depth != 1 || !c.emit || v0 >= len(c.raw) {
		return 0, false
	}
	if b := c.raw[v0]; b != '{' && b != '[' && b != '"' {
		return 0, false
	}
	for _, e := range c.memo {
		n := e.raw1 - e.raw0
		if n < minMemo || v0+n > len(c.raw) || !bytes.Equal(c.raw[v0:v0+n], c.raw[e.raw0:e.raw1]) {
			continue
		}
		// Copy the phase-1 bytes and every position that points into them.
		shift, rawShift, recShift := len(c.buf)-e.buf0, v0-e.raw0, len(c.recs)-e.rec0
		c.buf = append(c.buf, c.buf[e.buf0:e.buf1]...)
		c.viol += e.viol
		for k := e.rec0; k < e.rec1; k++ {
			r := c.recs[k]
			r.start += shift
			r.end += shift
			r.next += recShift
			if !r.sorted {
				p0 := len(c.perm)
				for _, sp := range c.perm[r.p0:r.p1] {
					sp.start += shift
					sp.end += shift
					sp.rec += recShift
					c.perm = append(c.perm, sp)
				}
				r.p0, r.p1 = p0, len(c.perm)
			}
			c.recs = append(c.recs, r)
		}
		if c.track {
			for k := e.s0; k < e.s1; k++ {
				t := c.subs[k]
				t.start += shift
				t.end += shift
				t.rec += recShift
				t.raw0 += rawShift
				t.raw1 += rawShift
				c.subs = append(c.subs, t)
			}
		}
		return v0 + n, true
	}
	return 0, false
}

// canonPool recycles canonicalizers: a 1 MB context would otherwise
// allocate several MB of buffers per emission. It is a cache, not state.
var canonPool = sync.Pool{New: func() any { return new(canonicalizer) }}

// maxPooledBuffer keeps the pool from pinning buffers of outsized inputs.
const maxPooledBuffer = 2 * DefaultMaxContextBytes

func getCanonicalizer() *canonicalizer { return canonPool.Get().(*canonicalizer) }

func putCanonicalizer(c *canonicalizer) {
	if cap(c.buf) > maxPooledBuffer || cap(c.out) > maxPooledBuffer {
		return
	}
	// Drop references into the caller's input.
	c.raw = nil
	for i := range c.frames {
		if c.failed {
			clear(c.frames[i][:cap(c.frames[i])])
		} else {
			clear(c.frames[i])
		}
		c.frames[i] = c.frames[i][:0]
	}
	clear(c.top[:max(c.topUsed, len(c.top))])
	clear(c.subs[:max(c.subsUsed, len(c.subs))])
	c.failed, c.topUsed, c.subsUsed = false, 0, 0
	canonPool.Put(c)
}

func intRuleOf(bound bool) intRule {
	if bound {
		return intReject
	}
	return intAny
}

// appendCanonical appends the RFC 8785 form of raw, one JSON value, to dst.
// maxDepth counts like CheckDomain (0 = unbounded); intBound adds the §10.2
// integer bound. Any failure is errCanon.
func appendCanonical(dst, raw []byte, maxDepth int, intBound bool) ([]byte, error) {
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	out, err := c.canonical(raw, maxDepth, intBound)
	if err != nil {
		return dst, err
	}
	return append(dst, out...), nil
}

// validJSON reports whether scanValue(raw, maxDepth, intBound) would accept
// raw, several times faster. CheckEncoding and CheckDomain can call it
// first and run the scanner only to explain a failure.
func validJSON(raw []byte, maxDepth int, intBound bool) bool {
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	return c.run(raw, maxDepth, intRuleOf(intBound), false, false) == nil
}

// canonical returns the canonical form of raw in a buffer owned by c (valid
// until c's next use).
func (c *canonicalizer) canonical(raw []byte, maxDepth int, intBound bool) ([]byte, error) {
	if err := c.run(raw, maxDepth, intRuleOf(intBound), true, false); err != nil {
		return nil, err
	}
	if len(c.recs) == 0 {
		return c.buf, nil
	}
	c.out = c.write(c.out[:0], 0, len(c.buf), 0)
	return c.out, nil
}

// run is phase 1.
func (c *canonicalizer) run(raw []byte, maxDepth int, ints intRule, emit, track bool) error {
	c.raw, c.maxDepth, c.ints, c.emit, c.track, c.viol = raw, maxDepth, ints, emit, track, 0
	c.buf, c.names, c.recs, c.perm = c.buf[:0], c.names[:0], c.recs[:0], c.perm[:0]
	c.topUsed, c.subsUsed = max(c.topUsed, len(c.top)), max(c.subsUsed, len(c.subs))
	c.top, c.subs, c.memo = c.top[:0], c.subs[:0], c.memo[:0]
	i, err := c.value(0, 1)
	if err != nil {
		c.failed = true
		return err
	}
	if skipWSAt(raw, i) != len(raw) {
		return errCanon
	}
	return nil
}

// write is phase 2: it appends c.buf[lo:hi] to dst with the members of
// unsorted objects in sorted order; rec is the first record that may start
// at or after lo.
func (c *canonicalizer) write(dst []byte, lo, hi, rec int) []byte {
	for rec < len(c.recs) && c.recs[rec].start < hi {
		r := &c.recs[rec]
		if r.sorted {
			rec++ // its unsorted descendants follow it
			continue
		}
		dst = append(dst, c.buf[lo:r.start]...)
		dst = append(dst, '{')
		for k, m := range c.perm[r.p0:r.p1] {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = c.write(dst, m.start, m.end, m.rec)
		}
		dst = append(dst, '}')
		lo, rec = r.end, r.next
	}
	return append(dst, c.buf[lo:hi]...)
}

// value reads the value at or after raw[i] (leading whitespace allowed) at
// the given depth (root = 1) and returns the index just past it.
func (c *canonicalizer) value(i, depth int) (int, error) {
	if c.maxDepth > 0 && depth > c.maxDepth {
		return i, errCanon
	}
	raw := c.raw
	i = skipWSAt(raw, i)
	if i >= len(raw) {
		return i, errCanon
	}
	switch raw[i] {
	case '{':
		return c.object(i+1, depth)
	case '[':
		return c.array(i+1, depth)
	case '"':
		j, _, err := c.str(i+1, false)
		return j, err
	case 't':
		return c.literal(i, "true")
	case 'f':
		return c.literal(i, "false")
	case 'n':
		return c.literal(i, "null")
	}
	return c.number(i)
}

func (c *canonicalizer) literal(i int, lit string) (int, error) {
	if len(c.raw)-i < len(lit) || string(c.raw[i:i+len(lit)]) != lit {
		return i, errCanon
	}
	c.buf = append(c.buf, lit...)
	return i + len(lit), nil
}

func (c *canonicalizer) array(i, depth int) (int, error) {
	raw := c.raw
	c.buf = append(c.buf, '[')
	i = skipWSAt(raw, i)
	if i < len(raw) && raw[i] == ']' {
		c.buf = append(c.buf, ']')
		return i + 1, nil
	}
	for {
		var err error
		if i, err = c.value(i, depth+1); err != nil {
			return i, err
		}
		i = skipWSAt(raw, i)
		if i >= len(raw) {
			return i, errCanon
		}
		switch raw[i] {
		case ',':
			c.buf = append(c.buf, ',')
			i++
		case ']':
			c.buf = append(c.buf, ']')
			return i + 1, nil
		default:
			return i, errCanon
		}
	}
}

func (c *canonicalizer) object(i, depth int) (int, error) {
	raw := c.raw
	rec := len(c.recs)
	start := len(c.buf)
	if c.emit {
		c.recs = append(c.recs, objRec{start: start})
	}
	c.buf = append(c.buf, '{')
	i = skipWSAt(raw, i)
	if i < len(raw) && raw[i] == '}' {
		c.buf = append(c.buf, '}')
		c.recs = c.recs[:rec]
		return i + 1, nil
	}
	for len(c.frames) <= depth {
		c.frames = append(c.frames, nil)
	}
	ms := c.frames[depth][:0]
	track := c.track && depth <= 2
	sorted := true
	for {
		if i >= len(raw) || raw[i] != '"' {
			return i, errCanon
		}
		m := canonMember{span: span{start: len(c.buf), rec: len(c.recs)}}
		var err error
		q, n0 := i+1, len(c.names)
		if i, _, err = c.str(q, true); err != nil {
			return i, err
		}
		if len(raw) > math.MaxInt32 || len(c.names) > math.MaxInt32 {
			return i, errCanon // offsets are int32 (contexts are far smaller)
		}
		if len(c.names) > n0 {
			// An escape decodes to at least one byte: the name had some.
			m.n0, m.n1, m.escaped = int32(n0), int32(len(c.names)), true
		} else {
			m.n0, m.n1 = int32(q), int32(i-1)
		}
		i = skipWSAt(raw, i)
		if i >= len(raw) || raw[i] != ':' {
			return i, errCanon
		}
		c.buf = append(c.buf, ':')
		v0, viol0, s0 := skipWSAt(raw, i+1), c.viol, len(c.subs)
		b0, r0 := len(c.buf), len(c.recs)
		if j, ok := c.reuse(depth, v0); ok {
			i = j
		} else if i, err = c.value(v0, depth+1); err != nil {
			return i, err
		} else if depth == 1 && c.emit {
			c.memo = append(c.memo, memoValue{raw0: v0, raw1: i, buf0: b0, buf1: len(c.buf),
				rec0: r0, rec1: len(c.recs), s0: s0, s1: len(c.subs), viol: c.viol - viol0})
		}
		m.end = len(c.buf)
		if track {
			t := trackedMember{canonMember: m, raw0: v0, raw1: i, viol: c.viol != viol0}
			if depth == 1 {
				t.s0, t.s1 = s0, len(c.subs)
				c.top = append(c.top, t)
			} else {
				c.subs = append(c.subs, t)
			}
		}
		if n := len(ms); n > 0 && sorted {
			switch d := compareUTF16(c.name(&ms[n-1]), c.name(&m)); {
			case d == 0:
				return i, errCanon // duplicate name
			case d > 0:
				sorted = false
			}
		}
		ms = append(ms, m)
		i = skipWSAt(raw, i)
		if i >= len(raw) {
			return i, errCanon
		}
		if raw[i] == '}' {
			i++
			break
		}
		if raw[i] != ',' {
			return i, errCanon
		}
		c.buf = append(c.buf, ',')
		i = skipWSAt(raw, i+1)
	}
	if len(ms) >= len(c.frames[depth]) {
		// Keep the grown capacity, and the most members written at this
		// depth as the length (putCanonicalizer clears that much).
		c.frames[depth] = ms
	}
	c.buf = append(c.buf, '}')
	if !sorted {
		c.sortMembers(ms)
		for k := 1; k < len(ms); k++ {
			if compareUTF16(c.name(&ms[k-1]), c.name(&ms[k])) == 0 {
				return i, errCanon // duplicate name
			}
		}
	}
	switch {
	case !c.emit:
	case sorted && len(c.recs) == rec+1:
		c.recs = c.recs[:rec]
	case sorted:
		c.recs[rec] = objRec{start: start, end: len(c.buf), next: len(c.recs), sorted: true}
	default:
		p0 := len(c.perm)
		for _, m := range ms {
			c.perm = append(c.perm, m.span)
		}
		c.recs[rec] = objRec{start: start, end: len(c.buf), next: len(c.recs), p0: p0, p1: len(c.perm)}
	}
	return i, nil
}

// sortMembers sorts by name in UTF-16 order; most objects are small, where
// an insertion sort beats the generic sort's setup.
func (c *canonicalizer) sortMembers(ms []canonMember) {
	if len(ms) > 12 {
		slices.SortFunc(ms, func(a, b canonMember) int { return compareUTF16(c.name(&a), c.name(&b)) })
		return
	}
	for k := 1; k < len(ms); k++ {
		for j := k; j > 0 && compareUTF16(c.name(&ms[j-1]), c.name(&ms[j])) > 0; j-- {
			ms[j-1], ms[j] = ms[j], ms[j-1]
		}
	}
}

// compareUTF16 orders decoded names by UTF-16 code units (RFC 8785 §3.2.3).
// UTF-8 byte order is code point order, which differs from UTF-16 order
// only between U+E000..U+FFFF (lead bytes EE, EF) and supplementary
// characters (lead bytes F0..F4, surrogate pairs D800..DFFF in UTF-16).
// Equal prefixes put both names at the same character boundary, so the
// first differing bytes are both lead bytes or both continuation bytes.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	x, y := int(a[i]), int(b[i])
	if x >= 0xEE && y >= 0xEE && (x >= 0xF0) != (y >= 0xF0) {
		return y - x // a surrogate pair sorts below U+E000..U+FFFF
	}
	return x - y
}

// SWAR constants: a byte-wise "has zero byte" test over 8 bytes at once.
const (
	ones    = 0x0101010101010101
	highs   = 0x8080808080808080
	quotes  = 0x2222222222222222
	slashes = 0x5c5c5c5c5c5c5c5c
	spaces  = 0x2020202020202020
)

// specialByte returns the index of the first byte at or after i that is
// '"', '\\' or a control character, or len(b); and a word whose high bits
// are set if any byte skipped is non-ASCII (then UTF-8 validation is
// needed; a control found may also set them, and its caller fails anyway).
func specialByte(b []byte, i int) (int, uint64) {
	var seen uint64
	// Member names and short values end within a few words: SWAR them.
	for stop := min(i+32, len(b)); i+8 <= stop; i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if t := flagged(x); t != 0 {
			k := bits.TrailingZeros64(t) >> 3
			return i + k, seen | x&(1<<(8*k)-1)
		}
		seen |= x
	}
	// Long strings: the vectorised IndexByte finds the quote and the
	// backslash, and one branch-free pass looks for controls and high
	// bytes. The window doubles, so a string dense with escapes rescans
	// little and a long plain one is read in few calls.
	for w := 64; i < len(b); w *= 2 {
		seg := b[i:min(i+w, len(b))]
		n := len(seg)
		if q := bytes.IndexByte(seg, '"'); q >= 0 {
			n = q
		}
		if s := bytes.IndexByte(seg[:n], '\\'); s >= 0 {
			n = s
		}
		var ctl uint64
		p := seg[:n]
		for ; len(p) >= 32; p = p[32:] {
			x0 := binary.LittleEndian.Uint64(p)
			x1 := binary.LittleEndian.Uint64(p[8:])
			x2 := binary.LittleEndian.Uint64(p[16:])
			x3 := binary.LittleEndian.Uint64(p[24:])
			ctl |= (x0-spaces)&^x0 | (x1-spaces)&^x1 | (x2-spaces)&^x2 | (x3-spaces)&^x3
			seen |= x0 | x1 | x2 | x3
		}
		for ; len(p) >= 8; p = p[8:] {
			x := binary.LittleEndian.Uint64(p)
			ctl |= (x - spaces) &^ x
			seen |= x
		}
		for _, c := range p {
			if c < 0x20 {
				ctl = highs
			}
			seen |= uint64(c)
		}
		if ctl&highs != 0 {
			for k := 0; k < n; k++ {
				if seg[k] < 0x20 {
					return i + k, seen
				}
			}
		}
		if n < len(seg) {
			return i + n, seen
		}
		i += len(seg)
	}
	return i, seen
}

// flagged has the high bit set in the lowest byte of x that is '"', '\\'
// or a control character; borrows may flag bytes above it, which is
// harmless since only the lowest is used.
func flagged(x uint64) uint64 {
	q, s := x^quotes, x^slashes
	return (((q - ones) &^ q) | ((s - ones) &^ s) | ((x - spaces) &^ x)) & highs
}

// str canonicalizes the string whose body starts at raw[i] and returns the
// index past its closing quote. For a member name (key) it also returns
// the decoded name (a slice of raw when the name has no escapes).
func (c *canonicalizer) str(i int, key bool) (int, []byte, error) {
	raw := c.raw
	start := i
	i, seen := specialByte(raw, i)
	if i >= len(raw) || raw[i] < 0x20 {
		return i, nil, errCanon
	}
	if raw[i] == '"' {
		body := raw[start:i]
		if seen&highs != 0 && !utf8.Valid(body) {
			return i, nil, errCanon
		}
		if c.emit {
			c.buf = append(c.buf, '"')
			c.buf = append(c.buf, body...)
			c.buf = append(c.buf, '"')
		}
		return i + 1, body, nil
	}
	return c.escapedStr(start, i, seen, key)
}

// escapedStr is str's path for a body with escapes; raw[i] is the first
// backslash and seen covers raw[start:i].
func (c *canonicalizer) escapedStr(start, i int, seen uint64, key bool) (int, []byte, error) {
	raw := c.raw
	n0 := len(c.names)
	emit := c.emit
	if emit {
		c.buf = append(c.buf, '"')
	}
	seg := start
	for {
		// raw[seg:i] is escape-free; raw[i] is '"', '\\' or a control.
		if i >= len(raw) || raw[i] < 0x20 {
			return i, nil, errCanon
		}
		if seen&highs != 0 && !utf8.Valid(raw[seg:i]) {
			return i, nil, errCanon
		}
		if emit {
			c.buf = append(c.buf, raw[seg:i]...)
		}
		if key {
			c.names = append(c.names, raw[seg:i]...)
		}
		if raw[i] == '"' {
			if emit {
				c.buf = append(c.buf, '"')
			}
			var name []byte
			if key {
				name = c.names[n0:]
			}
			return i + 1, name, nil
		}
		if i+1 >= len(raw) {
			return i, nil, errCanon
		}
		var r rune
		switch e := raw[i+1]; e {
		case '"', '\\', '/':
			r = rune(e)
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			u, ok := unhex4(raw, i+2)
			if !ok {
				return i, nil, errCanon
			}
			switch {
			case u >= 0xDC00 && u <= 0xDFFF:
				return i, nil, errCanon // lone low surrogate
			case u >= 0xD800 && u <= 0xDBFF:
				if i+7 >= len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' {
					return i, nil, errCanon // lone high surrogate
				}
				lo, ok := unhex4(raw, i+8)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return i, nil, errCanon
				}
				u = (u-0xD800)<<10 | (lo - 0xDC00) + 0x10000
				i += 6
			}
			r = u
			i += 4
		default:
			return i, nil, errCanon
		}
		i += 2
		if emit {
			c.buf = appendJCSRune(c.buf, r)
		}
		if key {
			c.names = utf8.AppendRune(c.names, r)
		}
		seg = i
		i, seen = specialByte(raw, i)
	}
}

// unhex is the value of each hex digit byte, -1 for the others. It is a
// read-only table, filled once at init.
var unhex = func() (t [256]int8) {
	for k := range t {
		t[k] = -1
	}
	for k := 0; k < 10; k++ {
		t['0'+k] = int8(k)
	}
	for k := 0; k < 6; k++ {
		t['a'+k], t['A'+k] = int8(10+k), int8(10+k)
	}
	return t
}()

// unhex4 decodes the four hex digits at b[at:].
func unhex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	h0, h1, h2, h3 := unhex[b[at]], unhex[b[at+1]], unhex[b[at+2]], unhex[b[at+3]]
	if h0|h1|h2|h3 < 0 {
		return 0, false
	}
	return rune(h0)<<12 | rune(h1)<<8 | rune(h2)<<4 | rune(h3), true
}

// appendJCSRune writes r as RFC 8785 §3.2.2.2 does: the two-character
// escapes where JSON has one, \u00xx (lowercase) for other controls, and
// everything else as literal UTF-8.
func appendJCSRune(dst []byte, r rune) []byte {
	switch r {
	case '"', '\\':
		return append(dst, '\\', byte(r))
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		const hexDigits = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}

// number reads an RFC 8259 number at raw[i] and writes its ECMA-262 form.
func (c *canonicalizer) number(i int) (int, error) {
	raw := c.raw
	start := i
	if raw[i] == '-' {
		i++
	}
	digits := i
	switch {
	case i < len(raw) && raw[i] == '0':
		i++
	case i < len(raw) && raw[i] >= '1' && raw[i] <= '9':
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
	default:
		return i, errCanon
	}
	intEnd := i
	integer, exp := true, false
	if i < len(raw) && raw[i] == '.' {
		integer = false
		i++
		n := i
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
		if i == n {
			return i, errCanon
		}
	}
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		integer, exp = false, true
		i++
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		n := i
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
		if i == n {
			return i, errCanon
		}
	}
	tok := raw[start:i]
	if integer {
		d := raw[digits:intEnd]
		if len(d) > len(maxSafeInteger) || len(d) == len(maxSafeInteger) && string(d) > maxSafeInteger {
			switch c.ints {
			case intReject:
				return i, errCanon
			case intCount:
				c.viol++
			}
		}
		// |n| <= 2^53 is exact and prints as its own digits.
		if len(d) < len(maxSafeInteger) || len(d) == len(maxSafeInteger) && string(d) <= "9007199254740992" {
			switch {
			case !c.emit:
			case len(d) == 1 && d[0] == '0':
				c.buf = append(c.buf, '0') // -0 → 0
			default:
				c.buf = append(c.buf, tok...)
			}
			return i, nil
		}
	}
	if !c.emit && !exp && intEnd-digits <= 300 {
		return i, nil // cannot overflow; nothing to format
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil || math.IsInf(f, 0) {
		return i, errCanon // only ±Inf (overflow) fails; the grammar is checked
	}
	if c.emit {
		c.buf = appendES(c.buf, f)
	}
	return i, nil
}

// appendES appends ECMA-262 Number::toString(f) for a finite f (RFC 8785
// §3.2.2.3): the shortest round-trip digits, in fixed notation for
// 1e-6 <= |f| < 1e21 and as d.ddde±x otherwise; -0 is 0.
func appendES(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	var tmp [32]byte
	s := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64) // d[.ddd]e±xx
	e := len(s) - 1
	for s[e] != 'e' {
		e--
	}
	x := 0
	for _, d := range s[e+2:] {
		x = x*10 + int(d-'0')
	}
	if s[e+1] == '-' {
		x = -x
	}
	// The k significant digits are s[0] then s[2:e] when there is a point.
	var dig [24]byte
	digits := append(dig[:0], s[0])
	if e > 1 {
		digits = append(digits, s[2:e]...)
	}
	k, n := len(digits), x+1 // value = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for ; k < n; k++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for ; n < 0; n++ {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

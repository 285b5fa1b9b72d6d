package points

import (
	"bytes"
	"strconv"
	"strings"
)

// Roots of a §5.2 transform path. PolicyTargetRoot is the deprecated ACS
// v0.3.x alias, treated as TargetRoot and removed in agent-hooks v0.3.
const (
	TargetRoot       = "$target"
	PolicyTargetRoot = "$policy_target"
)

// TransformError reports a transform that cannot be applied. Reason is
// ReasonTransformTargetForbidden for a path rooted elsewhere than $target,
// ReasonTransformInvalid for a path that does not parse under the root, does
// not resolve, or mismatches the target's shape, and for a value that is not
// valid JSON; ApplyTransform uses ReasonContextInvalid when the target
// itself is not valid JSON (a host fault, as in the reference ffi). Detail is
// value-free: it names the failure, never the path text or any JSON.
type TransformError struct {
	Reason Reason
	Detail string
}

// Error renders "reason: detail".
func (e *TransformError) Error() string {
	if e.Detail == "" {
		return e.Reason
	}
	return e.Reason + ": " + e.Detail
}

func transformInvalid(detail string) *TransformError {
	return &TransformError{Reason: ReasonTransformInvalid, Detail: detail}
}

// PathSegment is one step of a TargetPath: a member name or an array index.
type PathSegment struct {
	Member  string // when !IsIndex
	Index   int    // when IsIndex
	IsIndex bool
}

// TargetPath is a parsed §5.2 path (spec/schema/path-grammar.abnf): a root
// followed by dot-members (.name), bracket-indexes ([0]) and bracket-members
// (["name"]), names being 1*(ALPHA / DIGIT / "_" / "-"). The zero value is
// the bare $target.
type TargetPath struct {
	alias bool
	segs  []PathSegment
}

// ParseTargetPath parses s. A path not starting with $target or
// $policy_target is ReasonTransformTargetForbidden; anything else that does
// not match the grammar after the root is ReasonTransformInvalid, including
// near-miss roots such as "$targets.x" or "$target_x", as in the reference
// core's path.rs. One deliberate difference: path.rs accepts an empty
// bracket-member [""], which the ABNF (member-name = 1*...) forbids; it is
// rejected here. Indexes may carry leading zeros ([007] is index 7), as the
// grammar's 1*DIGIT allows; one that overflows int is invalid.
func ParseTargetPath(s string) (TargetPath, error) {
	var p TargetPath
	var rest string
	switch {
	case strings.HasPrefix(s, TargetRoot):
		rest = s[len(TargetRoot):]
	case strings.HasPrefix(s, PolicyTargetRoot):
		rest, p.alias = s[len(PolicyTargetRoot):], true
	default:
		return TargetPath{}, &TransformError{Reason: ReasonTransformTargetForbidden, Detail: "path is not rooted at $target"}
	}
	bad := func() (TargetPath, error) {
		return TargetPath{}, transformInvalid("path does not match the §5.2 grammar")
	}
	for i := 0; i < len(rest); {
		switch rest[i] {
		case '.':
			i++
			start := i
			for i < len(rest) && isMemberChar(rest[i]) {
				i++
			}
			if i == start {
				return bad()
			}
			p.segs = append(p.segs, PathSegment{Member: rest[start:i]})
		case '[':
			i++
			if i < len(rest) && rest[i] == '"' {
				i++
				start := i
				for i < len(rest) && isMemberChar(rest[i]) {
					i++
				}
				if i == start || i+1 >= len(rest) || rest[i] != '"' || rest[i+1] != ']' {
					return bad()
				}
				p.segs = append(p.segs, PathSegment{Member: rest[start:i]})
				i += 2
				continue
			}
			start := i
			n := 0
			for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
				d := int(rest[i] - '0')
				if n > (maxInt-d)/10 {
					return bad()
				}
				n = n*10 + d
				i++
			}
			if i == start || i >= len(rest) || rest[i] != ']' {
				return bad()
			}
			p.segs = append(p.segs, PathSegment{Index: n, IsIndex: true})
			i++
		default:
			return bad()
		}
	}
	return p, nil
}

const maxInt = int(^uint(0) >> 1)

// isMemberChar reports whether c may appear in a member name (ALPHA / DIGIT
// / "_" / "-").
func isMemberChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// String returns the canonical text: the root as written, every member as
// .name and every index without leading zeros. It parses back to an equal
// TargetPath.
func (p TargetPath) String() string {
	var b strings.Builder
	if p.alias {
		b.WriteString(PolicyTargetRoot)
	} else {
		b.WriteString(TargetRoot)
	}
	for _, s := range p.segs {
		if s.IsIndex {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.Index))
			b.WriteByte(']')
		} else {
			b.WriteByte('.')
			b.WriteString(s.Member)
		}
	}
	return b.String()
}

// Deprecated reports whether the path uses the $policy_target alias, which
// hosts accept but should warn about.
func (p TargetPath) Deprecated() bool { return p.alias }

// IsRoot reports whether the path is the bare root, which replaces the whole
// target.
func (p TargetPath) IsRoot() bool { return len(p.segs) == 0 }

// Segments returns a copy of the path's segments.
func (p TargetPath) Segments() []PathSegment { return append([]PathSegment(nil), p.segs...) }

// ApplyTransform parses path and applies it to target; see TargetPath.Apply.
func ApplyTransform(target []byte, path string, value []byte) ([]byte, error) {
	p, err := ParseTargetPath(path)
	if err != nil {
		return nil, err
	}
	return p.Apply(target, value)
}

// Apply returns a new target with the location p addresses replaced by
// value (§5.2, path.rs apply): the bare root replaces the whole target;
// otherwise every segment but the last must resolve (a member on an object,
// an index on an array), and the last must address an existing member or an
// in-range index, so a transform replaces and never adds. A digit-only
// member name (.0 or ["0"]) addresses an object member, never an array
// element, and an index never addresses an object. A nil or empty value
// means JSON null. value must be one valid JSON value in the encoding
// domain (CheckEncoding, depth unbounded here); the integer bound is left to
// the identity provider, which sees the folded context. target and value
// are not modified; the result is a new slice with target's bytes outside
// the replaced span kept verbatim.
func (p TargetPath) Apply(target, value []byte) ([]byte, error) {
	if len(value) == 0 {
		value = []byte("null")
	} else if err := scanValue(value, 0, false); err != nil {
		return nil, transformInvalid("value is not valid JSON")
	}
	value = trimWS(value)
	if len(p.segs) == 0 {
		return bytes.Clone(value), nil
	}
	start, end, err := p.locate(target)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(target)-(end-start)+len(value))
	out = append(out, target[:start]...)
	out = append(out, value...)
	return append(out, target[end:]...), nil
}

// Resolve returns a copy of the raw JSON p addresses within target.
func (p TargetPath) Resolve(target []byte) ([]byte, error) {
	if len(p.segs) == 0 {
		if err := scanValue(target, 0, false); err != nil {
			return nil, &TransformError{Reason: ReasonContextInvalid, Detail: "target is not valid JSON"}
		}
		return bytes.Clone(trimWS(target)), nil
	}
	start, end, err := p.locate(target)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(target[start:end]), nil
}

// locate validates target and returns the byte span of the value p
// addresses. It needs at least one segment.
func (p TargetPath) locate(target []byte) (start, end int, err error) {
	if err := scanValue(target, 0, false); err != nil {
		return 0, 0, &TransformError{Reason: ReasonContextInvalid, Detail: "target is not valid JSON"}
	}
	start = skipWSAt(target, 0)
	end = skipValue(target, start)
	for _, seg := range p.segs {
		var ok bool
		if seg.IsIndex {
			start, end, ok = element(target, start, seg.Index)
		} else {
			start, end, ok = member(target, start, seg.Member)
		}
		if !ok {
			return 0, 0, transformInvalid("path does not resolve against the target")
		}
	}
	return start, end, nil
}

// member finds name in the object at b[at]; false when b[at] is not an
// object or has no such member. CheckEncoding has ruled out duplicates.
func member(b []byte, at int, name string) (start, end int, ok bool) {
	if b[at] != '{' {
		return 0, 0, false
	}
	i := skipWSAt(b, at+1)
	for b[i] != '}' {
		if b[i] == ',' {
			i = skipWSAt(b, i+1)
		}
		kend := skipString(b, i)
		k, _ := jsonString(b[i:kend])
		i = skipWSAt(b, skipWSAt(b, kend)+1) // past ':'
		vend := skipValue(b, i)
		if k == name {
			return i, vend, true
		}
		i = skipWSAt(b, vend)
	}
	return 0, 0, false
}

// element finds index idx in the array at b[at]; false when b[at] is not an
// array or idx is out of range.
func element(b []byte, at, idx int) (start, end int, ok bool) {
	if b[at] != '[' {
		return 0, 0, false
	}
	i := skipWSAt(b, at+1)
	for n := 0; b[i] != ']'; n++ {
		if b[i] == ',' {
			i = skipWSAt(b, i+1)
		}
		vend := skipValue(b, i)
		if n == idx {
			return i, vend, true
		}
		i = skipWSAt(b, vend)
	}
	return 0, 0, false
}

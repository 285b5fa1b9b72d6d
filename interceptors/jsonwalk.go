package interceptors

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// isMemberChar is the §5.2 member-name alphabet (ALPHA / DIGIT / "_" / "-").
func isMemberChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// seg is one step into a JSON document: an object member or an array index.
type seg struct {
	key   string
	index int
	isIdx bool
}

// ctkPath is a CTK match path ("tool_call.args.url", "messages[0].content"):
// "." separates members, "[n]" indexes arrays, empty segments are skipped
// and "" is the root, as in the CTK reference engine.
type ctkPath []seg

func parseCTKPath(s string) (ctkPath, bool) {
	var out ctkPath
	start := 0
	for i := 0; i <= len(s); i++ {
		ch := byte('.')
		if i < len(s) {
			ch = s[i]
		}
		switch ch {
		case '.':
			if i > start {
				out = append(out, seg{key: s[start:i]})
			}
			start = i + 1
		case '[':
			if i > start {
				out = append(out, seg{key: s[start:i]})
			}
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return nil, false
			}
			end += i
			n, err := strconv.ParseUint(s[i+1:end], 10, 31)
			if err != nil {
				return nil, false
			}
			out = append(out, seg{index: int(n), isIdx: true})
			i = end
			start = end + 1
		case ']':
			return nil, false
		}
	}
	return out, true
}

// lookup resolves p in doc. A key never indexes an array and an index never
// reads an object; with duplicate keys the last wins.
func (p ctkPath) lookup(doc gjson.Result) (gjson.Result, bool) {
	cur := doc
	for _, s := range p {
		var next gjson.Result
		found := false
		if s.isIdx {
			if !cur.IsArray() {
				return gjson.Result{}, false
			}
			n := 0
			cur.ForEach(func(_, v gjson.Result) bool {
				if n == s.index {
					next, found = v, true
					return false
				}
				n++
				return true
			})
		} else {
			if !cur.IsObject() {
				return gjson.Result{}, false
			}
			cur.ForEach(func(k, v gjson.Result) bool {
				if k.Str == s.key {
					next, found = v, true
				}
				return true
			})
		}
		if !found {
			return gjson.Result{}, false
		}
		cur = next
	}
	return cur, true
}

// decodeJSON decodes raw with numbers kept exact, for value comparison.
func decodeJSON(raw string) (any, bool) {
	d := json.NewDecoder(strings.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// jsonValueEqual compares two decoded JSON values; numbers compare by value
// (1 equals 1.0), objects ignore member order.
func jsonValueEqual(a, b any) bool { return points.JSONValueEqual(a, b) }

// stringVisit is one string value found by walkStrings: its decoded value,
// its path from the walk root and its byte span in the walked document.
type stringVisit struct {
	path       []seg
	value      string
	start, end int
}

// cancelCheckEvery is how many strings walkStringsCtx visits between checks
// of the call's context.
const cancelCheckEvery = 64

// walkStringsCtx is walkStrings that also stops, with the context's error,
// when ctx ends (checked every cancelCheckEvery strings).
func walkStringsCtx(ctx context.Context, doc []byte, fn func(v stringVisit) bool) error {
	var err error
	n := 0
	walkStrings(doc, func(v stringVisit) bool {
		if n++; n%cancelCheckEvery == 0 {
			if err = ctxErr(ctx); err != nil {
				return false
			}
		}
		return fn(v)
	})
	return err
}

// walkStrings calls fn for every string value in doc (object keys
// excluded), depth first in document order, with absolute byte offsets into
// doc. doc must be valid JSON without leading whitespace. fn returns false
// to stop the walk; walkStrings then returns false.
func walkStrings(doc []byte, fn func(v stringVisit) bool) bool {
	// A view, not ParseBytes's copy of the whole document: visited values
	// are read during the walk and never kept.
	root := gjson.Parse(bytesView(doc))
	return walkResult(root, 0, nil, fn)
}

func walkResult(r gjson.Result, base int, path []seg, fn func(v stringVisit) bool) bool {
	switch {
	case r.Type == gjson.String:
		return fn(stringVisit{path: path, value: r.Str, start: base, end: base + len(r.Raw)})
	case r.IsObject() || r.IsArray():
		ok := true
		i := 0
		isArr := r.IsArray()
		r.ForEach(func(k, v gjson.Result) bool {
			// Children report offsets relative to r's own Index, which is 0 for
			// the root we parse; base carries the absolute position.
			childBase := base + (v.Index - r.Index)
			s := seg{key: k.Str}
			if isArr {
				s = seg{index: i, isIdx: true}
			}
			i++
			p := append(path[:len(path):len(path)], s)
			ok = walkResult(v, childBase, p, fn)
			return ok
		})
		return ok
	}
	return true
}

// targetPathString renders segs as a §5.2 path. Only the first n segments
// that the grammar can express are used; n is returned.
func targetPathString(segs []seg) (string, int) {
	var b strings.Builder
	b.WriteString("$target")
	n := 0
	for _, s := range segs {
		if s.isIdx {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		} else {
			if s.key == "" {
				break
			}
			plain := true
			for i := 0; i < len(s.key); i++ {
				if !isMemberChar(s.key[i]) {
					plain = false
					break
				}
			}
			if !plain {
				break
			}
			b.WriteByte('.')
			b.WriteString(s.key)
		}
		n++
	}
	return b.String(), n
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b []seg) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// encodeString renders s as a JSON string without HTML escaping, so that a
// masked string keeps its readable characters.
func encodeString(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// splice is one replacement of doc[start:end].
type splice struct {
	start, end int
	repl       []byte
}

// applySplices returns doc with the non-overlapping, ordered splices applied.
func applySplices(doc []byte, ss []splice) []byte {
	size := len(doc)
	for _, s := range ss {
		size += len(s.repl) - (s.end - s.start)
	}
	out := make([]byte, 0, size)
	at := 0
	for _, s := range ss {
		out = append(out, doc[at:s.start]...)
		out = append(out, s.repl...)
		at = s.end
	}
	return append(out, doc[at:]...)
}

// bytesView is b as a string without a copy, for gjson reads of a context
// (the budget, rules, content packs); b must not change while the string
// or anything read from it is in use.
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

package ctk

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Lookup resolves a CTK dotted/bracket path ("a.b[0].c") against a JSON
// document, as the reference engine does: "." separates object keys,
// "[n]" indexes an array, empty segments are skipped, and the empty path
// is the root. A key never indexes an array and an index never reads an
// object. It reports whether the path resolved; a member holding null
// resolves.
func Lookup(doc []byte, dotted string) (gjson.Result, bool) {
	if !gjson.ValidBytes(doc) {
		return gjson.Result{}, false
	}
	cur := gjson.ParseBytes(doc)
	start := 0
	for i := 0; i <= len(dotted); i++ {
		ch := byte('.')
		if i < len(dotted) {
			ch = dotted[i]
		}
		switch ch {
		case '.':
			if i > start {
				var ok bool
				if cur, ok = member(cur, dotted[start:i]); !ok {
					return gjson.Result{}, false
				}
			}
			start = i + 1
		case '[':
			if i > start {
				var ok bool
				if cur, ok = member(cur, dotted[start:i]); !ok {
					return gjson.Result{}, false
				}
			}
			end := strings.IndexByte(dotted[i:], ']')
			if end < 0 {
				return gjson.Result{}, false
			}
			end += i
			idx, err := strconv.ParseUint(dotted[i+1:end], 10, 63)
			if err != nil {
				return gjson.Result{}, false
			}
			var ok bool
			if cur, ok = element(cur, int(idx)); !ok {
				return gjson.Result{}, false
			}
			i = end
			start = end + 1
		}
	}
	return cur, true
}

// member returns the value of key in an object; with duplicate keys the
// last wins, as in the common JSON decoders.
func member(obj gjson.Result, key string) (gjson.Result, bool) {
	if !obj.IsObject() {
		return gjson.Result{}, false
	}
	var out gjson.Result
	found := false
	obj.ForEach(func(k, v gjson.Result) bool {
		if k.Str == key {
			out, found = v, true
		}
		return true
	})
	return out, found
}

func element(arr gjson.Result, idx int) (gjson.Result, bool) {
	if !arr.IsArray() {
		return gjson.Result{}, false
	}
	var out gjson.Result
	found := false
	n := 0
	arr.ForEach(func(_, v gjson.Result) bool {
		if n == idx {
			out, found = v, true
			return false
		}
		n++
		return true
	})
	return out, found
}

// JSONEqual reports whether two JSON texts are the same value: objects
// compare by member set, arrays element-wise, strings after unescaping and
// numbers by exact decimal value (1, 1.0 and 1e0 are equal, as they are
// under RFC 8785), so no literal is ever rounded through a float64.
// Invalid JSON equals nothing.
func JSONEqual(a, b []byte) bool {
	if !gjson.ValidBytes(a) || !gjson.ValidBytes(b) {
		return false
	}
	return valueEqual(gjson.ParseBytes(a), gjson.ParseBytes(b))
}

func valueEqual(a, b gjson.Result) bool {
	switch {
	case a.IsObject():
		if !b.IsObject() {
			return false
		}
		am, bm := objectMap(a), objectMap(b)
		if len(am) != len(bm) {
			return false
		}
		for k, av := range am {
			bv, ok := bm[k]
			if !ok || !valueEqual(av, bv) {
				return false
			}
		}
		return true
	case a.IsArray():
		if !b.IsArray() {
			return false
		}
		aa, ba := a.Array(), b.Array()
		if len(aa) != len(ba) {
			return false
		}
		for i := range aa {
			if !valueEqual(aa[i], ba[i]) {
				return false
			}
		}
		return true
	}
	if a.Type != b.Type {
		return false
	}
	switch a.Type {
	case gjson.String:
		return a.Str == b.Str
	case gjson.Number:
		return numberEqual(a.Raw, b.Raw)
	}
	return true // null, true, false: same Type is same value
}

func objectMap(obj gjson.Result) map[string]gjson.Result {
	m := map[string]gjson.Result{}
	obj.ForEach(func(k, v gjson.Result) bool {
		m[k.Str] = v
		return true
	})
	return m
}

func numberEqual(a, b string) bool {
	if a == b {
		return true
	}
	// A huge exponent would make big.Rat allocate 10^exp; such literals
	// only compare textually.
	if hugeExponent(a) || hugeExponent(b) {
		return false
	}
	ra, ok1 := new(big.Rat).SetString(a)
	rb, ok2 := new(big.Rat).SetString(b)
	return ok1 && ok2 && ra.Cmp(rb) == 0
}

func hugeExponent(num string) bool {
	i := strings.IndexAny(num, "eE")
	if i < 0 {
		return false
	}
	e, err := strconv.ParseInt(strings.TrimPrefix(num[i+1:], "+"), 10, 32)
	return err != nil || e > 4096 || e < -4096
}

// normalizeJSON re-serializes a JSON text compactly with strings encoded
// minimally (no HTML or \u escapes beyond what JSON requires), so that a
// substring needle matches content in whatever escaping the host chose.
func normalizeJSON(doc []byte) []byte {
	if !gjson.ValidBytes(doc) {
		return doc
	}
	var buf bytes.Buffer
	writeNormalized(&buf, gjson.ParseBytes(doc))
	return buf.Bytes()
}

func writeNormalized(buf *bytes.Buffer, v gjson.Result) {
	switch {
	case v.IsObject():
		buf.WriteByte('{')
		first := true
		v.ForEach(func(k, val gjson.Result) bool {
			if !first {
				buf.WriteByte(',')
			}
			first = false
			writeString(buf, k.Str)
			buf.WriteByte(':')
			writeNormalized(buf, val)
			return true
		})
		buf.WriteByte('}')
	case v.IsArray():
		buf.WriteByte('[')
		first := true
		v.ForEach(func(_, val gjson.Result) bool {
			if !first {
				buf.WriteByte(',')
			}
			first = false
			writeNormalized(buf, val)
			return true
		})
		buf.WriteByte(']')
	case v.Type == gjson.String:
		writeString(buf, v.Str)
	default:
		buf.WriteString(strings.TrimSpace(v.Raw))
	}
}

func writeString(buf *bytes.Buffer, s string) {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a Go string always encodes
	buf.Write(bytes.TrimRight(tmp.Bytes(), "\n"))
}

// compactJSON is raw with insignificant whitespace removed, for messages.
func compactJSON(raw []byte) string {
	if raw == nil {
		return "null"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

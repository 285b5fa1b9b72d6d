package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// jkind is the JSON type of a jval.
type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNum
	jStr
	jArr
	jObj
)

// jval is a parsed JSON value that keeps object member order and number
// literals verbatim, so nothing the document wrote is reinterpreted before
// the loader has judged it.
type jval struct {
	k   jkind
	b   bool
	s   string // string value, or the number literal
	arr []*jval
	obj []jmember
}

type jmember struct {
	key string
	val *jval
}

// get returns the member named key, or nil.
func (v *jval) get(key string) *jval {
	if v == nil || v.k != jObj {
		return nil
	}
	for _, m := range v.obj {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// object returns v when it is an object, else nil.
func (v *jval) object() *jval {
	if v != nil && v.k == jObj {
		return v
	}
	return nil
}

// str returns the string value and whether v is a string.
func (v *jval) str() (string, bool) {
	if v != nil && v.k == jStr {
		return v.s, true
	}
	return "", false
}

// strs returns the string items of an array, skipping anything else.
func (v *jval) strs() ([]string, bool) {
	if v == nil || v.k != jArr {
		return nil, false
	}
	out := make([]string, 0, len(v.arr))
	for _, it := range v.arr {
		if it.k == jStr {
			out = append(out, it.s)
		}
	}
	return out, true
}

// uintLiteral reports whether the number literal is a plain non-negative
// integer (no fraction, exponent or sign) and its value when it fits.
func uintLiteral(lit string) (uint64, bool) {
	if lit == "" {
		return 0, false
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] < '0' || lit[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(lit, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Bounds of the checked parse (§7.7.6).
const (
	maxDocumentBytes = 1 << 20
	maxDepth         = 32
)

// parseErr is a step-2 failure detail.
type parseErr struct{ detail string }

func (e *parseErr) Error() string { return e.detail }

// parseChecked parses one JSON text under the declaration bounds: at most
// 1 MiB, one value with nothing after it, no duplicate keys, nesting at most
// 32 levels (the root is level 1), finite numbers, paired surrogates.
func parseChecked(doc []byte) (*jval, error) {
	if len(doc) > maxDocumentBytes {
		return nil, &parseErr{fmt.Sprintf("document is %d bytes; the bound is %d", len(doc), maxDocumentBytes)}
	}
	if err := checkSurrogates(doc); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &parseErr{"not a valid JSON document: unexpected end of input"}
		}
		var pe *parseErr
		if errors.As(err, &pe) {
			return nil, pe
		}
		return nil, &parseErr{"not a valid JSON document: " + err.Error()}
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return nil, &parseErr{"trailing content after the document: " + err.Error()}
		}
		return nil, &parseErr{fmt.Sprintf("trailing content after the document: %v", tok)}
	}
	return v, nil
}

func parseValue(dec *json.Decoder, depth int) (*jval, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	return fromToken(dec, tok, depth)
}

func fromToken(dec *json.Decoder, tok json.Token, depth int) (*jval, error) {
	switch t := tok.(type) {
	case nil:
		return &jval{k: jNull}, nil
	case bool:
		return &jval{k: jBool, b: t}, nil
	case string:
		return &jval{k: jStr, s: t}, nil
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, &parseErr{fmt.Sprintf("invalid number %s", t)}
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, &parseErr{fmt.Sprintf("number %s is not finite", truncate(string(t), 40))}
		}
		return &jval{k: jNum, s: string(t)}, nil
	case json.Delim:
		if depth+1 > maxDepth {
			return nil, &parseErr{fmt.Sprintf("nesting deeper than %d", maxDepth)}
		}
		switch t {
		case '[':
			v := &jval{k: jArr}
			for dec.More() {
				item, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.arr = append(v.arr, item)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, err
			}
			return v, nil
		case '{':
			v := &jval{k: jObj}
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, &parseErr{"object key is not a string"}
				}
				if seen[key] {
					return nil, &parseErr{fmt.Sprintf("duplicate key %q", truncate(key, 64))}
				}
				seen[key] = true
				val, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.obj = append(v.obj, jmember{key, val})
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, err
			}
			return v, nil
		}
	}
	return nil, &parseErr{fmt.Sprintf("unexpected token %v", tok)}
}

// checkSurrogates refuses \u escapes that name a lone UTF-16 surrogate, which
// encoding/json would silently turn into U+FFFD.
func checkSurrogates(doc []byte) error {
	inStr := false
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		if !inStr {
			if c == '"' {
				inStr = true
			}
			continue
		}
		switch c {
		case '"':
			inStr = false
		case '\\':
			if i+1 >= len(doc) {
				return nil // the decoder reports the truncation
			}
			if doc[i+1] != 'u' {
				i++
				continue
			}
			r, ok := hex4(doc, i+2)
			if !ok {
				return nil
			}
			switch {
			case r >= 0xD800 && r <= 0xDBFF:
				if i+12 <= len(doc) && doc[i+6] == '\\' && doc[i+7] == 'u' {
					if lo, ok := hex4(doc, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
						i += 11
						continue
					}
				}
				return &parseErr{"string holds a lone UTF-16 surrogate escape"}
			case r >= 0xDC00 && r <= 0xDFFF:
				return &parseErr{"string holds a lone UTF-16 surrogate escape"}
			}
			i += 5
		}
	}
	return nil
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(n), true
}

// appendJSON writes v as compact JSON.
func appendJSON(dst []byte, v *jval) []byte {
	switch v.k {
	case jNull:
		return append(dst, "null"...)
	case jBool:
		if v.b {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case jNum:
		return append(dst, v.s...)
	case jStr:
		return appendJSONString(dst, v.s)
	case jArr:
		dst = append(dst, '[')
		for i, it := range v.arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSON(dst, it)
		}
		return append(dst, ']')
	case jObj:
		dst = append(dst, '{')
		for i, m := range v.obj {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, m.key)
			dst = append(dst, ':')
			dst = appendJSON(dst, m.val)
		}
		return append(dst, '}')
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string without HTML escaping; invalid
// UTF-8 becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// ptr appends an RFC 6901 segment to a JSON pointer.
func ptr(parent, key string) string {
	key = strings.ReplaceAll(key, "~", "~0")
	key = strings.ReplaceAll(key, "/", "~1")
	return parent + "/" + key
}

// truncate bounds a detail string to n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

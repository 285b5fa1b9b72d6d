package points

import (
	"strconv"
	"strings"
)

// MinimalEscapes rewrites, inside the JSON strings of s (which need not be
// valid JSON), the escapes that stand for a character that needs none:
// \/ and \uXXXX of a printable character other than a quote or backslash.
// Patterns then see the text a decoder reads. Control characters, quotes,
// backslashes and surrogates keep their escapes, so valid JSON stays valid
// and means the same. Content policies scan text that holds JSON (a tool
// result in a request, arguments) in this form, so an escaped secret
// (https:\/\/..., \u0040) is seen as a decoder reads it.
func MinimalEscapes(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			in = !in
		case c == '\\' && in && i+1 < len(s):
			switch s[i+1] {
			case '/':
				b.WriteByte('/')
				i++
				continue
			case 'u':
				if i+6 <= len(s) {
					if r, err := strconv.ParseUint(s[i+2:i+6], 16, 32); err == nil && r >= 0x20 && r != '"' && r != '\\' && (r < 0xd800 || r > 0xdfff) && r != 0x7f {
						b.WriteRune(rune(r))
						i += 5
						continue
					}
				}
			}
			b.WriteByte(c)
			b.WriteByte(s[i+1])
			i++
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

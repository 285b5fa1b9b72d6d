package interceptors

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzFoldText: the folded reading has no format characters or fullwidth
// ASCII left, its offset map is increasing and ends at len(s), and every
// ASCII byte it kept is the byte of s it maps to.
func FuzzFoldText(f *testing.F) {
	for _, s := range []string{"", "plain", "4111\u200b1111", "\uff53\uff4b-x", "a\u3000b", "caf\u00e9", "\xff\xfe", "s\u00adecret\ufeff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, orig, ok := foldText(s)
		if !ok {
			return
		}
		if len(orig) != len(out)+1 || orig[len(out)] != len(s) {
			t.Fatalf("foldText(%q): %d offsets for %d bytes, last %d", s, len(orig), len(out), orig[len(orig)-1])
		}
		for i := 1; i < len(orig); i++ {
			if orig[i] <= orig[i-1] && !(i == len(orig)-1 && orig[i] == orig[i-1]) {
				t.Fatalf("foldText(%q): offsets not increasing at %d: %v", s, i, orig)
			}
		}
		for i := 0; i < len(out); i++ {
			if c := out[i]; c < utf8.RuneSelf && s[orig[i]] < utf8.RuneSelf && s[orig[i]] != c {
				t.Fatalf("foldText(%q): byte %d %q maps to %q", s, i, c, s[orig[i]])
			}
		}
		if strings.ContainsRune(out, '\u200b') || strings.ContainsRune(out, '\uff53') {
			t.Fatalf("foldText(%q) = %q keeps what it folds", s, out)
		}
	})
}

package interceptors

import (
	"strings"
	"testing"
)

// The prefilters' fast forms against their byte-by-byte definitions.

func maxDigitRunRef(s string) int {
	best, run, gap := 0, 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c):
			run++
			gap = 0
			best = max(best, run)
		case (c == ' ' || c == '.' || c == '-' || c == '(' || c == ')' || c == '/' || c == '+') && gap < 2:
			gap++
		case c >= 0x80 && gap < 3:
			gap++ // a no-break space or a Unicode dash between groups
		default:
			run, gap = 0, 0
		}
	}
	return best
}

func hasIBANStartRef(s string) bool {
	for i := 0; i+3 < len(s); i++ {
		if isUpper(s[i]) && isUpper(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) {
			return true
		}
	}
	return false
}

func checkPrefilters(t *testing.T, s string) {
	t.Helper()
	if got, want := maxDigitRun(s), maxDigitRunRef(s); got != want {
		t.Fatalf("maxDigitRun(%q) = %d, want %d", s, got, want)
	}
	if got, want := hasIBANStart(newText(s)), hasIBANStartRef(s); got != want {
		t.Fatalf("hasIBANStart(%q) = %v, want %v", s, got, want)
	}
	for _, sub := range []string{"aws", "secret"} {
		if got, want := newLiteral(sub).inFold(s), containsFold(s, sub); got != want {
			t.Fatalf("inFold(%q, %q) = %v, want %v", s, sub, got, want)
		}
	}
	for i := 0; i <= len(s); i++ {
		want := len(s)
		if k := strings.IndexAny(s[i:], "0123456789"); k >= 0 {
			want = i + k
		}
		if got := nextDigit(s, i); got != want {
			t.Fatalf("nextDigit(%q, %d) = %d, want %d", s, i, got, want)
		}
	}
}

var prefilterSeeds = []string{"", "a", "0", "DE89 3704 0044 0532 0130 00", "call +44 20 7946 0958 now", "AWS secret: x",
	"aWs SeCrEt", "\xff9\x80\xb9/:09", "1234-5678-9012-3456", "no digits at all in this fairly long sentence here", "AB1", "xAB12", "é9AB12Z"}

func TestPrefilters(t *testing.T) {
	for _, s := range prefilterSeeds {
		checkPrefilters(t, s)
	}
}

func FuzzPrefilters(f *testing.F) {
	for _, s := range prefilterSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkPrefilters(t, s) })
}

// containsFold (the reference for literal.inFold) reports whether s contains the lower-case ASCII word sub,
// ignoring ASCII case, without allocating.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for ; j < len(sub); j++ {
			c := s[i+j]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				break
			}
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}

func TestLiteral(t *testing.T) {
	for _, lit := range []string{"sk-", "sk-ant-", "ghp_", "xox", "AKIA", "eyJ", "@", "PRIVATE KEY", "github_pat_"} {
		l := newLiteral(lit)
		for _, s := range []string{"", lit, "x" + lit, lit + "y", "sk", "s-k-", "xsk-ant", "ghp", "ghp__", "xoxo", "AKIAA", "ey", "PRIVATE KEYS", "a@b", "github_pat", "sk-sk-ant-"} {
			if got, want := l.in(s), strings.Contains(s, lit); got != want {
				t.Errorf("literal %q in %q = %v, want %v", lit, s, got, want)
			}
		}
	}
}

func FuzzLiteral(f *testing.F) {
	f.Add("sk-", "the sk-ant- key")
	f.Fuzz(func(t *testing.T, lit, s string) {
		if lit == "" {
			return
		}
		if got, want := newLiteral(lit).in(s), strings.Contains(s, lit); got != want {
			t.Fatalf("literal %q in %q = %v, want %v", lit, s, got, want)
		}
	})
}

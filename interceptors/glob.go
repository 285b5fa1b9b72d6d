package interceptors

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"
)

// glob is a name pattern in path.Match syntax ("*", "?", "[a-z]", "[^x]",
// "\\" escapes), except that "*" also matches "/": tool and model names
// such as "github/create_issue" or "openai/gpt-4o" are names, not paths.
type glob struct {
	text string
	re   *regexp.Regexp
}

// compileGlob validates pattern with path.Match's grammar and compiles it.
func compileGlob(at, pattern string) (glob, error) {
	if pattern == "" {
		return glob{}, cfgErr(at, "empty pattern")
	}
	if !utf8.ValidString(pattern) {
		return glob{}, cfgErr(at, "must be valid UTF-8")
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return glob{}, cfgErr(at, "invalid glob (path.Match syntax)")
	}
	var b strings.Builder
	b.WriteString(`\A(?s:`)
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '\\':
			i++
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		case '[':
			// path.Match already validated the class.
			i = globClass(&b, pattern, i+1)
		default:
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		}
	}
	b.WriteString(`)\z`)
	re, err := regexp.Compile(b.String())
	if err != nil {
		return glob{}, cfgErr(at, "invalid glob")
	}
	return glob{text: pattern, re: re}, nil
}

func (g glob) match(name string) bool { return g.re.MatchString(name) }

// globList is a list of globs from config.
type globList []glob

func compileGlobs(at string, patterns []string) (globList, error) {
	out := make(globList, 0, len(patterns))
	var ps problems
	for i, p := range patterns {
		g, err := compileGlob(indexPath(at, i), p)
		if err != nil {
			ps.add(err)
			continue
		}
		out = append(out, g)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// first returns the index of the first glob matching name, or -1.
func (l globList) first(name string) int {
	for i, g := range l {
		if g.match(name) {
			return i
		}
	}
	return -1
}

// globClass translates the path.Match class starting after "[" at i into
// RE2 syntax with every rune spelled \x{...}, and returns the index of its
// "]". Inverted ranges, which path.Match accepts and never matches, are
// dropped; a class left empty matches nothing (or, negated, any rune).
func globClass(b *strings.Builder, pattern string, i int) int {
	neg := false
	if pattern[i] == '^' {
		neg = true
		i++
	}
	next := func() rune {
		if pattern[i] == '\\' {
			i++
		}
		r, n := utf8.DecodeRuneInString(pattern[i:])
		i += n
		return r
	}
	var items []string
	for pattern[i] != ']' {
		lo := next()
		hi := lo
		if pattern[i] == '-' {
			i++
			hi = next()
		}
		if lo <= hi {
			items = append(items, fmt.Sprintf(`\x{%x}-\x{%x}`, lo, hi))
		}
	}
	switch {
	case len(items) == 0 && neg:
		b.WriteString(`.`)
	case len(items) == 0:
		b.WriteString(`[^\x{0}-\x{10ffff}]`)
	case neg:
		b.WriteString(`[^` + strings.Join(items, "") + `]`)
	default:
		b.WriteString(`[` + strings.Join(items, "") + `]`)
	}
	return i
}

// Package envname is the one rule for a config value that names an
// environment variable (a *_env key, headers_from_env): config,
// interceptors and approvals all check it, and none may import another.
package envname

import "strconv"

// Problem is the message for a value that is no such name. It never quotes
// the value: the usual cause is a secret pasted where its variable's name
// belongs, and problems reach terminals and logs.
const Problem = "must name an environment variable ([A-Za-z_][A-Za-z0-9_]*), not hold a value"

// Valid reports whether s is an environment variable name,
// [A-Za-z_][A-Za-z0-9_]*.
func Valid(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// Shown is name as a message may quote it: a valid name that reads like a
// secret (more than 24 letters and digits in a row, as tokens such as
// ghp_… or sk_live_… have, where variable names are words joined by _)
// is named only by its length.
func Shown(name string) string {
	run := 0
	for i := 0; i < len(name); i++ {
		if name[i] == '_' {
			run = 0
			continue
		}
		if run++; run > 24 {
			return "of " + strconv.Itoa(len(name)) + " characters (not shown: it reads like a secret)"
		}
	}
	return name
}

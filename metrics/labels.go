package metrics

import (
	"strings"
	"sync"
)

// maxLabelLen bounds a reason or binding label value.
const maxLabelLen = 64

// identLabel returns s when it is a plain identifier (letters, digits and
// _ . : / -, at most 64 bytes), else Other. Reasons and binding names are
// policy identifiers; anything else may be text from a request, and a label
// must never carry payload (nor invalid UTF-8, which the client rejects).
func identLabel(s string) string {
	if s == "" {
		return None
	}
	if len(s) > maxLabelLen {
		return Other
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '_', c == '.', c == ':', c == '/', c == '-':
		default:
			return Other
		}
	}
	return s
}

// capSet admits up to max distinct identifier label values; later ones
// become Other, bounding the series an unexpected stream of reasons can
// create.
type capSet struct {
	mu   sync.RWMutex
	max  int
	seen map[string]struct{}
}

func newCapSet(max int) *capSet {
	if max <= 0 {
		max = DefaultMaxReasons
	}
	return &capSet{max: max, seen: make(map[string]struct{})}
}

func (c *capSet) label(s string) string { return c.admit(s, false) }

// reserve admits s past the cap: the names and reasons a loaded config
// fixes are few and must not read as Other because something else came
// first. It returns s's label.
func (c *capSet) reserve(s string) string { return c.admit(s, true) }

// admit returns s's label, admitting it while the cap has room, or always
// with force.
func (c *capSet) admit(s string, force bool) string {
	s = identLabel(s)
	if s == Other || s == None {
		return s
	}
	c.mu.RLock()
	_, ok := c.seen[s]
	c.mu.RUnlock()
	if ok {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[s]; ok {
		return s
	}
	if !force && len(c.seen) >= c.max {
		return Other
	}
	s = strings.Clone(s) // kept for the process's life: never a view of a request
	c.seen[s] = struct{}{}
	return s
}

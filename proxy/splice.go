package proxy

import (
	"github.com/hooksproxy/hooksproxy/points"
)

// editMessages returns body with each message that edit rewrites replaced,
// in one copy of body: an sjson write per message would copy (and re-scan)
// the whole body once per message, k times n bytes for k messages of an
// n-byte request, which a client can make large by repeating a message.
// edit gets each message's index and raw bytes (a view of body) and
// returns its replacement, or nil to keep it; an error stops the walk and
// is returned. body is returned as it is when nothing is rewritten.
func editMessages(body []byte, edit func(i int, m []byte) ([]byte, error)) ([]byte, error) {
	var out []byte
	var err error
	prev, i := 0, 0
	points.ForEachElement(points.MemberValue(body, "messages"), func(m []byte) bool {
		var r []byte
		if r, err = edit(i, m); err != nil {
			return false
		}
		i++
		if r == nil {
			return true
		}
		if out == nil {
			out = make([]byte, 0, len(body)+len(body)/8)
		}
		// m is body[off:off+len(m)] (the walk slices, it never copies), so
		// its offset is what its capacity lacks of body's.
		off := cap(body) - cap(m)
		out = append(out, body[prev:off]...)
		out = append(out, r...)
		prev = off + len(m)
		return true
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		return body, nil
	}
	return append(out, body[prev:]...), nil
}

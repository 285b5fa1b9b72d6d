package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strings"
)

// minMaskedKey is the shortest upstream key whose value is masked in what
// the upstream writes back. Hosted providers' keys are far longer; a
// shorter one ("EMPTY", "token-abc123", as local servers take) is no
// secret worth hiding, and masking every occurrence of a few common bytes
// would corrupt answers.
const minMaskedKey = 16

// keyMaskText replaces the upstream key wherever an upstream echoes it.
const keyMaskText = "[REDACTED:upstream_api_key]"

// keyMask hides the configured upstream key (upstream.api_key_env) in the
// upstream's bytes that hooksproxy relays without judging them: error
// bodies and their messages, and passthrough answers. An upstream that
// refuses the key commonly quotes it ("Incorrect API key provided: ..."),
// and the key is configured so that clients never hold it. Nil masks
// nothing.
type keyMask struct{ key []byte }

// newKeyMask returns the mask of key, or nil when key is too short to be
// one (see minMaskedKey).
func newKeyMask(key string) *keyMask {
	if len(key) < minMaskedKey {
		return nil
	}
	return &keyMask{key: []byte(key)}
}

// bytes returns b with every occurrence of the key replaced; b itself when
// there is none.
func (m *keyMask) bytes(b []byte) []byte {
	if m == nil || !bytes.Contains(b, m.key) {
		return b
	}
	return bytes.ReplaceAll(b, m.key, []byte(keyMaskText))
}

// string is bytes for a string.
func (m *keyMask) string(s string) string {
	if m == nil || !strings.Contains(s, string(m.key)) {
		return s
	}
	return strings.ReplaceAll(s, string(m.key), keyMaskText)
}

// code is string for an error code relayed from the upstream (a string,
// or nil when it sent none).
func (m *keyMask) code(c any) any {
	if s, ok := c.(string); ok {
		return m.string(s)
	}
	return c
}

// header masks every value of h (the upstream's headers as copied for the
// client: a 401's WWW-Authenticate may quote the key).
func (m *keyMask) header(h http.Header) {
	if m == nil {
		return
	}
	for _, vs := range h {
		for i, v := range vs {
			vs[i] = m.string(v)
		}
	}
}

// writer masks a stream written to w in pieces: a key split across two
// writes is still found. It holds back only a tail that could begin the
// key, so the end of an event or line is never delayed (a key does not
// begin with a newline). Close writes what is held.
func (m *keyMask) writer(w io.Writer) *keyMaskWriter {
	return &keyMaskWriter{m: m, w: w}
}

type keyMaskWriter struct {
	m    *keyMask
	w    io.Writer
	held []byte
}

// Write masks p after what is held and writes all but a tail that is a
// proper prefix of the key. It reports len(p) once that is written.
func (k *keyMaskWriter) Write(p []byte) (int, error) {
	if k.m == nil {
		return k.w.Write(p)
	}
	data := p
	if len(k.held) > 0 {
		data = append(k.held, p...)
	}
	data = k.m.bytes(data)
	keep := keyPrefixTail(data, k.m.key)
	out := data[:len(data)-keep]
	if len(out) > 0 {
		if _, err := k.w.Write(out); err != nil {
			// Nothing more is written (Close included): how much of out
			// went is unknown, and a retry could duplicate it.
			k.m, k.w, k.held = nil, io.Discard, nil
			return 0, err
		}
	}
	// Copied: data may be p, which the caller reuses.
	k.held = append(k.held[:0:0], data[len(data)-keep:]...)
	return len(p), nil
}

// Close writes the held tail, which the stream ended before completing
// into the key.
func (k *keyMaskWriter) Close() error {
	if len(k.held) == 0 {
		return nil
	}
	_, err := k.w.Write(k.held)
	k.held = nil
	return err
}

// keyPrefixTail is the length of the longest suffix of b that is a proper
// prefix of key.
func keyPrefixTail(b, key []byte) int {
	start := max(len(b)-(len(key)-1), 0)
	for i := start; i < len(b); i++ {
		j := bytes.IndexByte(b[i:], key[0])
		if j < 0 {
			return 0
		}
		i += j
		if bytes.HasPrefix(key, b[i:]) {
			return len(b) - i
		}
	}
	return 0
}

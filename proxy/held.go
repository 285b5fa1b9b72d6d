package proxy

import (
	"bytes"
	"io"
	"net/http"
	"sync"
)

// heldStream is an upstream SSE response held whole until its verdicts pass.
type heldStream struct {
	cs *ChatStream
}

// holdStream reads the upstream stream to [DONE] within the buffer limit
// and assembles it into lend's buffer; any failure fails closed before a
// byte is released.
func (s *Server) holdStream(body io.Reader, lend func(n int) []byte) (*heldStream, []byte, error) {
	cs, _ := s.streams.Get().(*ChatStream)
	if cs == nil {
		cs = NewChatStream(s.opts.MaxBufferedResponseBytes)
	} else {
		cs.Reset(s.opts.MaxBufferedResponseBytes)
	}
	if _, err := cs.ReadFrom(body); err != nil {
		return nil, nil, err
	}
	completion, err := cs.AppendAssembled(lend(cs.AssembledSizeHint()))
	if err != nil {
		return nil, nil, err
	}
	return &heldStream{cs: cs}, completion, nil
}

// recycle returns a released stream's buffers to the pool (not those of
// an outsized stream, which would stay pinned). h must not be used after.
func (s *Server) recycle(h *heldStream) {
	if h == nil || h.cs == nil {
		return
	}
	cs := h.cs
	h.cs = nil
	if cap(cs.data) > 1<<20 || cap(cs.last) > 1<<20 {
		return
	}
	cs.Reset(0)
	if cs.rd != nil {
		cs.rd.Reset(nil) // drop the response body
	}
	s.streams.Put(cs)
}

// replay releases the upstream events one for one, rendered first into a
// pooled buffer so the answer goes out in one write.
func (h *heldStream) replay(w http.ResponseWriter, status int, pool *sync.Pool, omitUsage bool) error {
	b, _ := pool.Get().(*bytes.Buffer)
	if b == nil {
		b = new(bytes.Buffer)
	}
	defer func() {
		if b.Cap() <= 4<<20 { // do not pin outsized buffers
			b.Reset()
			pool.Put(b)
		}
	}()
	if err := h.cs.Replay(b, ReplayOptions{OmitUsageChunk: omitUsage}); err != nil {
		return err
	}
	return writeWhole(w, status, b.Bytes())
}

// render derives the SSE events of the verdicted completion into memory,
// so a failure is known before any byte is released.
func (h *heldStream) render(completion []byte, includeUsage bool) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(len(completion) + len(completion)/2)
	if err := RederiveChatStream(&b, completion, RederiveOptions{IncludeUsage: includeUsage}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/hooksproxy/hooksproxy/points"
)

// hopHeaders are connection-scoped (RFC 9110 §7.6.1) and never forwarded.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		delete(h, name) // already canonical: Del would canonicalize each again
	}
}

// upstreamRequest builds the outbound request for path with body. Headers
// are copied minus hop-by-hop ones and our own control headers;
// Accept-Encoding is dropped so bodies arrive readable.
func (s *Server) upstreamRequest(ctx context.Context, in *http.Request, body []byte) (*http.Request, error) {
	u := *s.opts.Upstream
	base := strings.TrimRight(u.Path, "/")
	p := in.URL.Path
	if strings.HasSuffix(base, "/v1") && (p == "/v1" || strings.HasPrefix(p, "/v1/")) {
		// A base URL that already ends in /v1 (as OPENAI_BASE_URL values
		// do) is the API root: /v1/x goes to base/x, not base/v1/x.
		p = p[len("/v1"):]
	}
	u.Path = base + p
	u.RawQuery = in.URL.RawQuery
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	// The URL is set directly rather than printed and parsed back: the
	// configured base is already parsed, and its raw path no longer
	// matches the joined path, so the joined path is encoded on the wire.
	u.RawPath = ""
	out, err := http.NewRequestWithContext(ctx, in.Method, "", rd)
	if err != nil {
		return nil, err
	}
	out.URL, out.Host = &u, strings.TrimSuffix(u.Host, ":") // as NewRequest does for an empty port
	out.Header = in.Header.Clone()
	removeHop(out.Header)
	// The values the proxy sets share one backing array (each capped at
	// its one element, so an Add elsewhere copies rather than overwrites).
	vals := make([]string, 0, 4)
	set := func(k, v string) {
		vals = append(vals, v)
		out.Header[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	// Asked for explicitly: a request without Accept-Encoding accepts any
	// coding (RFC 9110 §12.5.3), and the answer is read as identity bytes.
	set("Accept-Encoding", "identity")
	delete(out.Header, "Content-Length")
	out.Header.Del(s.opts.SessionHeader) // configured: may not be canonical
	delete(out.Header, "X-Agent-Hooks-Agent")
	if id := points.RequestIDFrom(ctx); id != "" {
		// The id on the records and the response (the client's, or ours
		// where the client's was refused), so the upstream's logs agree.
		set("X-Request-Id", id)
	}
	if body != nil {
		out.ContentLength = int64(len(body))
		set("Content-Length", strconv.Itoa(len(body)))
		b := body
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	if s.opts.APIKey != "" {
		set("Authorization", "Bearer "+s.opts.APIKey)
	}
	return out, nil
}

// copyHeaders copies response headers minus hop-by-hop and framing ones.
// A header the response already carries is hooksproxy's own
// (X-Request-Id, X-Agent-Hooks-Session and the configured session header,
// X-Upstream-Request-Id, X-Should-Retry): the upstream's value under the
// same name is left out, since two values under one name reach clients
// joined as one string (fetch's Headers.get) or as the wrong first line.
// A chained hooksproxy, or any gateway using the same names, sends them.
// modelTurn hands the upstream's X-Request-Id on as X-Upstream-Request-Id.
func copyHeaders(dst, src http.Header) {
	// The names the upstream's Connection lists are its hop-by-hop ones:
	// skipped while copying, never deleted from dst afterwards, where an
	// upstream naming X-Agent-Hooks-Session would strip the proxy's own.
	var named []string
	for _, f := range src.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				named = append(named, http.CanonicalHeaderKey(name))
			}
		}
	}
	for k, vs := range src {
		ck := http.CanonicalHeaderKey(k)
		switch ck {
		case "Content-Length", "Content-Encoding":
			continue
		}
		if _, own := dst[ck]; own || slices.Contains(hopHeaders, ck) || slices.Contains(named, ck) {
			continue
		}
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
}

// copyRawHeaders is copyHeaders for a body passed on as the upstream sent
// it: its Content-Encoding still describes those bytes.
func copyRawHeaders(dst, src http.Header) {
	copyHeaders(dst, src)
	if ce := src.Values("Content-Encoding"); len(ce) > 0 {
		dst["Content-Encoding"] = append([]string(nil), ce...)
	}
}

// relayError passes an upstream's error answer on, status and headers
// included, with the upstream key masked (the request asked for identity
// bytes; a coded body is relayed as it came). A body that cannot be read
// whole (over limit, cut or reset) is not relayed half: the client gets
// the status with an OpenAI-shaped body saying so, rather than truncated
// JSON that looks complete.
func relayError(w http.ResponseWriter, resp *http.Response, limit int64, mask *keyMask) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	copyRawHeaders(w.Header(), resp.Header)
	mask.header(w.Header())
	if err != nil || int64(len(b)) > limit {
		w.Header().Del("Content-Encoding")
		why := "could not be read whole"
		if err == nil {
			why = "is over max_buffered_response_bytes"
		}
		writeError(w, resp.StatusCode, "upstream_error", "upstream answered "+strconv.Itoa(resp.StatusCode)+" with an error body that "+why+"; it was not relayed", "upstream_error_body_unreadable")
		return
	}
	if identityCoded(resp.Header) {
		b = mask.bytes(b)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(b)
}

// identityCoded reports whether a response's body is its bytes as sent,
// without a content coding.
func identityCoded(h http.Header) bool {
	for _, ce := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(ce, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}

// passthrough forwards a configured path unchanged (still without hop-by-hop
// headers, with the configured key), streaming the answer back.
func (s *Server) passthrough(w http.ResponseWriter, r *http.Request) {
	// On every answer and to the upstream, as on the chat route: the id
	// the client sent, or the one generated for it, so that the logs of
	// both sides agree.
	r = r.WithContext(points.WithRequestID(r.Context(), requestID(w, r)))
	if !cleanPath(r) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "path is not canonical; refused so nothing reaches the model unmediated", "not_found")
		return
	}
	if r.Method == http.MethodPost && chatAPIPath(r.URL.Path) {
		// A prefix entry ("/openai/*") reaches a chat API under whatever
		// root the upstream has (Azure's deployments, Gemini's
		// /v1beta/openai): refused whatever the config allows.
		s.refuse(w, http.StatusNotFound, "hooksproxy does not pass through "+r.URL.EscapedPath()+": it is a model API path, mediated only at /v1/chat/completions", "not_found")
		return
	}
	var body []byte
	if r.Body != nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request body exceeds the configured limit", "request_too_large")
				return
			}
			writeError(w, http.StatusBadRequest, "invalid_request_error", "could not read request body", nil)
			return
		}
		body = b
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.UpstreamTimeout)
	defer cancel()
	out, err := s.upstreamRequest(ctx, r, body)
	if err != nil {
		writeError(w, http.StatusBadGateway, "upstream_error", "could not build upstream request", nil)
		return
	}
	// The client's Accept-Encoding as it came: the answer is relayed as
	// bytes, never read, so the coding the client asked for reaches it as
	// the upstream chose it. A client that sent none keeps identity (none
	// would accept any coding, RFC 9110 §12.5.3, which curl without
	// --compressed, say, would not decode).
	// With a configured key the answer is asked for as identity bytes, so
	// that a body quoting the key can be masked.
	if ae := r.Header.Values("Accept-Encoding"); len(ae) > 0 && s.mask == nil {
		out.Header["Accept-Encoding"] = slices.Clone(ae)
	}
	if s.mask != nil {
		// A byte range could cut the key in two pieces, each released
		// unmasked: the answer is asked for whole.
		delete(out.Header, "Range")
		delete(out.Header, "If-Range")
	}
	resp, err := s.client.Do(out)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away: no answer, and not the upstream's error
		}
		s.opts.Metrics.PassthroughRequest(0)
		writeError(w, http.StatusBadGateway, "upstream_error", "upstream unreachable or timed out", "upstream_unavailable")
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 599 {
		// A 101's body is the raw connection, which is not carried (no
		// upgrades pass through), and a status HTTP does not have is no
		// answer: either would leave the client waiting.
		s.opts.Metrics.PassthroughRequest(0)
		writeError(w, http.StatusBadGateway, "upstream_error", "upstream answered with status "+strconv.Itoa(resp.StatusCode)+", which passthrough does not carry", "upstream_invalid_response")
		return
	}
	s.opts.Metrics.PassthroughRequest(resp.StatusCode)
	// The names hooksproxy answers under are its own here too: the
	// upstream's X-Request-Id goes on as X-Upstream-Request-Id (when a
	// token), and a session header the upstream sent is dropped, as an
	// agent reading its session id from any answer must get the proxy's.
	noteUpstreamID(w, resp)
	copyRawHeaders(w.Header(), resp.Header)
	w.Header().Del("X-Agent-Hooks-Session")
	if h := s.opts.SessionHeader; h != "" {
		w.Header().Del(h)
	}
	if s.mask != nil {
		s.mask.header(w.Header())
		// The body may change length and bytes under the mask: a range
		// or digest of the upstream's would describe other bytes.
		for _, h := range []string{"Content-Range", "Content-Md5", "Digest", "Content-Digest", "Repr-Digest"} {
			delete(w.Header(), h)
		}
	}
	w.WriteHeader(resp.StatusCode)
	// Each read is written and flushed at once, so a streamed passthrough
	// answer (job events, progress) arrives as the upstream sends it.
	rc := http.NewResponseController(w)
	var dst io.Writer = w
	if s.mask != nil && identityCoded(resp.Header) {
		mw := s.mask.writer(w)
		defer func() { _ = mw.Close() }()
		dst = mw
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			if err != io.EOF && r.Context().Err() == nil {
				// Cut short by the upstream (a body shorter than its
				// Content-Length, a reset): the client must see it cut,
				// as it would have directly, not a complete answer.
				// Aborting leaves out the final chunk (or the missing
				// bytes of a declared length).
				panic(http.ErrAbortHandler)
			}
			return
		}
	}
}

// chatAPIPath reports whether path names a chat API under some root: it
// ends in /chat/completions, /responses or /v1/messages (any case, a
// trailing slash ignored). Only a POST runs the model there; a GET lists
// stored objects.
func chatAPIPath(path string) bool {
	lp := strings.TrimRight(strings.ToLower(path), "/")
	if strings.IndexByte(lp, ';') >= 0 {
		// Path parameters, which Tomcat, Jetty and Spring strip before
		// routing: chat;x/completions is chat/completions to them.
		segs := strings.Split(lp, "/")
		for i, seg := range segs {
			segs[i], _, _ = strings.Cut(seg, ";")
		}
		lp = strings.TrimRight(strings.Join(segs, "/"), "/")
	}
	// /messages only as Anthropic's (…/v1/messages): an Assistants
	// thread's /v1/threads/{id}/messages adds a message, runs nothing.
	for _, m := range []string{"/chat/completions", "/responses", "/v1/messages"} {
		if strings.HasSuffix(lp, m) {
			return true
		}
	}
	return lp == "/messages"
}

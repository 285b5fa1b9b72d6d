// Package proxy mediates OpenAI-compatible HTTP traffic through the
// AGENT-HOOKS interception points: it maps requests and responses to
// contexts, holds every response (streams included) until its verdicts
// permit, writes transforms back with sjson and answers blocks with
// OpenAI-shaped errors.
package proxy

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/hooksproxy/hooksproxy/points"
)

// Options configures a Server.
type Options struct {
	// Upstream is the model API base URL; /v1/... is appended as received.
	Upstream *url.URL
	// APIKey, when set, replaces the client's Authorization header; an
	// upstream error body or passthrough answer that quotes it (16 bytes
	// or longer) reaches the client with it masked.
	APIKey string
	// UpstreamTimeout bounds one upstream call, body included.
	UpstreamTimeout time.Duration
	// Transport carries upstream calls; nil uses a tuned http.Transport.
	Transport http.RoundTripper
	// Agent names agent.id and agent.framework in every context.
	Agent points.Agent
	// AllowAgentHeader lets a request's X-Agent-Hooks-Agent header name
	// agent.id for the session it starts.
	AllowAgentHeader bool
	// SessionHeader names the session header (default X-Agent-Hooks-Session).
	SessionHeader string
	// IdleTimeout ends idle sessions (default 15m); MaxSessions bounds them.
	IdleTimeout time.Duration
	MaxSessions int
	// MaxRequestBytes (default 8 MiB) and MaxBufferedResponseBytes
	// (default 32 MiB) bound what the proxy reads.
	MaxRequestBytes          int64
	MaxBufferedResponseBytes int64
	// MaxTotalBufferedBytes bounds the answer bytes held across all
	// requests at once (default 512 MiB): past it an answer is refused
	// with a host error rather than letting a few large ones exhaust
	// memory (each held answer costs several times its size in copies).
	MaxTotalBufferedBytes int64
	// Passthrough lists paths forwarded unchanged; all others are refused.
	Passthrough []string
	// TransparentToolSeam runs pre_tool_call on tool calls in responses and
	// post_tool_call on role:tool results, for agents that never call the
	// host API. MaxAutoTurns bounds how often the proxy asks the model
	// again itself when every call of a response was denied (default 8).
	TransparentToolSeam bool
	MaxAutoTurns        int
	// ToolSeamHostError is the declared posture for host_error denies at
	// the tool seam: "continue" (default: a control error, the loop goes
	// on) or "terminate" (the run halts with 503).
	ToolSeamHostError string
	// AdminToken returns the bearer token the admin API requires; nil or
	// "" disables the admin API.
	AdminToken func() string
	// Metrics observes upstream calls, held responses, sessions and
	// tokens; nil observes nothing.
	Metrics Metrics
	// Logger receives structured logs without payloads.
	Logger *slog.Logger
	// Emitter runs the emissions; Swap replaces it on reload.
	Emitter *points.Emitter
	// Now is the clock (tests).
	Now func() time.Time
	// Unready, when set, says why the process should get no traffic now
	// ("" when it may): /readyz answers 503 with it (a stalled record
	// sink, which drops records meanwhile).
	Unready func() string
}

// Metrics is what the proxy reports beyond emissions (which the emitter's
// observer sees).
type Metrics interface {
	UpstreamRequest(status int, stream bool, d time.Duration)
	BufferedResponseBytes(n int)
	HeldStreams(delta int)
	// BufferedInFlight adds delta to the answer bytes held right now
	// (the total that MaxTotalBufferedBytes bounds).
	BufferedInFlight(delta int64)
	ActiveSessions(n int)
	Tokens(prompt, completion int64)
	// RequestRefused counts a request refused before any emission (400,
	// 413, 415), by its error code.
	RequestRefused(code string)
	// PassthroughRequest counts a request forwarded to a passthrough path
	// by the upstream's status (0 when none arrived).
	PassthroughRequest(status int)
}

type noMetrics struct{}

func (noMetrics) UpstreamRequest(int, bool, time.Duration) {}
func (noMetrics) BufferedResponseBytes(int)                {}
func (noMetrics) HeldStreams(int)                          {}
func (noMetrics) BufferedInFlight(int64)                   {}
func (noMetrics) ActiveSessions(int)                       {}
func (noMetrics) Tokens(int64, int64)                      {}
func (noMetrics) RequestRefused(string)                    {}
func (noMetrics) PassthroughRequest(int)                   {}

// Server is the HTTP front of hooksproxy.
type Server struct {
	opts Options
	// buffered is the answer bytes held by all requests now (see
	// Options.MaxTotalBufferedBytes and run.charge).
	buffered atomic.Int64
	budgets  sync.Pool // *budgetReader
	// pol is the emitter and settings in force, swapped as one (Apply);
	// a request reads it once and keeps what it read.
	pol atomic.Pointer[policy]
	// applying serializes Swap and Apply, which each read the policy
	// they replace.
	applying sync.Mutex
	sessions *sessions
	client   *http.Client
	// mask hides opts.APIKey in the upstream bytes relayed unjudged.
	mask *keyMask
	// rt is client's transport, which the chat route calls directly: it
	// follows no redirect either, and skips the client's header copy and
	// redirect bookkeeping on every model call.
	rt      http.RoundTripper
	router  chi.Router
	log     *slog.Logger
	wg      sync.WaitGroup
	stop    context.CancelFunc
	closing atomic.Bool
	// base is the context requests are served under when the HTTP server
	// uses BaseContext; Close cancels it (abort) so that requests a
	// timed-out graceful shutdown left running end before their sessions'
	// agent_shutdown. inflight counts requests in ServeHTTP.
	base     context.Context
	abort    context.CancelFunc
	inflight atomic.Int64
	// writers recycles the buffers that replay held streams: one per
	// released stream would otherwise be allocated and grown.
	writers sync.Pool
	reads   sync.Pool // *bytes.Buffer for bodies of unknown length
	lend    sync.Pool // *[]byte lent to one request (run.buffer)
	streams sync.Pool // *ChatStream, reused by holdStream
	judged  *judgedResults
	inputs  *judgedInputs // input verdicts replayed in later histories
	// signatures are the upstream's extra_content of tool calls, handed
	// back with the histories that carry them.
	signatures *signatures
	// noStreamOptions: the upstream refused the stream_options the proxy
	// adds to streamed requests (send), which it then leaves out.
	noStreamOptions atomic.Bool
	// bodyTimeout, when set, replaces the request body deadline (tests).
	bodyTimeout time.Duration
}

// maxJudgedResults bounds the cross-session memory of judged tool
// results (about 100 bytes each).
const maxJudgedResults = 1 << 16

// New returns a Server; call Start to run its session sweeper and Close to
// end its sessions.
func New(opts Options) *Server {
	if opts.SessionHeader == "" {
		opts.SessionHeader = "X-Agent-Hooks-Session"
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 8 << 20
	}
	if opts.MaxBufferedResponseBytes <= 0 {
		opts.MaxBufferedResponseBytes = 32 << 20
	}
	if opts.MaxTotalBufferedBytes <= 0 {
		opts.MaxTotalBufferedBytes = 512 << 20
	}
	if opts.UpstreamTimeout <= 0 {
		opts.UpstreamTimeout = 10 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Metrics == nil {
		opts.Metrics = noMetrics{}
	}
	opts.MaxAutoTurns, opts.ToolSeamHostError, opts.Agent = defaultSeam(opts.MaxAutoTurns, opts.ToolSeamHostError, opts.Agent)
	tr := opts.Transport
	if tr == nil {
		tr = &http.Transport{
			Proxy:                 nil, // never route mediated calls through an environment proxy
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          512,
			MaxIdleConnsPerHost:   256,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: opts.UpstreamTimeout,
			ForceAttemptHTTP2:     true,
			DisableCompression:    true, // we ask for Accept-Encoding: identity and read identity bodies
		}
	}
	// A redirect is never followed: following it would send the prompt,
	// and the configured key, to wherever the upstream points. A chat
	// request answers any 3xx with 502 upstream_redirect (modelTurn); a
	// passthrough path passes it on as it came.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	s := &Server{opts: opts, client: &http.Client{Transport: tr, CheckRedirect: noRedirect}, rt: tr, log: opts.Logger,
		mask: newKeyMask(opts.APIKey)}
	s.base, s.abort = context.WithCancel(context.Background())
	s.pol.Store(&policy{em: opts.Emitter, st: &Settings{Agent: opts.Agent, AllowAgentHeader: opts.AllowAgentHeader, Passthrough: opts.Passthrough,
		TransparentToolSeam: opts.TransparentToolSeam, MaxAutoTurns: opts.MaxAutoTurns, ToolSeamHostError: opts.ToolSeamHostError,
		AdminToken: opts.AdminToken}})
	s.sessions = newSessions(opts.Agent, opts.MaxSessions, opts.IdleTimeout, s.evicted)
	s.judged = newJudgedResults(maxJudgedResults)
	s.inputs = newJudgedInputs(maxJudgedResults)
	s.signatures = newSignatures(maxJudgedResults)
	s.sessions.gauge = opts.Metrics.ActiveSessions
	s.router = s.routes()
	return s
}

// Swap installs a new emitter; requests already running keep the one they
// started with.
func (s *Server) Swap(e *points.Emitter) {
	s.applying.Lock()
	defer s.applying.Unlock()
	s.pol.Store(&policy{em: e, st: s.pol.Load().st})
	s.judged.reset() // what the old policy judged, the new one judges afresh
}

// policy is what a reload replaces in one step: the emitter and the
// settings of one configuration, so that no request pairs one
// configuration's interceptors with another's tool seam or posture.
type policy struct {
	em *points.Emitter
	st *Settings
}

// Settings are the Options a config reload may change (Apply); the
// others (upstream, limits, sessions) need a restart.
type Settings struct {
	Agent               points.Agent
	AllowAgentHeader    bool
	Passthrough         []string
	TransparentToolSeam bool
	MaxAutoTurns        int
	ToolSeamHostError   string
	AdminToken          func() string
}

// Apply installs a new emitter and settings, as a reload does. Sessions
// already open keep their agent; new ones get the new one.
func (s *Server) Apply(e *points.Emitter, st Settings) {
	st.MaxAutoTurns, st.ToolSeamHostError, st.Agent = defaultSeam(st.MaxAutoTurns, st.ToolSeamHostError, st.Agent)
	st.Passthrough = slices.Clone(st.Passthrough)
	s.applying.Lock()
	defer s.applying.Unlock()
	s.sessions.setAgent(st.Agent)
	s.pol.Store(&policy{em: e, st: &st})
	s.judged.reset()
}

// defaultSeam fills the reloadable settings' defaults: 8 automatic turns,
// the continue posture, agent "agent" of framework openai-compatible.
func defaultSeam(turns int, posture string, a points.Agent) (int, string, points.Agent) {
	if turns <= 0 {
		turns = 8
	}
	if posture == "" {
		posture = "continue"
	}
	if a.ID == "" {
		a.ID = "agent"
	}
	if a.Framework == "" {
		a.Framework = "openai-compatible"
	}
	return turns, posture, a
}

// cur returns the settings in force.
func (s *Server) cur() *Settings { return s.pol.Load().st }

// Emitter returns the emitter new requests use.
func (s *Server) Emitter() *points.Emitter { return s.pol.Load().em }

// Router exposes the router so other packages can mount more routes.
func (s *Server) Router() chi.Router { return s.router }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	s.router.ServeHTTP(w, r)
}

// BaseContext is the context to serve requests under
// (http.Server.BaseContext): Close cancels it, so that requests still
// running when Close is called end, as cancelled, before the sessions they
// belong to get agent_shutdown.
func (s *Server) BaseContext(net.Listener) context.Context { return s.base }

// closeWait bounds how long Close waits for cancelled requests to return.
const closeWait = 5 * time.Second

// Start runs the idle-session sweeper until Close.
func (s *Server) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	every := s.sessions.idle / 4
	if every > 30*time.Second {
		every = 30 * time.Second
	}
	if every < 10*time.Millisecond {
		every = 10 * time.Millisecond
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.sessions.run(ctx, every) }()
}

// Drain marks the server as shutting down: /readyz answers 503 from now on,
// so a load balancer stops sending new requests while the listener is
// still open and requests in flight finish.
func (s *Server) Drain() { s.closing.Store(true) }

// Close ends every open session with agent_shutdown{cancelled}. Call it after
// http.Server.Shutdown has let in-flight requests finish.
func (s *Server) Close() {
	s.closing.Store(true)
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
	// Requests a timed-out shutdown left running are cancelled and waited
	// for (bounded), so that their points precede their sessions' end.
	s.abort()
	for deadline := time.Now().Add(closeWait); s.inflight.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	for sess, reason := range s.sessions.drain() {
		s.shutdown(context.Background(), s.Emitter(), sess, reason)
	}
}

// Sessions reports the number of open sessions.
func (s *Server) Sessions() int { return s.sessions.count() }

func (s *Server) evicted(sess *session, reason string) {
	s.shutdown(context.Background(), s.Emitter(), sess, reason)
}

// shutdown emits agent_shutdown once for a session that had started (ok
// reports whether it did), and then frees the session's id.
func (s *Server) shutdown(ctx context.Context, em *points.Emitter, sess *session, reason string) (res points.Result, ok bool) {
	defer s.sessions.finish(sess)
	sess.mu.Lock()
	started := sess.started || sess.blocked || sess.startCut // agent_startup was emitted
	sess.mu.Unlock()
	if !started || em == nil {
		return points.Result{}, false
	}
	res = em.Emit(context.WithoutCancel(ctx), sess.ps, points.ShutdownEvent(reason))
	if s.log.Enabled(context.Background(), slog.LevelInfo) { // as Info asks; its arguments box before it does
		s.log.Info("session ended", "session", sess.ps.ID(), "reason", reason, "shutdown_decision", res.Verdict.Decision)
	}
	return res, true
}

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	// HEAD of a GET route answers as the GET does, without the body
	// (load balancers probe health with HEAD).
	r.Use(middleware.GetHead)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	r.Get("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if s.closing.Load() || s.Emitter() == nil {
			writeJSON(w, 503, map[string]string{"status": "not ready"})
			return
		}
		if s.opts.Unready != nil {
			if why := s.opts.Unready(); why != "" {
				writeJSON(w, 503, map[string]string{"status": "not ready", "reason": why})
				return
			}
		}
		writeJSON(w, 200, map[string]string{"status": "ready"})
	})
	r.Post("/v1/chat/completions", s.chat)
	s.mountHostAPI(r)
	// Passthrough paths are matched at request time, not routed, so that a
	// reload that removes one stops forwarding it at once.
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		if s.isPassthrough(r) {
			s.passthrough(w, r)
			return
		}
		// The path as sent (a decoded %73 would name a path that is
		// mediated); counted, so an agent calling an API hooksproxy does
		// not mediate (/v1/responses, /v1/embeddings) shows on a dashboard.
		s.refuse(w, http.StatusNotFound,
			"hooksproxy does not mediate "+r.Method+" "+r.URL.EscapedPath()+"; it is refused so nothing reaches the model unmediated", "not_found")
	})
	mux := r
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		// RFC 9110 §15.5.6: a 405 lists the methods the path does take.
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
			if mux.Match(chi.NewRouteContext(), m, r.URL.Path) {
				allow = append(allow, m)
			}
		}
		if slices.Contains(allow, http.MethodGet) && !slices.Contains(allow, http.MethodHead) {
			allow = append(allow, http.MethodHead) // GetHead answers it
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
		}
		s.refuse(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.EscapedPath(), "method_not_allowed")
	})
	return r
}

// isPassthrough reports whether the request's path is a passthrough
// entry, or falls under one written as a prefix ("/v1/files*"). Paths
// that are not clean (dot segments, encoded dots or slashes) never match
// a prefix: an upstream that normalises them could otherwise reach a
// mediated path unmediated.
func (s *Server) isPassthrough(r *http.Request) bool {
	p := r.URL.Path
	for _, e := range s.cur().Passthrough {
		if !strings.HasSuffix(e, "*") && p == "/"+strings.TrimLeft(e, "/") {
			return true
		}
	}
	if !cleanPath(r) {
		return false
	}
	for _, e := range s.cur().Passthrough {
		pre, ok := strings.CutSuffix(e, "*")
		if !ok {
			continue
		}
		pre = "/" + strings.TrimLeft(pre, "/")
		if strings.HasPrefix(p, pre) && (strings.HasSuffix(pre, "/") || len(p) == len(pre) || p[len(pre)] == '/') {
			return true
		}
	}
	return false
}

// cleanPath reports whether the request path is already canonical. A '%'
// left after one decoding (%252e) or a control byte (%00) is refused too:
// a component behind the upstream that decodes again would see dots,
// slashes or a cut path that no check here saw.
func cleanPath(r *http.Request) bool {
	if path.Clean(r.URL.Path) != r.URL.Path && path.Clean(r.URL.Path)+"/" != r.URL.Path {
		return false
	}
	for i := 0; i < len(r.URL.Path); i++ {
		if c := r.URL.Path[i]; c == '%' || c == '\\' || c < 0x20 || c == 0x7f {
			return false
		}
	}
	// A dot segment with a path parameter (..;x), which servers that read
	// parameters (Tomcat, Jetty, Spring) strip and then normalise as "..".
	for seg := range strings.SplitSeq(r.URL.Path, "/") {
		if before, _, ok := strings.Cut(seg, ";"); ok && (before == "." || before == "..") {
			return false
		}
	}
	raw := strings.ToLower(r.URL.RawPath)
	return !strings.Contains(raw, "%2e") && !strings.Contains(raw, "%2f") && !strings.Contains(raw, "%5c")
}

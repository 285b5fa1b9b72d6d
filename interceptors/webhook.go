package interceptors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/tidwall/gjson"
	"golang.org/x/net/http/httpguts"

	"github.com/hooksproxy/hooksproxy/internal/envname"
	"github.com/hooksproxy/hooksproxy/internal/urlcheck"
	"github.com/hooksproxy/hooksproxy/points"
)

// webhookConfig is hooksproxy.webhook.
type webhookConfig struct {
	URL            string            `json:"url"`
	Timeout        duration          `json:"timeout"`
	HeadersFromEnv map[string]string `json:"headers_from_env"`
	InputKey       string            `json:"input_key"`    // members joined by "."
	VerdictPath    string            `json:"verdict_path"` // a match path (see ctkPath)
}

// DefaultWebhookTimeout bounds one webhook call unless configured.
const DefaultWebhookTimeout = 5 * time.Second

// MaxWebhookAnswer is the most a webhook answer may hold (1 MiB).
const MaxWebhookAnswer = 1 << 20

// Webhook is the hooksproxy.webhook interceptor: it POSTs the spec wire
// context and reads a spec verdict back.
type Webhook struct {
	url     string
	timeout time.Duration
	headers http.Header
	// inputKey nests the context under these members, outermost first.
	inputKey []string
	// verdictPath locates the verdict in the answer when hasVerdictPath.
	verdictPath    ctkPath
	hasVerdictPath bool
	client         *http.Client
}

func newWebhook(_ string, config []byte, env Env) (points.Interceptor, error) {
	var c webhookConfig
	derr := decodeConfig(config, &c) // what did decode is still checked (problems.after)
	env = env.withDefaults()
	var ps problems
	if c.URL == "" {
		ps.add(cfgErr(configRoot+".url", "required"))
	} else if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		ps.add(cfgErr(configRoot+".url", "must be an absolute http or https URL"))
	} else if why := urlcheck.Credentials(u); why != "" {
		ps.add(cfgErr(configRoot+".url", "%s", why))
	}
	w := &Webhook{url: c.URL, timeout: time.Duration(c.Timeout), headers: http.Header{}}
	if w.timeout == 0 {
		w.timeout = DefaultWebhookTimeout
	}
	if c.InputKey != "" {
		p, ok := parseCTKPath(c.InputKey)
		if !ok || len(p) == 0 || slices.ContainsFunc(p, func(s seg) bool { return s.isIdx }) {
			ps.add(cfgErr(configRoot+".input_key", "must be a member name, or members joined by . (input, request.input)"))
		}
		for _, s := range p {
			w.inputKey = append(w.inputKey, s.key)
		}
	}
	if c.VerdictPath != "" {
		p, ok := parseCTKPath(c.VerdictPath)
		if !ok {
			ps.add(cfgErr(configRoot+".verdict_path", "invalid path (use a.b[0].c, names of letters, digits, _ and -)"))
		}
		w.verdictPath, w.hasVerdictPath = p, true
	}
	for _, h := range sortedKeys(c.HeadersFromEnv) {
		at := memberPath(configRoot+".headers_from_env", h)
		if !validHeaderName(h) {
			ps.add(cfgErr(at, "invalid header name"))
			continue
		}
		name := c.HeadersFromEnv[h]
		if !envname.Valid(name) {
			// Most often the header value itself (a token) pasted where
			// the variable's name belongs: never echoed.
			ps.add(cfgErr(at, "%s", envname.Problem))
			continue
		}
		v := env.Getenv(name)
		if v == "" {
			ps.add(cfgErr(at, "environment variable %s is not set", envname.Shown(name)))
			continue
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			// Refused at send time, every call would fail as unreachable;
			// the value itself (a secret) is never printed.
			ps.add(cfgErr(at, "environment variable %s holds a character a header value cannot carry (a line break or control character; a trailing newline from a secret file?)", name))
			continue
		}
		w.headers.Set(h, v)
	}
	if err := ps.after(derr); err != nil {
		return nil, err
	}
	// Our own client: a redirect would re-send the context elsewhere, so the
	// 3xx answer itself is returned (and refused as non-2xx).
	cl := *env.HTTPClient
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	w.client = &cl
	return w, nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isMemberChar(c) {
			continue
		}
		switch c {
		case '!', '#', '$', '%', '&', '\'', '*', '+', '.', '^', '`', '|', '~':
			continue
		}
		return false
	}
	return true
}

// ErrWebhook marks webhook transport and protocol failures.
var ErrWebhook = errors.New("webhook failed")

// webhookError is a webhook failure with a payload-free class for the
// interceptor_failed message (points.FailureClasser); it wraps ErrWebhook
// and the cause, whose text (a URL, a transport detail) stays in logs.
type webhookError struct {
	class string
	cause error
}

func (e *webhookError) Error() string {
	if e.cause != nil {
		return ErrWebhook.Error() + ": " + e.class + ": " + e.cause.Error()
	}
	return ErrWebhook.Error() + ": " + e.class
}

func (e *webhookError) Unwrap() []error {
	if e.cause != nil {
		return []error{ErrWebhook, e.cause}
	}
	return []error{ErrWebhook}
}

// FailureClass implements points.FailureClasser.
func (e *webhookError) FailureClass() string { return "webhook " + e.class }

// FailureCause implements points.FailureCauser: the transport or read
// error behind the class, without the URL (whose query may hold a key,
// such as an Azure Functions ?code=), never the context or answer.
func (e *webhookError) FailureCause() string {
	if e.cause == nil {
		return e.class
	}
	return urlcheck.ErrorWithoutURL(e.cause)
}

func webhookFailed(class string, cause error) error { return &webhookError{class: class, cause: cause} }

// transportClass names a failed call without its URL or address.
func transportClass(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "call timed out"
	}
	return "unreachable"
}

// ownTimeout reports whether the webhook's own timeout (cctx) ended the
// call, and not the caller's context.
func ownTimeout(ctx, cctx context.Context) bool {
	return ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded)
}

// webhookTimedOut is the failure of a call that ran past the binding's
// own timeout. It wraps context.DeadlineExceeded, which the emitter maps
// to the spec's host_error:interceptor_timeout (§6.3), as when its own
// timer fires first; a transport error may not say so itself (a body read
// cut short).
func webhookTimedOut() error {
	return &webhookError{class: "call timed out", cause: context.DeadlineExceeded}
}

// Intercept POSTs the context and parses the answer. Transport errors,
// non-2xx statuses, oversize or non-JSON answers and a missing verdict are
// errors (interceptor_failed); the binding's own timeout is
// interceptor_timeout; an answer that is JSON but not a valid verdict is
// the *points.VerdictError (verdict_invalid).
func (w *Webhook) Intercept(ctx context.Context, c *points.Context) (points.Verdict, error) {
	if err := ctxErr(ctx); err != nil {
		return points.Verdict{}, err
	}
	body := c.Raw()
	if len(w.inputKey) > 0 {
		var b []byte
		for _, k := range w.inputKey {
			b = append(b, '{')
			b = append(b, encodeString(k)...)
			b = append(b, ':')
		}
		b = append(b, body...)
		for range w.inputKey {
			b = append(b, '}')
		}
		body = b
	}
	cctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return points.Verdict{}, webhookFailed("request could not be built", err)
	}
	for k, v := range w.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		if ownTimeout(ctx, cctx) {
			return points.Verdict{}, webhookTimedOut()
		}
		return points.Verdict{}, webhookFailed(transportClass(err), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxWebhookAnswer+1))
	if err != nil {
		if ownTimeout(ctx, cctx) {
			return points.Verdict{}, webhookTimedOut()
		}
		return points.Verdict{}, webhookFailed("answer could not be read", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return points.Verdict{}, webhookFailed(fmt.Sprintf("answered status %d", resp.StatusCode), nil)
	}
	if len(data) > MaxWebhookAnswer {
		return points.Verdict{}, webhookFailed(fmt.Sprintf("answer exceeds %d bytes", MaxWebhookAnswer), nil)
	}
	if !points.ValidJSON(data) {
		return points.Verdict{}, webhookFailed("answer is not JSON", nil)
	}
	raw := data
	if w.hasVerdictPath {
		r, ok := w.verdictPath.lookup(gjson.ParseBytes(data))
		if !ok {
			return points.Verdict{}, webhookFailed("answer has no verdict at verdict_path", nil)
		}
		raw = []byte(r.Raw)
	}
	// ParseVerdict's error is the *points.VerdictError the emitter maps to
	// verdict_invalid.
	return points.ParseVerdict(raw)
}

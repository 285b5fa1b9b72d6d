package approvals

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"golang.org/x/net/http/httpguts"

	"github.com/hooksproxy/hooksproxy/internal/envname"
	"github.com/hooksproxy/hooksproxy/points"
)

// MaxWebhookAnswer is the most a webhook resolver's answer may hold (1 MiB).
const MaxWebhookAnswer = 1 << 20

// ErrWebhook marks webhook resolver transport and protocol failures.
var ErrWebhook = errors.New("approvals: webhook resolver failed")

// Webhook is the hooksproxy.webhook approval resolver: it POSTs the
// ApprovalRequest (spec wire JSON) and reads an ApprovalResolution back.
type Webhook struct {
	url     string
	timeout time.Duration
	headers http.Header
	client  *http.Client
}

var _ points.Resolver = (*Webhook)(nil)

// NewWebhook builds a webhook resolver from its config:
//
//	url: https://approvals.example/hook   # required, http or https
//	timeout: 30s                          # optional cap on one call
//	headers_from_env: {Authorization: APPROVER_TOKEN}
//
// Header values come from getenv (nil: none may be configured); an unset
// variable is a config error. client nil is a fresh http.Client. Without
// timeout a call is bounded by the emitter's approval_resolver_ms (a
// remote approver may itself wait for a person) and client.Timeout.
func NewWebhook(cfg []byte, getenv func(string) string, client *http.Client) (points.Resolver, error) {
	c, err := parseWebhookConfig(cfg)
	if err != nil {
		return nil, err
	}
	w := &Webhook{url: c.url, timeout: c.timeout, headers: http.Header{}}
	for _, h := range c.order {
		p := memberPath("config.headers_from_env", h)
		if getenv == nil {
			return nil, cfgErr(p, "no environment to read %s from", c.headers[h])
		}
		v := getenv(c.headers[h])
		if v == "" {
			return nil, cfgErr(p, "environment variable %s is not set", envname.Shown(c.headers[h]))
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			// Refused at send time, every approval would fail; the value
			// (a secret) is never printed.
			return nil, cfgErr(p, "environment variable %s holds a character a header value cannot carry (a line break or control character; a trailing newline from a secret file?)", c.headers[h])
		}
		w.headers.Set(h, v)
	}
	if client == nil {
		client = &http.Client{}
	}
	// Our own copy: a redirect would re-send the context elsewhere, so the
	// 3xx answer itself is returned (and refused as non-2xx).
	cl := *client
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	w.client = &cl
	return w, nil
}

// requestBody writes the ApprovalRequest wire JSON. The context goes in
// byte for byte: its identity was computed over exactly those bytes.
func requestBody(req points.ApprovalRequest) ([]byte, error) {
	ident := []byte("null")
	if req.ContextIdentity != nil {
		ident, _ = json.Marshal(*req.ContextIdentity)
	}
	verdict, err := json.Marshal(req.Verdict)
	if err != nil {
		return nil, fmt.Errorf("encoding verdict: %w", err)
	}
	body := []byte(`{}`)
	body, _ = sjson.SetRawBytes(body, "context_identity", ident)
	body, _ = sjson.SetBytes(body, "interception_point", string(req.Point))
	body, _ = sjson.SetRawBytes(body, "verdict", verdict)
	ctx := bytes.TrimSpace(req.Context)
	if len(ctx) > 0 {
		if !points.ValidJSON(ctx) {
			return nil, fmt.Errorf("context is not JSON")
		}
		if body, err = sjson.SetRawBytes(body, "context", ctx); err != nil {
			return nil, fmt.Errorf("encoding context: %w", err)
		}
	}
	return body, nil
}

// Resolve implements points.Resolver. Transport errors, non-2xx statuses,
// oversize or non-JSON answers, and answers that are not a JSON object are
// errors (approval_resolver_failed). Anything else is returned as the
// remote said it, for the emitter's normative validation order (§9).
func (w *Webhook) Resolve(ctx context.Context, req points.ApprovalRequest) (points.ApprovalResolution, error) {
	body, err := requestBody(req)
	if err != nil {
		return points.ApprovalResolution{}, resolverFail("webhook request could not be built", "%w: %w", ErrWebhook, err)
	}
	if w.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.timeout)
		defer cancel()
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return points.ApprovalResolution{}, resolverFail("webhook request could not be built", "%w: building request: %w", ErrWebhook, err)
	}
	for k, v := range w.headers {
		hr.Header[k] = v
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	resp, err := w.client.Do(hr)
	if err != nil {
		return points.ApprovalResolution{}, resolverFail(webhookTransportClass(err), "%w: %w", ErrWebhook, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxWebhookAnswer+1))
	if err != nil {
		return points.ApprovalResolution{}, resolverFail("webhook answer could not be read", "%w: reading answer: %w", ErrWebhook, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return points.ApprovalResolution{}, resolverFail(fmt.Sprintf("webhook answered status %d", resp.StatusCode), "%w: status %d", ErrWebhook, resp.StatusCode)
	}
	if len(data) > MaxWebhookAnswer {
		return points.ApprovalResolution{}, resolverFail(fmt.Sprintf("webhook answer exceeds %d bytes", MaxWebhookAnswer), "%w: answer exceeds %d bytes", ErrWebhook, MaxWebhookAnswer)
	}
	return parseResolution(data, req.ContextIdentity)
}

// webhookTransportClass names a failed call without its URL or address,
// as the webhook interceptor does.
func webhookTransportClass(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "webhook call timed out"
	}
	return "webhook unreachable"
}

// parseResolution reads an ApprovalResolution without judging it: the
// emitter runs the §9 validation order (echo, outcome/verdict presence,
// §5, consistency), so the members are carried as they came. A member of
// the wrong JSON type cannot be carried as is; it is mapped to a value
// that fails the same step it would fail in the emitter (an identity that
// is not a string or null never echoes; an outcome that is not a string
// is no known outcome). A missing context_identity reads as null, as in
// the reference SDKs.
func parseResolution(data []byte, requested *string) (points.ApprovalResolution, error) {
	data = bytes.TrimSpace(data)
	if !points.ValidJSON(data) {
		return points.ApprovalResolution{}, resolverFail("webhook answer is not JSON", "%w: answer is not JSON", ErrWebhook)
	}
	root := gjson.ParseBytes(data)
	if !root.IsObject() {
		return points.ApprovalResolution{}, resolverFail("webhook answer is not a JSON object", "%w: answer is not a JSON object", ErrWebhook)
	}
	var res points.ApprovalResolution
	switch o := root.Get("outcome"); o.Type {
	case gjson.String:
		res.Outcome = o.Str
	default:
		// Absent, null or the wrong type: not one of the three outcomes.
		res.Outcome = o.Raw
	}
	switch id := root.Get("context_identity"); {
	case !id.Exists() || id.Type == gjson.Null:
	case id.Type == gjson.String:
		s := id.Str
		res.ContextIdentity = &s
	default:
		res.ContextIdentity = neverEqual(id.Raw, requested)
	}
	if v := root.Get("verdict"); v.Exists() {
		res.Verdict = json.RawMessage(v.Raw)
	}
	return res, nil
}

// neverEqual returns an identity that differs from requested, derived from
// raw for debuggability.
func neverEqual(raw string, requested *string) *string {
	s := raw
	if requested != nil && *requested == s {
		s += "\x00"
	}
	return &s
}

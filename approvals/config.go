package approvals

import (
	"bytes"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/internal/envname"
	"github.com/hooksproxy/hooksproxy/internal/urlcheck"
)

// MaxPendingLimit is the largest max_pending a config may ask for; the
// console keeps a memory of recent ids proportional to it.
const MaxPendingLimit = 100000

// ConfigError is a resolver config refused at load time. Path locates the
// member, rooted at "config" (e.g. "config.max_pending"); Msg never echoes
// the configured value.
type ConfigError struct {
	Path string
	Msg  string
}

// Error renders "path: msg".
func (e *ConfigError) Error() string { return e.Path + ": " + e.Msg }

// MemberPath implements config.MemberError, so a problem is reported at
// the member's own line rather than the resolver's.
func (e *ConfigError) MemberPath() string { return e.Path }

func cfgErr(path, format string, args ...any) *ConfigError {
	return &ConfigError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// configObject parses a config strictly: nil, empty or null is {}; it must
// be an object; every key must be in known; duplicates are refused. It
// returns the members by key.
func configObject(raw []byte, known ...string) (map[string]gjson.Result, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if !gjson.ValidBytes(raw) {
		return nil, cfgErr("config", "not valid JSON")
	}
	root := gjson.ParseBytes(raw)
	if !root.IsObject() {
		return nil, cfgErr("config", "must be an object")
	}
	allowed := make(map[string]bool, len(known))
	for _, k := range known {
		allowed[k] = true
	}
	out := map[string]gjson.Result{}
	var ps problems
	root.ForEach(func(k, v gjson.Result) bool {
		p := memberPath("config", k.Str)
		switch {
		case !allowed[k.Str]:
			ps = append(ps, cfgErr(p, "unknown key (known: %s)", joinKeys(known)))
		case out[k.Str].Exists():
			ps = append(ps, cfgErr(p, "duplicate key"))
		default:
			out[k.Str] = v
		}
		return true
	})
	return out, ps.err()
}

// problems collects every problem of one config, so that a load reports
// them all at once.
type problems []error

// err is nil, the one problem, or all of them as one error ("; " joined,
// one line, as the config loader prints a component's refusal).
func (ps problems) err() error {
	switch len(ps) {
	case 0:
		return nil
	case 1:
		return ps[0]
	}
	return joinedProblems(ps)
}

// joinedProblems is several problems as one error: "; " joined on one
// line, and each still reachable with errors.As (a *ConfigError).
type joinedProblems []error

func (j joinedProblems) Error() string {
	msgs := make([]string, len(j))
	for i, p := range j {
		msgs[i] = p.Error()
	}
	return strings.Join(msgs, "; ")
}

func (j joinedProblems) Unwrap() []error { return j }

func joinKeys(ks []string) string {
	var b bytes.Buffer
	for i, k := range ks {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
	}
	return b.String()
}

// memberPath appends key to path, quoting keys that are not plain names.
func memberPath(path, key string) string {
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return path + "[" + strconv.Quote(key) + "]"
		}
	}
	if key == "" {
		return path + `[""]`
	}
	return path + "." + key
}

// present reports whether a member was written with a value; a YAML key
// written with no value arrives as null and reads as absent.
func present(r gjson.Result) bool { return r.Exists() && r.Type != gjson.Null }

// durationOf reads a positive Go duration string ("10m").
func durationOf(path string, r gjson.Result) (time.Duration, error) {
	if r.Type != gjson.String {
		return 0, cfgErr(path, "must be a Go duration string such as \"10m\"")
	}
	d, err := time.ParseDuration(r.Str)
	if err != nil {
		return 0, cfgErr(path, "invalid duration")
	}
	if d <= 0 {
		return 0, cfgErr(path, "must be positive")
	}
	return d, nil
}

// ParseConsoleConfig decodes a hooksproxy.console config strictly:
//
//	max_pending: 1000   # queue bound; default DefaultMaxPending
//	timeout: 10m        # optional cap on one wait (expiry: approval_resolver_failed)
//
// The wait is always bounded by the declaration's
// timeouts.approval_resolver_ms as well (the emitter's resolver timeout),
// so a long timeout here needs a long approval_resolver_ms too.
func ParseConsoleConfig(cfg []byte) (ConsoleOptions, error) {
	m, err := configObject(cfg, "max_pending", "timeout")
	var ps problems
	if err != nil {
		if m == nil {
			return ConsoleOptions{}, err
		}
		ps = append(ps, err) // and go on: every problem at once
	}
	var o ConsoleOptions
	if r := m["max_pending"]; present(r) {
		const p = "config.max_pending"
		n, err := strconv.ParseInt(r.Raw, 10, 64)
		switch {
		case r.Type != gjson.Number || err != nil:
			ps = append(ps, cfgErr(p, "must be an integer"))
		case n < 1 || n > MaxPendingLimit:
			ps = append(ps, cfgErr(p, "must be between 1 and %d", MaxPendingLimit))
		default:
			o.MaxPending = int(n)
		}
	}
	if r := m["timeout"]; present(r) {
		if o.Timeout, err = durationOf("config.timeout", r); err != nil {
			ps = append(ps, err)
		}
	}
	if err := ps.err(); err != nil {
		return ConsoleOptions{}, err
	}
	return o, nil
}

// NewConsoleFromConfig builds a console from its config (see
// ParseConsoleConfig). Use ParseConsoleConfig and NewConsole to add
// Metrics or OnDecision.
func NewConsoleFromConfig(cfg []byte) (*Console, error) {
	o, err := ParseConsoleConfig(cfg)
	if err != nil {
		return nil, err
	}
	return NewConsole(o), nil
}

// webhookConfig is a decoded hooksproxy.webhook resolver config.
type webhookConfig struct {
	url     string
	timeout time.Duration
	headers map[string]string // header name → env var name, in key order
	order   []string
}

func parseWebhookConfig(cfg []byte) (webhookConfig, error) {
	m, err := configObject(cfg, "url", "timeout", "headers_from_env")
	var ps problems
	if err != nil {
		if m == nil {
			return webhookConfig{}, err
		}
		ps = append(ps, err) // and go on: every problem at once
	}
	var w webhookConfig
	switch u := m["url"]; {
	case !present(u):
		ps = append(ps, cfgErr("config.url", "required"))
	case u.Type != gjson.String:
		ps = append(ps, cfgErr("config.url", "must be a string"))
	default:
		pu, perr := url.Parse(u.Str)
		if perr != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			ps = append(ps, cfgErr("config.url", "must be an absolute http or https URL"))
		} else if why := urlcheck.Credentials(pu); why != "" {
			ps = append(ps, cfgErr("config.url", "%s", why))
		} else {
			w.url = u.Str
		}
	}
	if r := m["timeout"]; present(r) {
		if w.timeout, err = durationOf("config.timeout", r); err != nil {
			ps = append(ps, err)
		}
	}
	if h := m["headers_from_env"]; present(h) {
		if !h.IsObject() {
			ps = append(ps, cfgErr("config.headers_from_env", "must be an object of header: ENV_VAR"))
		} else {
			w.headers = map[string]string{}
			h.ForEach(func(k, v gjson.Result) bool {
				p := memberPath("config.headers_from_env", k.Str)
				switch {
				case !validHeaderName(k.Str):
					ps = append(ps, cfgErr(p, "invalid header name"))
				case v.Type != gjson.String || !envname.Valid(v.Str):
					// Most often the header value itself (a token) pasted
					// where the variable's name belongs: never echoed.
					ps = append(ps, cfgErr(p, "%s", envname.Problem))
				default:
					if _, dup := w.headers[k.Str]; dup {
						ps = append(ps, cfgErr(p, "duplicate key"))
						break
					}
					w.headers[k.Str] = v.Str
					w.order = append(w.order, k.Str)
				}
				return true
			})
		}
	}
	if err := ps.err(); err != nil {
		return webhookConfig{}, err
	}
	return w, nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' ||
			c == '+' || c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' || c == '~':
		default:
			return false
		}
	}
	return true
}

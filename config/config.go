package config

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/hooksproxy/hooksproxy/internal/envname"
	"github.com/hooksproxy/hooksproxy/points"
)

// Config is a loaded, validated hooksproxy config file.
type Config struct {
	// Source names the file the config came from.
	Source string
	// Listen is the host:port the proxy serves on.
	Listen      string
	Upstream    Upstream
	Agent       Agent
	Sessions    Sessions
	Limits      Limits
	Passthrough []string
	Records     Records
	Metrics     Metrics
	Admin       Admin
	ToolSeam    ToolSeam
	// Hooks is the sealed host declaration, every binding resolved.
	Hooks *Declaration
	// Resolvers, Redactors and IdentityProviders are the file's named
	// definitions, as written; their built forms are what Hooks references.
	Resolvers         map[string]Component
	Redactors         map[string]Component
	IdentityProviders map[string]Component
	// Warnings are what the file asks for that works, but not as written
	// (validate prints them and exits 0; serve logs them).
	Warnings []Problem

	// lines maps the config path of every key and list item the file
	// holds (hooks and kind configs included) to its line.
	lines map[string]int
}

// Line returns the 1-based line of the config path ("upstream.timeout",
// "resolvers.approvers.config.timeout"), or of its nearest ancestor the
// file holds; 0 when none is known. Checks made after loading use it to
// report their problems in place.
func (c *Config) Line(path string) int {
	for path != "" {
		if l, ok := c.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			break
		}
		path = path[:i]
	}
	return c.lines[path]
}

// Upstream is the OpenAI-compatible API the proxy forwards to.
type Upstream struct {
	// BaseURL is scheme://host[:port][/prefix], without a trailing slash;
	// requests for /v1/... go to BaseURL + /v1/...
	BaseURL string
	// APIKeyEnv names the env var whose value replaces the client's
	// Authorization header; "" keeps the client's.
	APIKeyEnv string
	// Timeout bounds one upstream call.
	Timeout time.Duration
}

// Agent is the agent identity contexts carry.
type Agent struct {
	ID        string
	Framework string
	// AllowHeaderOverride lets X-Agent-Hooks-Agent replace ID.
	AllowHeaderOverride bool
}

// Sessions configures session tracking.
type Sessions struct {
	// Header names the session; canonical MIME form.
	Header      string
	IdleTimeout time.Duration
	// MaxSessions bounds live sessions: past it a new one evicts the
	// session idle longest (one with a request in flight never is).
	MaxSessions int
}

// Limits are byte bounds; breaching one fails closed.
type Limits struct {
	MaxRequestBytes          int64
	MaxBufferedResponseBytes int64
	// MaxTotalBufferedBytes bounds the answer bytes held across all
	// requests at once; past it an answer is a host error (503).
	MaxTotalBufferedBytes int64
	// MaxContextBytes bounds one serialized context (§12.3); 0 derives it
	// from the other two (ContextBytes).
	MaxContextBytes int64
}

// ContextBytes is the context bound in force: MaxContextBytes when set,
// else room for what the request and response limits admit. A context
// carries its judged member twice (the member and target, §4.3), so a
// bound below twice those limits would fail closed on requests and
// answers the proxy otherwise accepts; it is never below the spec's
// recommended 5 MiB.
func (l Limits) ContextBytes() int64 {
	if l.MaxContextBytes > 0 {
		return l.MaxContextBytes
	}
	return max(5<<20, 2*max(l.MaxRequestBytes, l.MaxBufferedResponseBytes)+1<<20)
}

// Records configures the InterceptionRecord file sink.
type Records struct {
	// File is the JSONL path; "" writes no file.
	File string
	// Fsync syncs after every record.
	Fsync bool
	// MaxBytes rotates the file at this size; 0 never rotates.
	MaxBytes int64
	// MaxBackups is how many rotated files to keep; 0 keeps all.
	MaxBackups int
	// HostMembers adds request_id and http_request_id to every record
	// (members the spec's closed record schema does not list).
	HostMembers bool
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	Path string
}

// Admin configures the admin parts of the host API.
type Admin struct {
	// TokenEnv names the env var holding the bearer token; when it is unset
	// or empty the admin API refuses every request.
	TokenEnv string
}

// ToolSeam configures the transparent tool seam.
type ToolSeam struct {
	Transparent  bool
	MaxAutoTurns int
}

// Component is a named resolver, redactor or identity provider definition.
type Component struct {
	Kind   string
	Config json.RawMessage
}

// Defaults: loopback, fail-closed bounds, nothing passed through.
const (
	DefaultListen                   = "127.0.0.1:8080"
	DefaultUpstreamTimeout          = 10 * time.Minute
	DefaultFramework                = "openai-compatible"
	DefaultSessionHeader            = "X-Agent-Hooks-Session"
	DefaultIdleTimeout              = 15 * time.Minute
	DefaultMaxSessions              = 10000
	DefaultMaxRequestBytes          = 8 << 20
	DefaultMaxBufferedResponseBytes = 32 << 20
	DefaultMaxTotalBufferedBytes    = 512 << 20
	DefaultMetricsPath              = "/metrics"
	DefaultAdminTokenEnv            = "HOOKSPROXY_ADMIN_TOKEN"
	DefaultMaxAutoTurns             = 8
)

// MediatedPaths are the paths that always go through interception; no
// passthrough entry may cover them.
var mediatedPaths = []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"}

// maxConfigBytes bounds the config file.
const maxConfigBytes = 8 << 20

// Problem is one thing wrong with a config file.
type Problem struct {
	// Path is the config path ("upstream.timeout", "hooks.bindings[1].kind").
	Path string
	// Line is the 1-based line, 0 when unknown.
	Line int
	Msg  string
}

// Problems is every problem a config file has; Parse and Load return it.
type Problems struct {
	File string
	List []Problem
}

// Error prints one problem per line: "file:line: path: msg".
func (p *Problems) Error() string {
	var b strings.Builder
	for i, pr := range p.List {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.File)
		if pr.Line > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(pr.Line))
		}
		b.WriteString(": ")
		if pr.Path != "" {
			b.WriteString(pr.Path)
			b.WriteString(": ")
		}
		b.WriteString(pr.Msg)
	}
	return b.String()
}

// Load reads and parses the config file at path.
func Load(path string, reg Registry) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, fmt.Errorf("config: %s is a directory, not a config file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		// err names the path already (*fs.PathError).
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, path, reg)
}

// Parse parses a config file's bytes; name labels problems. It returns
// *Problems listing every problem, or the config with Hooks loaded against
// reg (plus the file's own resolvers, redactors and identity providers,
// built through reg's Factories).
func Parse(data []byte, name string, reg Registry) (*Config, error) {
	p := &parser{file: name, baseDir: filepath.Dir(name), lines: map[string]int{}}
	cfg := p.parse(data, reg)
	if len(p.probs) > 0 {
		sort.SliceStable(p.probs, func(i, j int) bool { return p.probs[i].Line < p.probs[j].Line })
		return nil, &Problems{File: name, List: p.probs}
	}
	return cfg, nil
}

// Environment is implemented by a Registry that knows the environment its
// kinds read secrets from (MapRegistry.SetGetenv). Parse then also checks
// the environment variables the file itself names that serve cannot start
// without (upstream.api_key_env), so validate reports them as serve would.
type Environment interface {
	// LookupEnv returns the getenv function, nil when none is known.
	LookupEnv() func(string) string
}

// Key returns the upstream API key from the variable APIKeyEnv names: ""
// when none is configured, an error when the variable is unset or empty.
// Parse runs the same check for registries that implement Environment.
func (u Upstream) Key(getenv func(string) string) (string, error) {
	v, msg := u.key(getenv)
	if msg != "" {
		return "", errors.New("upstream.api_key_env: " + msg)
	}
	return v, nil
}

// key is Key with the problem as a message without its path.
func (u Upstream) key(getenv func(string) string) (value, problem string) {
	if u.APIKeyEnv == "" {
		return "", ""
	}
	if getenv != nil {
		value = getenv(u.APIKeyEnv)
	}
	if value == "" {
		return "", fmt.Sprintf("env var %s is unset or empty", envname.Shown(u.APIKeyEnv))
	}
	return value, ""
}

// LookupSecret returns the value of the env var a *_env key names; an
// unset or empty variable is an error, never an empty secret.
func LookupSecret(env string) (string, error) {
	if !IsEnvName(env) {
		return "", errors.New("config: the *_env value " + NotEnvName)
	}
	v, ok := os.LookupEnv(env)
	if !ok || v == "" {
		return "", fmt.Errorf("config: environment variable %s is not set", envname.Shown(env))
	}
	return v, nil
}

type parser struct {
	file    string
	baseDir string
	probs   []Problem
	// warnings are the hooks block's advice, for Config.Warnings.
	warnings []Problem
	// passLines locates each accepted passthrough entry, in order.
	passLines []passEntry
	// lines is Config.lines, filled as the walk goes.
	lines map[string]int
	// merged are the mappings that held a (refused) merge key: what they
	// lack may be in the merged mapping, so it is not reported missing.
	merged map[string]bool
}

func (p *parser) add(line int, path, format string, args ...any) {
	p.probs = append(p.probs, Problem{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// line records the line of a config path (the first one wins).
func (p *parser) line(path string, line int) {
	if _, ok := p.lines[path]; !ok && line > 0 {
		p.lines[path] = line
	}
}

var (
	yamlLineRE       = regexp.MustCompile(`line (\d+)`)
	yamlLinePrefixRE = regexp.MustCompile(`^line \d+: `)
)

// decodeYAML parses one YAML document; a panic in the parser is a problem,
// never a crash.
func decodeYAML(data []byte) (doc *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, &parserPanic{r}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		if errors.Is(err, io.EOF) {
			return &yaml.Node{Kind: yaml.MappingNode, Line: 1}, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("yaml: line %d: a config file holds one YAML document", extra.Line)
	}
	return &n, nil
}

// yamlErrorLine is the line a YAML error is on (0: unknown). The parser's
// syntax errors leave the line out exactly when their marks are on the
// first line (it counts from zero and prints only non-zero ones, and only
// the scanner's errors get one added); its
// reader errors (a character YAML does not allow, bad UTF-8) never carry
// one, so the first such character is looked for, by YAML's own rules; a
// recovered panic is nowhere.
func yamlErrorLine(data []byte, err error) int {
	var pe *parserPanic
	if errors.As(err, &pe) {
		return 0
	}
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		if yamlParserError(msg) {
			n++ // the parser's own errors print its zero-based mark; the scanner's add one
		}
		// A mark at the end of the input may be past the last line.
		return min(n, yamlLines(data))
	}
	if !strings.Contains(msg, "control characters") && !strings.Contains(msg, "UTF-8") && !strings.Contains(msg, "Unicode character") {
		return 1
	}
	line := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if (r == utf8.RuneError && size == 1) || !yamlAllowed(r) {
			return line
		}
		switch r {
		case '\r':
			if i+1 < len(data) && data[i+1] == '\n' {
				i++ // CRLF is one break
			}
			line++
		case '\n', '\u0085', '\u2028', '\u2029':
			line++
		}
		i += size
	}
	return 0
}

// yamlLines is how many lines data has, by YAML's line breaks.
func yamlLines(data []byte) int {
	lines, open := 1, false
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		open = true
		switch r {
		case '\r':
			if i+1 < len(data) && data[i+1] == '\n' {
				i++
			}
			fallthrough
		case '\n', '\u0085', '\u2028', '\u2029':
			lines++
			open = false
		}
		i += size
	}
	if !open && lines > 1 {
		lines-- // a final break ends the last line rather than starting one
	}
	return lines
}

// yamlParserProblems are the problems yaml.v3's parser (not its scanner)
// reports: it prints their lines counted from zero.
var yamlParserProblems = []string{
	"did not find expected <stream-start>",
	"did not find expected <document start>",
	"found undefined tag handle",
	"did not find expected node content",
	"did not find expected '-' indicator",
	"did not find expected key",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found duplicate %TAG directive",
}

func yamlParserError(msg string) bool {
	for _, p := range yamlParserProblems {
		if strings.HasSuffix(msg, ": "+p) {
			return true
		}
	}
	return false
}

// yamlAllowed reports whether YAML's reader takes r (the printable set of
// YAML 1.1 §5.1, as the parser checks it: tab, line breaks, printable
// ASCII, NEL and the rest of Unicode but surrogates, U+FFFE and U+FFFF).
func yamlAllowed(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r' || r == 0x85:
		return true
	case r >= 0x20 && r <= 0x7e:
		return true
	case r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd, r >= 0x10000 && r <= 0x10ffff:
		return true
	}
	return false
}

// jsonEscapesForYAML rewrites, in a file that is JSON, the two JSON string
// escapes the YAML parser refuses: \/ (YAML 1.2 has it, yaml.v3 does not)
// and a UTF-16 surrogate pair such as \ud83d\ude00 (what Python's
// json.dumps writes for an emoji), which becomes YAML's \U0001f600. Only
// double-quoted strings are touched, so a file meant as JSON that has an
// error elsewhere (a trailing comma, 0500) is reported for that error,
// not for an escape; a single-quoted YAML string, where a backslash is
// itself, is left alone. Lines stay where they were. A file that does not
// start as JSON does (a { or [) is returned as it is.
func jsonEscapesForYAML(data []byte) []byte {
	if bytes.IndexByte(data, '\\') < 0 {
		return data
	}
	if t := bytes.TrimLeft(data, " \t\r\n\ufeff"); len(t) == 0 || t[0] != '{' && t[0] != '[' {
		return data
	}
	out := make([]byte, 0, len(data))
	inDouble, inSingle := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case inSingle:
			inSingle = c != '\''
		case !inDouble:
			inDouble, inSingle = c == '"', c == '\''
		case c == '"':
			inDouble = false
		case c == '\\' && i+1 < len(data):
			switch data[i+1] {
			case '/':
				out = append(out, '/')
				i++
				continue
			case 'u':
				hi, ok1 := hex4(data, i+2)
				if ok1 && hi >= 0xD800 && hi <= 0xDBFF && i+11 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
					if lo, ok2 := hex4(data, i+8); ok2 && lo >= 0xDC00 && lo <= 0xDFFF {
						r := 0x10000 + (hi-0xD800)<<10 + (lo - 0xDC00)
						out = fmt.Appendf(out, "\\U%08x", r)
						i += 11
						continue
					}
				}
			}
			out = append(out, c, data[i+1])
			i++
			continue
		}
		out = append(out, c)
	}
	return out
}

// parserPanic is a panic of the YAML parser, recovered.
type parserPanic struct{ v any }

func (e *parserPanic) Error() string { return fmt.Sprintf("yaml: %v", e.v) }

func (p *parser) parse(data []byte, reg Registry) *Config {
	if len(data) > maxConfigBytes {
		p.add(0, "", "the file is larger than %d bytes", maxConfigBytes)
		return nil
	}
	doc, err := decodeYAML(jsonEscapesForYAML(data))
	if err != nil {
		line := yamlErrorLine(data, err)
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = yamlLinePrefixRE.ReplaceAllString(msg, "")
		p.add(line, "", "%s", msg)
		return nil
	}
	root := doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			root = &yaml.Node{Kind: yaml.MappingNode, Line: 1}
		} else {
			root = root.Content[0]
		}
	}
	cfg := &Config{
		Source:   p.file,
		Listen:   DefaultListen,
		Upstream: Upstream{Timeout: DefaultUpstreamTimeout},
		Agent:    Agent{Framework: DefaultFramework},
		Sessions: Sessions{Header: DefaultSessionHeader, IdleTimeout: DefaultIdleTimeout, MaxSessions: DefaultMaxSessions},
		Limits: Limits{
			MaxRequestBytes:          DefaultMaxRequestBytes,
			MaxBufferedResponseBytes: DefaultMaxBufferedResponseBytes,
			MaxTotalBufferedBytes:    DefaultMaxTotalBufferedBytes,
		},
		Passthrough:       []string{},
		Metrics:           Metrics{Path: DefaultMetricsPath},
		Admin:             Admin{TokenEnv: DefaultAdminTokenEnv},
		ToolSeam:          ToolSeam{Transparent: true, MaxAutoTurns: DefaultMaxAutoTurns},
		Resolvers:         map[string]Component{},
		Redactors:         map[string]Component{},
		IdentityProviders: map[string]Component{},
		lines:             p.lines,
	}
	var hooks *yaml.Node
	var hooksLine int
	seen := map[string]bool{}
	p.mapping(root, "", func(key string, k, v *yaml.Node, path string) {
		seen[key] = true
		switch key {
		case "listen":
			if s, ok := p.str(v, path); ok {
				cfg.Listen = s
				p.checkListen(v, path, s)
			}
		case "upstream":
			p.upstream(v, path, &cfg.Upstream, seen)
		case "agent":
			p.agent(v, path, &cfg.Agent, seen)
		case "sessions":
			p.sessions(v, path, &cfg.Sessions)
		case "limits":
			p.limits(v, path, &cfg.Limits)
		case "passthrough":
			cfg.Passthrough = p.passthrough(v, path)
		case "records":
			p.records(v, path, &cfg.Records)
		case "metrics":
			p.mapping(v, path, func(key string, k, v *yaml.Node, path string) {
				switch key {
				case "path":
					if s, ok := p.str(v, path); ok {
						cfg.Metrics.Path = s
						p.checkOpsPath(v, path, s)
					}
				default:
					p.unknown(k, path, key)
				}
			})
		case "admin":
			p.mapping(v, path, func(key string, k, v *yaml.Node, path string) {
				switch key {
				case "token_env":
					cfg.Admin.TokenEnv = p.envName(v, path)
				default:
					p.unknown(k, path, key)
				}
			})
		case "tool_seam":
			p.mapping(v, path, func(key string, k, v *yaml.Node, path string) {
				switch key {
				case "transparent":
					cfg.ToolSeam.Transparent, _ = p.boolean(v, path)
				case "max_auto_turns":
					if n, ok := p.integer(v, path, 1, 1000); ok {
						cfg.ToolSeam.MaxAutoTurns = int(n)
					}
				default:
					p.unknown(k, path, key)
				}
			})
		case "hooks":
			hooks, hooksLine = v, k.Line
		case "resolvers":
			cfg.Resolvers = p.components(v, path, false)
		case "redactors":
			cfg.Redactors = p.components(v, path, false)
		case "identity_providers":
			cfg.IdentityProviders = p.components(v, path, true)
		default:
			p.unknown(k, path, key)
		}
	})
	if root.Kind == yaml.MappingNode || isNull(root) {
		// A member a section lacks is reported on the section's line, a
		// missing section on the file's first; one a refused merge key may
		// have supplied is not reported at all.
		required := func(section, member string) {
			at := section + "." + member
			if seen[at] || p.merged[section] || p.merged[""] {
				return
			}
			line := p.lines[section]
			if line == 0 {
				line = lineOf(root)
			}
			p.add(line, at, "required")
		}
		required("upstream", "base_url")
		required("agent", "id")
		if hooks == nil {
			p.add(lineOf(root), "hooks", "required: an AGENT-HOOKS host declaration (declaration: %s, bindings: [...]); zero bindings deny everything", DeclarationVersion)
		}
	}
	p.checkMetricsPassthrough(cfg)
	p.checkV1BasePassthrough(cfg)
	if l := cfg.Limits; l.MaxTotalBufferedBytes < l.MaxBufferedResponseBytes {
		line, at := p.lines["limits.max_total_buffered_bytes"], "limits.max_total_buffered_bytes"
		if line == 0 {
			line, at = p.lines["limits.max_buffered_response_bytes"], "limits.max_buffered_response_bytes"
		}
		p.add(line, at, "max_total_buffered_bytes (%d) must be at least max_buffered_response_bytes (%d): no answer of that size could be held", l.MaxTotalBufferedBytes, l.MaxBufferedResponseBytes)
	}
	p.warnEndpointBase(cfg)
	p.warnModelPassthrough(cfg)
	p.checkRecordsFile(cfg, reg)
	if env, ok := reg.(Environment); ok && env.LookupEnv() != nil {
		if _, msg := cfg.Upstream.key(env.LookupEnv()); msg != "" {
			p.add(p.lines["upstream.api_key_env"], "upstream.api_key_env", "%s", msg)
		}
	}

	ov := p.overlay(root, cfg, reg)
	if hooks != nil {
		cfg.Hooks = p.hooks(hooks, hooksLine, ov)
		cfg.Warnings = append(cfg.Warnings, p.warnings...)
	}
	lines, _ := sectionLines(root)
	p.checkApprovalBound(cfg, ov, lines)
	return cfg
}

// BoundedResolver is implemented by an approval resolver whose own config
// bounds one consultation (the console's and the webhook's timeout).
type BoundedResolver interface {
	// ResolverTimeout is the resolver's own bound; zero or less is none.
	ResolverTimeout() time.Duration
}

// checkApprovalBound warns of a declared resolver, defined in this file,
// whose own timeout is longer than the declaration's approval bound,
// timeouts.approval_resolver_ms. That bound caps every consultation (§9)
// and, when the document does not write it, the schema makes it
// interceptor_ms (5000 ms by default): the host may not pick another. So a
// console with timeout: 10m is a 5 s window. It is a warning, not a
// refusal: the config works (approvals decided within the bound lift
// their denies, later ones fail closed), and a file written from the
// product's own example must start; the warning names the value to write.
func (p *parser) checkApprovalBound(cfg *Config, ov Registry, lines map[string]int) {
	if cfg == nil || cfg.Hooks == nil {
		return
	}
	ref := cfg.Hooks.ApprovalResolverRef()
	if _, defined := cfg.Resolvers[ref]; ref == "" || !defined {
		return
	}
	r, _ := ov.Resolver(ref)
	b, ok := r.(BoundedResolver)
	if !ok {
		return
	}
	timeout, bound := b.ResolverTimeout(), cfg.Hooks.Timeouts().ApprovalResolver
	if timeout <= 0 || bound < 0 || timeout <= bound {
		return
	}
	path := "resolvers." + ref + ".config.timeout"
	line := cfg.Line(path)
	if line == 0 {
		line = lines["resolvers."+ref]
	}
	ms := (timeout + time.Millisecond - 1) / time.Millisecond
	warn := func(format string, args ...any) {
		cfg.Warnings = append(cfg.Warnings, Problem{Path: path, Line: line, Msg: "warning: " + fmt.Sprintf(format, args...)})
	}
	if cfg.Hooks.ApprovalResolverTimeoutStated() {
		warn("timeout %s exceeds hooks.configuration.timeouts.approval_resolver_ms (%d ms), the bound on every approval wait: approvals not decided within %s fail closed with host_error:approval_resolver_failed; set approval_resolver_ms to at least %d (or null for no bound)",
			timeout, bound.Milliseconds(), bound, ms)
		return
	}
	warn("timeout %s exceeds the approval bound: hooks.configuration.timeouts.approval_resolver_ms is not set, so the spec makes it interceptor_ms (%d ms), and approvals not decided within %s fail closed with host_error:approval_resolver_failed; set hooks.configuration.timeouts.approval_resolver_ms: %d (or more, or null for no bound)",
		timeout, bound.Milliseconds(), bound, ms)
}

func lineOf(n *yaml.Node) int {
	if n.Line == 0 {
		return 1
	}
	return n.Line
}

func isNull(n *yaml.Node) bool {
	n = resolveAlias(n)
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// mapping walks a YAML mapping strictly: duplicate keys, merge keys and
// non-string keys are problems; each member goes to f with its path. A null
// value (an empty section) is an empty mapping.
func (p *parser) mapping(n *yaml.Node, path string, f func(key string, k, v *yaml.Node, path string)) {
	n = resolveAlias(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, path, "must be a mapping")
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolveAlias(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.add(k.Line, path, "mapping keys must be strings")
			continue
		}
		if k.ShortTag() == "!!merge" {
			p.add(k.Line, path, "YAML merge keys (<<) are not supported")
			if p.merged == nil {
				p.merged = map[string]bool{}
			}
			p.merged[path] = true
			continue
		}
		kp := joinPath(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			if first == k.Line {
				p.add(k.Line, kp, "duplicate key (first earlier on the same line)")
			} else {
				p.add(k.Line, kp, "duplicate key (first at line %d)", first)
			}
			continue
		}
		seen[k.Value] = k.Line
		p.line(kp, k.Line)
		f(k.Value, n.Content[i], v, kp)
	}
}

// secretKeyRE matches keys that name a secret value (api_key, admin_token,
// password, ...), not ones that merely mention one (max_tokens).
var secretKeyRE = regexp.MustCompile(`(?i)^(.*[_-])?(api_?key|key|password|passwd|secret|token|private_?key|credentials?|bearer|authorization)$`)

// knownKeys lists the keys of each config section, by parent path ("" is
// the top level, "component" a resolvers/redactors/identity_providers
// entry), for did-you-mean hints.
var knownKeys = map[string][]string{
	"":          {"listen", "upstream", "agent", "sessions", "limits", "passthrough", "records", "metrics", "admin", "tool_seam", "hooks", "resolvers", "redactors", "identity_providers"},
	"upstream":  {"base_url", "api_key_env", "timeout"},
	"agent":     {"id", "framework", "allow_header_override"},
	"sessions":  {"header", "idle_timeout", "max_sessions"},
	"limits":    {"max_request_bytes", "max_buffered_response_bytes", "max_total_buffered_bytes", "max_context_bytes"},
	"records":   {"file", "fsync", "max_bytes", "max_backups", "host_members"},
	"metrics":   {"path"},
	"admin":     {"token_env"},
	"tool_seam": {"transparent", "max_auto_turns"},
	"component": {"kind", "config"},
}

// secretEnvKey returns the real *_env key that replaces an inline secret
// written as key under parent, or "" when the file has none for it.
func secretEnvKey(parent, key string) string {
	lk := strings.ToLower(key)
	switch {
	case parent == "upstream":
		return "upstream.api_key_env"
	case parent == "admin":
		return "admin.token_env"
	case parent != "":
	case strings.Contains(lk, "admin"):
		return "admin.token_env"
	case strings.Contains(lk, "upstream") || strings.Contains(lk, "openai") || strings.Contains(lk, "api_key") || strings.Contains(lk, "apikey"):
		return "upstream.api_key_env"
	}
	return ""
}

// unknown reports an unknown key k at path. A key that looks like an
// inline secret and has a real *_env counterpart gets that key as the fix;
// any other gets the closest known key of its section, when one is close.
func (p *parser) unknown(k *yaml.Node, path, key string) {
	line := resolveAlias(k).Line
	parent := ""
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		parent = path[:i]
	}
	if secretKeyRE.MatchString(key) && !strings.HasSuffix(strings.ToLower(key), "_env") {
		if env := secretEnvKey(parent, key); env != "" {
			p.add(line, path, "inline secrets are not allowed; name the environment variable that holds it with %s", env)
			return
		}
	}
	section := parent
	for _, sec := range []string{"resolvers.", "redactors.", "identity_providers."} {
		if strings.HasPrefix(parent, sec) {
			section = "component"
		}
	}
	if near := closest(key, knownKeys[section]); near != "" {
		p.add(line, path, "unknown key; did you mean %s?", near)
		return
	}
	p.add(line, path, "unknown key")
}

// closest returns the candidate within a small edit distance of key (one
// edit per four characters, at least one), or "".
func closest(key string, candidates []string) string {
	best, bestD := "", max(1, len(key)/4)+1
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(key), c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of two short ASCII strings.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func (p *parser) str(n *yaml.Node, path string) (string, bool) {
	n = resolveAlias(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		p.add(n.Line, path, "must be a string")
		return "", false
	}
	return n.Value, true
}

func (p *parser) boolean(n *yaml.Node, path string) (bool, bool) {
	n = resolveAlias(n)
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		p.add(n.Line, path, "must be true or false")
		return false, false
	}
	return b, true
}

func (p *parser) integer(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	n = resolveAlias(n)
	var x int64
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 {
		// 08 and 09 are not octal to yaml.v3, so it tags them strings.
		if _, _, msg := decimalInt(n.Value); msg != "" {
			p.add(n.Line, path, "%s", msg)
			return 0, false
		}
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&x) != nil {
		p.add(n.Line, path, "must be an integer")
		return 0, false
	}
	if x < lo || x > hi {
		p.add(n.Line, path, "must be from %d to %d", lo, hi)
		return 0, false
	}
	return x, true
}

// duration reads a positive Go duration ("90s", "10m").
func (p *parser) duration(n *yaml.Node, path string) (time.Duration, bool) {
	n = resolveAlias(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		d, err := time.ParseDuration(n.Value)
		if err == nil && d > 0 {
			return d, true
		}
	}
	p.add(n.Line, path, "must be a positive Go duration such as 30s or 10m")
	return 0, false
}

// size reads a byte size: a plain integer or a number with a unit
// (B, KB, MB, GB in powers of 1000; KiB, MiB, GiB in powers of 1024).
func (p *parser) size(n *yaml.Node, path string, allowZero bool) (int64, bool) {
	n = resolveAlias(n)
	var v int64
	ok := false
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!int":
			if _, _, msg := decimalInt(n.Value); msg != "" {
				p.add(n.Line, path, "%s", msg)
				return 0, false
			}
			ok = n.Decode(&v) == nil
		case "!!str":
			v, ok = parseSize(n.Value)
		}
	}
	if !ok || v < 0 || (v == 0 && !allowZero) {
		p.add(n.Line, path, "must be a positive size: a byte count (1048576) or a number with KiB, MiB, GiB (powers of 1024, as 8MiB) or B, KB, MB, GB (powers of 1000)")
		return 0, false
	}
	return v, true
}

var sizeUnits = map[string]int64{
	"": 1, "B": 1,
	"KB": 1000, "MB": 1000 * 1000, "GB": 1000 * 1000 * 1000,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
}

func parseSize(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || i > 15 {
		return 0, false
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	mult, ok := sizeUnits[strings.TrimSpace(s[i:])]
	if err != nil || !ok || n > (1<<62)/mult {
		return 0, false
	}
	return n * mult, true
}

// NotEnvName is the problem for a value where an environment variable's
// name belongs (a *_env key, headers_from_env) that is no such name. It
// never quotes the value: the usual cause is a secret pasted in place of
// the name, and problems reach terminals and logs.
const NotEnvName = envname.Problem

// IsEnvName reports whether s is a valid environment variable name
// ([A-Za-z_][A-Za-z0-9_]*). A value that is not may be a secret and must
// not be echoed (see NotEnvName).
func IsEnvName(s string) bool { return envname.Valid(s) }

// ShownEnvName is a valid env var name as a problem may quote it: one that
// reads like a secret (a long run of letters and digits) is not quoted.
func ShownEnvName(s string) string { return envname.Shown(s) }

func (p *parser) envName(n *yaml.Node, path string) string {
	s, ok := p.str(n, path)
	if !ok {
		return ""
	}
	if !IsEnvName(s) {
		p.add(resolveAlias(n).Line, path, NotEnvName)
		return ""
	}
	return s
}

func (p *parser) checkListen(n *yaml.Node, path, s string) {
	if err := CheckListen(s); err != nil {
		p.add(resolveAlias(n).Line, path, "%v", err)
	}
}

// CheckListen checks a listen address as the listen key does (host:port,
// port 0 to 65535); serve and validate apply it to --listen too.
func CheckListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		var pn int
		pn, err = strconv.Atoi(port)
		if err == nil && (pn < 0 || pn > 65535) {
			err = errors.New("port out of range")
		}
	}
	if err != nil {
		return errors.New("must be host:port, such as 127.0.0.1:8080")
	}
	return nil
}

// checkOpsPath checks an HTTP path the proxy serves itself (the metrics
// path): it may not shadow a mediated path, the host API or the health
// endpoints.
func (p *parser) checkOpsPath(n *yaml.Node, path, s string) {
	line := resolveAlias(n).Line
	ls := strings.TrimSuffix(strings.ToLower(s), "/")
	switch {
	case !strings.HasPrefix(s, "/") || strings.ContainsAny(s, "?#* \\") || strings.Contains(s, "//"):
		p.add(line, path, "must be a clean absolute path, such as /metrics")
	case ls == "/v1" || strings.HasPrefix(ls, "/v1/") || ls == "/agent-hooks" || strings.HasPrefix(ls, "/agent-hooks/"):
		p.add(line, path, "must be outside /v1/ and /agent-hooks/, which the proxy mediates and serves")
	case ls == "/healthz" || ls == "/readyz":
		p.add(line, path, "%s is the proxy's health endpoint; choose another path, such as /metrics", s)
	}
}

func (p *parser) upstream(n *yaml.Node, path string, u *Upstream, seen map[string]bool) {
	p.mapping(n, path, func(key string, k, v *yaml.Node, path string) {
		switch key {
		case "base_url":
			seen["upstream.base_url"] = true
			if s, ok := p.str(v, path); ok {
				u.BaseURL = p.baseURL(v, path, s)
			}
		case "api_key_env":
			u.APIKeyEnv = p.envName(v, path)
		case "timeout":
			if d, ok := p.duration(v, path); ok {
				u.Timeout = d
			}
		default:
			p.unknown(k, path, key)
		}
	})
}

func (p *parser) baseURL(n *yaml.Node, path, s string) string {
	line := resolveAlias(n).Line
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		p.add(line, path, "must be an http or https URL such as https://api.openai.com")
	case u.User != nil:
		p.add(line, path, "must not carry credentials; use upstream.api_key_env")
	case u.RawQuery != "" || u.Fragment != "":
		p.add(line, path, "must not have a query or fragment")
	default:
		return strings.TrimRight(s, "/")
	}
	return ""
}

var frameworkRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

func (p *parser) agent(n *yaml.Node, path string, a *Agent, seen map[string]bool) {
	p.mapping(n, path, func(key string, k, v *yaml.Node, path string) {
		switch key {
		case "id":
			seen["agent.id"] = true
			if s, ok := p.str(v, path); ok {
				if s == "" || len(s) > 256 || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
					p.add(resolveAlias(v).Line, path, "must be 1 to 256 printable characters")
				}
				a.ID = s
			}
		case "framework":
			if s, ok := p.str(v, path); ok {
				if !frameworkRE.MatchString(s) {
					p.add(resolveAlias(v).Line, path, "must match ^[a-z0-9_-]+$")
				}
				a.Framework = s
			}
		case "allow_header_override":
			a.AllowHeaderOverride, _ = p.boolean(v, path)
		default:
			p.unknown(k, path, key)
		}
	})
}

var headerTokenRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// credentialHeaders carry credentials (canonical form): the client's and
// the upstream's key travel in Authorization, and the admin token too.
var credentialHeaders = []string{
	"Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie",
	"X-Api-Key", "Api-Key", "X-Auth-Token", "X-Goog-Api-Key",
}

// reservedHeaders mean something else to the proxy or to HTTP (canonical
// form): a session named by one would fight its other meaning (the proxy
// answers X-Request-Id with its own id, X-Agent-Hooks-Agent names the
// agent).
var reservedHeaders = []string{
	"X-Request-Id", "X-Agent-Hooks-Agent", "X-Upstream-Request-Id", "X-Should-Retry",
	"Host", "Content-Type", "Content-Length", "Content-Encoding", "Transfer-Encoding",
	"Connection", "Accept", "Accept-Encoding", "User-Agent", "Te", "Trailer", "Upgrade",
	"Traceparent", "Tracestate",
}

// credentialWords mark a header name as a credential's whatever the
// vendor (X-Amz-Security-Token, Ocp-Apim-Subscription-Key, X-Vault-Token,
// Cf-Access-Client-Secret, Anthropic-Api-Key, ...).
var credentialWords = []string{"key", "token", "secret", "auth", "passw", "signature", "cookie", "credential"}

// credentialHeader reports whether h (any case) is, or by its name looks
// like, a credential header.
func credentialHeader(h string) bool {
	if slices.Contains(credentialHeaders, textproto.CanonicalMIMEHeaderKey(h)) {
		return true
	}
	l := strings.ToLower(h)
	return slices.ContainsFunc(credentialWords, func(w string) bool { return strings.Contains(l, w) })
}

func (p *parser) sessions(n *yaml.Node, path string, s *Sessions) {
	p.mapping(n, path, func(key string, k, v *yaml.Node, path string) {
		switch key {
		case "header":
			if h, ok := p.str(v, path); ok {
				switch {
				case !headerTokenRE.MatchString(h):
					p.add(resolveAlias(v).Line, path, "must be an HTTP header name")
				case credentialHeader(h):
					p.add(resolveAlias(v).Line, path, "%s carries credentials; session ids are written to records, response headers and logs, so name a header of their own (default %s)", textproto.CanonicalMIMEHeaderKey(h), DefaultSessionHeader)
				case slices.Contains(reservedHeaders, textproto.CanonicalMIMEHeaderKey(h)):
					p.add(resolveAlias(v).Line, path, "%s already means something to HTTP or to hooksproxy; name a header of the sessions' own (default %s)", textproto.CanonicalMIMEHeaderKey(h), DefaultSessionHeader)
				}
				s.Header = textproto.CanonicalMIMEHeaderKey(h)
			}
		case "idle_timeout":
			if d, ok := p.duration(v, path); ok {
				s.IdleTimeout = d
			}
		case "max_sessions":
			if x, ok := p.integer(v, path, 1, 1<<31-1); ok {
				s.MaxSessions = int(x)
			}
		default:
			p.unknown(k, path, key)
		}
	})
}

func (p *parser) limits(n *yaml.Node, path string, l *Limits) {
	p.mapping(n, path, func(key string, k, v *yaml.Node, path string) {
		switch key {
		case "max_request_bytes":
			if x, ok := p.size(v, path, false); ok {
				l.MaxRequestBytes = x
			}
		case "max_buffered_response_bytes":
			if x, ok := p.size(v, path, false); ok {
				l.MaxBufferedResponseBytes = x
			}
		case "max_total_buffered_bytes":
			if x, ok := p.size(v, path, false); ok {
				l.MaxTotalBufferedBytes = x
			}
		case "max_context_bytes":
			if x, ok := p.size(v, path, false); ok {
				if x > 1<<31-1 {
					p.add(resolveAlias(v).Line, path, "must be at most 2GiB")
				} else {
					l.MaxContextBytes = x
				}
			}
		default:
			p.unknown(k, path, key)
		}
	})
}

func (p *parser) records(n *yaml.Node, path string, r *Records) {
	p.mapping(n, path, func(key string, k, v *yaml.Node, path string) {
		switch key {
		case "file":
			if s, ok := p.str(v, path); ok {
				if s == "" {
					p.add(resolveAlias(v).Line, path, "must be a file path (omit records.file to write no file)")
				}
				r.File = s
			}
		case "fsync":
			r.Fsync, _ = p.boolean(v, path)
		case "host_members":
			r.HostMembers, _ = p.boolean(v, path)
		case "max_bytes":
			if x, ok := p.size(v, path, true); ok {
				r.MaxBytes = x
			}
		case "max_backups":
			if x, ok := p.integer(v, path, 0, 1<<20); ok {
				r.MaxBackups = int(x)
			}
		default:
			p.unknown(k, path, key)
		}
	})
}

// passthrough reads the forwarded-unchanged paths: exact paths, or a prefix
// ending in "*". None may cover a mediated path: there is no bypass.
func (p *parser) passthrough(n *yaml.Node, path string) []string {
	n = resolveAlias(n)
	out := []string{}
	if isNull(n) {
		return out
	}
	if n.Kind != yaml.SequenceNode {
		p.add(n.Line, path, "must be a list of paths")
		return out
	}
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		s, ok := p.str(item, ip)
		if !ok {
			continue
		}
		line := resolveAlias(item).Line
		p.line(ip, line)
		prefix, wildcard := strings.CutSuffix(s, "*")
		switch {
		case !strings.HasPrefix(s, "/") || strings.ContainsAny(prefix, "?#* \\") || strings.Contains(s, "//") ||
			strings.Contains(s, "/../") || strings.HasSuffix(prefix, "/..") || strings.Contains(s, "/./"):
			p.add(line, ip, "must be a clean absolute path, optionally ending in * for a prefix")
			continue
		}
		if covered := bypassed(s, prefix, wildcard); covered != "" {
			p.add(line, ip, "would bypass mediation or the host API (%s); it cannot be passed through", covered)
			continue
		}
		if api := chatAPIPath(s, wildcard); api != "" {
			p.add(line, ip, "covers %s, a model API path wherever an upstream's API root is (Gemini's /v1beta/openai, a gateway's /openai/v1); it cannot be passed through", api)
			continue
		}
		out = append(out, s)
		p.passLines = append(p.passLines, passEntry{path: ip, line: line})
	}
	return out
}

// chatAPIPaths are the mediated APIs as they sit under any API root.
var chatAPIPaths = []string{"/chat/completions", "/responses", "/messages"}

// chatAPIPath returns the mediated API a passthrough entry reaches under
// some API root: an entry covering it at the root ("/chat*"), an exact
// entry ending in it ("/openai/chat/completions"), or a prefix holding it
// ("/openai/deployments/x/chat/completions*"). A broader prefix
// ("/openai/*") is refused at request time instead (proxy).
func chatAPIPath(s string, wildcard bool) string {
	ls := strings.TrimSuffix(strings.ToLower(s), "/")
	for _, m := range chatAPIPaths {
		// Below the root, /messages only as Anthropic's /v1/messages: an
		// Assistants thread's …/threads/{id}/messages runs nothing.
		deep := m
		if m == "/messages" {
			deep = "/v1/messages"
		}
		if covers(s, m) || !wildcard && strings.HasSuffix(ls, deep) || wildcard && strings.Contains(ls, deep) {
			return m
		}
	}
	return ""
}

// passEntry is where one accepted passthrough entry was written.
type passEntry struct {
	path string
	line int
}

// covers reports whether the passthrough entry s (an exact path, or a
// prefix ending in *) covers path, compared as bypassed compares.
func covers(s, path string) bool {
	lp := strings.TrimSuffix(strings.ToLower(path), "/")
	if prefix, wildcard := strings.CutSuffix(s, "*"); wildcard {
		return strings.HasPrefix(lp+"/", strings.ToLower(prefix)) || strings.HasPrefix(lp, strings.ToLower(prefix))
	}
	return strings.TrimSuffix(strings.ToLower(s), "/") == lp
}

// modelPaths are other upstream APIs that run a model: passed through, what
// they generate reaches the caller unmediated. They are not refused (a
// deployment may mean it, or the upstream may not serve them), but said.
var modelPaths = []string{
	"/v1/completions", "/v1/batches", "/v1/assistants", "/v1/threads", "/v1/realtime", "/v1/images", "/v1/audio",
	"/api/chat", "/api/generate", // Ollama's native API
}

// warnModelPassthrough warns of a passthrough entry that covers one of
// modelPaths.
func (p *parser) warnModelPassthrough(cfg *Config) {
	for i, pt := range cfg.Passthrough {
		if i >= len(p.passLines) {
			break
		}
		prefix, wildcard := strings.CutSuffix(pt, "*")
		lp := strings.TrimSuffix(strings.ToLower(prefix), "/")
		for _, m := range modelPaths {
			hit := covers(pt, m) || strings.HasPrefix(lp, m+"/") || (wildcard && strings.HasPrefix(m, strings.ToLower(prefix)))
			if !hit {
				continue
			}
			e := p.passLines[i]
			cfg.Warnings = append(cfg.Warnings, Problem{Path: e.path, Line: e.line,
				Msg: fmt.Sprintf("warning: %s covers %s, an API that runs the model; passed through, its requests and answers are mediated by no binding", pt, m)})
			break
		}
	}
}

// warnEndpointBase warns of a base_url that names an endpoint rather than
// the API root (a pasted .../v1/chat/completions): chat requests would go
// to that path with /chat/completions appended again.
func (p *parser) warnEndpointBase(cfg *Config) {
	u, err := url.Parse(cfg.Upstream.BaseURL)
	if err != nil {
		return
	}
	path := strings.ToLower(strings.TrimRight(u.Path, "/"))
	for _, m := range append([]string{"/chat/completions", "/completions", "/models"}, mediatedPaths...) {
		if strings.HasSuffix(path, m) {
			cfg.Warnings = append(cfg.Warnings, Problem{Path: "upstream.base_url", Line: p.lines["upstream.base_url"],
				Msg: fmt.Sprintf("warning: base_url ends in %s, an endpoint; it should be the API root (such as https://api.openai.com or .../v1), as chat requests go to base_url + /v1/chat/completions", m)})
			return
		}
	}
}

// checkV1BasePassthrough refuses, with a base_url that ends in /v1, an
// entry outside /v1 that reaches a mediated API anyway: the proxy sends
// /v1/x to base/x and any other path p to base+p, so "/chat/completions"
// would reach the upstream's /v1/chat/completions unmediated. Such an
// entry's model-API cousins are warned of as their /v1 forms would be.
func (p *parser) checkV1BasePassthrough(cfg *Config) {
	u, err := url.Parse(cfg.Upstream.BaseURL)
	if err != nil || !strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/v1") {
		return
	}
	for i, pt := range cfg.Passthrough {
		if i >= len(p.passLines) || pt == "/v1" || strings.HasPrefix(pt, "/v1/") {
			continue
		}
		e := p.passLines[i]
		prefix, wildcard := strings.CutSuffix("/v1"+pt, "*")
		if covered := bypassed("/v1"+pt, prefix, wildcard); covered != "" {
			p.add(e.line, e.path, "with upstream.base_url ending in /v1, %s reaches the upstream's %s: it would bypass mediation; point the client at /v1 instead", pt, covered)
			continue
		}
		lp := strings.TrimSuffix(strings.ToLower(prefix), "/")
		for _, m := range modelPaths {
			if covers("/v1"+pt, m) || strings.HasPrefix(lp, m+"/") || (wildcard && strings.HasPrefix(m, strings.ToLower(prefix))) {
				cfg.Warnings = append(cfg.Warnings, Problem{Path: e.path, Line: e.line,
					Msg: fmt.Sprintf("warning: with upstream.base_url ending in /v1, %s reaches the upstream's %s, an API that runs the model; passed through, it is mediated by no binding", pt, m)})
				break
			}
		}
	}
}

// checkMetricsPassthrough refuses a passthrough entry that covers the
// metrics path: one of them would shadow the other. The problem is
// reported where the file wrote the metrics path, else at the entry.
func (p *parser) checkMetricsPassthrough(cfg *Config) {
	if cfg.Metrics.Path == "" {
		return
	}
	for i, pt := range cfg.Passthrough {
		if i >= len(p.passLines) || !covers(pt, cfg.Metrics.Path) {
			continue
		}
		e := p.passLines[i]
		if l, ok := p.lines["metrics.path"]; ok {
			p.add(l, "metrics.path", "%s is passed through by %s (line %d); choose a path no passthrough entry covers", cfg.Metrics.Path, e.path, e.line)
			continue
		}
		p.add(e.line, e.path, "%s covers the metrics path %s; remove it or move metrics.path", pt, cfg.Metrics.Path)
	}
}

// protectedPaths are served or mediated by the proxy itself.
var protectedPaths = append(append([]string{}, mediatedPaths...), "/agent-hooks", "/healthz", "/readyz")

// bypassed returns the protected path a passthrough entry would cover. It
// compares case-insensitively and ignores a trailing slash, since an
// upstream may normalize either.
func bypassed(s, prefix string, wildcard bool) string {
	ls := strings.TrimSuffix(strings.ToLower(s), "/")
	lp := strings.ToLower(prefix)
	for _, m := range protectedPaths {
		if ls == m || strings.HasPrefix(ls, m+"/") || (wildcard && strings.HasPrefix(m+"/", lp)) {
			return m
		}
	}
	return ""
}

// components reads a resolvers/redactors/identity_providers map.
func (p *parser) components(n *yaml.Node, path string, provider bool) map[string]Component {
	out := map[string]Component{}
	p.mapping(n, path, func(name string, k, v *yaml.Node, path string) {
		switch {
		case provider && !validProviderName(name):
			p.add(k.Line, path, "identity provider names must match ^[a-z][a-z0-9_-]{0,63}$ and not begin with jcs")
			return
		case !provider && !validReference(name):
			p.add(k.Line, path, "names must match ^[a-z][a-z0-9_-]{0,63}$")
			return
		}
		c := Component{Config: json.RawMessage(`{}`)}
		ok := true
		p.mapping(v, path, func(key string, k, v *yaml.Node, path string) {
			switch key {
			case "kind":
				if s, good := p.str(v, path); good {
					if !validKind(s) {
						p.add(resolveAlias(v).Line, path, `must match ^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)+$`)
						ok = false
					}
					c.Kind = s
				} else {
					ok = false
				}
			case "config":
				raw, good := p.blob(v, path)
				c.Config, ok = raw, ok && good
			default:
				p.unknown(k, path, key)
			}
		})
		if resolveAlias(v).Kind == yaml.MappingNode && c.Kind == "" && ok {
			p.add(resolveAlias(v).Line, path+".kind", "required")
			ok = false
		}
		if ok && c.Kind != "" {
			out[name] = c
		}
	})
	return out
}

// blobSecretKeys are top-level config keys that can only be inline secrets.
var blobSecretKeys = map[string]bool{
	"api_key": true, "apikey": true, "password": true, "passwd": true, "secret": true,
	"client_secret": true, "secret_key": true, "private_key": true, "token": true,
	"access_token": true, "auth_token": true, "bearer_token": true, "authorization": true,
	"key": true, "hmac_key": true,
}

// blob converts an opaque kind config to JSON. Its top-level keys may not be
// inline secrets; everything else is the kind's to validate.
func (p *parser) blob(n *yaml.Node, path string) (json.RawMessage, bool) {
	c := newConverter()
	v := c.convert(n, "", path, resolveAlias(n).Line, 0)
	if c.err != nil {
		p.add(c.err.line, c.err.path, "%s", c.err.msg)
		return nil, false
	}
	p.recordLines(c)
	ok := true
	if v.k == jObj {
		for _, m := range v.obj {
			if blobSecretKeys[strings.ToLower(m.key)] {
				l := c.locate(ptr("", m.key))
				p.add(l.line, l.path, "inline secrets are not allowed; name an environment variable with one of the kind's *_env keys instead")
				ok = false
			}
		}
	}
	return appendJSON(nil, v), ok
}

// recordLines records the line of every path a conversion visited.
func (p *parser) recordLines(c *converter) {
	for _, l := range c.locs {
		p.line(l.path, l.line)
	}
}

// hooks converts the hooks block (a declaration written in YAML, or the path
// of a JSON declaration file) and loads it, mapping refusal findings back to
// config paths and lines.
func (p *parser) hooks(n *yaml.Node, keyLine int, reg Registry) *Declaration {
	rn := resolveAlias(n)
	if rn.Kind == yaml.ScalarNode && rn.ShortTag() == "!!str" {
		file := rn.Value
		if !filepath.IsAbs(file) {
			file = filepath.Join(p.baseDir, file)
		}
		d, err := LoadDeclarationFile(file, reg)
		if err == nil && len(d.Advice()) == 0 {
			return d
		}
		// A problem or warning stands at the hooks: line of this file; its
		// message names the line inside the declaration file too.
		lines := jsonFileLines(file)
		at := func(pointer string) string {
			// A finding about the whole document (a syntax error the YAML
			// parser, which read the lines, accepted) has no line here.
			if l := lineOfPointer(lines, pointer); l > 0 && pointer != "" {
				return rn.Value + ":" + strconv.Itoa(l) + ": "
			}
			return rn.Value + ": "
		}
		if err != nil {
			p.declProblems(err, func(pointer string) loc {
				return loc{line: rn.Line, path: pointerPath("hooks", pointer)}
			}, at)
			return nil
		}
		for _, f := range d.Advice() {
			p.warnings = append(p.warnings, Problem{Path: pointerPath("hooks", f.Path), Line: rn.Line, Msg: "warning: " + at(f.Path) + f.Detail})
		}
		return d
	}
	if rn.Kind != yaml.MappingNode {
		p.add(rn.Line, "hooks", "must be a host declaration mapping, or the path of a declaration JSON file")
		return nil
	}
	c := newConverter()
	v := c.convert(n, "", "hooks", keyLine, 0)
	if c.err != nil {
		p.add(c.err.line, c.err.path, "%s: %s", ClassMalformed, c.err.msg)
		return nil
	}
	p.recordLines(c)
	d, err := LoadDeclaration(appendJSON(nil, v), reg)
	if err != nil {
		p.declProblems(err, c.locate, func(string) string { return "" })
		return nil
	}
	for _, f := range d.Advice() {
		l := c.locate(f.Path)
		p.warnings = append(p.warnings, Problem{Path: l.path, Line: l.line, Msg: "warning: " + f.Detail})
	}
	return d
}

// jsonFileLines maps the JSON pointers of a declaration file's values to
// their lines (JSON is YAML, and the YAML parser keeps lines); nil when the
// file cannot be read or parsed, whose problem then says so itself.
func jsonFileLines(file string) map[string]int {
	data, err := readDeclarationFile(file)
	if err != nil {
		return nil
	}
	doc, err := decodeYAML(data)
	if err != nil || doc == nil || len(doc.Content) == 0 {
		return nil
	}
	return nodeLines(doc.Content[0])
}

// nodeLines maps the JSON pointers of the values under n (n's own: "") to
// their lines.
func nodeLines(n *yaml.Node) map[string]int {
	lines := map[string]int{}
	var walk func(n *yaml.Node, pointer string, depth int)
	walk = func(n *yaml.Node, pointer string, depth int) {
		n = resolveAlias(n)
		if n == nil || depth > maxDepth+1 {
			return
		}
		if _, ok := lines[pointer]; !ok {
			lines[pointer] = n.Line
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				esc := strings.ReplaceAll(strings.ReplaceAll(k.Value, "~", "~0"), "/", "~1")
				lines[pointer+"/"+esc] = k.Line
				walk(n.Content[i+1], pointer+"/"+esc, depth+1)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, pointer+"/"+strconv.Itoa(i), depth+1)
			}
		}
	}
	walk(n, "", 0)
	return lines
}

// lineOfPointer is the line of pointer, or of its nearest parent that has
// one (a finding may name a member the document lacks); 0 when none does.
func lineOfPointer(lines map[string]int, pointer string) int {
	for p := pointer; ; {
		if l, ok := lines[p]; ok && l > 0 {
			return l
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return 0
		}
		p = p[:i]
	}
}

// pointerPath appends a JSON pointer to a config path in config-path form.
func pointerPath(base, pointer string) string {
	path := base
	for _, seg := range strings.Split(pointer, "/")[1:] {
		seg = unescapePointer(seg)
		if _, err := strconv.Atoi(seg); err == nil {
			path += "[" + seg + "]"
		} else {
			path = joinPath(path, seg)
		}
	}
	return path
}

// declProblems turns a refusal into one problem per finding.
func (p *parser) declProblems(err error, locate func(string) loc, prefix func(pointer string) string) {
	var de *DeclarationError
	if !errors.As(err, &de) {
		p.add(0, "hooks", "%s%v", prefix(""), err)
		return
	}
	for _, e := range append([]*DeclarationError{de}, de.Later...) {
		fs := e.Findings
		if len(fs) == 0 {
			fs = []Finding{{e.Path, e.Detail}}
		}
		for i, f := range fs {
			l := locate(f.Path)
			note := ""
			if i == len(fs)-1 && stopsPipeline(e.Class) {
				// §7.7.6: a loader reports the first failing step only.
				note = " (the declaration's later checks, bindings' configs included, run once this is fixed: more problems may follow)"
			}
			p.add(l.line, l.path, "%s%s: %s%s", prefix(f.Path), e.Class, f.Detail, note)
		}
	}
}

// overlay builds the file's named resolvers, redactors and identity
// providers through reg's Factories and layers them over reg. A definition
// that fails to build is reported here and stands in as a fail-closed
// placeholder so the declaration does not report it twice.
func (p *parser) overlay(root *yaml.Node, cfg *Config, reg Registry) Registry {
	if reg == nil {
		reg = NewRegistry()
	}
	ov := &overlay{
		Registry:   reg,
		resolvers:  map[string]points.Resolver{},
		redactors:  map[string]points.Redactor{},
		identities: map[string]points.IdentityProvider{},
	}
	lines, nodes := sectionLines(root)
	fac, hasFactories := reg.(Factories)
	build := func(section, name string, c Component, exists bool, mk func() (any, error)) (any, bool) {
		path := section + "." + name
		line := lines[path]
		if exists {
			p.add(line, path, "%q is already registered by the host", name)
			return nil, false
		}
		if !hasFactories {
			p.add(line, path, "kind %q: this host builds no %s from the config file", c.Kind, section)
			return nil, false
		}
		obj, err := safeBuild(mk)
		switch {
		case errors.Is(err, ErrUnknownKind):
			p.add(line, path+".kind", "%s", unknownComponentKind(reg, section, c.Kind))
		case err != nil:
			// As for a binding: each problem the kind reports is its own,
			// at the member it names and that member's line.
			for _, leaf := range errorLeaves(err) {
				lp, ll := path, line
				if ptr := memberPointer(leaf); ptr != "" {
					lp = pointerPath(path, ptr)
					if l := lineOfPointer(nodeLines(nodes[path]), ptr); l > 0 {
						ll = l
					}
				}
				p.add(ll, lp, "kind %q refused its config: %v", c.Kind, leaf)
			}
		case obj == nil:
			p.add(line, path, "kind %q built nothing", c.Kind)
		default:
			return obj, true
		}
		return nil, false
	}
	for _, name := range sortedKeys(cfg.Resolvers) {
		c := cfg.Resolvers[name]
		_, exists := reg.Resolver(name)
		obj, ok := build("resolvers", name, c, exists, func() (any, error) { return nilIfNil(fac.NewResolver(c.Kind, name, c.Config)) })
		if r, isR := obj.(points.Resolver); ok && isR {
			ov.resolvers[name] = r
		} else {
			ov.resolvers[name] = brokenResolver{}
		}
	}
	for _, name := range sortedKeys(cfg.Redactors) {
		c := cfg.Redactors[name]
		_, exists := reg.Redactor(name)
		obj, ok := build("redactors", name, c, exists, func() (any, error) { return nilIfNil(fac.NewRedactor(c.Kind, name, c.Config)) })
		if r, isR := obj.(points.Redactor); ok && isR {
			ov.redactors[name] = r
		} else {
			ov.redactors[name] = brokenRedactor{}
		}
	}
	for _, name := range sortedKeys(cfg.IdentityProviders) {
		c := cfg.IdentityProviders[name]
		_, exists := reg.IdentityProvider(name)
		obj, ok := build("identity_providers", name, c, exists, func() (any, error) {
			return nilIfNil(fac.NewIdentityProvider(c.Kind, name, c.Config))
		})
		ip, isIP := obj.(points.IdentityProvider)
		if ok && isIP && ip.Name() != name {
			p.add(lines["identity_providers."+name], "identity_providers."+name, "kind %q built a provider named %q; records would not match the declaration", c.Kind, ip.Name())
			isIP = false
		}
		if ok && isIP {
			ov.identities[name] = ip
		} else {
			ov.identities[name] = brokenIdentity(name)
		}
	}
	return ov
}

// nilIfNil turns a typed nil in an interface into an untyped nil.
func nilIfNil[T any](v T, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	if any(v) == nil {
		return nil, nil
	}
	return v, nil
}

func safeBuild(mk func() (any, error)) (obj any, err error) {
	defer func() {
		if r := recover(); r != nil {
			obj, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	return mk()
}

// sectionLines maps "section.name" to the line of each definition.
func sectionLines(root *yaml.Node) (map[string]int, map[string]*yaml.Node) {
	out, nodes := map[string]int{}, map[string]*yaml.Node{}
	root = resolveAlias(root)
	if root.Kind != yaml.MappingNode {
		return out, nodes
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		sec := root.Content[i].Value
		if sec != "resolvers" && sec != "redactors" && sec != "identity_providers" {
			continue
		}
		m := resolveAlias(root.Content[i+1])
		if m.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(m.Content); j += 2 {
			key := sec + "." + m.Content[j].Value
			if _, dup := out[key]; !dup {
				out[key], nodes[key] = m.Content[j].Line, m.Content[j+1]
			}
		}
	}
	return out, nodes
}

// overlay layers the config file's named definitions over a host Registry.
type overlay struct {
	Registry
	resolvers  map[string]points.Resolver
	redactors  map[string]points.Redactor
	identities map[string]points.IdentityProvider
}

// componentSections are the top-level sections that define components,
// with what each defines.
var componentSections = []struct{ name, noun string }{
	{"resolvers", "approval resolvers"}, {"redactors", "approval redactors"}, {"identity_providers", "identity providers"},
}

// componentKindLister is the registry's list of the kinds of a section
// (MapRegistry.ComponentKinds).
type componentKindLister interface {
	ComponentKinds(section string) []string
}

// unknownComponentKind says why kind builds nothing under section: a kind
// of another section or a binding kind written in the wrong place, or
// one nobody registered, with the kinds the section takes.
func unknownComponentKind(reg Registry, section, kind string) string {
	kl, ok := reg.(componentKindLister)
	noun := section
	for _, cs := range componentSections {
		if cs.name == section {
			noun = cs.noun
		}
	}
	msg := fmt.Sprintf("unknown kind %q", kind)
	if reg.HasKind(kind) {
		msg = fmt.Sprintf("kind %q is a binding kind (under hooks.bindings), not one of %s", kind, noun)
	}
	if ok {
		for _, cs := range componentSections {
			if cs.name != section && slices.Contains(kl.ComponentKinds(cs.name), kind) {
				msg = fmt.Sprintf("kind %q builds %s (under %s:), not %s", kind, cs.noun, cs.name, noun)
			}
		}
	}
	if ok {
		if ks := kl.ComponentKinds(section); len(ks) > 0 {
			msg += "; " + section + " take " + strings.Join(ks, ", ")
		}
	}
	return msg
}

func (o *overlay) Resolver(name string) (points.Resolver, bool) {
	if r, ok := o.resolvers[name]; ok {
		return r, true
	}
	return o.Registry.Resolver(name)
}

func (o *overlay) Redactor(name string) (points.Redactor, bool) {
	if r, ok := o.redactors[name]; ok {
		return r, true
	}
	return o.Registry.Redactor(name)
}

func (o *overlay) IdentityProvider(name string) (points.IdentityProvider, bool) {
	if r, ok := o.identities[name]; ok {
		return r, true
	}
	return o.Registry.IdentityProvider(name)
}

// Placeholders for definitions that failed to build; they only exist while
// a config that is already refused finishes loading, and fail closed.
type brokenResolver struct{}

var errBroken = errors.New("config: definition failed to build")

func (brokenResolver) Resolve(context.Context, points.ApprovalRequest) (points.ApprovalResolution, error) {
	return points.ApprovalResolution{}, errBroken
}

type brokenRedactor struct{}

func (brokenRedactor) Redact(context.Context, []byte) ([]byte, error) { return nil, errBroken }

type brokenIdentity string

func (b brokenIdentity) Name() string                  { return string(b) }
func (brokenIdentity) Identity([]byte) (string, error) { return "", errBroken }

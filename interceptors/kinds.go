// Package interceptors holds hooksproxy's built-in binding kinds
// (hooksproxy.allow_all, rules, content, tools, budget, models, cel,
// webhook) and the content packs' approval redactor. Each kind validates
// and compiles its config once, at load, and yields a points.Interceptor
// that is safe for concurrent use. Verdict messages name what matched (a
// pattern name, a list index, a limit) and never the matched payload.
//
// The package depends on points only; config resolves kinds through
// Builtins.
package interceptors

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// Kind is one binding kind: its namespaced name, a one-line description and
// the constructor that validates a binding's config and builds its
// interceptor. config is the binding's config as JSON and may be nil.
type Kind struct {
	Name string
	Doc  string
	New  func(bindingID string, config []byte, env Env) (points.Interceptor, error)
}

// Env is what kinds may use from the outside world, injected so that tests
// and hosts control it (the package reads no globals). Zero fields get
// defaults: a Getenv that finds nothing (the process environment is the
// host's to hand in), a fresh http.Client, time.Now.
type Env struct {
	Getenv     func(string) string
	HTTPClient *http.Client
	Now        func() time.Time
}

func (e Env) withDefaults() Env {
	if e.Getenv == nil {
		e.Getenv = func(string) string { return "" }
	}
	if e.HTTPClient == nil {
		e.HTTPClient = &http.Client{}
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	return e
}

// The built-in kind names.
const (
	KindAllowAll = "hooksproxy.allow_all"
	KindRules    = "hooksproxy.rules"
	KindContent  = "hooksproxy.content"
	KindTools    = "hooksproxy.tools"
	KindBudget   = "hooksproxy.budget"
	KindModels   = "hooksproxy.models"
	KindCEL      = "hooksproxy.cel"
	KindWebhook  = "hooksproxy.webhook"
)

// Builtins returns the built-in kinds, freshly allocated (no shared state).
func Builtins() []Kind {
	return []Kind{
		{KindAllowAll, "explicit passthrough: always allow", newAllowAll},
		{KindRules, "ordered {at, match, return} rules, first match wins (CTK interceptor_script shape)", newRules},
		{KindContent, "regexes and secrets/pii packs over every string in the target: deny, redact, escalate, warn", newContent},
		{KindTools, "tool name allow/deny/escalate globs, argument constraints and a URL egress allowlist", newTools},
		{KindBudget, "per-session and per-agent limits on model calls, tool calls, tokens and wall time", newBudget},
		{KindModels, "allowed and denied model ids at pre_model_call", newModels},
		{KindCEL, "CEL expressions over the context that pick a verdict", newCEL},
		{KindWebhook, "POSTs the context to a URL and reads a spec verdict back", newWebhook},
	}
}

// allowAll is hooksproxy.allow_all.
type allowAll struct{}

func newAllowAll(_ string, config []byte, _ Env) (points.Interceptor, error) {
	var c struct{}
	if err := decodeConfig(config, &c); err != nil {
		return nil, err
	}
	return allowAll{}, nil
}

func (allowAll) Intercept(ctx context.Context, _ *points.Context) (points.Verdict, error) {
	if err := ctx.Err(); err != nil {
		return points.Verdict{}, err
	}
	return points.Allow(), nil
}

// pointSet is an "at" member: one point or a list of points.
type pointSet []points.Point

func (s *pointSet) decodeField(path string, r gjson.Result) error {
	var items []gjson.Result
	switch {
	case r.Type == gjson.String:
		items = []gjson.Result{r}
	case r.IsArray():
		items = r.Array()
		if len(items) == 0 {
			return cfgErr(path, "must name at least one interception point")
		}
	default:
		return cfgErr(path, "must be an interception point or a list of them")
	}
	out := pointSet{}
	for i, it := range items {
		p := path
		if r.IsArray() {
			p = indexPath(path, i)
		}
		if it.Type != gjson.String {
			return cfgErr(p, "must be an interception point name")
		}
		pt, err := points.ParsePoint(it.Str)
		if err != nil {
			return cfgErr(p, "unknown interception point")
		}
		if !slices.Contains(out, pt) {
			out = append(out, pt)
		}
	}
	*s = out
	return nil
}

// has reports whether p is in s; an empty set has every point.
func (s pointSet) has(p points.Point) bool {
	if len(s) == 0 {
		return true
	}
	for _, q := range s {
		if q == p {
			return true
		}
	}
	return false
}

// duration is a Go duration string ("5s", "10m").
type duration time.Duration

func (d *duration) decodeField(path string, r gjson.Result) error {
	if r.Type != gjson.String {
		return cfgErr(path, "must be a Go duration string such as \"5s\"")
	}
	v, err := time.ParseDuration(r.Str)
	if err != nil {
		return cfgErr(path, "invalid duration")
	}
	if v <= 0 {
		return cfgErr(path, "must be positive")
	}
	*d = duration(v)
	return nil
}

// verdictSpec is a spec wire verdict written in config, validated at load.
type verdictSpec struct {
	v   points.Verdict
	set bool
}

func (vs *verdictSpec) decodeField(path string, r gjson.Result) error {
	// Config is strict where the wire is lenient: ParseVerdict ignores
	// unknown members, so "aproval" would silently drop an escalation and
	// a transform's "vaule" null the answer.
	if err := verdictKeys(path, r); err != nil {
		return err
	}
	v, err := points.ParseVerdict([]byte(r.Raw))
	if err != nil {
		return &ConfigError{Path: path, Msg: err.Error(), Err: err}
	}
	if v.Transform != nil {
		// On the wire a path outside the §5.2 grammar is a transform that
		// fails when applied; written in config it can never apply, so it
		// is refused at load.
		if _, err := points.ParseTargetPath(v.Transform.Path); err != nil {
			return &ConfigError{Path: path + ".transform.path", Msg: err.Error(), Err: err}
		}
	}
	vs.v, vs.set = v, true
	return nil
}

// verdictMembers are the members of the spec's verdict schema, which is
// closed (additionalProperties false), and of its closed sub-objects.
var verdictMembers = map[string][]string{
	"":          {"decision", "reason", "message", "warnings", "approval", "transform", "evidence", "result_labels"},
	"transform": {"path", "value"},
	"warnings":  {"reason", "message"},
	"evidence":  {"artefact", "verification_pointers"},
}

// verdictKeys refuses a config verdict member the schema does not have.
func verdictKeys(path string, r gjson.Result) error {
	if !r.IsObject() {
		return nil // ParseVerdict says what is wrong
	}
	var err error
	check := func(at, kind string, obj gjson.Result) {
		obj.ForEach(func(k, _ gjson.Result) bool {
			if !slices.Contains(verdictMembers[kind], k.Str) {
				err = cfgErr(at+"."+k.Str, "unknown verdict member (known: %s)", strings.Join(verdictMembers[kind], ", "))
			}
			return err == nil
		})
	}
	check(path, "", r)
	for _, kind := range []string{"transform", "evidence"} {
		if v := r.Get(kind); err == nil && v.IsObject() {
			check(path+"."+kind, kind, v)
		}
	}
	if ws := r.Get("warnings"); err == nil && ws.IsArray() {
		for i, w := range ws.Array() {
			if err == nil && w.IsObject() {
				check(indexPath(path+".warnings", i), "warnings", w)
			}
		}
	}
	return err
}

// verdict returns a private copy, so no caller can alias the compiled one.
func (vs verdictSpec) verdict() points.Verdict { return cloneVerdict(vs.v) }

// cloneVerdict deep-copies v's slices.
func cloneVerdict(v points.Verdict) points.Verdict {
	if v.Warnings != nil {
		v.Warnings = append([]points.Warning(nil), v.Warnings...)
	}
	if v.Approval != nil {
		v.Approval = bytes.Clone(v.Approval)
	}
	if v.Transform != nil {
		t := *v.Transform
		if t.Value != nil {
			t.Value = bytes.Clone(t.Value)
		}
		v.Transform = &t
	}
	if v.Evidence != nil {
		v.Evidence = bytes.Clone(v.Evidence)
	}
	if v.ResultLabels != nil {
		v.ResultLabels = append([]string(nil), v.ResultLabels...)
	}
	return v
}

// compileRegex compiles a config regex (RE2 syntax), reporting the error
// code only: the pattern itself is configuration and stays out of errors.
func compileRegex(path, pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		msg := "invalid regex"
		if se, ok := err.(*syntax.Error); ok {
			msg += ": " + string(se.Code)
		}
		return nil, &ConfigError{Path: path, Msg: msg, Err: err}
	}
	return re, nil
}

// reasonSpec is a verdict reason from config: a string that is not in the
// reserved host_error: namespace.
func checkReason(path, reason string) error {
	if points.IsHostError(reason) {
		return cfgErr(path, "reasons starting with %s are reserved for the host", points.HostErrorPrefix)
	}
	return nil
}

// pickReason resolves a verdict reason: the per-action one (checked at
// path), else the kind-wide one, else the default.
func pickReason(path, perAction, shared, def string) (string, error) {
	if err := checkReason(path, perAction); err != nil {
		return "", err
	}
	return firstNonEmpty(perAction, shared, def), nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// ctxErr reports cancellation of the call, wrapped for the emitter.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return &failure{class: "call cancelled", cause: err}
	}
	return nil
}

// failure is an interceptor error whose class says what failed without
// payload (points.FailureClasser): the emitter makes it the message of the
// interceptor_failed deny, which reaches records and the client. The cause
// (a CEL error may name a key of the context) stays in Error, for logs.
type failure struct {
	class string
	cause error
}

func (e *failure) Error() string {
	if e.cause == nil {
		return "interceptors: " + e.class
	}
	return "interceptors: " + e.class + ": " + e.cause.Error()
}

func (e *failure) Unwrap() error { return e.cause }

// FailureClass implements points.FailureClasser.
func (e *failure) FailureClass() string { return e.class }

// sortedKeys returns m's keys in order, so that compiled config is
// deterministic.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Every built-in kind only reads its context, so the emitter may pass it
// without a copy (points.ContextSharer).

// SharesContext reports that allow_all never writes its context.
func (allowAll) SharesContext() bool { return true }

// SharesContext reports that rules never writes its context.
func (*Rules) SharesContext() bool { return true }

// SharesContext reports that content never writes its context.
func (*Content) SharesContext() bool { return true }

// SharesContext reports that tools never writes its context.
func (*Tools) SharesContext() bool { return true }

// SharesContext reports that budget never writes its context.
func (*Budget) SharesContext() bool { return true }

// SharesContext reports that models never writes its context.
func (*Models) SharesContext() bool { return true }

// SharesContext reports that cel never writes its context.
func (*CEL) SharesContext() bool { return true }

// SharesContext reports that webhook never writes its context.
func (*Webhook) SharesContext() bool { return true }

// The kinds below do bounded CPU work and never block, so the emitter may
// run them on its own goroutine (points.InlineRunner). The webhook waits on
// the network and does not.

// RunsInline reports that allow_all never blocks.
func (allowAll) RunsInline() bool { return true }

// RunsInline reports that rules never blocks.
func (*Rules) RunsInline() bool { return true }

// RunsInline reports that content never blocks.
func (*Content) RunsInline() bool { return true }

// RunsInline reports that tools never blocks.
func (*Tools) RunsInline() bool { return true }

// RunsInline reports that budget never blocks (a short mutex hold).
func (*Budget) RunsInline() bool { return true }

// RunsInline reports that models never blocks.
func (*Models) RunsInline() bool { return true }

// RunsInline reports that cel never blocks: its evaluation is
// cost-limited (cost_limit) and checks the caller's context. It ran on a
// goroutine of its own while the interpreter's 6 KiB of stack, on top of
// the handler's frames, made every held stream keep a 32 KiB stack; the
// frames in use while a stream is held are now under a quarter of that,
// so the runtime halves such a stack at the next GC (bench's
// TestHeldStackPolicy measures the policy set, cel included), and the
// hand-off cost more CPU than it saved.
func (*CEL) RunsInline() bool { return true }

// HonorsDeadline reports whether cel's evaluation checks its context: a
// comprehension does (InterruptCheckFrequency), so for rules with one the
// emitter gives the inline call the binding's timeout as a deadline, and
// a loop of a high cost_limit stops at the timeout instead of running to
// its cost. Rules without one end within their cost whatever the context
// says, and a timer per call would cost them 3-4% of a request's CPU.
func (x *CEL) HonorsDeadline() bool { return x.loops }

// adviseAt is AdvisePoints for a kind that judges only at judged: "" when
// at (nil: every point) includes one of them, else why the binding judges
// nothing.
func adviseAt(at []points.Point, what string, judged ...points.Point) string {
	if len(at) == 0 {
		return ""
	}
	for _, p := range at {
		if slices.Contains(judged, p) {
			return ""
		}
	}
	names := make([]string, len(judged))
	for i, p := range judged {
		names[i] = string(p)
	}
	return "judges " + what + " only at " + strings.Join(names, " and ") + ", none of its points: it allows everything there"
}

// The kinds' Reasons methods list the reasons a binding's verdicts can
// carry, as its config fixed them: the metrics keep them as label values
// whatever else arrived first (a policy service that answers with ever new
// reasons fills the cap and turns later ones into "other").

// Reasons lists the content binding's reason per action.
func (ct *Content) Reasons() []string { return mapValues(ct.rules.reasons) }

// Reasons lists the tools binding's reason per outcome.
func (t *Tools) Reasons() []string { return nonEmpty(t.reasons[:]) }

// Reasons lists the models binding's reason.
func (m *Models) Reasons() []string { return nonEmpty([]string{m.reason}) }

// Reasons lists the budget binding's reason.
func (b *Budget) Reasons() []string { return nonEmpty([]string{b.reason}) }

// Reasons lists the reasons of the rules' verdicts and the default's.
func (r *Rules) Reasons() []string {
	out := []string{r.def.v.Reason}
	for _, x := range r.rules {
		out = append(out, x.ret.v.Reason)
	}
	return nonEmpty(out)
}

// Reasons lists the reasons of the rules' verdicts and the default's.
func (c *CEL) Reasons() []string {
	out := []string{c.def.v.Reason}
	for _, x := range c.rules {
		out = append(out, x.verdict.v.Reason)
	}
	return nonEmpty(out)
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return nonEmpty(out)
}

// nonEmpty is ss without empty strings and repeats.
func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

package interceptors

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// budgetConfig is hooksproxy.budget.
type budgetConfig struct {
	MaxModelCalls       *int64   `json:"max_model_calls"`
	MaxToolCalls        *int64   `json:"max_tool_calls"`
	MaxPromptTokens     *int64   `json:"max_prompt_tokens"`
	MaxCompletionTokens *int64   `json:"max_completion_tokens"`
	MaxTotalTokens      *int64   `json:"max_total_tokens"`
	MaxElapsed          duration `json:"max_elapsed"`
	Scope               string   `json:"scope"`
	Reason              string   `json:"reason"`
	Message             string   `json:"message"`
	MaxSessions         *int64   `json:"max_sessions"`
	RequireUsage        bool     `json:"require_usage"`
}

// DefaultBudgetMaxSessions bounds the sessions (and, separately, agents) a
// budget tracks; the least recently seen is forgotten beyond it.
const DefaultBudgetMaxSessions = 10000

// Budget scopes.
const (
	scopeSession = "session"
	scopeAgent   = "agent"
	scopeBoth    = "both"
)

// counters is what one session or agent has used.
type counters struct {
	modelCalls, toolCalls, prompt, completion int64
	first                                     time.Time
}

type lruEntry struct {
	key string
	c   counters
}

// lru is a size-bounded map of counters, least recently used evicted.
type lru struct {
	cap int
	m   map[string]*list.Element
	l   *list.List
}

func newLRU(capacity int) *lru {
	return &lru{cap: capacity, m: map[string]*list.Element{}, l: list.New()}
}

// get returns the counters of key, creating them with first = now.
func (c *lru) get(key string, now time.Time) *counters {
	if e, ok := c.m[key]; ok {
		c.l.MoveToFront(e)
		return &e.Value.(*lruEntry).c
	}
	// The key may be a view into a context (gjson on bytesView): clone it,
	// or the entry would pin that whole context for as long as it lives.
	ent := &lruEntry{key: strings.Clone(key), c: counters{first: now}}
	c.m[ent.key] = c.l.PushFront(ent)
	for c.l.Len() > c.cap {
		old := c.l.Back()
		c.l.Remove(old)
		delete(c.m, old.Value.(*lruEntry).key)
	}
	return &ent.c
}

// peek returns the counters of key, or nil, without touching the order.
func (c *lru) peek(key string) *counters {
	if e, ok := c.m[key]; ok {
		return &e.Value.(*lruEntry).c
	}
	return nil
}

func (c *lru) remove(key string) {
	if e, ok := c.m[key]; ok {
		c.l.Remove(e)
		delete(c.m, key)
	}
}

func (c *lru) len() int { return c.l.Len() }

// limit is one configured maximum.
type limit struct {
	name string
	max  int64
	used func(*counters) int64
	// at is the point whose action the limit gates.
	at points.Point
	// next is added to used before comparing (1 for a call about to be made).
	next int64
}

// Budget is the hooksproxy.budget interceptor. It counts what it sees:
// pre_model_call is a model call, pre_tool_call a tool call, and
// post_model_call adds usage.prompt_tokens and usage.completion_tokens.
type Budget struct {
	limits          []limit
	maxElapsed      time.Duration
	session, agent  bool
	reason, message string
	now             func() time.Time
	// requireUsage: a post_model_call without numeric usage denies.
	requireUsage bool

	mu       sync.Mutex
	sessions *lru
	agents   *lru
}

func newBudget(_ string, config []byte, env Env) (points.Interceptor, error) {
	var c budgetConfig
	derr := decodeConfig(config, &c) // what did decode is still checked (problems.after)
	env = env.withDefaults()
	b := &Budget{maxElapsed: time.Duration(c.MaxElapsed), reason: c.Reason, message: c.Message, now: env.Now}
	if b.reason == "" {
		b.reason = "budget_exceeded"
	}
	var ps problems
	ps.add(checkReason(configRoot+".reason", c.Reason))
	switch c.Scope {
	case "", scopeSession:
		b.session = true
	case scopeAgent:
		b.agent = true
	case scopeBoth:
		b.session, b.agent = true, true
	default:
		ps.add(cfgErr(configRoot+".scope", "must be session, agent or both"))
	}
	limits := 0
	add := func(key string, v *int64, at points.Point, next int64, used func(*counters) int64) {
		if v == nil {
			return
		}
		limits++
		if *v < 0 {
			ps.add(cfgErr(configRoot+"."+key, "must be >= 0"))
			return
		}
		b.limits = append(b.limits, limit{name: key, max: *v, used: used, at: at, next: next})
	}
	add("max_model_calls", c.MaxModelCalls, points.PreModelCall, 1, func(c *counters) int64 { return c.modelCalls })
	add("max_tool_calls", c.MaxToolCalls, points.PreToolCall, 1, func(c *counters) int64 { return c.toolCalls })
	// Token limits stop the next model call once reached: the call that
	// crosses a limit has already been paid for.
	add("max_prompt_tokens", c.MaxPromptTokens, points.PreModelCall, 0, func(c *counters) int64 { return c.prompt })
	add("max_completion_tokens", c.MaxCompletionTokens, points.PreModelCall, 0, func(c *counters) int64 { return c.completion })
	add("max_total_tokens", c.MaxTotalTokens, points.PreModelCall, 0, func(c *counters) int64 { return c.prompt + c.completion })
	if limits == 0 && b.maxElapsed == 0 {
		ps.add(cfgErr(configRoot, "needs at least one max_* limit"))
	}
	if c.RequireUsage {
		if c.MaxPromptTokens == nil && c.MaxCompletionTokens == nil && c.MaxTotalTokens == nil {
			ps.add(cfgErr(configRoot+".require_usage", "needs a max_*_tokens limit"))
		}
		b.requireUsage = true
	}
	capacity := int64(DefaultBudgetMaxSessions)
	if c.MaxSessions != nil {
		if *c.MaxSessions < 1 {
			ps.add(cfgErr(configRoot+".max_sessions", "must be >= 1"))
		} else {
			capacity = *c.MaxSessions
		}
	}
	if err := ps.after(derr); err != nil {
		return nil, err
	}
	b.sessions = newLRU(int(capacity))
	b.agents = newLRU(int(capacity))
	return b, nil
}

// CheckPoints refuses a binding whose points leave a configured limit
// unenforced: a call limit is counted and gated at its pre point; a token
// limit is counted at post_model_call and gated at pre_model_call;
// max_elapsed is gated at input, pre_model_call or pre_tool_call. (A
// binding with no points is bound everywhere.)
func (b *Budget) CheckPoints(at []points.Point) error {
	if len(at) == 0 {
		return nil
	}
	has := func(p points.Point) bool { return slices.Contains(at, p) }
	var missing []string
	for _, l := range b.limits {
		need := []points.Point{l.at}
		if l.next == 0 { // a token limit
			need = append(need, points.PostModelCall)
		}
		for _, p := range need {
			if !has(p) {
				missing = append(missing, fmt.Sprintf("%s needs %s", l.name, p))
			}
		}
	}
	if b.maxElapsed > 0 && !has(points.Input) && !has(points.PreModelCall) && !has(points.PreToolCall) {
		missing = append(missing, "max_elapsed needs input, pre_model_call or pre_tool_call")
	}
	// The clock starts at the first context the binding sees: unless that
	// is the session's first (agent_startup, or input right after it), a
	// session that began long before its first model or tool call would
	// be timed from that call, not from its start.
	if b.maxElapsed > 0 && !has(points.AgentStartup) && !has(points.Input) {
		missing = append(missing, "max_elapsed needs agent_startup or input, where the session's clock starts")
	}
	if len(missing) > 0 {
		return fmt.Errorf("the binding's points leave limits unenforced (%s); bind it there too", strings.Join(missing, ", "))
	}
	return nil
}

// exceeded reports the first limit at p that a call would break.
func (b *Budget) exceeded(p points.Point, c *counters) (limit, bool) {
	for _, l := range b.limits {
		if l.at != p {
			continue
		}
		used := l.used(c) + l.next
		if (l.next > 0 && used > l.max) || (l.next == 0 && used >= l.max) {
			return l, true
		}
	}
	return limit{}, false
}

// reads reports whether the budget has anything to do at p: count (model
// and tool calls, usage), check a limit, forget a session at its end, or,
// with max_elapsed, start a session's clock at its first point. Elsewhere
// (agent_startup, input, output, post_tool_call without max_elapsed) it
// allows without reading the context, since no counter or verdict could
// differ.
func (b *Budget) reads(p points.Point) bool {
	switch p {
	case points.PreModelCall, points.PostModelCall, points.PreToolCall, points.AgentShutdown:
		return true
	}
	return b.maxElapsed > 0
}

// Intercept counts and checks. Limits gate pre_model_call (calls and
// tokens) and pre_tool_call (calls); max_elapsed also gates input.
// agent_shutdown forgets the session.
func (b *Budget) Intercept(ctx context.Context, c *points.Context) (points.Verdict, error) {
	if err := ctxErr(ctx); err != nil {
		return points.Verdict{}, err
	}
	p := c.Point()
	if !b.reads(p) {
		return points.Allow(), nil
	}
	m := readBudgetMembers(c, true)
	agentID, sessionID := m.ids()
	sessKey := agentID + "\x00" + sessionID // on the stack: lru.get clones what it keeps
	ts, usage := m.ts, m.usage
	now, err := points.ParseTimestamp(gjson.Parse(bytesView(ts)).Str)
	if err != nil {
		now = b.now()
	}
	var prompt, completion int64
	if p == points.PostModelCall {
		u := gjson.Parse(bytesView(usage))
		pt, ct := u.Get("prompt_tokens"), u.Get("completion_tokens")
		if b.requireUsage && (pt.Type != gjson.Number || ct.Type != gjson.Number) {
			// An answer without usage cannot be counted: with
			// require_usage a token budget refuses it rather than let
			// it through uncounted.
			msg := b.message
			if msg == "" {
				msg = "model answer carries no usage, so the token budget cannot count it"
			}
			return points.Deny(b.reason, msg), nil
		}
		prompt = nonNeg(pt.Int())
		completion = nonNeg(ct.Int())
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if p == points.AgentShutdown {
		b.sessions.remove(sessKey)
		return points.Allow(), nil
	}
	type scoped struct {
		name string
		c    *counters
	}
	var scopes []scoped
	// The session entry also carries the elapsed clock in agent scope.
	sess := b.sessions.get(sessKey, now)
	if b.session {
		scopes = append(scopes, scoped{"session", sess})
	}
	if b.agent {
		scopes = append(scopes, scoped{"agent", b.agents.get(agentID, now)})
	}
	switch p {
	case points.Input, points.PreModelCall, points.PreToolCall:
		if b.maxElapsed > 0 && now.Sub(sess.first) > b.maxElapsed {
			return b.deny("session", "max_elapsed", b.maxElapsed.String()), nil
		}
	}
	for _, s := range scopes {
		if l, over := b.exceeded(p, s.c); over {
			return b.deny(s.name, l.name, fmt.Sprint(l.max)), nil
		}
	}
	for _, s := range scopes {
		switch p {
		case points.PreModelCall:
			s.c.modelCalls++
		case points.PreToolCall:
			s.c.toolCalls++
		case points.PostModelCall:
			s.c.prompt += prompt
			s.c.completion += completion
		}
	}
	return points.Allow(), nil
}

// Denied takes back a call the budget counted at pre_model_call or
// pre_tool_call when the emission's action did not proceed: a later
// binding denied it (or an approver rejected it), so it was never made
// (points.DenialObserver). Counting at once and taking back, rather than
// counting after the outcome, keeps concurrent calls on one session from
// passing a limit together.
func (b *Budget) Denied(c *points.Context, own points.Verdict) {
	p := c.Point()
	if !own.Decision.Permits() || (p != points.PreModelCall && p != points.PreToolCall) {
		return
	}
	agentID, sessionID := readBudgetMembers(c, false).ids()
	sessKey := agentID + "\x00" + sessionID
	b.mu.Lock()
	defer b.mu.Unlock()
	take := func(cs *counters) {
		switch {
		case cs == nil:
		case p == points.PreModelCall && cs.modelCalls > 0:
			cs.modelCalls--
		case p == points.PreToolCall && cs.toolCalls > 0:
			cs.toolCalls--
		}
	}
	if b.session {
		take(b.sessions.peek(sessKey))
	}
	if b.agent {
		take(b.agents.peek(agentID))
	}
}

// budgetMembers are the context members a budget reads, as views: the
// context does not change while an interceptor runs (gjson's byte
// functions would copy every result).
type budgetMembers struct{ agent, session, ts, usage []byte }

// readBudgetMembers finds them in one walk of the root (a gjson path per
// member rescanned the context, past a long answer for usage, each time);
// with all, the timestamp and at post_model_call the usage too.
func readBudgetMembers(c *points.Context, all bool) budgetMembers {
	var m budgetMembers
	p := c.Point()
	points.ForEachMember(c.Raw(), func(name string, v []byte) bool {
		switch name {
		case "agent":
			m.agent = v
		case "session":
			m.session = v
		case "timestamp":
			m.ts = v
		case "usage":
			m.usage = v
		}
		// Stop once everything is found (names are unique in a checked
		// context), rather than walk on through the target.
		return m.agent == nil || m.session == nil || all && (m.ts == nil || (p == points.PostModelCall && m.usage == nil))
	})
	return m
}

// ids are agent.id and session.id (views into the context).
func (m budgetMembers) ids() (agentID, sessionID string) {
	return gjson.Get(bytesView(m.agent), "id").Str, gjson.Get(bytesView(m.session), "id").Str
}

func (b *Budget) deny(scope, name, max string) points.Verdict {
	msg := b.message
	if msg == "" {
		msg = fmt.Sprintf("%s budget exceeded: %s (%s)", scope, name, max)
	}
	return points.Deny(b.reason, msg)
}

func nonNeg(n int64) int64 {
	if n < 0 {
		return 0
	}
	return n
}

// tracked reports how many sessions and agents the budget holds (tests).
func (b *Budget) tracked() (sessions, agents int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions.len(), b.agents.len()
}

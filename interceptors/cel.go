package interceptors

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// celConfig is hooksproxy.cel.
type celConfig struct {
	Rules     []celRuleConfig `json:"rules"`
	Default   verdictSpec     `json:"default"`
	CostLimit *int64          `json:"cost_limit"`
}

type celRuleConfig struct {
	When    string      `json:"when"`
	Verdict verdictSpec `json:"verdict"`
}

// DefaultCELCostLimit bounds one expression's evaluation cost (CEL's
// abstract CPU units), so a policy cannot stall the hot path.
const DefaultCELCostLimit = 1_000_000

type celRule struct {
	prg     cel.Program
	verdict verdictSpec
}

// CEL is the hooksproxy.cel interceptor.
type CEL struct {
	rules []celRule
	def   verdictSpec
	// loops: some rule has a comprehension (all, exists, map, ...), the
	// only evaluation cel-go interrupts when its context ends, so the only
	// one worth a deadline (HonorsDeadline).
	loops bool
}

func newCEL(_ string, config []byte, _ Env) (points.Interceptor, error) {
	var c celConfig
	derr := decodeConfig(config, &c) // what did decode is still checked (problems.after)
	var ps problems
	if len(c.Rules) == 0 {
		ps.add(cfgErr(configRoot+".rules", "needs at least one rule"))
	}
	cost := uint64(DefaultCELCostLimit)
	if c.CostLimit != nil {
		if *c.CostLimit < 1 {
			ps.add(cfgErr(configRoot+".cost_limit", "must be >= 1"))
		} else {
			cost = uint64(*c.CostLimit)
		}
	}
	// The strings extension (split, join, trim, lowerAscii, indexOf, ...)
	// is part of cel-go; policies over addresses and content parts need it.
	// Its calls that can build a result far larger than their inputs are
	// guarded (celGuards).
	opts := append([]cel.EnvOption{cel.Variable("ctx", cel.DynType), cel.CustomTypeAdapter(jsonAdapter{}), ext.Strings()}, celGuards(cost)...)
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("interceptors: cel environment: %w", err)
	}
	out := &CEL{def: c.Default}
	for i, rc := range c.Rules {
		at := indexPath(configRoot+".rules", i)
		noWhen := strings.TrimSpace(rc.When) == ""
		if noWhen {
			ps.add(cfgErr(at+".when", "required"))
		}
		if !rc.Verdict.set {
			ps.add(cfgErr(at+".verdict", "required"))
		}
		if noWhen {
			continue
		}
		ast, iss := env.Compile(rc.When)
		if iss != nil && iss.Err() != nil {
			ps.add(&ConfigError{Path: at + ".when", Msg: celIssues(iss), Err: iss.Err()})
			continue
		}
		if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
			ps.add(cfgErr(at+".when", "must be a bool expression, not %s", t))
			continue
		}
		prg, err := env.Program(ast, append([]cel.ProgramOption{cel.CostLimit(cost), cel.InterruptCheckFrequency(100)}, celResultCost()...)...)
		if err != nil {
			ps.add(&ConfigError{Path: at + ".when", Msg: "cannot build program", Err: err})
			continue
		}
		out.rules = append(out.rules, celRule{prg: prg, verdict: rc.Verdict})
		out.loops = out.loops || hasComprehension(ast.NativeRep().Expr())
	}
	if err := ps.after(derr); err != nil {
		return nil, err
	}
	return out, nil
}

// celIssues renders compile errors as "line:col: message", without the
// source snippet (the expression is configuration).
func celIssues(iss *cel.Issues) string {
	var parts []string
	for _, e := range iss.Errors() {
		parts = append(parts, fmt.Sprintf("%d:%d: %s", e.Location.Line(), e.Location.Column()+1, e.Message))
	}
	return "invalid CEL: " + strings.Join(parts, "; ")
}

// hasComprehension reports whether e holds a comprehension.
func hasComprehension(e celast.Expr) bool {
	found := false
	celast.PostOrderVisit(e, celast.NewExprVisitor(func(x celast.Expr) {
		found = found || x.Kind() == celast.ComprehensionKind
	}))
	return found
}

// Intercept evaluates the rules in order; the first true one answers, then
// the default, then allow. An evaluation error (a missing key outside a
// has() guard, a non-bool result, the cost limit) is returned as an error.
func (x *CEL) Intercept(ctx context.Context, c *points.Context) (points.Verdict, error) {
	if err := ctxErr(ctx); err != nil {
		return points.Verdict{}, err
	}
	act := &lazyActivation{raw: c.Raw()}
	for i, r := range x.rules {
		val, _, err := r.prg.ContextEval(ctx, act)
		if err != nil {
			if cerr := ctxErr(ctx); cerr != nil {
				return points.Verdict{}, cerr
			}
			class := fmt.Sprintf("cel rules[%d].when: evaluation error", i)
			if strings.Contains(err.Error(), "cost limit") {
				class = fmt.Sprintf("cel rules[%d].when: cost limit exceeded", i)
			}
			return points.Verdict{}, &failure{class: class, cause: err}
		}
		b, ok := val.Value().(bool)
		if !ok {
			return points.Verdict{}, &failure{class: fmt.Sprintf("cel rules[%d].when: result is %s, not bool", i, val.Type().TypeName())}
		}
		if b {
			return r.verdict.verdict(), nil
		}
	}
	if x.def.set {
		return x.def.verdict(), nil
	}
	return points.Allow(), nil
}

// lazyActivation binds ctx to the context. The context is not decoded:
// jsonAdapter turns a JSON value into a CEL value only when an expression
// reaches it, so a rule on model.id never walks a long message history.
type lazyActivation struct {
	raw []byte
	ctx ref.Val // the root, adapted on first use and shared by every rule
}

func (a *lazyActivation) ResolveName(name string) (any, bool) {
	if name != "ctx" {
		return nil, false
	}
	if a.ctx == nil {
		a.ctx = jsonAdapter{}.NativeToValue(jsonValue(a.raw))
	}
	return a.ctx, true
}

func (a *lazyActivation) Parent() interpreter.Activation { return nil }

// jsonValue is one raw JSON value of a context that passed the encoding
// check, so it is valid JSON.
type jsonValue []byte

// jsonAdapter adapts JSON values for CEL one level at a time: an object
// becomes a jsonObject that finds members on demand and an array a list
// whose elements are adapted (by this adapter) when read. Everything else
// goes to CEL's default adapter.
type jsonAdapter struct{}

func (a jsonAdapter) NativeToValue(v any) ref.Val {
	if n, ok := v.(*jsonNode); ok {
		if n.val == nil {
			n.val = a.NativeToValue(n.raw)
		}
		return n.val
	}
	raw, ok := v.(jsonValue)
	if !ok {
		return types.DefaultTypeAdapter.NativeToValue(v)
	}
	i := 0
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	if i < len(raw) {
		switch raw[i] {
		case '{':
			return &jsonObject{raw: raw[i:]}
		case '[':
			var nodes []jsonNode
			points.ForEachElement(raw[i:], func(e []byte) bool { nodes = append(nodes, jsonNode{raw: e}); return true })
			elems := make([]any, len(nodes))
			for k := range nodes {
				elems[k] = &nodes[k]
			}
			return jsonList{Lister: types.NewDynamicList(a, elems).(traits.Lister), raw: raw[i:]}
		}
	}
	return types.DefaultTypeAdapter.NativeToValue(celScalar(gjson.ParseBytes(raw)))
}

// jsonObject is a JSON object as a CEL map. Member lookups by name, what
// field selection and "in" do, index the members once and adapt only the
// value asked for; anything else (iteration, equality, conversion)
// materializes the whole map once and delegates to CEL's own map, so the
// semantics are CEL's. As with encoding/json, the last of duplicate names
// wins.
type jsonObject struct {
	raw     []byte
	members []jsonMember
	indexed bool
	full    traits.Mapper
}

type jsonMember struct {
	name  string
	value jsonNode // its address is handed out once the members are indexed
}

// jsonNode is a raw value adapted once, on first use: a rule that reads
// ctx.messages[i].content in a loop over the history reads the same few
// values thousands of times, and adapting them anew each time would copy
// the history (and each long text) as often, past anything the cost limit
// counts.
type jsonNode struct {
	raw jsonValue
	val ref.Val
}

var _ traits.Mapper = (*jsonObject)(nil)

func (o *jsonObject) index() []jsonMember {
	if !o.indexed {
		o.indexed = true
		// One allocation for a context envelope (up to 16 members); a
		// member takes at least 6 bytes ("a":1,), which bounds small ones.
		o.members = make([]jsonMember, 0, min(16, len(o.raw)/6+1))
		points.ForEachMember(o.raw, func(name string, v []byte) bool {
			o.members = append(o.members, jsonMember{name: name, value: jsonNode{raw: v}})
			return true
		})
	}
	return o.members
}

// FindStringKey is the interpreter's fast path for field selection: it
// returns the member's raw value, adapted by jsonAdapter when used.
func (o *jsonObject) FindStringKey(s string) (any, bool) {
	ms := o.index()
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].name == s {
			return &ms[i].value, true
		}
	}
	return nil, false
}

func (o *jsonObject) materialize() traits.Mapper {
	if o.full == nil {
		ms := o.index()
		m := make(map[string]any, len(ms))
		for i := range ms {
			m[ms[i].name] = &ms[i].value
		}
		o.full = types.NewStringInterfaceMap(jsonAdapter{}, m).(traits.Mapper)
	}
	return o.full
}

// Find implements traits.Mapper.
func (o *jsonObject) Find(key ref.Val) (ref.Val, bool) {
	if k, ok := key.(types.String); ok {
		v, found := o.FindStringKey(string(k))
		if !found {
			return nil, false
		}
		return jsonAdapter{}.NativeToValue(v), true
	}
	return o.materialize().Find(key)
}

// Get implements traits.Indexer.
func (o *jsonObject) Get(key ref.Val) ref.Val {
	if v, found := o.Find(key); found {
		return v
	}
	return o.materialize().Get(key) // CEL's own error for a missing or mistyped key
}

// Contains implements traits.Container.
func (o *jsonObject) Contains(key ref.Val) ref.Val {
	if _, ok := key.(types.String); ok {
		_, found := o.Find(key)
		return types.Bool(found)
	}
	return o.materialize().Contains(key)
}

// Size implements traits.Sizer: the number of distinct names.
func (o *jsonObject) Size() ref.Val { return o.materialize().Size() }

// Iterator implements traits.Iterable.
func (o *jsonObject) Iterator() traits.Iterator { return o.materialize().Iterator() }

// ConvertToNative implements ref.Val.
func (o *jsonObject) ConvertToNative(t reflect.Type) (any, error) { return convertJSON(o.raw, t) }

// ConvertToType implements ref.Val.
func (o *jsonObject) ConvertToType(t ref.Type) ref.Val {
	if t == types.MapType {
		return o
	}
	return o.materialize().ConvertToType(t)
}

// Equal implements ref.Val.
func (o *jsonObject) Equal(other ref.Val) ref.Val { return o.materialize().Equal(other) }

// Type implements ref.Val.
func (o *jsonObject) Type() ref.Type { return types.MapType }

// Value implements ref.Val: the object decoded.
func (o *jsonObject) Value() any { return celDecodeJSON(gjson.ParseBytes(o.raw)) }

// IsZeroValue reports whether the object has no members.
func (o *jsonObject) IsZeroValue() bool { return len(o.index()) == 0 }

// jsonList is a JSON array as a CEL list: elements are adapted when read.
// Conversion to Go decodes the array, since the elements CEL holds are raw.
type jsonList struct {
	traits.Lister
	raw []byte
}

// ConvertToNative implements ref.Val.
func (l jsonList) ConvertToNative(t reflect.Type) (any, error) { return convertJSON(l.raw, t) }

// ConvertToType implements ref.Val; to a list it stays a jsonList, so a
// later conversion to Go still decodes.
func (l jsonList) ConvertToType(t ref.Type) ref.Val {
	if t == types.ListType {
		return l
	}
	return l.Lister.ConvertToType(t)
}

// Value implements ref.Val: the array decoded.
func (l jsonList) Value() any { return celDecodeJSON(gjson.ParseBytes(l.raw)) }

// convertJSON converts a raw object or array to a Go value of type t by
// decoding it whole, the rare path (a rule's result is a bool).
func convertJSON(raw []byte, t reflect.Type) (any, error) {
	return types.DefaultTypeAdapter.NativeToValue(celDecodeJSON(gjson.ParseBytes(raw))).ConvertToNative(t)
}

// celDecodeJSON decodes a JSON value into maps, slices and celScalar values;
// the last of duplicate names wins.
func celDecodeJSON(r gjson.Result) any {
	switch {
	case r.IsArray():
		out := []any{}
		r.ForEach(func(_, v gjson.Result) bool { out = append(out, celDecodeJSON(v)); return true })
		return out
	case r.IsObject():
		out := map[string]any{}
		r.ForEach(func(k, v gjson.Result) bool { out[k.Str] = celDecodeJSON(v); return true })
		return out
	}
	return celScalar(r)
}

// celScalar converts a JSON scalar to the Go value CEL adapts natively:
// integers become int64 (so ctx.sequence == 3 holds), other numbers
// float64, null nil.
func celScalar(r gjson.Result) any {
	switch r.Type {
	case gjson.String:
		return r.Str
	case gjson.True:
		return true
	case gjson.False:
		return false
	case gjson.Number:
		if n, err := strconv.ParseInt(r.Raw, 10, 64); err == nil {
			return n
		}
		return r.Num
	}
	return nil
}

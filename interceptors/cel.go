package interceptors

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
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
}

func newCEL(_ string, config []byte, _ Env) (points.Interceptor, error) {
	var c celConfig
	if err := decodeConfig(config, &c); err != nil {
		return nil, err
	}
	if len(c.Rules) == 0 {
		return nil, cfgErr(configRoot+".rules", "needs at least one rule")
	}
	cost := uint64(DefaultCELCostLimit)
	if c.CostLimit != nil {
		if *c.CostLimit < 1 {
			return nil, cfgErr(configRoot+".cost_limit", "must be >= 1")
		}
		cost = uint64(*c.CostLimit)
	}
	env, err := cel.NewEnv(cel.Variable("ctx", cel.DynType), cel.CustomTypeAdapter(jsonAdapter{}))
	if err != nil {
		return nil, fmt.Errorf("interceptors: cel environment: %w", err)
	}
	out := &CEL{def: c.Default}
	for i, rc := range c.Rules {
		at := indexPath(configRoot+".rules", i)
		if strings.TrimSpace(rc.When) == "" {
			return nil, cfgErr(at+".when", "required")
		}
		if !rc.Verdict.set {
			return nil, cfgErr(at+".verdict", "required")
		}
		ast, iss := env.Compile(rc.When)
		if iss != nil && iss.Err() != nil {
			return nil, &ConfigError{Path: at + ".when", Msg: celIssues(iss), Err: iss.Err()}
		}
		if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
			return nil, cfgErr(at+".when", "must be a bool expression, not %s", t)
		}
		prg, err := env.Program(ast, cel.CostLimit(cost), cel.InterruptCheckFrequency(100))
		if err != nil {
			return nil, &ConfigError{Path: at + ".when", Msg: "cannot build program", Err: err}
		}
		out.rules = append(out.rules, celRule{prg: prg, verdict: rc.Verdict})
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
			return points.Verdict{}, fmt.Errorf("interceptors: cel rules[%d]: %w", i, err)
		}
		b, ok := val.Value().(bool)
		if !ok {
			return points.Verdict{}, fmt.Errorf("interceptors: cel rules[%d]: result is %s, not bool", i, val.Type().TypeName())
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
		a.ctx = jsonAdapter{}.NativeToValue(gjson.ParseBytes(a.raw))
	}
	return a.ctx, true
}

func (a *lazyActivation) Parent() interpreter.Activation { return nil }

// jsonAdapter adapts gjson values for CEL one level at a time: an object
// becomes a map and an array a list whose members are adapted (by this
// adapter) when read. Everything else goes to CEL's default adapter.
type jsonAdapter struct{}

func (a jsonAdapter) NativeToValue(v any) ref.Val {
	r, ok := v.(gjson.Result)
	if !ok {
		return types.DefaultTypeAdapter.NativeToValue(v)
	}
	if r.IsArray() {
		return types.NewDynamicList(a, r.Array())
	}
	if r.IsObject() {
		m := make(map[string]any, 16)
		r.ForEach(func(k, v gjson.Result) bool { m[k.Str] = v; return true }) // the last duplicate wins, as before
		return types.NewStringInterfaceMap(a, m)
	}
	return types.DefaultTypeAdapter.NativeToValue(celScalar(r))
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

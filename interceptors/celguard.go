package interceptors

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
)

// maxCELResult caps one string call's result whatever the cost limit, so
// a cost_limit raised for CPU-heavy rules cannot let one call ask for
// gigabytes.
const maxCELResult = 64 << 20

// CEL charges a call's cost after the call returns, so the cost limit
// alone cannot stop one join, replace, split or format from building a
// result of gigabytes out of a few megabytes of context (a list of 2 000
// references to one long message, joined; replace("", s)): the process
// would die of it, with every request in flight. celGuards redefines those
// overloads (the same ids and signatures, which cel-go lets a later
// declaration replace) so that each computes its result's size first and
// fails, as the cost limit would have once it charged the result, when
// that size is past limit. The extension's cost models, keyed by overload
// id, still apply.
func celGuards(limit uint64) []cel.EnvOption {
	max := int64(min(limit, maxCELResult))
	tooBig := func(fn string, n int64) ref.Val {
		return types.NewErr("%s: a result of %d bytes or elements exceeds the cost limit (%d)", fn, n, max)
	}
	join := func(list ref.Val, sep string) ref.Val {
		l, ok := list.(traits.Lister)
		if !ok {
			return types.NewErr("join: receiver is not a list")
		}
		n := int64(l.Size().(types.Int))
		total := int64(0)
		if n > 1 {
			total = (n - 1) * int64(len(sep))
		}
		for i := int64(0); i < n; i++ {
			s, ok := l.Get(types.Int(i)).(types.String)
			if !ok {
				return types.NewErr("join: the list holds a value that is not a string")
			}
			if total += int64(len(s)); total > max {
				return tooBig("join", total)
			}
		}
		var b strings.Builder
		b.Grow(int(total))
		for i := int64(0); i < n; i++ {
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(string(l.Get(types.Int(i)).(types.String)))
		}
		return types.String(b.String())
	}
	replace := func(s, old, repl string, n int64) ref.Val {
		count := int64(strings.Count(s, old)) // "" counts runes + 1, as ReplaceAll inserts
		if n >= 0 && n < count {
			count = n
		}
		if size := int64(len(s)) + count*(int64(len(repl))-int64(len(old))); size > max {
			return tooBig("replace", size)
		}
		return types.String(strings.Replace(s, old, repl, int(n)))
	}
	split := func(s, sep string, n int64) ref.Val {
		pieces := int64(strings.Count(s, sep)) + 1
		if sep == "" {
			pieces = int64(utf8.RuneCountInString(s))
		}
		if n >= 0 && n < pieces {
			pieces = n
		}
		// Each piece is a unit of the result's cost, and a string header
		// (16 bytes) in the list, which the absolute cap bounds.
		if pieces > max || pieces > maxCELResult/16 {
			return tooBig("split", pieces)
		}
		return types.NewStringList(types.DefaultTypeAdapter, strings.SplitN(s, sep, int(n)))
	}
	format, formatErr := celFormatter()
	return []cel.EnvOption{
		cel.Function("join",
			cel.MemberOverload("list_join", []*cel.Type{cel.ListType(cel.StringType)}, cel.StringType,
				cel.UnaryBinding(func(list ref.Val) ref.Val { return join(list, "") })),
			cel.MemberOverload("list_join_string", []*cel.Type{cel.ListType(cel.StringType), cel.StringType}, cel.StringType,
				cel.BinaryBinding(func(list, sep ref.Val) ref.Val { return join(list, string(sep.(types.String))) }))),
		cel.Function("replace",
			cel.MemberOverload("string_replace_string_string", []*cel.Type{cel.StringType, cel.StringType, cel.StringType}, cel.StringType,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					return replace(string(args[0].(types.String)), string(args[1].(types.String)), string(args[2].(types.String)), -1)
				})),
			cel.MemberOverload("string_replace_string_string_int", []*cel.Type{cel.StringType, cel.StringType, cel.StringType, cel.IntType}, cel.StringType,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					return replace(string(args[0].(types.String)), string(args[1].(types.String)), string(args[2].(types.String)), int64(args[3].(types.Int)))
				}))),
		cel.Function("split",
			cel.MemberOverload("string_split_string", []*cel.Type{cel.StringType, cel.StringType}, cel.ListType(cel.StringType),
				cel.BinaryBinding(func(s, sep ref.Val) ref.Val {
					return split(string(s.(types.String)), string(sep.(types.String)), -1)
				})),
			cel.MemberOverload("string_split_string_int", []*cel.Type{cel.StringType, cel.StringType, cel.IntType}, cel.ListType(cel.StringType),
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					return split(string(args[0].(types.String)), string(args[1].(types.String)), int64(args[2].(types.Int)))
				}))),
		cel.Function("format",
			cel.MemberOverload("string_format", []*cel.Type{cel.StringType, cel.ListType(cel.DynType)}, cel.StringType,
				cel.BinaryBinding(func(s, args ref.Val) ref.Val {
					if formatErr != nil {
						return types.NewErr("format: %v", formatErr)
					}
					if size := int64(len(s.(types.String))) + formatSize(args, max); size > max {
						return tooBig("format", size)
					}
					return format(s, args)
				}))),
	}
}

// celResultCost charges the calls that build text but have a flat cost
// (format and strings.quote, which the strings extension models not, and
// the bytes and string conversions, which copy their argument) by their
// result's length, as the extension charges the others, so a loop of them
// is bounded by the cost limit too. A conversion of a dyn value carries no
// overload id at run time, so those are matched by function name.
func celResultCost() []cel.ProgramOption {
	return []cel.ProgramOption{
		cel.CostTracking(resultLengthCost{}),
		cel.CostTrackerOptions(
			cost.OverloadTracker("string_format", byResultLength),
			cost.OverloadTracker("strings_quote", byResultLength),
		),
	}
}

// byResultLength is one unit per call and one per byte of its result.
func byResultLength(_ []ref.Val, result ref.Val) *uint64 {
	n := uint64(1)
	switch r := result.(type) {
	case types.String:
		n += uint64(len(r))
	case types.Bytes:
		n += uint64(len(r))
	}
	return &n
}

// resultLengthCost is the cost estimator for the conversions; nil leaves
// every other call to its model.
type resultLengthCost struct{}

func (resultLengthCost) CallCost(function, _ string, args []ref.Val, result ref.Val) *uint64 {
	switch function {
	case "bytes", "string":
		return byResultLength(args, result)
	}
	return nil
}

// formatSize bounds what format writes for args: a string or bytes at
// most twice its length (hex), a list or map the sum of its parts, any
// other value 420 bytes (a double at the extension's largest precision,
// %.100f of 1e308, is 410). It stops once past max.
func formatSize(v ref.Val, max int64) int64 {
	switch x := v.(type) {
	case types.String:
		return 2*int64(len(x)) + 2
	case types.Bytes:
		return 2*int64(len(x)) + 2
	case traits.Lister:
		n := int64(2)
		size := int64(x.Size().(types.Int))
		for i := int64(0); i < size && n <= max; i++ {
			n += formatSize(x.Get(types.Int(i)), max-n) + 2
		}
		return n
	case traits.Mapper:
		n := int64(2)
		it := x.Iterator()
		for it.HasNext() == types.True && n <= max {
			k := it.Next()
			n += formatSize(k, max-n) + formatSize(x.Get(k), max-n) + 4
		}
		return n
	}
	return 420
}

// celFormatter returns the strings extension's own format, run through a
// small program of its own: the extension does not export it, and the
// guard above only needs to precede it.
func celFormatter() (func(s, args ref.Val) ref.Val, error) {
	env, err := cel.NewEnv(ext.Strings(), cel.Variable("s", cel.StringType), cel.Variable("a", cel.ListType(cel.DynType)))
	if err != nil {
		return nil, fmt.Errorf("format environment: %w", err)
	}
	ast, iss := env.Compile("s.format(a)")
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("format program: %w", iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		return nil, fmt.Errorf("format program: %w", err)
	}
	return func(s, args ref.Val) ref.Val {
		out, _, err := prg.Eval(map[string]any{"s": s, "a": args})
		if err != nil {
			return types.NewErr("%v", err)
		}
		return out
	}, nil
}

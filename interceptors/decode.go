package interceptors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// ConfigError is a kind config refused at load time. Path locates the
// offending member, rooted at "config" (e.g. "config.deny[2]"); Msg says
// what is wrong without echoing the configured value, so the loader can
// print it next to the binding id safely.
type ConfigError struct {
	Path string
	Msg  string
	Err  error
}

// Error renders "path: msg".
func (e *ConfigError) Error() string { return e.Path + ": " + e.Msg }

// Unwrap returns the underlying cause, if any.
func (e *ConfigError) Unwrap() error { return e.Err }

// MemberPath returns Path, so a loader can point at the offending member's
// line without knowing this package.
func (e *ConfigError) MemberPath() string { return e.Path }

// configErrors is every problem a kind found in one config: its message
// lists them on one line, and errors.As and errors.Is see each of them.
type configErrors []error

// Error renders the problems separated by "; ".
func (es configErrors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap returns the problems.
func (es configErrors) Unwrap() []error { return es }

// problems collects a kind's independent config errors, so one load
// reports all of them.
type problems []error

// add records err when it is not nil, flattening a configErrors.
func (ps *problems) add(err error) {
	if err == nil {
		return
	}
	if es, ok := err.(configErrors); ok {
		*ps = append(*ps, es...)
		return
	}
	*ps = append(*ps, err)
}

// after returns the problems of a config that was compiled although its
// decode failed (decoded is decodeConfig's error), so that one load reports
// a bad regex beside a wrong type: the decode's problems, then those of
// ps at paths unrelated to them. A problem at, inside or around a path
// that did not decode follows from the value that could not be read, and
// is left out.
func (ps problems) after(decoded error) error {
	if decoded == nil {
		return ps.err()
	}
	var all problems
	all.add(decoded)
	var failed []string
	for _, d := range all {
		var ce *ConfigError
		if !errors.As(d, &ce) {
			return all.err() // not a path problem: nothing else is trustworthy
		}
		failed = append(failed, ce.Path)
	}
	for _, p := range ps {
		var ce *ConfigError
		if !errors.As(p, &ce) || slices.ContainsFunc(failed, func(f string) bool { return relatedPaths(f, ce.Path) }) {
			continue
		}
		all = append(all, p)
	}
	return all.err()
}

// relatedPaths reports whether a and b are the same config path or one is
// inside the other.
func relatedPaths(a, b string) bool {
	inside := func(outer, inner string) bool {
		return strings.HasPrefix(inner, outer) && (len(inner) == len(outer) || inner[len(outer)] == '.' || inner[len(outer)] == '[')
	}
	return inside(a, b) || inside(b, a)
}

// err is nil, the one problem, or all of them as one error.
func (ps problems) err() error {
	switch len(ps) {
	case 0:
		return nil
	case 1:
		return ps[0]
	}
	return configErrors(slices.Clone(ps))
}

func cfgErr(path, format string, args ...any) *ConfigError {
	return &ConfigError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// configRoot is the path every config error starts from.
const configRoot = "config"

// fieldDecoder is implemented by config types that read themselves (a point
// or a list of points, a duration, a verdict, a regex).
type fieldDecoder interface {
	decodeField(path string, r gjson.Result) error
}

var fieldDecoderType = reflect.TypeFor[fieldDecoder]()

// decodeConfig decodes a kind's JSON config strictly into v (a pointer to
// a struct): unknown and duplicate keys and type mismatches are errors
// naming their path, every one of them reported (see problems). nil, empty
// or null config decodes as {}.
func decodeConfig(raw []byte, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if !gjson.ValidBytes(raw) {
		return cfgErr(configRoot, "not valid JSON")
	}
	r := gjson.ParseBytes(raw)
	if !r.IsObject() {
		return cfgErr(configRoot, "must be an object")
	}
	return decodeValue(configRoot, r, reflect.ValueOf(v).Elem())
}

// memberPath appends key to path: ".key" for plain names, `["key"]` otherwise.
func memberPath(path, key string) string {
	plain := key != ""
	for i := 0; i < len(key); i++ {
		if !isMemberChar(key[i]) {
			plain = false
			break
		}
	}
	if plain {
		return path + "." + key
	}
	q, _ := json.Marshal(key)
	return path + "[" + string(q) + "]"
}

func indexPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// typeName describes a JSON type for error messages.
func typeName(r gjson.Result) string {
	switch r.Type {
	case gjson.String:
		return "a string"
	case gjson.Number:
		return "a number"
	case gjson.True, gjson.False:
		return "a boolean"
	case gjson.Null:
		return "null"
	}
	if r.IsArray() {
		return "an array"
	}
	return "an object"
}

// fieldsOf maps JSON names to field indexes. Config loads are rare, so
// there is no cache (and no package state).
func fieldsOf(t reflect.Type) map[string]int {
	m := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" || !sf.IsExported() {
			continue
		}
		m[name] = i
	}
	return m
}

func decodeValue(path string, r gjson.Result, v reflect.Value) error {
	if v.CanAddr() && v.Addr().Type().Implements(fieldDecoderType) {
		if r.Type == gjson.Null {
			return nil
		}
		return v.Addr().Interface().(fieldDecoder).decodeField(path, r)
	}
	if v.Type() == reflect.TypeFor[json.RawMessage]() {
		v.SetBytes([]byte(r.Raw))
		return nil
	}
	if r.Type == gjson.Null {
		// A key written with no value (YAML "key:") reads as absent.
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		nv := reflect.New(v.Type().Elem())
		err := decodeValue(path, r, nv.Elem())
		// Set even on a problem: what did decode (the members beside an
		// unknown key) is still checked, so a load reports it too.
		v.Set(nv)
		return err
	case reflect.String:
		if r.Type != gjson.String {
			return cfgErr(path, "must be a string, not %s", typeName(r))
		}
		v.SetString(r.Str)
	case reflect.Bool:
		if r.Type != gjson.True && r.Type != gjson.False {
			return cfgErr(path, "must be a boolean, not %s", typeName(r))
		}
		v.SetBool(r.Bool())
	case reflect.Int, reflect.Int64:
		if r.Type != gjson.Number {
			return cfgErr(path, "must be an integer, not %s", typeName(r))
		}
		n, err := strconv.ParseInt(r.Raw, 10, 64)
		if err != nil {
			return cfgErr(path, "must be an integer")
		}
		v.SetInt(n)
	case reflect.Float64:
		if r.Type != gjson.Number {
			return cfgErr(path, "must be a number, not %s", typeName(r))
		}
		v.SetFloat(r.Num)
	case reflect.Slice:
		if !r.IsArray() {
			return cfgErr(path, "must be an array, not %s", typeName(r))
		}
		items := r.Array()
		s := reflect.MakeSlice(v.Type(), len(items), len(items))
		var ps problems
		for i, item := range items {
			ps.add(decodeValue(indexPath(path, i), item, s.Index(i)))
		}
		v.Set(s)
		return ps.err()
	case reflect.Map:
		if !r.IsObject() {
			return cfgErr(path, "must be an object, not %s", typeName(r))
		}
		m := reflect.MakeMap(v.Type())
		var ps problems
		r.ForEach(func(k, item gjson.Result) bool {
			p := memberPath(path, k.Str)
			if m.MapIndex(reflect.ValueOf(k.Str)).IsValid() {
				ps.add(cfgErr(p, "duplicate key"))
				return true
			}
			ev := reflect.New(v.Type().Elem()).Elem()
			if err := decodeValue(p, item, ev); err != nil {
				ps.add(err)
				return true
			}
			m.SetMapIndex(reflect.ValueOf(k.Str), ev)
			return true
		})
		v.Set(m)
		return ps.err()
	case reflect.Struct:
		if !r.IsObject() {
			return cfgErr(path, "must be an object, not %s", typeName(r))
		}
		fields := fieldsOf(v.Type())
		seen := map[string]bool{}
		var ps problems
		r.ForEach(func(k, item gjson.Result) bool {
			p := memberPath(path, k.Str)
			if seen[k.Str] {
				ps.add(cfgErr(p, "duplicate key"))
				return true
			}
			seen[k.Str] = true
			i, ok := fields[k.Str]
			if !ok {
				if len(fields) == 0 {
					ps.add(cfgErr(p, "unknown key (this kind takes no config)"))
				} else {
					ps.add(cfgErr(p, "unknown key (known: %s)", strings.Join(sortedKeys(fields), ", ")))
				}
				return true
			}
			ps.add(decodeValue(p, item, v.Field(i)))
			return true
		})
		return ps.err()
	default:
		return cfgErr(path, "unsupported config type %s", v.Type())
	}
	return nil
}

// reflectValue returns the settable value v points to.
func reflectValue(v any) reflect.Value { return reflect.ValueOf(v).Elem() }

package points

import (
	"encoding/json"
	"unsafe"
)

// ForEachMember calls fn with the name (unescaped) and raw value of each
// member of obj, in document order, until fn returns false. obj must be a
// JSON object already checked valid (CheckEncoding); anything else is
// ignored. Unlike a gjson walk it jumps over string bodies with a
// vectorised search, so a member after megabytes of content costs little.
// A name without escapes shares obj's memory: it stays valid as long as
// obj is not modified.
func ForEachMember(obj []byte, fn func(name string, value []byte) bool) {
	i := skipWSAt(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	// Every step is bounds-checked, so bytes that are not valid JSON end
	// the walk early instead of panicking; each round consumes a name.
	for i++; ; {
		i = skipWSAt(obj, i)
		if i < len(obj) && obj[i] == ',' {
			i = skipWSAt(obj, i+1)
		}
		if i >= len(obj) || obj[i] != '"' {
			return
		}
		end := skipString(obj, i)
		name := nameOf(obj[i:end])
		i = skipWSAt(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		if i = skipWSAt(obj, i+1); i >= len(obj) {
			return
		}
		vend := skipValue(obj, i)
		if vend == i || !fn(name, obj[i:vend]) {
			return
		}
		i = vend
	}
}

// ForEachElement calls fn with each raw element of arr, a JSON array
// already checked valid, until fn returns false.
func ForEachElement(arr []byte, fn func(elem []byte) bool) {
	i := skipWSAt(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	for i++; ; {
		i = skipWSAt(arr, i)
		if i < len(arr) && arr[i] == ',' {
			i = skipWSAt(arr, i+1)
		}
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		end := skipValue(arr, i)
		if end == i || !fn(arr[i:end]) {
			return
		}
		i = end
	}
}

// nameOf decodes a quoted member name, without a copy when it has no
// escapes.
func nameOf(q []byte) string {
	if len(q) < 2 {
		return ""
	}
	body := q[1 : len(q)-1]
	for _, c := range body {
		if c == '\\' {
			// Rare; encoding/json also copes with the malformed escapes
			// of bytes that were never validated.
			var name string
			if json.Unmarshal(q, &name) != nil {
				return ""
			}
			return name
		}
	}
	return unsafe.String(unsafe.SliceData(body), len(body))
}

package points

import "unsafe"

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
	for i++; ; {
		i = skipWSAt(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			return
		}
		if obj[i] == ',' {
			i = skipWSAt(obj, i+1)
		}
		end := skipString(obj, i)
		name := nameOf(obj[i:end])
		i = skipWSAt(obj, end)
		i = skipWSAt(obj, i+1) // ':'
		vend := skipValue(obj, i)
		if !fn(name, obj[i:vend]) {
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
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		if arr[i] == ',' {
			i = skipWSAt(arr, i+1)
		}
		end := skipValue(arr, i)
		if !fn(arr[i:end]) {
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
			return string(unescapeString(body))
		}
	}
	return unsafe.String(unsafe.SliceData(body), len(body))
}

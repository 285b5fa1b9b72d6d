package proxy

import (
	"testing"

	"github.com/tidwall/gjson"
)

// A model that writes its arguments in the raw_arguments wrapper's own
// shape gets them judged as text, and a write-back releases them as it
// wrote them: never the wrapped text as the arguments (which would hand
// the agent {"cmd":"rm -rf /"}, judged only as a string).
func TestStandInShapedArgumentsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		args    string
		wrapped bool // judged as {"raw_arguments": <args text>}
	}{
		{`{"raw_arguments":"{\"cmd\":\"rm -rf /\"}"}`, true},
		{`{"raw_arguments":"x"}`, true},
		{`{"raw_arguments":"x","other":1}`, false},
		{`{"raw_arguments":5}`, false},
		{`{"cmd":"ls"}`, false},
		{`not json`, true},
	} {
		obj := argsObject(tc.args)
		r := gjson.ParseBytes(obj)
		if got := standInShaped(r) && r.Get("raw_arguments").Str == tc.args; got != tc.wrapped {
			t.Errorf("%s: judged as %s, wrapped %v, want %v", tc.args, obj, got, tc.wrapped)
		}
		if back := argsString(r); back != string(compact([]byte(tc.args))) && back != tc.args {
			t.Errorf("%s: written back as %s", tc.args, back)
		}
	}
}

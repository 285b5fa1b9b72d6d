package proxy

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Some OpenAI-compatible servers repeat a tool call's whole name in every
// delta. That is one name, judged and re-derived once; a different
// fragment is still appended, as openai-go appends it.
func TestToolNameRepeatedInDeltas(t *testing.T) {
	tool := func(delta string) string {
		return chunk(`{"tool_calls":[{"index":0,`+delta+`}]}`, "")
	}
	for _, tc := range []struct {
		name, stream, want string
	}{
		{"repeated", chunk(`{"role":"assistant","content":null}`, "") +
			tool(`"id":"call_1","type":"function","function":{"name":"delete_files","arguments":""}`) +
			tool(`"function":{"name":"delete_files","arguments":"{\"p\":"}`) +
			tool(`"function":{"name":"delete_files","arguments":"1}"}`) +
			chunk(`{}`, "tool_calls") + "data: [DONE]\n\n", "delete_files"},
		{"split", chunk(`{"role":"assistant","content":null}`, "") +
			tool(`"id":"call_1","type":"function","function":{"name":"delete_","arguments":""}`) +
			tool(`"function":{"name":"files","arguments":"{}"}`) +
			chunk(`{}`, "tool_calls") + "data: [DONE]\n\n", "delete_files"},
		{"changed", chunk(`{"role":"assistant","content":null}`, "") +
			tool(`"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}`) +
			tool(`"function":{"name":"delete_files","arguments":"{}"}`) +
			chunk(`{}`, "tool_calls") + "data: [DONE]\n\n", "get_weatherdelete_files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := csAssemble(t, strings.NewReader(tc.stream))
			if got := gjson.GetBytes(out, "choices.0.message.tool_calls.0.function.name").Str; got != tc.want {
				t.Fatalf("name %q, want %q: %s", got, tc.want, out)
			}
		})
	}
}

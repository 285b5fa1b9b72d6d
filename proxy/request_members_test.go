package proxy

import (
	"strings"
	"testing"
)

// Member names that equal a mediated name only with case folded are
// refused: an upstream decoding with Go's encoding/json reads them as that
// member, which no point judged. A missing model is refused too.
func TestCheckChatRequestCaseVariants(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct {
		name, body, want string
	}{
		{"MODEL beside model", `{"model":"gpt-4o","MODEL":"o1",` + msgs + `}`, "'MODEL' differs from 'model'"},
		{"Model alone", `{"Model":"o1",` + msgs + `}`, "'Model' differs from 'model'"},
		{"Messages beside messages", `{"model":"m",` + msgs + `,"Messages":[{"role":"user","content":"x"}]}`, "'Messages'"},
		{"long s in messages", `{"model":"m",` + msgs + `,"meſſages":[{"role":"user","content":"x"}]}`, "'meſſages'"},
		{"N", `{"model":"m",` + msgs + `,"N":3}`, "'N' differs from 'n'"},
		{"Stream", `{"model":"m",` + msgs + `,"Stream":true}`, "'Stream'"},
		{"Tools", `{"model":"m",` + msgs + `,"tools":[],"Tools":[]}`, "'Tools'"},
		{"Kelvin sign", `{"model":"m",` + msgs + `,"max_toKens":1}`, "differs from 'max_tokens'"},
		{"message Content", `{"model":"m","messages":[{"role":"user","content":"hi","Content":"x"}]}`, "'Content' differs from 'content'"},
		{"message Role", `{"model":"m","messages":[{"Role":"user","content":"hi"}]}`, "'Role'"},
		{"message tool_Calls", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_Calls":[]}]}`, "'tool_Calls'"},
		{"missing model", `{` + msgs + `}`, "missing required parameter: 'model'"},
		{"part Text", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hello","Text":"evil"}]}]}`, "'Text' differs from 'text'"},
		{"part TEXT alone", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","TEXT":"evil"}]}]}`, "'TEXT'"},
		{"tool call Function", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"},"Function":{"name":"g","arguments":"{}"}}]}]}`, "'Function'"},
		{"function Arguments", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}","Arguments":"{\"x\":1}"}}]}]}`, "'Arguments' differs from 'arguments'"},
	} {
		if got := checkChatRequest([]byte(c.body)); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	for _, ok := range []string{
		`{"model":"m",` + msgs + `,"Temperature":1,"metadata":{"Model":"x"}}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"user":"u"}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:x","detail":"low"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"r"}]}]}`,
	} {
		if got := checkChatRequest([]byte(ok)); got != "" {
			t.Errorf("%s refused: %s", ok, got)
		}
	}
}

// Shapes no point could read are refused rather than sent on: tools a
// policy could not name, input content that is neither text nor parts,
// tool calls that are not objects.
func TestCheckChatRequestShapes(t *testing.T) {
	user := `{"role":"user","content":"hi"}`
	for _, c := range []struct{ name, body, want string }{
		{"tools a string", `{"model":"m","messages":[` + user + `],"tools":"x"}`, "'tools' must be an array"},
		{"tools null element", `{"model":"m","messages":[` + user + `],"tools":[null]}`, "each of 'tools' must be an object"},
		{"tool name a number", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":5}}]}`, "string 'function.name'"},
		{"tool without function", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function"}]}`, "string 'function.name'"},
		{"user content a number", `{"model":"m","messages":[{"role":"user","content":5}]}`, "'content' must be a string or an array"},
		{"user content parts not objects", `{"model":"m","messages":[{"role":"user","content":[5]}]}`, "'content' must be a string or an array"},
		{"user without content", `{"model":"m","messages":[{"role":"user"}]}`, "'content' must be a string or an array"},
		{"system content null", `{"model":"m","messages":[{"role":"system","content":null},` + user + `]}`, "system message's 'content'"},
		{"tool_calls null element", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[null]}]}`, "'tool_calls' must be an object"},
		{"tool_calls an object", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":{}}]}`, "'tool_calls' must be an array"},
		{"arguments an object", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":{"path":"/etc/shadow"}}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`, "'function.arguments' must be a string"},
		{"arguments an array", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":["x"]}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`, "'function.arguments' must be a string"},
		{"arguments a number", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":1}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`, "'function.arguments' must be a string"},
		{"arguments a boolean", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":true}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`, "'function.arguments' must be a string"},
		{"name a number", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":5,"arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`, "'function.name' must be a string"},
		{"function a string", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":"f"}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`, "'function' must be an object"},
	} {
		if got := checkChatRequest([]byte(c.body)); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	for _, ok := range []string{
		`{"model":"m","messages":[` + user + `],"tools":null}`,
		`{"model":"m","messages":[` + user + `],"tools":[]}`,
		`{"model":"m","messages":[` + user + `],"tools":[{"type":"custom","custom":{"name":"grammar"}}]}`,
		`{"model":"m","messages":[` + user + `],"tools":[{"function":{"name":"f"}}]}`,
		`{"model":"m","messages":[` + user + `,{"role":"assistant","content":"x","tool_calls":null}]}`,
		`{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"path\":\"/etc/shadow\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`,
		`{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":null}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`,
		`{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`,
		`{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"be brief"}]},` + user + `]}`,
	} {
		if got := checkChatRequest([]byte(ok)); got != "" {
			t.Errorf("%s refused: %s", ok, got)
		}
	}
}

package interceptors

import (
	"strings"
	"testing"
)

// Argument rules fail closed where they cannot look (arguments that are
// not an object), read numbers as the tool does, and refuse path syntax
// that would match nothing.
func TestToolsArgsEdges(t *testing.T) {
	const cfg = `{"args": [
	  {"tool": "read_*", "path": "path", "not_regex": "\\.\\.", "reason": "path_traversal"},
	  {"tool": "pay", "path": "amount", "not_regex": "^[0-9]{4,}", "reason": "too_much"},
	  {"tool": "copy", "path": "files.0", "not_regex": "\\.\\."},
	  {"tool": "copy", "path": "a\\.b", "not_regex": "\\.\\."}
	]}`
	ic := build(t, KindTools, cfg)
	for _, tc := range []struct {
		name, tool, args, want string
	}{
		{"truncated arguments", "read_file", `{"raw_arguments":"{\"path\":\"../../etc/passwd\""}`, "deny path_traversal"},
		{"single-quoted arguments", "read_file", `{"raw_arguments":"{'path': '../x'}"}`, "deny path_traversal"},
		{"raw arguments, no rule for the tool", "search", `{"raw_arguments":"{\"q\":"}`, "allow"},
		{"raw_arguments beside other members is an object", "read_file", `{"raw_arguments":"x","path":"/ok"}`, "allow"},
		{"empty arguments are none", "read_file", `{"raw_arguments":""}`, "allow"},
		{"blank arguments are none", "read_file", `{"raw_arguments":"  "}`, "allow"},
		{"escaped dot in a name", "copy", `{"files":["ok"],"a.b":"../x"}`, "deny tool_args_violation"},
		{"exponent", "pay", `{"amount":5e3}`, "deny too_much"},
		{"fraction", "pay", `{"amount":5000.0}`, "deny too_much"},
		{"small", "pay", `{"amount":50}`, "allow"},
		{"index path", "copy", `{"files":["../x","b"]}`, "deny tool_args_violation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := run(t, ic, preTool(t, tc.tool, tc.args))
			if got := verdictSummary(v); got != tc.want {
				t.Fatalf("verdict %q (%s), want %q", got, v.Message, tc.want)
			}
		})
	}
	for _, path := range []string{"files[0]", "a..b", "a.", "a|b", "@this", "a.*", `x["y"]`, "{a,b}", `a\b`} {
		_, err := kind(t, KindTools).New("b1", []byte(`{"args":[{"path":`+quoteJSON(path)+`,"regex":"x"}]}`), Env{})
		if err == nil || !strings.Contains(err.Error(), "args[0].path") {
			t.Errorf("path %q: %v", path, err)
		}
	}
}

// A deny rule whose match reads into tool-call arguments that are not a
// JSON object cannot rule them out, so it denies; an allow rule does not
// match them.
func TestRulesOnRawArguments(t *testing.T) {
	ic := build(t, KindRules, `{"rules":[
	  {"at":"pre_tool_call","match":{"tool_call.name":"fetch","tool_call.args.url":{"regex":"^https://internal\\."}},"return":{"decision":"deny","reason":"internal_url"}},
	  {"at":"pre_tool_call","match":{"tool_call.args.mode":"safe"},"return":{"decision":"allow"}}
	],"default":{"decision":"deny","reason":"not_safe"}}`)
	for _, tc := range []struct{ tool, args, want string }{
		{"fetch", `{"raw_arguments":"{\"url\":\"https://internal.corp/x\""}`, "deny internal_url"},
		{"fetch", `{"url":"https://public.example/"}`, "deny not_safe"},
		{"fetch", `{"url":"https://public.example/","mode":"safe"}`, "allow"},
		{"search", `{"raw_arguments":"{\"mode\":\"safe\""}`, "deny not_safe"},
		{"fetch", `{"raw_arguments":""}`, "deny not_safe"}, // no arguments: the rule does not hold
	} {
		v := run(t, ic, preTool(t, tc.tool, tc.args))
		if got := verdictSummary(v); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.tool, tc.args, got, tc.want)
		}
	}
}

// Only tool-call arguments have the raw_arguments stand-in: an "args"
// member elsewhere (in a tool's result) is read as it is.
func TestRulesRawArgumentsOnlyInToolCalls(t *testing.T) {
	ic := build(t, KindRules, `{"rules":[{"at":"post_tool_call","match":{"tool_result.value.args.mode":"unsafe"},"return":{"decision":"deny","reason":"unsafe"}}]}`)
	for _, value := range []string{`{"args":"none","ok":true}`, `{"args":null}`, `{"args":["a"]}`, `{"args":{"raw_arguments":"x"}}`, `{"args":{"mode":"safe"}}`} {
		if got := verdictSummary(run(t, ic, postTool(t, "t", `{}`, value))); got != "allow" {
			t.Errorf("result %s: %q", value, got)
		}
	}
}

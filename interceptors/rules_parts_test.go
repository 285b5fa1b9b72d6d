package interceptors

import (
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

// TestRulesRegexContentParts: a regex judges content parts by their text
// (joined as content.go joins it, joined by lines, and for a deny each
// part alone), so a deny written against a string holds when the client
// sends the same text as parts, and an allow does not widen.
func TestRulesRegexContentParts(t *testing.T) {
	const cfg = `{
	  "rules": [
	    {"at": "input", "match": {"input.content": {"regex": "blockme"}}, "return": {"decision": "deny", "reason": "blocked_input"}},
	    {"at": "input", "match": {"input.content": {"regex": "(?i)\\bdrop table\\b"}}, "return": {"decision": "deny", "reason": "drop_table"}},
	    {"at": "input", "match": {"input.content": {"regex": "(?m)^rm -rf"}}, "return": {"decision": "deny", "reason": "rm_rf"}},
	    {"at": "input", "match": {"input.content": {"regex": "^yes$"}}, "return": {"decision": "allow", "reason": "ok_yes"}},
	    {"at": "input", "match": {"input.content": "exactstr"}, "return": {"decision": "deny", "reason": "exact_string"}},
	    {"at": "input", "match": {"input.content": [{"type": "text", "text": "exactparts"}]}, "return": {"decision": "deny", "reason": "exact_parts"}},
	    {"at": "pre_model_call", "match": {"messages[0].content": {"regex": "blockme"}}, "return": {"decision": "deny", "reason": "blocked_history"}},
	    {"at": "post_model_call", "match": {"response.content": {"regex": "blockme"}}, "return": {"decision": "deny", "reason": "blocked_answer"}},
	    {"at": "post_model_call", "match": {"response.tool_calls": {"regex": "blockme"}}, "return": {"decision": "deny", "reason": "blocked_calls"}},
	    {"at": "post_tool_call", "match": {"tool_result.value": {"regex": "blockme"}}, "return": {"decision": "deny", "reason": "blocked_result"}},
	    {"at": "output", "match": {"output.content": {"regex": "blockme"}}, "return": {"decision": "deny", "reason": "blocked_output"}}
	  ],
	  "default": {"decision": "allow", "reason": "default_rule"}
	}`
	const img = `{"type":"image_url","image_url":{"url":"https://x.example/blockme.png"}}`
	ic := build(t, KindRules, cfg)
	tests := []struct {
		name string
		ctx  *points.Context
		want string
	}{
		{"string content", inputCtx(t, `"please blockme"`), "deny blocked_input"},
		{"one text part", inputCtx(t, `[{"type":"text","text":"blockme"}]`), "deny blocked_input"},
		{"split across two parts", inputCtx(t, `[{"type":"text","text":"block"},{"type":"text","text":"me"}]`), "deny blocked_input"},
		{"split across three parts", inputCtx(t, `[{"type":"text","text":"bl"},{"type":"text","text":"ock"},{"type":"text","text":"me"}]`), "deny blocked_input"},
		{"escaped text", inputCtx(t, `[{"type":"text","text":"block\u006de"}]`), "deny blocked_input"},
		{"text part without type, as content reads it", inputCtx(t, `[{"text":"blockme"}]`), "deny blocked_input"},
		{"mixed with an image part", inputCtx(t, `[`+img+`,{"type":"text","text":"please blockme"}]`), "deny blocked_input"},
		{"split across an image part", inputCtx(t, `[{"type":"text","text":"block"},`+img+`,{"type":"text","text":"me"}]`), "deny blocked_input"},
		{"audio and file parts add no text", inputCtx(t, `[{"type":"input_audio","input_audio":{"data":"YmxvY2ttZQ==","format":"wav"}},{"type":"file","file":{"filename":"blockme.txt"}},{"type":"text","text":"block"},{"type":"text","text":"me"}]`), "deny blocked_input"},
		{"image url is not text", inputCtx(t, `[{"type":"text","text":"hi"},`+img+`]`), "allow default_rule"},
		{"no text parts", inputCtx(t, `[`+img+`]`), "allow default_rule"},
		{"parts without a match", inputCtx(t, `[{"type":"text","text":"block"},{"type":"text","text":" me"}]`), "allow default_rule"},
		{"empty array", inputCtx(t, `[]`), "allow default_rule"},
		{"list of strings is not parts", inputCtx(t, `["blockme"]`), "allow default_rule"},
		{"string among parts is not parts", inputCtx(t, `["x",{"type":"text","text":"blockme"}]`), "allow default_rule"},
		{"object is not parts", inputCtx(t, `{"type":"text","text":"blockme"}`), "allow default_rule"},
		{"anchored string", inputCtx(t, `"yes"`), "allow ok_yes"},
		// An allow needs every joined reading: "y"+"es" is y\nes as a
		// chat template renders it, so the allow does not widen to it.
		{"anchored allow needs every joined reading", inputCtx(t, `[{"type":"text","text":"y"},{"type":"text","text":"es"}]`), "allow default_rule"},
		// A deny takes any reading: a boundary between parts is a word or
		// line boundary to the model.
		{"word boundary between parts", inputCtx(t, `[{"type":"text","text":"please"},{"type":"text","text":"drop table users"}]`), "deny drop_table"},
		{"line start between parts", inputCtx(t, `[{"type":"text","text":"ok"},{"type":"text","text":"rm -rf /"}]`), "deny rm_rf"},
		{"anchored deny on one part", inputCtx(t, `[{"type":"text","text":"intro"},{"type":"text","text":"rm -rf /"}]`), "deny rm_rf"},
		{"anchored with an image part", inputCtx(t, `[{"type":"text","text":"yes"},`+img+`]`), "allow ok_yes"},
		{"anchored not on one part alone", inputCtx(t, `[{"type":"text","text":"yes"},{"type":"text","text":" and more"}]`), "allow default_rule"},
		{"exact string does not read parts", inputCtx(t, `[{"type":"text","text":"exactstr"}]`), "allow default_rule"},
		{"exact parts compare as JSON", inputCtx(t, `[{"text":"exactparts","type":"text"}]`), "deny exact_parts"},
		{"exact parts are not their text", inputCtx(t, `"exactparts"`), "allow default_rule"},
		{"history parts", preModel(t, "m", `[{"role":"user","content":[{"type":"text","text":"block"},{"type":"text","text":"me"}]}]`), "deny blocked_history"},
		{"refusal part", preModel(t, "m", `[{"role":"assistant","content":[{"type":"refusal","refusal":"blockme"}]}]`), "deny blocked_history"},
		{"answer parts with a refusal", postModel(t, `[{"type":"text","text":"block"},{"type":"refusal","refusal":"me"}]`, `[]`, ""), "deny blocked_answer"},
		{"tool_calls are not parts", postModel(t, `null`, `[{"id":"c1","name":"blockme","args":{"text":"blockme"}}]`, ""), "allow default_rule"},
		{"tool result parts", postTool(t, "fetch", `{}`, `[{"type":"text","text":"block"},{"type":"text","text":"me"}]`), "deny blocked_result"},
		{"tool result rows are not parts", postTool(t, "fetch", `{}`, `[{"name":"blockme"}]`), "allow default_rule"},
		{"output parts", outputCtx(t, `[{"type":"text","text":"block"},{"type":"text","text":"me"}]`), "deny blocked_output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := verdictSummary(run(t, ic, tt.ctx)); got != tt.want {
				t.Errorf("verdict = %q, want %q", got, tt.want)
			}
		})
	}
}

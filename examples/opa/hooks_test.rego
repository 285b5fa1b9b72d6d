# opa test examples/opa/
package hooks_test

import data.hooks

ctx(point, extra) := object.union(
	{
		"spec": "agent-hooks/0.1",
		"interception_point": point,
		"timestamp": "2026-01-01T00:00:00Z",
		"sequence": 3,
		"agent": {"id": "ops-agent", "framework": "openai-compatible"},
		"session": {"id": "s1"},
	},
	extra,
)

test_pre_tool_call_dangerous_denied if {
	v := hooks.verdict with input as ctx("pre_tool_call", {"tool_call": {"id": "c1", "name": "delete_files", "args": {}}, "target": {}})
	v.decision == "deny"
	v.reason == "dangerous_tool"
}

test_pre_tool_call_prefix_denied if {
	v := hooks.verdict with input as ctx("pre_tool_call", {"tool_call": {"id": "c1", "name": "shell_exec", "args": {}}, "target": {}})
	v.reason == "dangerous_tool"
}

test_pre_tool_call_benign_allowed if {
	v := hooks.verdict with input as ctx("pre_tool_call", {"tool_call": {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}, "target": {"city": "Paris"}})
	v == {"decision": "allow"}
}

test_post_model_call_any_dangerous_call_denied if {
	resp := {"content": null, "finish_reason": "tool_calls", "tool_calls": [
		{"id": "c1", "name": "get_weather", "args": {}},
		{"id": "c2", "name": "delete_files", "args": {"path": "/"}},
	]}
	v := hooks.verdict with input as ctx("post_model_call", {"model": {"id": "m"}, "response": resp, "target": resp})
	v.decision == "deny"
	v.message == "tool delete_files is not allowed by policy"
}

test_post_model_call_text_allowed if {
	resp := {"content": "hi", "finish_reason": "stop", "tool_calls": []}
	v := hooks.verdict with input as ctx("post_model_call", {"model": {"id": "m"}, "response": resp, "target": resp})
	v.decision == "allow"
}

test_other_points_allowed if {
	v := hooks.verdict with input as ctx("input", {"input": {"content": "delete_files", "role": "user"}, "target": {"content": "delete_files", "role": "user"}})
	v.decision == "allow"
}

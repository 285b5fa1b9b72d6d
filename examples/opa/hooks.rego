# AGENT-HOOKS verdicts for hooksproxy's webhook binding (examples/opa.yaml).
#
# hooksproxy POSTs {"input": <AGENT-HOOKS context>} to
# /v1/data/hooks/verdict and reads the verdict from "result". The verdict
# is a spec wire verdict object: {"decision": "allow" | "deny" | "transform",
# "reason", "message", ...}; an "approval": {} member makes a deny liftable.
#
# Rego v1 (OPA 1.x). Test: opa test examples/opa/
package hooks

# Tools an agent must never run, whatever the model asks for.
dangerous_tools := {"delete_files", "drop_database", "format_disk"}

dangerous_prefixes := {"shell_", "exec_"}

dangerous(name) if name in dangerous_tools

dangerous(name) if {
	some prefix in dangerous_prefixes
	startswith(name, prefix)
}

# The tool names this context is about: the call at pre_tool_call, every
# call the model asks for at post_model_call.
requested contains input.tool_call.name if input.interception_point == "pre_tool_call"

requested contains call.name if {
	input.interception_point == "post_model_call"
	some call in input.response.tool_calls
}

denied contains name if {
	some name in requested
	dangerous(name)
}

# One complete rule with a default, so every query has exactly one answer
# (an undefined result would make hooksproxy fail closed).
default verdict := {"decision": "allow"}

verdict := {
	"decision": "deny",
	"reason": "dangerous_tool",
	"message": sprintf("tool %s is not allowed by policy", [min(denied)]),
} if count(denied) > 0

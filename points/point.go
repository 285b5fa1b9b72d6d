// Package points is the AGENT-HOOKS-0.1 contract in pure Go: interception
// points, contexts held as raw JSON, verdicts, transforms, composition
// profiles, the approval seam, identities and payload-free records. It knows
// nothing about HTTP, so any Go host can use it.
package points

import "fmt"

// SpecVersion is the wire version every context carries in its spec member.
const SpecVersion = "agent-hooks/0.1"

// Point is one of the eight interception points of §3.
type Point string

// The closed set of interception points, in lifecycle order.
const (
	AgentStartup  Point = "agent_startup"
	Input         Point = "input"
	PreModelCall  Point = "pre_model_call"
	PostModelCall Point = "post_model_call"
	PreToolCall   Point = "pre_tool_call"
	PostToolCall  Point = "post_tool_call"
	Output        Point = "output"
	AgentShutdown Point = "agent_shutdown"
)

// AllPoints lists the interception points in lifecycle order.
func AllPoints() []Point {
	return []Point{AgentStartup, Input, PreModelCall, PostModelCall, PreToolCall, PostToolCall, Output, AgentShutdown}
}

// ParsePoint returns the Point named s, or an error for anything outside the closed set.
func ParsePoint(s string) (Point, error) {
	switch p := Point(s); p {
	case AgentStartup, Input, PreModelCall, PostModelCall, PreToolCall, PostToolCall, Output, AgentShutdown:
		return p, nil
	}
	return "", fmt.Errorf("points: unknown interception point %q", s)
}

// Valid reports whether p is one of the eight points.
func (p Point) Valid() bool {
	switch p {
	case AgentStartup, Input, PreModelCall, PostModelCall, PreToolCall, PostToolCall, Output, AgentShutdown:
		return true
	}
	return false
}

// Field is the conditional member of the context that target aliases at p
// (§4.2): "agent_init", "input", "messages", "response", "tool_call.args",
// "tool_result.value", "output" or "summary". It is a gjson/sjson path.
func (p Point) Field() string {
	switch p {
	case AgentStartup:
		return "agent_init"
	case Input:
		return "input"
	case PreModelCall:
		return "messages"
	case PostModelCall:
		return "response"
	case PreToolCall:
		return "tool_call.args"
	case PostToolCall:
		return "tool_result.value"
	case Output:
		return "output"
	case AgentShutdown:
		return "summary"
	}
	return ""
}

// Transformable reports whether a transform may rewrite the target at p
// (§4.3: never at agent_startup or agent_shutdown).
func (p Point) Transformable() bool {
	return p != AgentStartup && p != AgentShutdown && p.Valid()
}

// Mode is the enforcement mode of §8.
type Mode string

// The two enforcement modes.
const (
	Enforce      Mode = "enforce"
	EvaluateOnly Mode = "evaluate_only"
)

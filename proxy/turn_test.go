package proxy

import (
	"fmt"
	"testing"
)

// turnInputs judges what is new in a request that opens a turn: the user
// messages after the last assistant message, else the system or developer
// messages there, else the last user message, the last system message, or
// the last message.
func TestTurnInputs(t *testing.T) {
	const (
		sys  = `{"role":"system","content":"s"}`
		dev  = `{"role":"developer","content":"d"}`
		usr  = `{"role":"user","content":"u"}`
		asst = `{"role":"assistant","content":"a"}`
		call = `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
		tool = `{"role":"tool","tool_call_id":"c1","content":"r"}`
	)
	for _, tc := range []struct {
		msgs []string
		want string
	}{
		{[]string{usr}, "[{0 user}]"},
		{[]string{sys, usr}, "[{1 user}]"},
		{[]string{sys, usr, asst, usr}, "[{3 user}]"},
		{[]string{usr, asst, usr, usr}, "[{2 user} {3 user}]"},
		{[]string{usr, call, tool, sys}, "[{3 system}]"},
		{[]string{usr, call, tool, dev}, "[{3 system}]"},
		{[]string{usr, call, tool, sys, usr}, "[{4 user}]"},
		{[]string{usr, asst}, "[{0 user}]"},
		{[]string{usr, call, tool}, "[{0 user}]"},
		{[]string{sys}, "[{0 system}]"},
		{[]string{asst}, "[{0 external}]"},
	} {
		body := "{\"messages\":["
		for i, m := range tc.msgs {
			if i > 0 {
				body += ","
			}
			body += m
		}
		body += "]}"
		if got := fmt.Sprint(turnInputs(messagesOf([]byte(body)))); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.msgs, got, tc.want)
		}
	}
}

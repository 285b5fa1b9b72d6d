package points

import (
	"encoding/json"
	"testing"
)

// TestStartupEventMatchesMarshal: the agent_init member is built by hand,
// byte for byte as encoding/json writes {"tools_registered": tools}.
func TestStartupEventMatchesMarshal(t *testing.T) {
	for _, tools := range [][]string{nil, {}, {"a"}, {"get_weather", "send_email"}, {"<b>&", "q\"", "café", "\u2028", "\xff", ""}} {
		list := tools
		if list == nil {
			list = []string{}
		}
		want, _ := json.Marshal(map[string][]string{"tools_registered": list})
		if got := StartupEvent(tools).Members[0].Value; string(got) != string(want) {
			t.Errorf("StartupEvent(%q) = %s, want %s", tools, got, want)
		}
	}
}

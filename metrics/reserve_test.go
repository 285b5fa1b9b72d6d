package metrics

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hooksproxy/hooksproxy/points"
)

type listed struct{ reasons []string }

func (l listed) Intercept(context.Context, *points.Context) (points.Verdict, error) {
	return points.Allow(), nil
}
func (l listed) Reasons() []string { return l.reasons }

// The reasons a loaded config fixes keep their label values after a policy
// service answering ever new reasons has filled the cap.
func TestConfiguredReasonsOutliveTheCap(t *testing.T) {
	m, err := New(prometheus.NewRegistry(), WithMaxReasons(10))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		m.reasonLabel("r_" + strconv.Itoa(i))
	}
	if got := m.reasonLabel("late_reason"); got != Other {
		t.Fatalf("past the cap: %q, want %q", got, Other)
	}
	m.BindingsLoaded([]points.Binding{{Name: "tools", Interceptor: listed{[]string{"needs_approval", "tool_denied"}}}})
	for _, r := range []string{"needs_approval", "tool_denied"} {
		if got := m.reasonLabel(r); got != r {
			t.Errorf("configured reason %q reads %q", r, got)
		}
	}
	if got := m.bindings.label("tools"); got != "tools" {
		t.Errorf("binding name reads %q", got)
	}
}

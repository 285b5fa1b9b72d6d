package interceptors

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

// TestCELGuardsBigResults: calls whose result would outgrow the cost limit
// fail before they build it (the cost is charged only after a call
// returns), so a rule over a long history cannot make the process allocate
// gigabytes and die. Each case would allocate at least 200 MB without the
// guard; the test bounds what the evaluation allocated at 48 MB.
func TestCELGuardsBigResults(t *testing.T) {
	big := strings.Repeat("y", 100_000)
	var msgs strings.Builder
	msgs.WriteByte('[')
	for i := 0; i < 2000; i++ {
		msgs.WriteString(`{"role":"user","content":"q"},`)
	}
	msgs.WriteString(`{"role":"user","content":"` + big + `"}]`)
	c := preModel(t, "m", msgs.String())
	last := "ctx.messages[size(ctx.messages) - 1].content"
	for _, tt := range []struct{ name, when string }{
		{"join of references", "ctx.messages.map(m, " + last + ").join(\"\").contains(\"FORBIDDEN\")"},
		{"join with a separator", "ctx.messages.map(m, " + last + ").join(\",\").contains(\"FORBIDDEN\")"},
		{"replace of the empty string", last + ".replace(\"\", " + last + ").contains(\"FORBIDDEN\")"},
		{"replace with a limit", last + ".replace(\"y\", " + last + ", 5000).contains(\"FORBIDDEN\")"},
		{"format of a list of references", "\"%s\".format([ctx.messages.map(m, " + last + ")]).contains(\"FORBIDDEN\")"},
		{"format in a loop", "ctx.messages.map(m, \"%s\".format([" + last + "])).size() > 0"},
		{"quote in a loop", "ctx.messages.map(m, strings.quote(" + last + ")).size() > 0"},
		{"split into runes, repeated", "ctx.messages.map(m, " + last + ".split(\"\")).size() > 0"},
		{"bytes in a loop", "ctx.messages.map(m, bytes(" + last + ")).size() > 0"},
		{"string of bytes in a loop", "ctx.messages.map(m, string(bytes(" + last + "))).size() > 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _ := json.Marshal(map[string]any{"rules": []any{map[string]any{"when": tt.when, "verdict": map[string]any{"decision": "deny", "reason": "x"}}}})
			ic := build(t, KindCEL, string(cfg))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := ic.Intercept(context.Background(), c)
			runtime.ReadMemStats(&after)
			var fc points.FailureClasser
			if err == nil || !errors.As(err, &fc) || fc.FailureClass() != "cel rules[0].when: cost limit exceeded" {
				t.Fatalf("err = %v (class %v), want the cost limit", err, fc)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 48<<20 {
				t.Fatalf("the evaluation allocated %d MB before failing", n>>20)
			}
		})
	}
}

// The guarded calls answer as the strings extension does.
func TestCELGuardedCallsAnswer(t *testing.T) {
	c := inputCtx(t, `"a,b,,c"`)
	for i, when := range []string{
		`ctx.input.content.split(",") == ["a", "b", "", "c"]`,
		`ctx.input.content.split(",", 2) == ["a", "b,,c"]`,
		`ctx.input.content.split(",", 0) == []`,
		`"héj".split("") == ["h", "é", "j"]`,
		`"".split("") == []`,
		`ctx.input.content.split(",").join("-") == "a-b--c"`,
		`["x", "y"].join() == "xy"`,
		`[].join(",") == ""`,
		`ctx.input.content.replace(",", ";") == "a;b;;c"`,
		`ctx.input.content.replace(",", ";", 1) == "a;b,,c"`,
		`ctx.input.content.replace(",", "", 0) == "a,b,,c"`,
		`"ab".replace("", "-") == "-a-b-"`,
		`"%s=%d".format(["n", 3]) == "n=3"`,
		`"%s".format([["a", 1]]) == "[a, 1]"`,
		`bytes("ab") == b"ab"`,
		`string(b"ab") == "ab"`,
		`strings.quote("a\"b") == "\"a\\\"b\""`,
	} {
		cfg, _ := json.Marshal(map[string]any{"rules": []any{map[string]any{"when": when, "verdict": map[string]any{"decision": "deny", "reason": "r" + strconv.Itoa(i)}}}})
		if got := verdictSummary(run(t, build(t, KindCEL, string(cfg)), c)); got != "deny r"+strconv.Itoa(i) {
			t.Errorf("%s: %s", when, got)
		}
	}
}

// A split into many pieces is judged by the cost limit, as cel-go charges
// it (about a unit a piece), not refused far below it.
func TestCELSplitWithinTheLimit(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("w ", 100_000))
	c := inputCtx(t, `"`+words+`"`)
	for _, when := range []string{`ctx.input.content.split(" ").size() == 100000`, `ctx.input.content.split("").size() > 5`} {
		cfg, _ := json.Marshal(map[string]any{"rules": []any{map[string]any{"when": when, "verdict": map[string]any{"decision": "deny", "reason": "many"}}}})
		if got := verdictSummary(run(t, build(t, KindCEL, string(cfg)), c)); got != "deny many" {
			t.Errorf("%s: %s", when, got)
		}
	}
}

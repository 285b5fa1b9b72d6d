package interceptors

import (
	"context"
	"strings"
	"testing"
)

// BenchmarkContentPacks scans a ~4 KiB model response with both packs.
func BenchmarkContentPacks(b *testing.B) {
	ic := build(b, KindContent, `{"packs":{"secrets":"redact","pii":"redact"}}`)
	text := strings.Repeat("The quick brown fox jumps over the lazy dog 12345. ", 80)
	c := postModel(b, quoteJSON(text), `[{"id":"a","name":"f","args":{"q":"`+text[:200]+`"}}]`, "")
	b.SetBytes(int64(len(c.Raw())))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ic.Intercept(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRules matches a few predicates per call.
func BenchmarkRules(b *testing.B) {
	ic := build(b, KindRules, `{"rules":[{"at":"pre_tool_call","match":{"tool_call.name":"x","tool_call.args.url":{"regex":"^https://"}},"return":{"decision":"deny"}}]}`)
	c := preTool(b, "x", `{"url":"https://a"}`)
	for i := 0; i < b.N; i++ {
		if _, err := ic.Intercept(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCEL evaluates one expression per call (decode included).
func BenchmarkCEL(b *testing.B) {
	ic := build(b, KindCEL, `{"rules":[{"when":"ctx.interception_point == \"pre_tool_call\" && ctx.tool_call.name == \"shell\"","verdict":{"decision":"deny"}}]}`)
	c := preTool(b, "x", `{"url":"https://a"}`)
	for i := 0; i < b.N; i++ {
		if _, err := ic.Intercept(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
}

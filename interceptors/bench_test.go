package interceptors

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
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

// BenchmarkCELPreModel is the bench policy's model guard on a context with
// a short history: the rule reads model.id and the message count only.
func BenchmarkCELPreModel(b *testing.B) {
	ic := build(b, KindCEL, `{"rules":[{"when":"ctx.model.id.startsWith(\"o1-\") || size(ctx.messages) > 256","verdict":{"decision":"deny"}}]}`)
	msg := strings.Repeat("lorem ipsum dolor sit amet ", 10)
	c := preModel(b, "gpt-4o", `[{"role":"system","content":"`+msg+`"},{"role":"user","content":"`+msg+`"},{"role":"assistant","content":"`+msg+`"},{"role":"user","content":"`+msg+`"}]`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ic.Intercept(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBudgetPostModel is the bench policy's budget on a model response
// of about 2 KiB: it reads the envelope and the usage after the answer.
// The context stays under the size from which a Context indexes its
// members (and keeps the index across calls), so reusing it measures what
// each fresh Context of the emitter costs.
func BenchmarkBudgetPostModel(b *testing.B) {
	ic := build(b, KindBudget, `{"max_model_calls":1000000000,"max_tool_calls":1000000000,"max_total_tokens":1000000000000,"scope":"both"}`)
	text := strings.Repeat("The quick brown fox jumps over the lazy dog 12345. ", 40)
	c := postModel(b, quoteJSON(text), `[]`, `"usage":{"prompt_tokens":12,"completion_tokens":900}`)
	if len(c.Raw()) >= 8<<10 {
		b.Fatalf("context of %d bytes would be indexed", len(c.Raw()))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ic.Intercept(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkContentPacksProse is the bench policy's two content bindings on
// an answer of 1 or 32 KB of prose that matches nothing, as hooksbench
// sends it: secrets and pii redacted at post_model_call, secrets denied and pii
// redacted at output.
func BenchmarkContentPacksProse(b *testing.B) {
	type bench struct {
		name, config string
		c            *points.Context
	}
	var cases []bench
	for _, size := range []int{1 << 10, 32 << 10} {
		text := quoteJSON(strings.ReplaceAll(benchProse(size), "\n", " "))
		cases = append(cases,
			bench{fmt.Sprintf("%dKB/post_model_call", size>>10), `{"packs":{"secrets":"redact","pii":"redact"}}`, postModel(b, text, `[]`, "")},
			bench{fmt.Sprintf("%dKB/output", size>>10), `{"packs":{"secrets":"deny","pii":"redact"}}`, outputCtx(b, text)})
	}
	for _, tc := range cases {
		ic := build(b, KindContent, tc.config)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.c.Raw())))
			b.ReportAllocs()
			for b.Loop() {
				if v, err := ic.Intercept(context.Background(), tc.c); err != nil || v.Decision != points.DecisionAllow {
					b.Fatal(v, err)
				}
			}
		})
	}
}

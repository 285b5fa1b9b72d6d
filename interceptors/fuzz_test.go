package interceptors

import (
	"context"
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// FuzzContentRedact: for any string, the redact verdict is a valid
// transform whose application leaves valid JSON with no match of any
// redact pattern, and an allow means nothing matched.
func FuzzContentRedact(f *testing.F) {
	for _, s := range []string{
		"", "plain", "sk-proj-" + strings.Repeat("A", 24), "xoxb-4111111111111111-AbAbAbAbAb",
		"mail bob@example.com now", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00",
		"-----BEGIN PRIVATE KEY-----\nabc", "aws secret = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY.",
		"+44 20 7946 0958", "123-45-6789", "keyKEYkey", "\u00e9\"\\\n<>&",
		`"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"`, "SessionToken=" + strings.Repeat("AQoD/+", 20),
		"MIIEpAIBAAKCAQEA75yQmHdl3eP5\nIJKL==\n-----END RSA PRIVATE KEY-----", `\n-----END PRIVATE KEY-----`,
		"4111111111111111 123", "4111 1111 1111 1111 5555 5555 5555 4444", "4111\u00a01111\u00a01111\u00a01111", "card_4111111111111111",
	} {
		f.Add(s)
	}
	cfg := `{"redact":[{"name":"kw","regex":"(?i)key[A-Z]"}],"packs":{"secrets":"redact","pii":"redact"}}`
	ic, err := newContent("f", []byte(cfg), Env{})
	if err != nil {
		f.Fatal(err)
	}
	pats := ic.(*Content).redact.patterns
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // contexts carry valid UTF-8 only
		}
		q := quoteJSON(s)
		c := postTool(t, "t", `{}`, `{"a":`+q+`,"b":[`+q+`,{"c":`+q+`,"n":1}],"d":"fixed","e":{`+q+`:1}}`)
		v, err := ic.Intercept(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Validate(); err != nil {
			t.Fatalf("invalid verdict: %v", err)
		}
		target := []byte(c.Target().Raw)
		switch v.Decision {
		case points.DecisionAllow:
			for _, p := range pats {
				if p.found(newText(s)) {
					t.Fatalf("allow although %s matches", p.name)
				}
			}
			return
		case points.DecisionTransform:
		default:
			t.Fatalf("unexpected %s", v.Decision)
		}
		out, err := points.ApplyTransform(target, v.Transform.Path, v.Transform.Value)
		if err != nil {
			t.Fatalf("transform does not apply: %v", err)
		}
		if !gjson.ValidBytes(out) {
			t.Fatalf("result is not JSON: %s", out)
		}
		r := gjson.ParseBytes(out)
		if r.Get("d").Str != "fixed" || r.Get("b.1.n").Raw != "1" {
			t.Fatalf("untouched members changed: %s", out)
		}
		walkStringsAndKeys([]byte(r.Raw), func(sv stringVisit) bool {
			for _, p := range pats {
				if p.found(newText(sv.value)) {
					t.Fatalf("%s still matches after redaction in %q", p.name, sv.value)
				}
			}
			return true
		})
	})
}

// FuzzRulesConfig: any bytes as a kind config give an interceptor or an
// error, never a panic; accepted rules answer a valid verdict.
func FuzzRulesConfig(f *testing.F) {
	for _, s := range []string{
		`{"rules":[{"at":"pre_tool_call","match":{"tool_call.name":"x"},"return":{"decision":"deny"}}]}`,
		`{"rules":[{"match":{"a[0].b":{"regex":"^x"}},"return":{"decision":"allow"}}],"default":{"decision":"deny","approval":{}}}`,
		`{"rules":[{"match":{"x":{"equals":{"regex":1}}},"return":{"decision":"transform","transform":{"path":"$target.a","value":1}}}]}`,
		`{"rules":[{"at":[],"return":{}}]}`, `[]`, `null`, `{"rules":{}}`, ``, `{"rules":[{"match":{"]":1}}]}`,
	} {
		f.Add([]byte(s))
	}
	c := preTool(f, "x", `{"a":[{"b":"xy"}]}`)
	f.Fuzz(func(t *testing.T, cfg []byte) {
		ic, err := newRules("f", cfg, Env{})
		if err != nil {
			if ic != nil {
				t.Fatal("interceptor and error")
			}
			return
		}
		v, err := ic.Intercept(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Validate(); err != nil {
			t.Fatalf("accepted config answers an invalid verdict: %v", err)
		}
	})
}

// FuzzKindConfigs: every kind survives any config bytes.
func FuzzKindConfigs(f *testing.F) {
	f.Add(uint8(2), []byte(`{"deny":["x"],"packs":{"pii":"redact"},"mask":"#"}`))
	f.Add(uint8(3), []byte(`{"allow":["a*"],"args":[{"path":"u","regex":"x"}],"egress":{"allow_domains":[".a.b"]}}`))
	f.Add(uint8(4), []byte(`{"max_model_calls":1,"max_elapsed":"1s","scope":"both"}`))
	f.Add(uint8(5), []byte(`{"allow":["[a-"]}`))
	f.Add(uint8(6), []byte(`{"rules":[{"when":"ctx.a.b == 1","verdict":{"decision":"deny"}}]}`))
	f.Add(uint8(7), []byte(`{"url":"http://127.0.0.1:1/","timeout":"1ms"}`))
	kinds := Builtins()
	c := preTool(f, "x", `{"u":"https://a.b/"}`)
	f.Fuzz(func(t *testing.T, k uint8, cfg []byte) {
		kd := kinds[int(k)%len(kinds)]
		ic, err := kd.New("f", cfg, Env{})
		if err != nil || kd.Name == KindWebhook {
			return // no network from fuzzing
		}
		v, err := ic.Intercept(context.Background(), c)
		if err == nil {
			if verr := v.Validate(); verr != nil {
				t.Fatalf("%s answers an invalid verdict: %v", kd.Name, verr)
			}
		}
	})
}

// FuzzGlob: our glob agrees with path.Match on names without "/".
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{{"shell_*", "shell_x"}, {"[a-c]?", "b1"}, {`\*`, "*"}, {"[^x]", "y"}, {"é*", "éa"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 64 || len(name) > 64 {
			return // path.Match backtracks exponentially on long inputs
		}
		if !utf8.ValidString(pattern) || !utf8.ValidString(name) {
			return // config and names are JSON strings: valid UTF-8
		}
		g, err := compileGlob("p", pattern)
		_, perr := path.Match(pattern, name)
		if (err != nil) != (perr != nil) && pattern != "" {
			t.Fatalf("validity differs: ours %v, path.Match %v", err, perr)
		}
		if err != nil || strings.Contains(name, "/") || strings.Contains(pattern, "/") {
			return
		}
		want, _ := path.Match(pattern, name)
		if got := g.match(name); got != want {
			t.Fatalf("%q ~ %q: ours %v, path.Match %v", pattern, name, got, want)
		}
	})
}

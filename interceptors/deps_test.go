package interceptors

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hooksproxy/hooksproxy/points"
)

// TestImportsOnlyPoints pins the dependency direction points ← interceptors
// ← proxy ← cmd: of this module, only points may be imported.
func TestImportsOnlyPoints(t *testing.T) {
	const module = "github.com/hooksproxy/hooksproxy"
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, module) {
				seen++
				if p != module+"/points" && p != module+"/internal/urlcheck" && p != module+"/internal/envname" {
					t.Errorf("%s imports %s; interceptors may import only %s/points (and internal/urlcheck, internal/envname)", f, p, module)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("found no import of points; is the test looking at the right files?")
	}
}

// Every built-in kind must declare itself read-only, so the emitter can
// share contexts with it; a kind that starts writing must drop this.
func TestBuiltinsShareContext(t *testing.T) {
	cfgs := map[string]string{
		KindWebhook: `{"url":"http://127.0.0.1:1/x"}`,
		KindModels:  `{"allow":["*"]}`,
		KindCEL:     `{"rules":[{"when":"true","verdict":{"decision":"allow"}}]}`,
		KindRules:   `{"rules":[{"return":{"decision":"allow"}}]}`,
		KindContent: `{"packs":{"secrets":"deny"}}`,
		KindTools:   `{"deny":["x"]}`,
		KindBudget:  `{"max_model_calls":10}`,
	}
	for _, k := range Builtins() {
		cfg := []byte(cfgs[k.Name])
		if len(cfg) == 0 {
			cfg = nil
		}
		ic, err := k.New("b", cfg, Env{})
		if err != nil {
			t.Fatalf("%s: %v", k.Name, err)
		}
		if s, ok := ic.(points.ContextSharer); !ok || !s.SharesContext() {
			t.Errorf("%s does not share its context", k.Name)
		}
	}
}

package interceptors

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
				if p != module+"/points" {
					t.Errorf("%s imports %s; interceptors may import only %s/points", f, p, module)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("found no import of points; is the test looking at the right files?")
	}
}

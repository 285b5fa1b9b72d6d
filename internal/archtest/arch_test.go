// Package archtest enforces the dependency direction of the module:
// points ← interceptors ← proxy ← cmd, with the contract package free of
// HTTP and the SSE package free of OpenAI knowledge.
package archtest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/hooksproxy/hooksproxy"

// imports returns the imports of the non-test Go files of dir.
func imports(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fs := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fs, filepath.Join(dir, n), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			out[p] = true
		}
	}
	return out
}

func TestDependencyDirection(t *testing.T) {
	root := filepath.Join("..", "..")
	// Which of our packages each package may import.
	allowed := map[string][]string{
		"points":            {},
		"sse":               {},
		"interceptors":      {"points", "internal/urlcheck", "internal/envname"},
		"config":            {"points", "internal/envname"},
		"approvals":         {"points", "internal/urlcheck", "internal/envname"},
		"audit":             {"points"},
		"metrics":           {"points"},
		"scripted":          {},
		"internal/urlcheck": {},
		"internal/envname":  {},
		"proxy":             {"points", "sse"},
		"ctk":               {"points", "config", "proxy", "scripted"},
		"app":               {"points", "config", "interceptors", "proxy"},
	}
	for pkg, ok := range allowed {
		okSet := map[string]bool{}
		for _, o := range ok {
			okSet[module+"/"+o] = true
		}
		var bad []string
		for im := range imports(t, filepath.Join(root, pkg)) {
			if strings.HasPrefix(im, module+"/") && !okSet[im] {
				bad = append(bad, im)
			}
		}
		sort.Strings(bad)
		if len(bad) > 0 {
			t.Errorf("%s must not import %v", pkg, bad)
		}
	}
	// The contract knows nothing of HTTP; the SSE wire nothing of JSON bodies.
	for pkg, banned := range map[string][]string{
		"points": {"net/http", "net/http/httputil"},
		"sse":    {"github.com/tidwall/gjson", "github.com/tidwall/sjson"},
	} {
		ims := imports(t, filepath.Join(root, pkg))
		for _, b := range banned {
			if ims[b] {
				t.Errorf("%s must not import %s", pkg, b)
			}
		}
	}
}

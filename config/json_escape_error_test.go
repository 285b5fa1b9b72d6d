package config

import (
	"strings"
	"testing"
)

// A JSON config with \/ escapes and another error reports that error, at
// its line, not the escape: the rewrite of \/ used to be skipped for any
// file that was not valid JSON, and YAML then stopped at the escape.
func TestJSONEscapesDoNotMaskTheRealError(t *testing.T) {
	head := "{\"upstream\": {\"base_url\": \"https:\\/\\/x.example\"}, \"agent\": {\"id\": \"a\"},\n"
	for _, tc := range []struct {
		name, line2, want string
	}{
		{"leading-zero", ` "hooks": {"declaration": "agent-hooks-declaration/1.0", "bindings": [{"id": "a", "kind": "com.example.allow", "timeout_ms": 0500}]}}`, "leading zero"},
		{"unknown-key", ` "hooks": {"declaration": "agent-hooks-declaration/1.0", "bindings": [{"id": "a", "kind": "com.example.allow", "timeout_msx": 500}]}}`, "timeout_msx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(head+tc.line2+"\n"), "x.json", testRegistry(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "x.json:2:") {
				t.Fatalf("want %q at x.json:2, got: %v", tc.want, err)
			}
			if strings.Contains(err.Error(), "escape") {
				t.Fatalf("reported the escape: %v", err)
			}
		})
	}
	// A single-quoted YAML string in a flow document keeps its backslashes.
	doc := "{upstream: {base_url: 'https://x.example/a\\/b'}, agent: {id: a}, hooks: {declaration: agent-hooks-declaration/1.0, bindings: [{id: a, kind: com.example.allow}]}}\n"
	cfg, err := Parse([]byte(doc), "x.yaml", testRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Upstream.BaseURL; got != `https://x.example/a\/b` {
		t.Fatalf("base_url %q, want the backslash kept", got)
	}
}

package config

import (
	"strings"
	"testing"
)

// A passthrough entry that covers another API that runs the model loads
// (a deployment may mean it) with a warning at its line; the usual ones do
// not warn.
func TestModelPassthroughWarns(t *testing.T) {
	head := "upstream: {base_url: http://127.0.0.1:1}\nagent: {id: a}\nhooks:\n  declaration: agent-hooks-declaration/1.0\n  bindings: [{id: allow, kind: hooksproxy.allow_all}]\n"
	for _, tt := range []struct {
		entry, want string // want "": no warning
	}{
		{"/v1/models", ""},
		{"/v1/models*", ""},
		{"/v1/files*", ""},
		{"/v1/embeddings", ""},
		{"/v1/completions", "/v1/completions covers /v1/completions"},
		{"/v1/completions/", "covers /v1/completions"},
		{"/V1/Completions", "covers /v1/completions"},
		{"/v1/batches/b1", "covers /v1/batches"},
		{"/v1/b*", "covers /v1/batches"},
		{"/v1/threads*", "covers /v1/threads"},
		{"/api/*", "covers /api/chat"},
		{"/api/generate", "covers /api/generate"},
		{"/api/tags", ""},
		{"/v1/images/generations", "covers /v1/images"},
		{"/v1/audio*", "covers /v1/audio"},
	} {
		cfg, err := Parse([]byte(head+"passthrough: ['"+tt.entry+"']\n"), "hp.yaml", configRegistry(t))
		if err != nil {
			t.Fatalf("%s: %v", tt.entry, err)
		}
		got := (&Problems{File: "hp.yaml", List: cfg.Warnings}).Error()
		if tt.want == "" {
			if len(cfg.Warnings) != 0 {
				t.Errorf("%s: unexpected warning %s", tt.entry, got)
			}
			continue
		}
		if len(cfg.Warnings) != 1 || !strings.Contains(got, tt.want) || !strings.Contains(got, "hp.yaml:6: passthrough[0]") {
			t.Errorf("%s: warnings %q, want one at hp.yaml:6 passthrough[0] containing %q", tt.entry, got, tt.want)
		}
	}
}

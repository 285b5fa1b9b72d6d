package interceptors

import (
	"strings"
	"testing"
)

// A verdict written in config is as strict as the schema (closed): a
// misspelled member is an error at load, not a silently different policy.
func TestConfigVerdictMembersStrict(t *testing.T) {
	for _, tc := range []struct{ ret, path string }{
		{`{"decision":"deny","reason":"needs_review","aproval":{}}`, "return.aproval"},
		{`{"decision":"transform","transform":{"path":"$target.content","vaule":"[masked]"}}`, "return.transform.vaule"},
		{`{"decision":"allow","warnings":[{"reason":"w","foo":1}]}`, "return.warnings[0].foo"},
		{`{"decision":"deny","evidence":{"artifact":"x"}}`, "return.evidence.artifact"},
	} {
		_, err := kind(t, KindRules).New("r", []byte(`{"rules":[{"at":"output","return":`+tc.ret+`}]}`), Env{})
		if err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), "unknown verdict member") {
			t.Errorf("%s: %v", tc.ret, err)
		}
	}
	if _, err := kind(t, KindRules).New("r", []byte(`{"rules":[{"at":"output","return":{"decision":"deny","reason":"r","message":"m","approval":{"ticket":"x"},"warnings":[{"reason":"w","message":"m"}],"evidence":{"artefact":"sha256:00"},"result_labels":["l"]}}]}`), Env{}); err != nil {
		t.Errorf("a verdict with every member: %v", err)
	}
}

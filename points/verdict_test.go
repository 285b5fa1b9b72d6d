package points

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseVerdict(t *testing.T) {
	big := `"` + strings.Repeat("x", EvidenceMaxBytes) + `"`
	tests := []struct {
		raw    string
		reason Reason // "" = valid
	}{
		{`{"decision":"allow"}`, ""},
		{`{"decision":"deny","reason":"r","message":"m","approval":{}}`, ""},
		{`{"decision":"transform","transform":{"path":"$target.a","value":1}}`, ""},
		{`{"decision":"transform","transform":{"path":"$target"}}`, ""},
		{`{"decision":"transform","transform":{"path":"$policy_target.a","value":null}}`, ""},
		{`{"decision":"allow","warnings":[{"reason":"w"}],"result_labels":["l"],"evidence":{"artefact":"a","verification_pointers":{"k":"https://x"}}}`, ""},
		{`{"decision":"allow","reason":null,"message":null,"warnings":null}`, ""},
		{`[]`, ReasonVerdictInvalid},
		{`"allow"`, ReasonVerdictInvalid},
		{`not json`, ReasonVerdictInvalid},
		{`{}`, ReasonVerdictInvalid},
		{`{"decision":"warn"}`, ReasonVerdictInvalid},
		{`{"decision":"escalate"}`, ReasonVerdictInvalid},
		{`{"decision":"deny","reason":"host_error:context_invalid"}`, ReasonVerdictInvalid},
		{`{"decision":"allow","warnings":[{"reason":"host_error:x"}]}`, ReasonVerdictInvalid},
		{`{"decision":"allow","warnings":["x"]}`, ReasonVerdictInvalid},
		{`{"decision":"allow","warnings":{}}`, ReasonVerdictInvalid},
		{`{"decision":"allow","approval":{}}`, ReasonVerdictInvalid},
		{`{"decision":"deny","approval":[]}`, ReasonVerdictInvalid},
		{`{"decision":"transform"}`, ReasonVerdictInvalid},
		{`{"decision":"allow","transform":{"path":"$target.a","value":1}}`, ReasonVerdictInvalid},
		// A path outside the grammar is a valid verdict whose transform
		// fails to apply (§5.2): the emitter refuses it there.
		{`{"decision":"transform","transform":{"path":"$.a","value":1}}`, ""},
		{`{"decision":"transform","transform":{"path":"$target.","value":1}}`, ""},
		{`{"decision":"transform","transform":{"path":"$targets.x","value":1}}`, ""},
		{`{"decision":"transform","transform":{"path":1,"value":1}}`, ReasonVerdictInvalid},
		{`{"decision":"allow","evidence":{"artefact":` + big + `}}`, ReasonVerdictInvalid},
		{`{"decision":"allow","evidence":"x"}`, ReasonVerdictInvalid},
		{`{"decision":"allow","evidence":{"verification_pointers":{"k":1}}}`, ReasonVerdictInvalid},
		{`{"decision":"allow","result_labels":[1]}`, ReasonVerdictInvalid},
		{`{"decision":"allow","reason":5}`, ReasonVerdictInvalid},
	}
	for _, tt := range tests {
		v, err := ParseVerdict([]byte(tt.raw))
		if tt.reason == "" {
			if err != nil {
				t.Errorf("%s: unexpected %v", tt.raw, err)
			}
			continue
		}
		ve, ok := err.(*VerdictError)
		if !ok || ve.Reason != tt.reason {
			t.Errorf("%.60s: got %v (%#v), want %s", tt.raw, err, v, tt.reason)
		}
	}
}

func TestVerdictHelpers(t *testing.T) {
	for _, v := range []Verdict{Allow(), Deny("r", "m"), Warn("w", "m"), Escalate("e", "m"), Replace("$target.x", json.RawMessage(`1`))} {
		if err := v.Validate(); err != nil {
			t.Errorf("%s: %v", v, err)
		}
		b, _ := json.Marshal(v)
		back, err := ParseVerdict(b)
		if err != nil {
			t.Fatalf("%s does not round-trip: %v", b, err)
		}
		if back.Liftable() != v.Liftable() || back.Decision != v.Decision {
			t.Errorf("round trip changed %s", b)
		}
	}
	if !Escalate("e", "").Liftable() || Deny("d", "").Liftable() {
		t.Error("liftable")
	}
	if w := Warn("w", "m"); w.Decision != DecisionAllow || len(w.Warnings) != 1 {
		t.Error("warn is allow+warnings")
	}
}

// FuzzParseVerdict: any bytes give a verdict or a typed error, and an
// accepted verdict re-marshals to bytes that parse to the same verdict.
func FuzzParseVerdict(f *testing.F) {
	for _, s := range []string{`{"decision":"allow"}`, `{"decision":"deny","approval":{},"reason":"r"}`,
		`{"decision":"transform","transform":{"path":"$target[0][\"a-b\"]","value":[1,2]}}`, `{"decision":"allow","warnings":[{}]}`, `[]`, `{"decision":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := ParseVerdict(raw)
		if err != nil {
			if _, ok := err.(*VerdictError); !ok {
				t.Fatalf("error type %T", err)
			}
			return
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := ParseVerdict(b)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		b2, _ := json.Marshal(again)
		if string(b) != string(b2) {
			t.Fatalf("not canonical: %s vs %s", b, b2)
		}
	})
}

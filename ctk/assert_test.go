package ctk

import (
	"encoding/json"
	"strings"
	"testing"
)

// vec parses a hand-made vector around an expect object.
func vec(t *testing.T, expect string) Vector {
	t.Helper()
	raw := `{"id":"AH-CTK-999","title":"t","spec_clause":"0","scenario":{"input":{"content":"hi","role":"user"}},"interceptor_script":[],"expect":` + expect + `}`
	v, err := ParseVector([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ctxAt is a minimal valid context at p with sequence seq and extra members.
func ctxAt(p string, seq int, extra string) []byte {
	cond := map[string]string{
		"agent_startup":   `"agent_init":{"tools_registered":[]},"target":{"tools_registered":[]}`,
		"input":           `"input":{"content":"hi","role":"user"},"target":{"content":"hi","role":"user"}`,
		"pre_model_call":  `"model":{"id":"m"},"messages":[],"target":[]`,
		"post_model_call": `"model":{"id":"m"},"response":{"content":"x","tool_calls":[],"finish_reason":"stop"},"target":{"content":"x","tool_calls":[],"finish_reason":"stop"}`,
		"pre_tool_call":   `"tool_call":{"id":"1","name":"n","args":{}},"target":{}`,
		"post_tool_call":  `"tool_call":{"id":"1","name":"n","args":{}},"tool_result":{"value":1,"is_error":false},"target":1`,
		"output":          `"output":{"content":"x"},"target":{"content":"x"}`,
		"agent_shutdown":  `"summary":{"reason":"completed"},"target":{"reason":"completed"}`,
	}[p]
	s := `{"spec":"agent-hooks/0.1","interception_point":"` + p + `","timestamp":"2026-01-01T00:00:00.000Z","sequence":` +
		itoa(seq) + `,"agent":{"id":"a","framework":"f"},"session":{"id":"s"},` + cond
	if extra != "" {
		s += "," + extra
	}
	return []byte(s + "}")
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func completed() RunRecord { return RunRecord{Outcome: OutcomeCompleted} }

func wantFailure(t *testing.T, r Result, substr string) {
	t.Helper()
	if r.Status != StatusFail {
		t.Fatalf("status %s, want fail (looking for %q)", r.Status, substr)
	}
	for _, f := range r.Failures {
		if strings.Contains(f, substr) {
			return
		}
	}
	t.Fatalf("no failure contains %q: %q", substr, r.Failures)
}

func wantPass(t *testing.T, r Result) {
	t.Helper()
	if r.Status != StatusPass {
		t.Fatalf("status %s: %q", r.Status, r.Failures)
	}
}

func TestAssertInterceptionsStrict(t *testing.T) {
	v := vec(t, `{"interceptions":[{"interception_point":"input","context":{"input.content":"hi","sequence":1.0}},{"interception_point":"output"}],"run_outcome":"completed"}`)
	good := [][]byte{ctxAt("input", 1, ""), ctxAt("output", 2, "")}
	wantPass(t, Assert(v, good, completed()))

	wantFailure(t, Assert(v, [][]byte{ctxAt("input", 1, "")}, completed()), "interception sequence mismatch")
	bad := [][]byte{ctxAt("input", 1, ""), ctxAt("output", 2, "")}
	bad[0] = []byte(strings.Replace(string(bad[0]), `"content":"hi"`, `"content":"ho"`, 1))
	wantFailure(t, Assert(v, bad, completed()), `input.content == "ho", want "hi"`)
}

func TestAssertInterceptionsForwardScan(t *testing.T) {
	v := vec(t, `{"sequence_strict":false,"interceptions":[{"interception_point":"pre_tool_call","context":{"tool_call.args.missing":1}},{"interception_point":"output"}],"interceptions_absent":["post_tool_call"],"run_outcome":"completed"}`)
	rec := [][]byte{ctxAt("input", 0, ""), ctxAt("pre_tool_call", 1, ""), ctxAt("post_tool_call", 2, ""), ctxAt("output", 3, "")}
	r := Assert(v, rec, completed())
	wantFailure(t, r, `path "tool_call.args.missing" did not resolve`)
	wantFailure(t, r, `"post_tool_call" was emitted but MUST be absent`)

	v = vec(t, `{"sequence_strict":false,"interceptions":[{"interception_point":"output"},{"interception_point":"input"}],"run_outcome":"completed"}`)
	wantFailure(t, Assert(v, rec, completed()), `expected interception point "input" not found in sequence`)
}

func TestAssertEnvelopeOfEveryRecordedContext(t *testing.T) {
	v := vec(t, `{"sequence_strict":false,"interceptions":[],"run_outcome":"completed"}`)
	broken := []byte(strings.Replace(string(ctxAt("pre_tool_call", 0, "")), `"framework":"f"`, `"framework":"F!"`, 1))
	wantFailure(t, Assert(v, [][]byte{broken}, completed()), "agent.framework")
	noTarget := []byte(strings.Replace(string(ctxAt("output", 0, "")), `,"target":{"content":"x"}`, ``, 1))
	wantFailure(t, Assert(v, [][]byte{noTarget}, completed()), `missing required field "target"`)

	// context_must_validate:false exempts the paired context only.
	v = vec(t, `{"interceptions":[{"interception_point":"output","context_must_validate":false}],"run_outcome":"completed"}`)
	wantPass(t, Assert(v, [][]byte{noTarget}, completed()))
}

func TestAssertSubstrings(t *testing.T) {
	v := vec(t, `{"sequence_strict":false,"interceptions":[{"interception_point":"pre_model_call","context_must_contain":["ctk:tainted-result"],"context_must_not_contain":["SECRET-RESULT"]}],"run_outcome":"completed"}`)
	ok := ctxAt("pre_model_call", 0, `"x":[{"role":"tool","content":{"error":"blocked","reason":"ctk:tainted-result"}}]`)
	wantPass(t, Assert(v, [][]byte{ok}, completed()))
	// Escaped forms are caught too: the needle is matched after normalization.
	leaky := ctxAt("pre_model_call", 0, `"x":"\u0053ECRET-RESULT"`)
	r := Assert(v, [][]byte{leaky}, completed())
	wantFailure(t, r, "MUST NOT surface")
	wantFailure(t, r, "in any form")
}

func TestAssertRunOutcomeByPosture(t *testing.T) {
	const by = `"run_outcome_by_posture":{"posture":"tool_seam_host_error","outcomes":{"continue":"completed","terminate":"blocked"}}`
	v := vec(t, `{"interceptions":[],"run_outcome":"completed",`+by+`}`)
	rr := func(outcome, posture string) RunRecord {
		r := RunRecord{Outcome: outcome}
		if posture != "" {
			r.Postures = map[string]string{PostureToolSeamHostError: posture}
		}
		return r
	}
	wantPass(t, Assert(v, nil, rr("completed", "")))
	wantPass(t, Assert(v, nil, rr("completed", "continue")))
	wantPass(t, Assert(v, nil, rr("blocked", "terminate")))
	wantFailure(t, Assert(v, nil, rr("completed", "terminate")), `run_outcome == "completed", want "blocked"`)
	wantFailure(t, Assert(v, nil, rr("blocked", "")), `want "completed"`)
	wantFailure(t, Assert(v, nil, rr("blocked", "halt")), "has no outcome")

	v = vec(t, `{"interceptions":[],"run_outcome":"completed","run_outcome_by_posture":{"posture":"nope","outcomes":{"continue":"completed","terminate":"blocked"}}}`)
	wantFailure(t, Assert(v, nil, rr("completed", "")), "unknown posture")
	v = vec(t, `{"interceptions":[],"run_outcome":"completed","run_outcome_by_posture":{"posture":"tool_seam_host_error","outcomes":{"continue":"blocked","terminate":"blocked"}}}`)
	wantFailure(t, Assert(v, nil, rr("completed", "")), "vector error")
}

func TestAssertRunMembers(t *testing.T) {
	v := vec(t, `{"interceptions":[],"run_outcome":"completed","final_output":null,"tool_invocations":[{"name":"t","args":{"id":18446744073709551616}}],"tool_not_invoked":["x"]}`)
	rr := RunRecord{Outcome: OutcomeCompleted, ToolInvocations: []ToolInvocation{{Name: "t", Args: json.RawMessage(`{"id":18446744073709551616}`)}}}
	wantPass(t, Assert(v, nil, rr))

	// One unit off beyond u64 is a different value: nothing rounds.
	rr.ToolInvocations[0].Args = json.RawMessage(`{"id":18446744073709551617}`)
	wantFailure(t, Assert(v, nil, rr), "tool_invocations ==")
	rr.ToolInvocations = append(rr.ToolInvocations[:0], ToolInvocation{Name: "x", Args: json.RawMessage(`{}`)})
	wantFailure(t, Assert(v, nil, rr), `tool "x" was invoked but MUST NOT be`)

	rr = RunRecord{Outcome: OutcomeCompleted, FinalOutput: json.RawMessage(`"leak"`)}
	v = vec(t, `{"interceptions":[],"run_outcome":"completed","final_output":null}`)
	wantFailure(t, Assert(v, nil, rr), `final_output == "leak", want null`)
	// final_output absent asserts nothing.
	v = vec(t, `{"interceptions":[],"run_outcome":"completed"}`)
	wantPass(t, Assert(v, nil, rr))
}

func TestAssertStreamingMembers(t *testing.T) {
	v := vec(t, `{"interceptions":[],"run_outcome":"blocked","released_output":"keep this, ","persisted_must_not_contain":["DROP-THIS-SECRET"]}`)
	rr := RunRecord{Outcome: OutcomeBlocked, ReleasedOutput: json.RawMessage(`"keep this, "`), Persisted: `[{"role":"assistant","content":"keep this, "}]`}
	wantPass(t, Assert(v, nil, rr))
	rr.Persisted = `[{"content":"keep this, DROP-THIS-SECRET"}]`
	wantFailure(t, Assert(v, nil, rr), "MUST NOT become durable")
	rr.Persisted, rr.ReleasedOutput = "", nil
	wantFailure(t, Assert(v, nil, rr), "did not report released_output")
}

func TestAssertIdentities(t *testing.T) {
	a, b := "sha256:a", "sha256:b"
	eq := vec(t, `{"interceptions":[],"run_outcome":"completed","identities_equal":true}`)
	ne := vec(t, `{"interceptions":[],"run_outcome":"completed","identities_equal":false}`)
	same := RunRecord{Outcome: OutcomeCompleted, Identities: []IdentityPair{{&a, &a}, {nil, nil}}}
	diff := RunRecord{Outcome: OutcomeCompleted, Identities: []IdentityPair{{&a, &a}, {&a, &b}, {&a, nil}}}
	wantPass(t, Assert(eq, nil, same))
	wantPass(t, Assert(ne, nil, diff))
	wantFailure(t, Assert(eq, nil, diff), "differ at indices [1 2]")
	wantFailure(t, Assert(ne, nil, same), "but all pairs are equal")
	wantFailure(t, Assert(eq, nil, completed()), "did not report identities")
}

func TestAssertRecords(t *testing.T) {
	v := vec(t, `{"interceptions":[],"run_outcome":"completed","records":[
		{"interception_point":"pre_tool_call","assert":{"verdict.decision":"deny","decided_by":null,"verdicts[1].name":"b"},"absent":["verdict.transform.value","trace"],"present":["timestamp"]},
		{"interception_point":"pre_tool_call","assert":{"verdict.decision":"allow"}}]}`)
	recs := []json.RawMessage{
		json.RawMessage(`{"interception_point":"input","verdict":{"decision":"allow"}}`),
		json.RawMessage(`{"interception_point":"pre_tool_call","timestamp":"t","decided_by":null,"verdict":{"decision":"deny","transform":{"path":"$target"}},"verdicts":[{"name":"a"},{"name":"b"}]}`),
		json.RawMessage(`{"interception_point":"pre_tool_call","verdict":{"decision":"allow"}}`),
	}
	wantPass(t, Assert(v, nil, RunRecord{Outcome: OutcomeCompleted, Records: recs}))

	leaky := append([]json.RawMessage(nil), recs...)
	leaky[1] = json.RawMessage(`{"interception_point":"pre_tool_call","decided_by":0,"verdict":{"decision":"deny","transform":{"path":"$target","value":"x"}},"verdicts":[{"name":"a"}]}`)
	r := Assert(v, nil, RunRecord{Outcome: OutcomeCompleted, Records: leaky})
	wantFailure(t, r, "record[1] pre_tool_call: decided_by == 0, want null")
	wantFailure(t, r, `path "verdicts[1].name" did not resolve`)
	wantFailure(t, r, `verdict.transform.value present ("x"), want absent`)
	wantFailure(t, r, "timestamp absent, want present")

	r = Assert(v, nil, RunRecord{Outcome: OutcomeCompleted, Records: recs[:2]})
	wantFailure(t, r, `expected record for "pre_tool_call" not found in order`)
	wantFailure(t, Assert(v, nil, completed()), "did not report records")
}

func TestAssertSequence(t *testing.T) {
	v := vec(t, `{"sequence_strict":false,"interceptions":[],"run_outcome":"completed"}`)
	wantPass(t, Assert(v, [][]byte{ctxAt("input", 0, ""), ctxAt("output", 5, "")}, completed()))
	wantFailure(t, Assert(v, [][]byte{ctxAt("input", 3, ""), ctxAt("output", 3, "")}, completed()), "sequence not strictly increasing")
	wantFailure(t, Assert(v, [][]byte{ctxAt("input", 3, ""), ctxAt("output", 2, "")}, completed()), "sequence not strictly increasing")
}

func TestAssertLoad(t *testing.T) {
	accepted := vec(t, `{"load":{"outcome":"accepted"},"interceptions":[],"run_outcome":"completed"}`)
	refused := vec(t, `{"load":{"outcome":"refused","class":"declaration_error:kind_unknown"}}`)
	le := &LoadError{Class: "declaration_error:kind_unknown"}
	cases := []struct {
		name    string
		v       Vector
		err     error
		proceed bool
		fail    string
	}{
		{"accepted ok", accepted, nil, true, ""},
		{"accepted but refused", accepted, le, false, "harness.Setup"},
		{"refused as expected", refused, le, false, ""},
		{"refused wrong class", refused, &LoadError{Class: "declaration_error:inconsistent"}, false, "want declaration_error:kind_unknown"},
		{"refused but loaded", refused, nil, false, "declaration loaded, want refused"},
		{"refused other error", refused, errString("boom"), false, "boom"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, proceed := AssertLoad(c.v, c.err)
			if proceed != c.proceed {
				t.Fatalf("proceed %v, want %v", proceed, c.proceed)
			}
			if c.fail == "" && len(f) > 0 || c.fail != "" && (len(f) == 0 || !strings.Contains(strings.Join(f, "\n"), c.fail)) {
				t.Fatalf("failures %q, want %q", f, c.fail)
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

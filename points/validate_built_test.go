package points

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// checkBuilt requires validateBuilt to give exactly validateEnvelope's
// answer on the context build makes, whenever that context is valid JSON
// (otherwise the encoding check rejects it whichever runs).
func checkBuilt(t *testing.T, s *Session, ev Event, now time.Time) {
	t.Helper()
	raw, err := s.build(ev, 7, now, nil)
	if err != nil || CheckEncoding(raw, 0) != nil {
		return
	}
	want := validateEnvelope(raw)
	got := validateBuilt(s, ev, now)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("validateBuilt = %v, validateEnvelope = %v\ncontext: %s", got, want, raw)
	}
	if got == nil {
		checkBuiltPreimage(t, raw, ev.Point)
	}
}

// checkBuiltPreimage requires the preimage of a context validateBuilt
// accepted to be the same, error included, whether or not checkTracked
// runs (the emitter skips it for such contexts).
func checkBuiltPreimage(t *testing.T, raw []byte, p Point) {
	t.Helper()
	c := getCanonicalizer()
	want, wantErr := c.preimage(raw, "")
	want = bytes.Clone(want)
	putCanonicalizer(c)
	c = getCanonicalizer()
	got, gotErr := c.preimage(raw, p)
	defer putCanonicalizer(c)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !bytes.Equal(got, want) {
		t.Fatalf("built preimage = %q, %v; checked preimage = %q, %v\ncontext: %s", got, gotErr, want, wantErr, raw)
	}
}

func builtEvents() []Event {
	resp := json.RawMessage(`{"content":"hi","tool_calls":[],"finish_reason":"stop"}`)
	return []Event{
		StartupEvent([]string{"a", "b"}),
		InputEvent(json.RawMessage(`"hello"`), "user"),
		InputEvent(json.RawMessage(`"hello"`), "nobody"),
		PreModelCallEvent("m", json.RawMessage(`[{"role":"user","content":"x"}]`)),
		PreModelCallEvent("m", json.RawMessage(`[{"role":1,"content":"x"}]`)),
		PreModelCallEvent("m", json.RawMessage(`[{"content":"x"}]`)),
		PreModelCallEvent("m", json.RawMessage(`{}`)),
		PostModelCallEvent("m", resp),
		PostModelCallEvent("m", json.RawMessage(`{"content":"hi","tool_calls":{},"finish_reason":"stop"}`)),
		PostModelCallEvent("m", json.RawMessage(`{"content":"hi","tool_calls":[],"finish_reason":"stop","x":1}`)),
		PostModelCallEvent("m", resp).With("usage", json.RawMessage(`{"prompt_tokens":1,"completion_tokens":2}`)),
		PostModelCallEvent("m", resp).With("extensions", json.RawMessage(`{"ok_ns":{}}`)),
		PostModelCallEvent("m", resp).With("extensions", json.RawMessage(`{"Bad":{}}`)),
		PostModelCallEvent("m", resp).With("extensions", json.RawMessage(`[]`)),
		PostModelCallEvent("m", resp).With("agent", json.RawMessage(`{"id":""}`)),
		PostModelCallEvent("m", resp).With("target", json.RawMessage(`1`)),
		OutputEvent(json.RawMessage(`"done"`)),
		OutputEvent(nil),
		ShutdownEvent("completed"),
		{Point: "bogus", Members: []Member{{"x", json.RawMessage(`1`)}}},
		{Point: Output, Members: []Member{{"output", json.RawMessage(`"not an object"`)}}},
	}
}

func TestValidateBuiltMatchesEnvelope(t *testing.T) {
	sessions := []*Session{
		NewSession(Agent{ID: "a", Framework: "fw"}, "s"),
		NewSession(Agent{ID: "", Framework: "fw"}, "s"),
		NewSession(Agent{ID: "a", Framework: "F W"}, "s"),
		NewSession(Agent{ID: "a", Framework: "fw", Name: "n", Version: "1"}, ""),
		NewSession(Agent{ID: "a", Framework: "fw"}, "s", Member{"trace", json.RawMessage(`{"trace_id":"t","span_id":"s"}`)}),
		NewSession(Agent{ID: "a", Framework: "fw"}, "s", Member{"extensions", json.RawMessage(`{"x":1}`)}),
	}
	times := []time.Time{time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, s := range sessions {
		for _, ev := range builtEvents() {
			for _, now := range times {
				checkBuilt(t, s, ev, now)
			}
		}
	}
}

func FuzzValidateBuilt(f *testing.F) {
	f.Add(uint8(3), "usage", `{"a":1}`, "agent", "fw", "sess")
	f.Add(uint8(6), "extensions", `{"a":{}}`, "", "fw", "sess")
	f.Fuzz(func(t *testing.T, which uint8, key, value, agentID, framework, sessionID string) {
		evs := builtEvents()
		ev := evs[int(which)%len(evs)].With(key, json.RawMessage(value))
		s := NewSession(Agent{ID: agentID, Framework: framework}, sessionID)
		checkBuilt(t, s, ev, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	})
}

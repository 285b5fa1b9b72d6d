package ctk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/tidwall/sjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// ErrScriptedFault is the error a scripted "raise" fault returns; the host
// must substitute host_error:interceptor_failed (or approval_resolver_failed).
var ErrScriptedFault = errors.New("ctk scripted fault: raise")

// malformedVerdict is the §5-invalid shape of the malformed_verdict fault:
// a transform decision with no body.
const malformedVerdict = `{"decision":"transform"}`

// mutatedVerdict is what the mutate fault answers after tampering with its
// copy of the context, as the reference wrappers do.
const mutatedVerdict = `{"decision":"allow","reason":"ctk:mutated"}`

// Matches reports whether every predicate holds on doc: each path resolves
// and deep-equals its expected value. No predicates always match.
func Matches(doc []byte, preds Predicates) bool {
	for _, p := range preds {
		got, ok := Lookup(doc, p.Path)
		if !ok || !JSONEqual([]byte(got.Raw), p.Want) {
			return false
		}
	}
	return true
}

// Evaluate returns the rule of s that answers ctx: the first whose at
// names the context's interception point and whose match holds. ok is
// false when none does; the scripted interceptor then allows.
func (s Script) Evaluate(ctx []byte) (Rule, bool) {
	ip := pointOf(ctx)
	for _, r := range s {
		if string(r.At) == ip && Matches(ctx, r.Match) {
			return r, true
		}
	}
	return Rule{}, false
}

// Scripted is the CTK-supplied interceptor: it records a copy of every
// context it receives and answers from its script (ctk_scripted_intercept).
type Scripted struct {
	script Script
	mu     sync.Mutex
	seen   [][]byte
}

// ScriptedInterceptor returns an interceptor replaying rules.
func ScriptedInterceptor(rules Script) *Scripted { return &Scripted{script: rules} }

// Recorded returns the contexts received so far, in order, as they were
// before the interceptor looked at them.
func (s *Scripted) Recorded() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(s.seen))
	copy(out, s.seen)
	return out
}

// Reset forgets the recorded contexts.
func (s *Scripted) Reset() {
	s.mu.Lock()
	s.seen = nil
	s.mu.Unlock()
}

// Intercept records c and answers per the script: the first matching
// rule's verdict (a verdict the §5 gate rejects comes back as its
// *points.VerdictError), raise → ErrScriptedFault, malformed_verdict → the
// VerdictError of a transform with no body, mutate → tamper with this
// interceptor's own copy of the context and allow; no rule → allow.
func (s *Scripted) Intercept(_ context.Context, c *points.Context) (points.Verdict, error) {
	raw := c.Raw()
	s.mu.Lock()
	s.seen = append(s.seen, bytes.Clone(raw))
	s.mu.Unlock()

	rule, ok := s.script.Evaluate(raw)
	if !ok {
		return points.Allow(), nil
	}
	switch rule.Fault {
	case FaultRaise:
		return points.Verdict{}, ErrScriptedFault
	case FaultMalformedVerdict:
		return points.ParseVerdict([]byte(malformedVerdict))
	case FaultMutate:
		tamper(raw)
		return points.ParseVerdict([]byte(mutatedVerdict))
	}
	return points.ParseVerdict(rule.Return)
}

// tamper scribbles over the context bytes it was handed, in place (§7
// isolation, TM-05): target becomes "TAMPERED" and tool_call.args
// {"tampered":true}, written into the same backing array so that a host
// sharing the bytes would see it.
func tamper(raw []byte) {
	t, err := sjson.SetRawBytes(bytes.Clone(raw), "target", []byte(`"TAMPERED"`))
	if err != nil {
		t = []byte(`"TAMPERED"`)
	}
	if bytes.Contains(t, []byte(`"tool_call"`)) {
		if t2, err := sjson.SetRawBytes(t, "tool_call.args", []byte(`{"tampered":true}`)); err == nil {
			t = t2
		}
	}
	n := copy(raw, t)
	for i := n; i < len(raw); i++ {
		raw[i] = ' '
	}
}

// ScriptedApproval is the CTK-supplied approval resolver replaying an
// approval_script (ctk_scripted_resolve).
type ScriptedApproval struct {
	rules []ApprovalRule
	mu    sync.Mutex
	seen  []points.ApprovalRequest
}

// ScriptedResolver returns a resolver replaying rules.
func ScriptedResolver(rules []ApprovalRule) *ScriptedApproval {
	return &ScriptedApproval{rules: rules}
}

// Requests returns the approval requests received so far.
func (r *ScriptedApproval) Requests() []points.ApprovalRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]points.ApprovalRequest(nil), r.seen...)
}

// Resolve answers with the first rule whose match holds on the request
// context: raise → ErrScriptedFault; otherwise its outcome and verdict,
// echoing the request identity unless the rule overrides it
// (identity_override) or recomputes jcs-sha256 over the context it was
// actually shown (echo_recomputed, which wins). No rule → unresolved.
func (r *ScriptedApproval) Resolve(_ context.Context, req points.ApprovalRequest) (points.ApprovalResolution, error) {
	req.Context = bytes.Clone(req.Context)
	r.mu.Lock()
	r.seen = append(r.seen, req)
	r.mu.Unlock()
	for _, rule := range r.rules {
		if !Matches(req.Context, rule.Match) {
			continue
		}
		res := rule.Resolve
		if res.Fault == FaultRaise {
			return points.ApprovalResolution{}, ErrScriptedFault
		}
		ident := req.ContextIdentity
		switch {
		case res.EchoRecomputed:
			// The reference engine echoes "" when it cannot compute;
			// the mismatch is the point then.
			id, err := points.JCSSHA256().Identity(req.Context)
			if err != nil {
				id = ""
			}
			ident = &id
		case res.IdentityOverride != nil:
			id := *res.IdentityOverride
			ident = &id
		}
		var verdict json.RawMessage
		if res.Verdict != nil {
			verdict = bytes.Clone(res.Verdict)
		}
		return points.ApprovalResolution{Outcome: res.Outcome, ContextIdentity: ident, Verdict: verdict}, nil
	}
	return points.ApprovalResolution{Outcome: points.OutcomeUnresolved, ContextIdentity: req.ContextIdentity}, nil
}

// redactTarget is the CTK approval redactor convention (§9): each listed
// §5.2 path in the target is replaced with "[redacted]", mirrored into the
// aliased member; a path that does not resolve is left alone.
func redactTarget(paths []string) points.Redactor {
	return points.RedactorFunc(func(_ context.Context, raw []byte) ([]byte, error) {
		p, err := points.ParsePoint(pointOf(raw))
		if err != nil {
			return nil, err
		}
		out := bytes.Clone(raw)
		for _, path := range paths {
			target, ok := Lookup(out, "target")
			if !ok {
				break
			}
			next, err := points.ApplyTransform([]byte(target.Raw), path, []byte(`"[redacted]"`))
			if err != nil {
				continue
			}
			if out, err = writeBack(out, p, next); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
}

// writeBack stores a new target and mirrors it into the member it aliases
// (§4.3).
func writeBack(raw []byte, p points.Point, target []byte) ([]byte, error) {
	out, err := sjson.SetRawBytes(raw, "target", target)
	if err != nil {
		return nil, err
	}
	return sjson.SetRawBytes(out, p.Field(), target)
}

// Redactor returns the approval redactor a vector asks for (nil when it
// lists no redact_for_approval paths).
func (v *Vector) Redactor() points.Redactor {
	if len(v.RedactForApproval) == 0 {
		return nil
	}
	return redactTarget(v.RedactForApproval)
}

// faultProvider is the ctk-fault identity provider: it fails every
// computation (§10.1 provider-failure rule).
type faultProvider struct{}

func (faultProvider) Name() string { return ProviderCTKFault }

func (faultProvider) Identity([]byte) (string, error) {
	return "", errors.New("ctk scripted provider fault")
}

// Identity returns the identity provider the vector selects: jcs-sha256,
// the failing ctk-fault provider, or nil for the null provider.
func (v *Vector) Identity() points.IdentityProvider {
	switch v.IdentityProvider {
	case ProviderJCS:
		return points.JCSSHA256()
	case ProviderCTKFault:
		return faultProvider{}
	}
	return nil
}

// CompositionConfig returns the points composition the vector selects;
// absent is sequential/first_deny with on_approval stop.
func (v *Vector) CompositionConfig() points.Composition {
	if v.Composition == nil {
		return points.Composition{Profile: points.ProfileFirstDeny, OnApproval: points.OnApprovalStop}
	}
	return points.Composition{
		Profile:             v.Composition.Profile,
		OnApproval:          v.Composition.OnApproval,
		OnDisagreement:      v.Composition.OnDisagreement,
		OnTransformConflict: v.Composition.OnTransformConflict,
	}
}

package ctk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hooksproxy/hooksproxy/config"
	"github.com/hooksproxy/hooksproxy/points"
)

// The names a CTK host declaration resolves against.
const (
	// KindScripted is the binding kind whose config {"script": N} selects
	// the vector's Nth interceptor script.
	KindScripted = "ctk.scripted"
	// ResolverScripted is the reference name of the vector's scripted
	// approval resolver.
	ResolverScripted = "ctk-scripted"
)

// ConformanceRegistry is the registry a CTK host declaration loads
// against: kind ctk.scripted over s.Scripts, the approval resolver
// "ctk-scripted" (when the vector has an approval script) and the custom
// identity provider "ctk-fault".
func ConformanceRegistry(s Setup) (*config.MapRegistry, error) {
	reg := config.NewConformanceRegistry()
	scripts := s.Scripts
	err := reg.RegisterKind(KindScripted, func(b config.BindingSpec) (points.Interceptor, error) {
		n, err := scriptIndex(b.Config)
		if err != nil {
			return nil, err
		}
		if n >= len(scripts) {
			return nil, fmt.Errorf("ctk.scripted: script %d out of range (the vector has %d)", n, len(scripts))
		}
		return scripts[n], nil
	})
	if err != nil {
		return nil, fmt.Errorf("ctk: registering %s: %w", KindScripted, err)
	}
	if s.Resolver != nil {
		if err := reg.RegisterResolver(ResolverScripted, s.Resolver); err != nil {
			return nil, fmt.Errorf("ctk: registering %s: %w", ResolverScripted, err)
		}
	}
	if err := reg.RegisterIdentityProvider(ProviderCTKFault, faultProvider{}); err != nil {
		return nil, fmt.Errorf("ctk: registering %s: %w", ProviderCTKFault, err)
	}
	return reg, nil
}

// scriptIndex reads {"script": N}: N must be a non-negative integer
// literal (not a string holding one) and nothing else may be present.
func scriptIndex(cfg json.RawMessage) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(cfg))
	dec.DisallowUnknownFields()
	var c struct {
		Script json.RawMessage `json:"script"`
	}
	if err := dec.Decode(&c); err != nil {
		return 0, errors.New("ctk.scripted: config must be {\"script\": <index>}")
	}
	if c.Script == nil {
		return 0, errors.New("ctk.scripted: config.script is required")
	}
	n, err := strconv.ParseUint(string(c.Script), 10, 20)
	if err != nil {
		return 0, errors.New("ctk.scripted: config.script must be a non-negative integer")
	}
	return int(n), nil
}

// LoadDeclaration loads s.HostDeclaration against ConformanceRegistry(s).
// The document goes through three load paths — its JSON bytes, a
// re-encoded value (other member order and spacing) and a file — which
// must agree on one canonical resolved form or one refusal class
// (§7.7.7). A refusal is a *LoadError naming the class.
func LoadDeclaration(s Setup) (*config.Declaration, error) {
	if s.HostDeclaration == nil {
		return nil, errors.New("ctk: the vector has no host declaration")
	}
	load := func(doc []byte) (*config.Declaration, error) {
		reg, err := ConformanceRegistry(s)
		if err != nil {
			return nil, err
		}
		return config.LoadDeclaration(doc, reg)
	}
	d, err := load(s.HostDeclaration)
	value, err2 := load(reencode(s.HostDeclaration))
	file, err3 := loadFile(s, s.HostDeclaration)
	if msg := disagreement(d, err, value, err2, "value"); msg != "" {
		return nil, errors.New(msg)
	}
	if msg := disagreement(d, err, file, err3, "file"); msg != "" {
		return nil, errors.New(msg)
	}
	if err != nil {
		var de *config.DeclarationError
		if errors.As(err, &de) {
			return nil, &LoadError{Class: de.Class, Err: err}
		}
		return nil, err
	}
	return d, nil
}

// reencode round-trips doc through a generic value: members come out
// sorted and compact, numbers byte-for-byte (json.Number).
func reencode(doc []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return doc
	}
	out, err := json.Marshal(v)
	if err != nil {
		return doc
	}
	return out
}

func loadFile(s Setup, doc []byte) (*config.Declaration, error) {
	dir, err := os.MkdirTemp("", "ctk-declaration-")
	if err != nil {
		return nil, fmt.Errorf("ctk: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "declaration.json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		return nil, fmt.Errorf("ctk: %w", err)
	}
	reg, err := ConformanceRegistry(s)
	if err != nil {
		return nil, err
	}
	return config.LoadDeclarationFile(path, reg)
}

// disagreement describes how two load paths disagree, "" when they agree.
func disagreement(a *config.Declaration, errA error, b *config.Declaration, errB error, path string) string {
	classOf := func(err error) string {
		var de *config.DeclarationError
		if errors.As(err, &de) {
			return de.Class
		}
		return fmt.Sprintf("error %v", err)
	}
	switch {
	case errA == nil && errB == nil:
		if !bytes.Equal(a.Canonical(), b.Canonical()) {
			return fmt.Sprintf("load paths disagree: the %s path resolves another canonical form", path)
		}
	case errA == nil:
		return fmt.Sprintf("load paths disagree: the JSON path accepts, the %s path refuses: %v", path, errB)
	case errB == nil:
		return fmt.Sprintf("load paths disagree: the JSON path refuses (%v), the %s path accepts", errA, path)
	case classOf(errA) != classOf(errB):
		return fmt.Sprintf("load paths disagree: the JSON path refuses with %s, the %s path with %s", classOf(errA), path, classOf(errB))
	}
	return ""
}

// DeclarationConfig loads s.HostDeclaration (see LoadDeclaration) and
// returns the emitter configuration it declares and its declared
// tool_seam_host_error posture.
func DeclarationConfig(s Setup) (points.Config, string, error) {
	d, err := LoadDeclaration(s)
	if err != nil {
		return points.Config{}, "", err
	}
	return d.EmitterConfig(), d.Posture(), nil
}

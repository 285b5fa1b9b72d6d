package config

import (
	"strings"
)

// The eleven declaration refusal classes (spec/declaration-errors.json), in
// pipeline order. A loader reports exactly one: the first step that fails.
const (
	ClassUnreadable          = "declaration_error:unreadable"
	ClassMalformed           = "declaration_error:malformed"
	ClassVersionUnsupported  = "declaration_error:version_unsupported"
	ClassSpecUnsupported     = "declaration_error:spec_unsupported"
	ClassUnknownField        = "declaration_error:unknown_field"
	ClassInvalidField        = "declaration_error:invalid_field"
	ClassInconsistent        = "declaration_error:inconsistent"
	ClassSurfaceUnsupported  = "declaration_error:surface_unsupported"
	ClassReferenceUnresolved = "declaration_error:reference_unresolved"
	ClassKindUnknown         = "declaration_error:kind_unknown"
	ClassBindingRejected     = "declaration_error:binding_rejected"
)

// DeclarationClasses lists the refusal classes in pipeline order.
func DeclarationClasses() []string {
	return []string{
		ClassUnreadable, ClassMalformed, ClassVersionUnsupported, ClassSpecUnsupported,
		ClassUnknownField, ClassInvalidField, ClassInconsistent, ClassSurfaceUnsupported,
		ClassReferenceUnresolved, ClassKindUnknown, ClassBindingRejected,
	}
}

// maxDetailLen bounds a finding detail (and the exposure bound).
const maxDetailLen = 512

// Finding is one problem a load step found: Path is a JSON pointer into the
// document ("/bindings/1/kind"; "" is the root). Details name members, kinds
// and ids, never binding configuration.
type Finding struct {
	Path   string
	Detail string
}

// DeclarationError is a refused host declaration (§7.7.6). It is a
// construction error, never a verdict. Class is the first failing step's
// class; Path and Detail are its first finding and Findings all of them.
type DeclarationError struct {
	Class    string
	Path     string
	Detail   string
	Findings []Finding
	// Accepted names the accepted contract versions (version_unsupported only).
	Accepted []string
	// Err is the underlying cause, when there is one (an I/O error, a kind
	// resolver's error).
	Err error
	// Later holds what the later independent steps found when the first
	// failing step was reference_unresolved or kind_unknown (steps 10 and
	// 11 look at other members): the refusal's class stays Class, and
	// Later lets a validator list every problem at once. Error omits it.
	Later []*DeclarationError
}

// stopsPipeline reports whether a refusal of this class leaves later steps
// unchecked (nothing in Later covers them).
func stopsPipeline(class string) bool {
	switch class {
	case ClassReferenceUnresolved, ClassKindUnknown, ClassBindingRejected:
		return false
	}
	return true
}

func newDeclError(class string, findings []Finding) *DeclarationError {
	for i := range findings {
		findings[i].Detail = truncate(findings[i].Detail, maxDetailLen)
	}
	e := &DeclarationError{Class: class, Findings: findings}
	if len(findings) > 0 {
		e.Path, e.Detail = findings[0].Path, findings[0].Detail
	}
	return e
}

func declErr(class, path, detail string) *DeclarationError {
	return newDeclError(class, []Finding{{Path: path, Detail: detail}})
}

// Error prints the class and every finding: "class: /path: detail; ...".
func (e *DeclarationError) Error() string {
	var b strings.Builder
	b.WriteString(e.Class)
	fs := e.Findings
	if len(fs) == 0 {
		fs = []Finding{{e.Path, e.Detail}}
	}
	for i, f := range fs {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		if f.Path != "" {
			b.WriteString(f.Path)
			b.WriteString(": ")
		}
		b.WriteString(f.Detail)
	}
	return b.String()
}

// Unwrap returns the underlying cause, if any.
func (e *DeclarationError) Unwrap() error { return e.Err }

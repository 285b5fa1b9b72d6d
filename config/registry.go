package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
)

// ErrUnknownKind is returned (wrapped) by registries and factories for a kind
// nobody registered.
var ErrUnknownKind = errors.New("unknown kind")

// BindingSpec is one resolved binding as its kind resolver sees it.
type BindingSpec struct {
	// ID is the binding id, stamped on records as verdicts[].name.
	ID string
	// Kind is the namespaced kind, the registry lookup key.
	Kind string
	// Config is the binding's config as compact JSON ({} when absent). The
	// kind validates it; the loader never reads it.
	Config json.RawMessage
	// At lists the points the binding runs at, in lifecycle order.
	At []points.Point
	// Timeout is the per-binding bound, or Unbounded.
	Timeout time.Duration
}

// Unbounded is the resolved timeout of a declaration member written as null.
const Unbounded time.Duration = -1

// Registry is what a declaration resolves against (§7.7.5): kind resolvers
// and the reference names of identity providers, approval resolvers and
// approval redactors. Implementations must be safe for concurrent reads.
type Registry interface {
	// HasKind reports whether a resolver is registered for kind (step 10).
	HasKind(kind string) bool
	// NewInterceptor builds the interceptor of one binding (step 11). An
	// error refuses the declaration as binding_rejected; its message must
	// not echo the config.
	NewInterceptor(b BindingSpec) (points.Interceptor, error)
	// IdentityProvider looks up a custom identity provider by name.
	IdentityProvider(name string) (points.IdentityProvider, bool)
	// Resolver looks up an approval resolver by reference name.
	Resolver(name string) (points.Resolver, bool)
	// Redactor looks up an approval redactor by reference name.
	Redactor(name string) (points.Redactor, bool)
}

// Factories builds the named resolvers, redactors and identity providers the
// config file defines at its top level ({kind, config}). A Registry that also
// implements Factories can serve a config file with those sections. Each
// method wraps ErrUnknownKind for a kind it does not know.
type Factories interface {
	NewResolver(kind, name string, config json.RawMessage) (points.Resolver, error)
	NewRedactor(kind, name string, config json.RawMessage) (points.Redactor, error)
	NewIdentityProvider(kind, name string, config json.RawMessage) (points.IdentityProvider, error)
}

// KindFunc builds one binding's interceptor.
type KindFunc func(b BindingSpec) (points.Interceptor, error)

// ResolverFactory builds a named approval resolver from its JSON config.
type ResolverFactory func(name string, config json.RawMessage) (points.Resolver, error)

// RedactorFactory builds a named approval redactor from its JSON config.
type RedactorFactory func(name string, config json.RawMessage) (points.Redactor, error)

// IdentityProviderFactory builds a named identity provider from its JSON config.
type IdentityProviderFactory func(name string, config json.RawMessage) (points.IdentityProvider, error)

// MapRegistry is a map-backed Registry and Factories. Register everything
// before loading; lookups are safe for concurrent use.
type MapRegistry struct {
	mu            sync.RWMutex
	allowCTK      bool
	checkFiles    bool
	getenv        func(string) string
	kinds         map[string]KindFunc
	identities    map[string]points.IdentityProvider
	resolvers     map[string]points.Resolver
	redactors     map[string]points.Redactor
	resolverKinds map[string]ResolverFactory
	redactorKinds map[string]RedactorFactory
	identityKinds map[string]IdentityProviderFactory
}

// NewRegistry returns an empty registry. Kinds under the reserved first
// segments agent_hooks and ctk are refused.
func NewRegistry() *MapRegistry {
	return &MapRegistry{
		kinds:         map[string]KindFunc{},
		identities:    map[string]points.IdentityProvider{},
		resolvers:     map[string]points.Resolver{},
		redactors:     map[string]points.Redactor{},
		resolverKinds: map[string]ResolverFactory{},
		redactorKinds: map[string]RedactorFactory{},
		identityKinds: map[string]IdentityProviderFactory{},
	}
}

// NewConformanceRegistry is NewRegistry for the conformance kit: the ctk
// segment (ctk.scripted) may be registered.
func NewConformanceRegistry() *MapRegistry {
	r := NewRegistry()
	r.allowCTK = true
	return r
}

var (
	referenceRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	kindRE      = regexp.MustCompile(`^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)+$`)
)

const maxKindLen = 128

func validReference(s string) bool { return referenceRE.MatchString(s) }

func validKind(s string) bool { return len(s) <= maxKindLen && kindRE.MatchString(s) }

// validProviderName is the §10.1 custom provider grammar: a reference that
// does not begin with jcs.
func validProviderName(s string) bool { return validReference(s) && !strings.HasPrefix(s, "jcs") }

func (r *MapRegistry) checkKind(kind string) error {
	if !validKind(kind) {
		return fmt.Errorf("config: kind %q does not match the kind grammar (see spec §7.7.5)", kind)
	}
	head, _, _ := strings.Cut(kind, ".")
	if head == "agent_hooks" || (head == "ctk" && !r.allowCTK) {
		return fmt.Errorf("config: kind %q uses the reserved segment %q (see spec §7.7.5)", kind, head)
	}
	return nil
}

// RegisterKind registers the resolver of a binding kind.
func (r *MapRegistry) RegisterKind(kind string, f KindFunc) error {
	if err := r.checkKind(kind); err != nil {
		return err
	}
	if f == nil {
		return fmt.Errorf("config: kind %q: nil resolver", kind)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.kinds[kind]; dup {
		return fmt.Errorf("config: kind %q registered twice", kind)
	}
	r.kinds[kind] = f
	return nil
}

// RegisterIdentityProvider registers a custom identity provider by name
// (§10.1: a reference name not beginning with jcs).
func (r *MapRegistry) RegisterIdentityProvider(name string, p points.IdentityProvider) error {
	if !validProviderName(name) {
		return fmt.Errorf("config: identity provider name %q must match ^[a-z][a-z0-9_-]{0,63}$ and not begin with jcs", name)
	}
	if p == nil {
		return fmt.Errorf("config: identity provider %q is nil", name)
	}
	if p.Name() != name {
		// Records carry Name(); it must be the name the declaration uses.
		return fmt.Errorf("config: identity provider registered as %q names itself %q", name, p.Name())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.identities[name]; dup {
		return fmt.Errorf("config: identity provider %q registered twice", name)
	}
	r.identities[name] = p
	return nil
}

// RegisterResolver registers an approval resolver by reference name.
func (r *MapRegistry) RegisterResolver(name string, res points.Resolver) error {
	if !validReference(name) {
		return fmt.Errorf("config: approval resolver name %q must match ^[a-z][a-z0-9_-]{0,63}$", name)
	}
	if res == nil {
		return fmt.Errorf("config: approval resolver %q is nil", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.resolvers[name]; dup {
		return fmt.Errorf("config: approval resolver %q registered twice", name)
	}
	r.resolvers[name] = res
	return nil
}

// RegisterRedactor registers an approval redactor by reference name.
func (r *MapRegistry) RegisterRedactor(name string, red points.Redactor) error {
	if !validReference(name) {
		return fmt.Errorf("config: approval redactor name %q must match ^[a-z][a-z0-9_-]{0,63}$", name)
	}
	if red == nil {
		return fmt.Errorf("config: approval redactor %q is nil", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.redactors[name]; dup {
		return fmt.Errorf("config: approval redactor %q registered twice", name)
	}
	r.redactors[name] = red
	return nil
}

// RegisterResolverKind registers a factory for the config file's resolvers section.
func (r *MapRegistry) RegisterResolverKind(kind string, f ResolverFactory) error {
	if err := r.checkKind(kind); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.resolverKinds[kind]; dup || f == nil {
		return fmt.Errorf("config: resolver kind %q registered twice or nil", kind)
	}
	r.resolverKinds[kind] = f
	return nil
}

// RegisterRedactorKind registers a factory for the config file's redactors section.
func (r *MapRegistry) RegisterRedactorKind(kind string, f RedactorFactory) error {
	if err := r.checkKind(kind); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.redactorKinds[kind]; dup || f == nil {
		return fmt.Errorf("config: redactor kind %q registered twice or nil", kind)
	}
	r.redactorKinds[kind] = f
	return nil
}

// RegisterIdentityProviderKind registers a factory for the config file's
// identity_providers section.
func (r *MapRegistry) RegisterIdentityProviderKind(kind string, f IdentityProviderFactory) error {
	if err := r.checkKind(kind); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.identityKinds[kind]; dup || f == nil {
		return fmt.Errorf("config: identity provider kind %q registered twice or nil", kind)
	}
	r.identityKinds[kind] = f
	return nil
}

// SetGetenv names the environment the registry's kinds read secrets from,
// so that Parse checks the config file's own env references against it
// too (see Environment). nil forgets it.
func (r *MapRegistry) SetGetenv(getenv func(string) string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.getenv = getenv
}

// SetCheckFiles makes Parse check the files the config names as serve
// will open them (records.file), without creating anything: validate
// uses it so that it refuses what serve would.
func (r *MapRegistry) SetCheckFiles(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checkFiles = on
}

// ChecksFiles implements FileChecker.
func (r *MapRegistry) ChecksFiles() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.checkFiles
}

// LookupEnv implements Environment: the function SetGetenv set, or nil.
func (r *MapRegistry) LookupEnv() func(string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.getenv
}

// HasKind implements Registry.
func (r *MapRegistry) HasKind(kind string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.kinds[kind]
	return ok
}

// NewInterceptor implements Registry.
func (r *MapRegistry) NewInterceptor(b BindingSpec) (points.Interceptor, error) {
	r.mu.RLock()
	f, ok := r.kinds[b.Kind]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("binding kind %q: %w", b.Kind, ErrUnknownKind)
	}
	return f(b)
}

// IdentityProvider implements Registry.
func (r *MapRegistry) IdentityProvider(name string) (points.IdentityProvider, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.identities[name]
	return p, ok
}

// Resolver implements Registry.
func (r *MapRegistry) Resolver(name string) (points.Resolver, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.resolvers[name]
	return p, ok
}

// Redactor implements Registry.
func (r *MapRegistry) Redactor(name string) (points.Redactor, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.redactors[name]
	return p, ok
}

// ComponentKinds returns, sorted, the kinds that build the components of
// a top-level section of the config file: "resolvers", "redactors" or
// "identity_providers". Config errors name them.
func (r *MapRegistry) ComponentKinds(section string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var ks []string
	switch section {
	case "resolvers":
		ks = slices.Collect(maps.Keys(r.resolverKinds))
	case "redactors":
		ks = slices.Collect(maps.Keys(r.redactorKinds))
	case "identity_providers":
		ks = slices.Collect(maps.Keys(r.identityKinds))
	}
	slices.Sort(ks)
	return ks
}

// NewResolver implements Factories.
func (r *MapRegistry) NewResolver(kind, name string, config json.RawMessage) (points.Resolver, error) {
	r.mu.RLock()
	f, ok := r.resolverKinds[kind]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("resolver kind %q: %w", kind, ErrUnknownKind)
	}
	return f(name, config)
}

// NewRedactor implements Factories.
func (r *MapRegistry) NewRedactor(kind, name string, config json.RawMessage) (points.Redactor, error) {
	r.mu.RLock()
	f, ok := r.redactorKinds[kind]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("redactor kind %q: %w", kind, ErrUnknownKind)
	}
	return f(name, config)
}

// NewIdentityProvider implements Factories.
func (r *MapRegistry) NewIdentityProvider(kind, name string, config json.RawMessage) (points.IdentityProvider, error) {
	r.mu.RLock()
	f, ok := r.identityKinds[kind]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("identity provider kind %q: %w", kind, ErrUnknownKind)
	}
	return f(name, config)
}

// Package app wires hooksproxy together: the config file, the kind
// registry with the built-in interceptors, resolvers, redactors and identity
// providers, the emitter and the proxy server, and hot reload.
package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/config"
	"github.com/hooksproxy/hooksproxy/interceptors"
	"github.com/hooksproxy/hooksproxy/points"
)

// Env is what the registry may take from the outside world.
type Env struct {
	Getenv     func(string) string
	HTTPClient *http.Client
	Now        func() time.Time
}

func (e Env) withDefaults() Env {
	if e.Getenv == nil {
		e.Getenv = os.Getenv
	}
	if e.HTTPClient == nil {
		// No client-wide timeout: each webhook call is bounded by its
		// own timeout and its binding's timeout_ms, which may be longer
		// than any fixed figure here.
		e.HTTPClient = &http.Client{}
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	return e
}

// Extra registers further kinds, resolvers or redactors (the approval
// console, the conformance kit) on top of the built-ins.
type Extra func(r *config.MapRegistry) error

// NewRegistry returns a registry with every built-in binding kind, the
// content redactor kind and the keyed identity provider kind.
func NewRegistry(env Env, extra ...Extra) (*config.MapRegistry, error) {
	env = env.withDefaults()
	reg := config.NewRegistry()
	ienv := interceptors.Env{Getenv: env.Getenv, HTTPClient: env.HTTPClient, Now: env.Now}
	for _, k := range interceptors.Builtins() {
		k := k
		if err := reg.RegisterKind(k.Name, func(b config.BindingSpec) (points.Interceptor, error) {
			return k.New(b.ID, b.Config, ienv)
		}); err != nil {
			return nil, err
		}
	}
	if err := reg.RegisterRedactorKind(interceptors.KindContent, func(_ string, cfg json.RawMessage) (points.Redactor, error) {
		return interceptors.NewRedactor(cfg)
	}); err != nil {
		return nil, err
	}
	if err := reg.RegisterIdentityProviderKind("hooksproxy.hmac", func(name string, cfg json.RawMessage) (points.IdentityProvider, error) {
		return newHMAC(name, cfg, env.Getenv)
	}); err != nil {
		return nil, err
	}
	for _, x := range extra {
		if err := x(reg); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// newHMAC builds hmac-sha256-<key-id> from {key_env: NAME}; the provider
// name must be hmac-sha256-<key-id> so records say which key was used.
func newHMAC(name string, cfg json.RawMessage, getenv func(string) string) (points.IdentityProvider, error) {
	const prefix = "hmac-sha256-"
	if len(name) <= len(prefix) || name[:len(prefix)] != prefix {
		return nil, fmt.Errorf("identity provider %q: a hooksproxy.hmac provider must be named hmac-sha256-<key-id>", name)
	}
	var known = map[string]bool{"key_env": true}
	var bad string
	gjson.ParseBytes(cfg).ForEach(func(k, _ gjson.Result) bool {
		if !known[k.Str] {
			bad = k.Str
		}
		return bad == ""
	})
	if bad != "" {
		return nil, fmt.Errorf("config.%s: unknown key", bad)
	}
	env := gjson.GetBytes(cfg, "key_env").Str
	if env == "" {
		return nil, keyEnvError("required (the env var holding the HMAC key)")
	}
	if !config.IsEnvName(env) {
		// Likely the key itself pasted in: never echoed.
		return nil, keyEnvError(config.NotEnvName)
	}
	key := getenv(env)
	if key == "" {
		return nil, keyEnvError(fmt.Sprintf("env var %s is unset or empty", config.ShownEnvName(env)))
	}
	return points.HMACSHA256(name[len(prefix):], []byte(key))
}

// keyEnvError is a problem with config.key_env; as a config.MemberError
// it is reported at that member's line, not the provider's.
type keyEnvError string

func (e keyEnvError) Error() string { return "config.key_env: " + string(e) }

// MemberPath implements config.MemberError.
func (e keyEnvError) MemberPath() string { return "config.key_env" }

// Getenv reads the process environment; it is the default Env.Getenv.
func Getenv(k string) string { return os.Getenv(k) }

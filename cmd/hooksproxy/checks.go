package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hooksproxy/hooksproxy/app"
	"github.com/hooksproxy/hooksproxy/approvals"
	"github.com/hooksproxy/hooksproxy/config"
)

// envExtra hands the registry the environment serve reads secrets from,
// so loading checks the config's own env references (upstream.api_key_env)
// the way serve needs them: validate then reports what serve would refuse.
func envExtra(getenv func(string) string) app.Extra {
	return func(r *config.MapRegistry) error {
		r.SetGetenv(getenv)
		return nil
	}
}

// The approval resolver kinds whose config carries a wait bound.
const (
	kindConsole = "hooksproxy.console"
	kindWebhook = "hooksproxy.webhook"
)

// approvalChecks finds approvals that a loaded config cannot deliver as
// written. Problems: the declared resolver's own timeout is longer than the
// effective hooks.configuration.timeouts.approval_resolver_ms, which caps
// every wait (the spec makes it default to interceptor_ms, 5 s), so an
// approver silently gets the shorter bound. Warnings: the declared resolver
// is the console while the admin token is unset, so no one can ever decide
// what it queues. validate reports both; serve logs both as warnings.
func approvalChecks(cfg *config.Config, getenv func(string) string) (problems, warnings []config.Problem) {
	ref := cfg.Hooks.ApprovalResolverRef()
	comp, ok := cfg.Resolvers[ref]
	if ref == "" || !ok {
		return nil, nil // none, or one the host registered itself
	}
	at := "resolvers." + ref
	if timeout, ok := resolverTimeout(comp); ok {
		if bound := cfg.Hooks.Timeouts().ApprovalResolver; bound >= 0 && timeout > bound {
			path := at + ".config.timeout"
			problems = append(problems, config.Problem{Path: path, Line: cfg.Line(path), Msg: fmt.Sprintf(
				"timeout %s exceeds hooks.configuration.timeouts.approval_resolver_ms (%d ms, which defaults to interceptor_ms), the bound on every approval wait: an approver would get %s; set approval_resolver_ms to at least %d",
				timeout, bound.Milliseconds(), bound, timeout.Milliseconds())})
		}
	}
	if comp.Kind == kindConsole && getenv(cfg.Admin.TokenEnv) == "" {
		warnings = append(warnings, config.Problem{Path: at, Line: cfg.Line(at), Msg: fmt.Sprintf(
			"warning: the console resolver can never be decided: %s (admin.token_env) is unset, so the approval API and page refuse every request and each approval waits until it times out",
			cfg.Admin.TokenEnv)})
	}
	return problems, warnings
}

// resolverTimeout is the timeout a console or webhook resolver config sets;
// ok is false when it sets none. The config has already loaded, so it is
// valid.
func resolverTimeout(c config.Component) (time.Duration, bool) {
	switch c.Kind {
	case kindConsole:
		o, err := approvals.ParseConsoleConfig(c.Config)
		return o.Timeout, err == nil && o.Timeout > 0
	case kindWebhook:
		var w struct {
			Timeout string `json:"timeout"`
		}
		if json.Unmarshal(c.Config, &w) != nil || w.Timeout == "" {
			return 0, false
		}
		d, err := time.ParseDuration(w.Timeout)
		return d, err == nil && d > 0
	}
	return 0, false
}

package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hooksproxy/hooksproxy/app"
	"github.com/hooksproxy/hooksproxy/config"
	"github.com/hooksproxy/hooksproxy/points"
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

// checkFiles makes loading check the files the config names as serve will
// open them (records.file), creating nothing: validate refuses what serve
// would.
func checkFiles(r *config.MapRegistry) error {
	r.SetCheckFiles(true)
	return nil
}

// The approval resolver kinds this binary registers.
const (
	kindConsole = "hooksproxy.console"
	kindWebhook = "hooksproxy.webhook"
)

// approvalWarnings finds approvals that a loaded config cannot deliver as
// written but that are not errors: the declared resolver is the console
// while the admin token is unset, so no one can ever decide what it queues.
// validate prints them (exit 0); serve logs them. The config's own
// warnings (a resolver timeout above approval_resolver_ms: see
// config.BoundedResolver) come first.
func approvalWarnings(cfg *config.Config, getenv func(string) string) []config.Problem {
	warns := append([]config.Problem(nil), cfg.Warnings...)
	if len(cfg.Hooks.Bindings()) == 0 && cfg.Hooks.Mode() == points.Enforce {
		// The spec requires the document to load; it also makes every
		// point deny, which is rarely what the author meant.
		warns = append(warns, config.Problem{Path: "hooks.bindings", Line: cfg.Line("hooks.bindings"),
			Msg: "warning: no bindings in enforce mode: every request is denied with host_error:no_interceptor (add a hooksproxy.allow_all binding for an explicit passthrough)"})
	}
	ref := cfg.Hooks.ApprovalResolverRef()
	comp, ok := cfg.Resolvers[ref]
	if ref == "" || !ok || comp.Kind != kindConsole || getenv(cfg.Admin.TokenEnv) != "" {
		return warns
	}
	at := "resolvers." + ref
	return append(warns, config.Problem{Path: at, Line: cfg.Line(at), Msg: fmt.Sprintf(
		"warning: the console resolver can never be decided: %s (admin.token_env) is unset, so the approval API and page refuse every request and each approval waits until it times out",
		config.ShownEnvName(cfg.Admin.TokenEnv))})
}

// webhookTimeout is the timeout a hooksproxy.webhook resolver config sets,
// 0 for none. The webhook has already accepted the config.
func webhookTimeout(cfg json.RawMessage) time.Duration {
	var w struct {
		Timeout string `json:"timeout"`
	}
	if json.Unmarshal(cfg, &w) != nil || w.Timeout == "" {
		return 0
	}
	d, err := time.ParseDuration(w.Timeout)
	if err != nil || d < 0 {
		return 0
	}
	return d
}

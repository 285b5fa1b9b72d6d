package interceptors

import (
	"context"
	"fmt"
	"strings"

	"github.com/hooksproxy/hooksproxy/points"
)

// modelsConfig is hooksproxy.models.
type modelsConfig struct {
	Allow   []string `json:"allow"`
	Deny    []string `json:"deny"`
	Reason  string   `json:"reason"`
	Message string   `json:"message"`
}

// Models is the hooksproxy.models interceptor.
type Models struct {
	allow, deny     globList
	denyFold        globList // deny, lower-cased: matched against the id folded too
	hasAllow        bool
	reason, message string
}

func newModels(_ string, config []byte, _ Env) (points.Interceptor, error) {
	var c modelsConfig
	derr := decodeConfig(config, &c) // what did decode is still checked (problems.after)
	var ps problems
	if c.Allow == nil && c.Deny == nil {
		ps.add(cfgErr(configRoot, "needs allow or deny"))
	}
	ps.add(checkReason(configRoot+".reason", c.Reason))
	m := &Models{hasAllow: c.Allow != nil, reason: c.Reason, message: c.Message}
	var err error
	m.allow, err = compileGlobs(configRoot+".allow", c.Allow)
	ps.add(err)
	m.deny, err = compileGlobs(configRoot+".deny", c.Deny)
	ps.add(err)
	lower := make([]string, len(c.Deny))
	for i, d := range c.Deny {
		lower[i] = strings.ToLower(d)
	}
	m.denyFold, _ = compileGlobs(configRoot+".deny", lower) // errors are deny's, reported above
	if err := ps.after(derr); err != nil {
		return nil, err
	}
	return m, nil
}

// Intercept checks model.id at pre_model_call; deny wins over allow.
// AdvisePoints implements config.PointsAdvisor: models judges the model a
// call asks for, at pre_model_call.
func (m *Models) AdvisePoints(at []points.Point) string {
	return adviseAt(at, "the model a call asks for", points.PreModelCall)
}

func (m *Models) Intercept(ctx context.Context, c *points.Context) (points.Verdict, error) {
	if err := ctxErr(ctx); err != nil {
		return points.Verdict{}, err
	}
	if c.Point() != points.PreModelCall {
		return points.Allow(), nil
	}
	id := c.Get("model.id").Str
	reason, msg := "model_denied", ""
	// A deny also holds for the id in another case or with spaces around
	// it, which case-insensitive upstreams (Azure deployments, routers)
	// take for the same model; an allow is matched as written, so such a
	// variant of an allowed id is not allowed.
	i := m.deny.first(id)
	if i < 0 {
		i = m.denyFold.first(strings.ToLower(strings.TrimSpace(id)))
	}
	if i >= 0 {
		msg = fmt.Sprintf("model id matches deny[%d] %q", i, m.deny[i].text)
	} else if m.hasAllow && m.allow.first(id) < 0 {
		reason, msg = "model_not_allowed", "model id matches no allow pattern"
	} else {
		return points.Allow(), nil
	}
	if m.reason != "" {
		reason = m.reason
	}
	if m.message != "" {
		msg = m.message
	}
	return points.Deny(reason, msg), nil
}

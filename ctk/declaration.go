package ctk

import (
	"errors"

	"github.com/hooksproxy/hooksproxy/points"
)

// DeclarationConfig loads s.HostDeclaration into an emitter configuration
// whose ctk.scripted bindings are s.Scripts and whose "ctk-scripted"
// approval resolver is s.Resolver. A refusal is a *LoadError.
func DeclarationConfig(s Setup) (points.Config, error) {
	return points.Config{}, errors.New("ctk: host declarations are not wired yet")
}

// Package hooksproxy holds what the whole module ships as data: the
// AGENT-HOOKS-0.1 conformance vectors the conformance command runs, so the
// binary runs them anywhere without a checkout.
package hooksproxy

import "embed"

// CTKData is the AGENT-HOOKS-0.1 spec data (MIT, see its LICENSE): the core
// vectors under CTKVectorsDir, the host declaration vectors under
// CTKDeclarationVectorsDir, and the schemas and golden fixtures beside them.
//
//go:embed testdata/agent-hooks-0.1
var CTKData embed.FS

// Where the vectors sit inside CTKData.
const (
	CTKRoot                  = "testdata/agent-hooks-0.1"
	CTKVectorsDir            = CTKRoot + "/conformance/vectors"
	CTKDeclarationVectorsDir = CTKRoot + "/declaration/conformance/vectors"
)

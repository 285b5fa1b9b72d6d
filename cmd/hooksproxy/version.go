package main

import (
	"regexp"
	"runtime/debug"
	"sync"
)

// version is set with -ldflags "-X main.version=..."; without it the
// binary names its build (see buildVersion).
var version = "dev"

// buildVersion is the version `version` prints and the conformance claim
// names: the link-time version when one was set; else a released module
// version (go install module@v1.2.3); else the VCS revision the binary was
// built from, shortened to 12 hex digits, with +dirty for a modified work
// tree; else "dev".
var buildVersion = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	return versionFrom(version, bi, ok)
})

// pseudoRE matches a Go pseudo-version's timestamp-revision tail.
var pseudoRE = regexp.MustCompile(`(^|[-.])(0\.)?\d{14}-[0-9a-f]{12}(\+dirty)?$`)

func versionFrom(linked string, bi *debug.BuildInfo, ok bool) string {
	if linked != "" && linked != "dev" {
		return linked
	}
	if !ok || bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" && !pseudoRE.MatchString(v) {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}

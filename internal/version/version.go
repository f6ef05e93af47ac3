// Package version is the one place that says which switchboard this is:
// `switchboard version`, the serverInfo of every agent server, and the
// clientInfo of every pool the commands make.
package version

import "runtime/debug"

// String is the module version of the running binary: a tag for
// `go install ...@v1.2.3`, a pseudo-version for a commit, "(devel)" for a
// build from a checkout.
func String() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// Revision is the VCS revision the binary was built from, with "+dirty"
// when the tree had changes, or "" when the build recorded none.
func Revision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" && modified == "true" {
		rev += "+dirty"
	}
	return rev
}

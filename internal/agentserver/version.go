package agentserver

import "runtime/debug"

// version is the module version of the running binary ("(devel)" from a
// source build), reported as the MCP server's version.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

package agentserver

import sbversion "github.com/switchboard-run/switchboard/internal/version"

// version is the running binary's version, reported as the MCP server's.
func version() string { return sbversion.String() }

// Package agents holds the bundled agents: each folder agents/<name>/ has an
// agent.json and a tools/mcp.json, and the Go packages below it implement the
// native tools an agent.json can name in "tools".
package agents

import (
	"io"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Env is what a toolset gets from the agent server hosting it.
type Env struct {
	// DataDir is the agent's private, persistent data directory.
	DataDir string
	Logger  *slog.Logger
}

// A Toolset adds native tools to an agent's MCP server. The returned Closer
// (may be nil) releases what the toolset holds (a database, say).
type Toolset func(s *mcp.Server, env Env) (io.Closer, error)

// Lookup returns the toolset called name.
func Lookup(name string) (Toolset, bool) { t, ok := toolsets[name]; return t, ok }

// Names returns the names of all toolsets.
func Names() []string {
	var n []string
	for k := range toolsets {
		n = append(n, k)
	}
	return n
}

var toolsets = map[string]Toolset{}

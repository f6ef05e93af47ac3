// Package agents holds the bundled agents: each folder agents/<name>/ has an
// agent.json and a tools/mcp.json, and the Go packages below it implement the
// native tools an agent.json can name in "tools".
package agents

import (
	"io"
	"log/slog"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/agents/abacus"
	"github.com/switchboard-run/switchboard/agents/packrat"
	"github.com/switchboard-run/switchboard/agents/testkit"
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

// Names returns the names of all toolsets, sorted.
func Names() []string { return slices.Sorted(maps.Keys(toolsets)) }

// toolsets maps the names an agent.json "tools" list may use to the Go code
// behind them.
var toolsets = map[string]Toolset{
	// packrat: a persistent note archive (store_note, search_notes,
	// list_notes, get_note, delete_note) in DataDir/packrat.db.
	"packrat": func(s *mcp.Server, env Env) (io.Closer, error) {
		return packrat.Register(s, env.DataDir, env.Logger)
	},
	// abacus: offline arithmetic, unit conversion and date arithmetic
	// (calculate, convert_units, date_math); stateless.
	"abacus": func(s *mcp.Server, env Env) (io.Closer, error) {
		return nil, abacus.Register(s)
	},
	// testkit: slow_effect, for end-to-end tests that kill an agent inside
	// a tool (no bundled agent names it).
	"testkit": func(s *mcp.Server, env Env) (io.Closer, error) {
		return nil, testkit.Register(s, env.DataDir)
	},
}

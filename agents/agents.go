// Package agents holds the bundled agents: each folder agents/<name>/ has an
// agent.json and a tools/mcp.json, and the Go packages below it implement the
// native tools an agent.json can name in "tools".
package agents

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/agents/abacus"
	"github.com/switchboard-run/switchboard/agents/packrat"
	"github.com/switchboard-run/switchboard/agents/testkit"
	"github.com/switchboard-run/switchboard/internal/conformance/fixtures"
)

// Env is what a toolset gets from the agent server hosting it.
type Env struct {
	// DataDir is the agent's private, persistent data directory.
	DataDir string
	// DatabaseURL, when set, is the PostgreSQL database the agent's
	// replicas share (`agent serve --database`); a toolset with a store
	// keeps it there, in the schema DatabaseSchema, instead of DataDir.
	DatabaseURL    string
	DatabaseSchema string
	Logger         *slog.Logger
}

// A Toolset adds native tools to an agent's MCP server. The returned Closer
// (may be nil) releases what the toolset holds (a database, say).
type Toolset func(s *mcp.Server, env Env) (io.Closer, error)

// Lookup returns the toolset called name.
func Lookup(name string) (Toolset, bool) { t, ok := toolsets[name]; return t, ok }

// Names returns the names of all toolsets, sorted.
func Names() []string { return slices.Sorted(maps.Keys(toolsets)) }

// Handlers are the server-wide methods a toolset may serve besides its
// tools, prompts and resources. go-sdk takes them only when the server is
// made (mcp.ServerOptions), and infers the capabilities it declares from
// them, so the agent server asks for every named toolset's Handlers before
// it makes its server. A nil field is a method the toolset does not serve.
type Handlers struct {
	// Complete answers completion/complete (the completions capability).
	Complete func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error)
	// Subscribe and Unsubscribe accept resources/subscribe and
	// resources/unsubscribe (resources.subscribe); go-sdk then keeps the
	// subscribers and notifies them on mcp.Server.ResourceUpdated. Both or
	// neither.
	Subscribe   func(context.Context, *mcp.SubscribeRequest) error
	Unsubscribe func(context.Context, *mcp.UnsubscribeRequest) error
}

// MergeHandlers returns the Handlers of the named toolsets together. Two
// toolsets serving the same method is an error naming both, since a
// server has one handler per method.
func MergeHandlers(names []string) (Handlers, error) {
	var h Handlers
	var complete, subscribe string
	for _, name := range names {
		t, ok := handlers[name]
		if !ok {
			continue
		}
		if t.Complete != nil {
			if complete != "" {
				return Handlers{}, fmt.Errorf("toolsets %q and %q both answer completion/complete", complete, name)
			}
			complete, h.Complete = name, t.Complete
		}
		if t.Subscribe != nil {
			if subscribe != "" {
				return Handlers{}, fmt.Errorf("toolsets %q and %q both take resources/subscribe", subscribe, name)
			}
			subscribe, h.Subscribe, h.Unsubscribe = name, t.Subscribe, t.Unsubscribe
		}
	}
	return h, nil
}

// handlers are the toolsets' Handlers, for those that have any.
var handlers = map[string]Handlers{
	"conformance": {Complete: fixtures.Complete, Subscribe: fixtures.Subscribe, Unsubscribe: fixtures.Unsubscribe},
}

// toolsets maps the names an agent.json "tools" list may use to the Go code
// behind them.
var toolsets = map[string]Toolset{
	// packrat: a persistent note archive (store_note, search_notes,
	// list_notes, get_note, delete_note) in DataDir/packrat.db, or in
	// PostgreSQL with DatabaseURL.
	"packrat": func(s *mcp.Server, env Env) (io.Closer, error) {
		return packrat.RegisterWith(s, &packrat.Options{DataDir: env.DataDir, DatabaseURL: env.DatabaseURL, Schema: env.DatabaseSchema, Logger: env.Logger})
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
	// conformance: the MCP conformance suite's fixtures (test_simple_text
	// and the rest, its resources, templates and prompts; its completion
	// and subscriptions are in handlers), for internal/conformance's
	// agent (no bundled agent names it).
	"conformance": func(s *mcp.Server, env Env) (io.Closer, error) {
		return nil, fixtures.Register(s)
	},
}

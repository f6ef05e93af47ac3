package delegation

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/pool"
)

// A Target is the sibling tool behind one model tool name.
type Target struct {
	// Name is the model tool name (see ToolName).
	Name string
	// Server is the sibling agent's MCP server; Server.Name is the agent.
	Server *pool.Server
	// Tool is the tool as the server listed it.
	Tool *mcp.Tool
	// Parameters is Tool.InputSchema mapped for a chat API (see Parameters).
	Parameters json.RawMessage
	// Timeout bounds one call (the mcp.json "timeout"); zero: none of its
	// own.
	Timeout time.Duration
}

// ServerTools is what discovery found on one server: its tools, or the
// error that kept it from listing them.
type ServerTools struct {
	Server *pool.Server
	Tools  []*mcp.Tool
	Err    error
	// Timeout bounds each call to the server; zero: none of its own.
	Timeout time.Duration
	// Notes are what discovery has to say of a server that did list its
	// tools: a name its tool filter gives that it does not list
	// (*FilterError). They are reported in Toolbox.Unavailable.
	Notes []*DiscoveryError
}

// A DiscoveryError says why a server, or one of its tools, is not offered to
// the model.
type DiscoveryError struct {
	Server string
	Tool   string // empty when the error is the server's: it failed, or its filter names a tool it lacks
	Err    error
}

func (e *DiscoveryError) Error() string {
	if e.Tool != "" {
		return fmt.Sprintf("agent %q tool %q: %v", e.Server, e.Tool, e.Err)
	}
	return fmt.Sprintf("agent %q: %v", e.Server, e.Err)
}

// Unwrap returns the cause: the pool's error for a server that could not
// list its tools (a *pool.Error), one matching agentdef.ErrStdioNotAllowed for a stdio
// server the agent may not start, why a tool's schema cannot be offered, or
// a *FilterError for a name in the server's tool filter that it does not
// list.
func (e *DiscoveryError) Unwrap() error { return e.Err }

// A Toolbox is the set of sibling tools offered to a model, by model tool
// name. It is immutable and safe for concurrent use.
type Toolbox struct {
	targets     []*Target // in server order, then the server's tool order
	byName      map[string]*Target
	unavailable []*DiscoveryError
}

// NewToolbox names every tool found and builds the Toolbox. Servers that
// failed, and tools whose schema cannot be offered, are kept as
// DiscoveryErrors.
func NewToolbox(found []ServerTools) *Toolbox {
	tb := &Toolbox{byName: map[string]*Target{}}
	var pairs []pair
	for _, st := range found {
		if st.Err != nil {
			continue
		}
		for _, t := range st.Tools {
			pairs = append(pairs, pair{st.Server.Name, t.Name})
		}
	}
	names := assignNames(pairs)
	for _, st := range found {
		if st.Err != nil {
			tb.unavailable = append(tb.unavailable, &DiscoveryError{Server: st.Server.Name, Err: st.Err})
			continue
		}
		tb.unavailable = append(tb.unavailable, st.Notes...)
		for _, t := range st.Tools {
			name := names[pair{st.Server.Name, t.Name}]
			if tb.byName[name] != nil {
				// The same server listed the same tool twice; offer it once.
				continue
			}
			params, err := Parameters(t.InputSchema)
			if err != nil {
				tb.unavailable = append(tb.unavailable, &DiscoveryError{Server: st.Server.Name, Tool: t.Name, Err: err})
				continue
			}
			target := &Target{Name: name, Server: st.Server, Tool: t, Parameters: params, Timeout: st.Timeout}
			tb.targets = append(tb.targets, target)
			tb.byName[name] = target
		}
	}
	return tb
}

// Lookup returns the target of a model tool name.
func (tb *Toolbox) Lookup(name string) (*Target, bool) {
	t, ok := tb.byName[name]
	return t, ok
}

// Targets returns every offered tool, in a deterministic order: servers in
// configuration order, each server's tools in the order it listed them.
func (tb *Toolbox) Targets() []*Target { return append([]*Target(nil), tb.targets...) }

// Unavailable returns what discovery could not offer, and why.
func (tb *Toolbox) Unavailable() []*DiscoveryError {
	return append([]*DiscoveryError(nil), tb.unavailable...)
}

// Len returns the number of offered tools.
func (tb *Toolbox) Len() int { return len(tb.targets) }

// First returns a Toolbox of tb's first n tools, in tb's order and under
// the same model names (which a smaller set could otherwise spell
// differently), with tb's unavailable list: a turn that may offer the
// model only so many tools offers these, and can run only these. tb
// itself when it has n tools or fewer.
func (tb *Toolbox) First(n int) *Toolbox {
	if n >= len(tb.targets) {
		return tb
	}
	out := &Toolbox{targets: tb.targets[:max(n, 0):max(n, 0)], byName: make(map[string]*Target, max(n, 0)), unavailable: tb.unavailable}
	for _, t := range out.targets {
		out.byName[t.Name] = t
	}
	return out
}

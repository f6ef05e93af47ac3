package delegation

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

// DiscoverOptions configure Discover. The zero value is the default.
type DiscoverOptions struct {
	// Check, when set, vets each server before it is contacted: a server
	// it rejects is reported unavailable with its error and is never
	// started. The runtime passes agentdef's Definition.CheckServer, which
	// refuses stdio servers to an agent without allow_stdio.
	Check func(*mcpconfig.Server) error
	// Servers are offered before cfg's, and need not come from an
	// mcp.json: the runtime puts the agent's own native tools here. With a
	// nil cfg they are all that is discovered. They are offered whole: a
	// tool filter is a field of an mcp.json server, and agent.json names
	// native toolsets, not their tools.
	Servers []*pool.Server
}

// Discover lists the tools of every server in cfg concurrently and returns
// them as a Toolbox. A server that fails discovery is reported in
// Toolbox.Unavailable and does not affect the others. A nil cfg gives an
// empty Toolbox.
//
// A server's tool filter (mcpconfig.Server.AllowedTools, DisabledTools)
// decides which of its listed tools are offered: a tool left out is not in
// the Toolbox, so the model is never shown it and a call to it is a call
// to an unknown tool. The filter is applied before the tools are named, so
// the names of the offered ones do not depend on the ones left out. A name
// in either list that the server does not list is reported in
// Toolbox.Unavailable (a *FilterError): a misspelt allowedTools would
// otherwise offer nothing without a word, and a misspelt disabledTools
// would keep offering the tool it meant to leave out.
func Discover(ctx context.Context, c Caller, cfg *mcpconfig.Config, opts *DiscoverOptions) *Toolbox {
	if opts == nil {
		opts = &DiscoverOptions{}
	}
	var found []ServerTools
	for _, srv := range opts.Servers {
		found = append(found, ServerTools{Server: srv})
	}
	var filters []*mcpconfig.Server // the mcp.json server of each entry of found; nil for a native one
	if cfg != nil {
		filters = make([]*mcpconfig.Server, len(found), len(found)+len(cfg.Servers))
		for _, s := range cfg.Servers {
			st := ServerTools{Server: s.Pool(), Timeout: s.Timeout}
			if opts.Check != nil {
				st.Err = opts.Check(s)
			}
			found = append(found, st)
			filters = append(filters, s)
		}
	}
	found = list(ctx, c, found)
	for i, s := range filters {
		if s != nil && found[i].Err == nil {
			filterTools(&found[i], s, cfg.Path)
		}
	}
	return NewToolbox(found)
}

// maxOffered bounds the tool names a FilterError lists.
const maxOffered = 20

// A FilterError is the note for a name in a server's tool filter that the
// server does not list (the filter is applied all the same, and the name
// matches nothing), or, with Tool empty, for a disabledTools that leaves
// out every tool the server lists (so that the turn does not say the agent
// has no servers).
type FilterError struct {
	File string // the mcp.json
	// Field is "allowedTools" or "disabledTools" (Gemini CLI's
	// includeTools and excludeTools are read as these).
	Field string
	Tool  string // empty: the filter leaves none of Offered
	// Offered are the names the server listed, in its order.
	Offered []string
	// Meant is the listed tool whose model name Tool is
	// ("abacus__calculate" for "calculate"), when it is one.
	Meant string
}

func (e *FilterError) Error() string {
	offered := "none"
	if len(e.Offered) > 0 {
		offered = strings.Join(e.Offered[:min(len(e.Offered), maxOffered)], ", ")
		if n := len(e.Offered) - maxOffered; n > 0 {
			offered += fmt.Sprintf(" and %d more", n)
		}
	}
	if e.Tool == "" {
		return fmt.Sprintf("%s in %s leaves out every tool the server offers (%s)", e.Field, cmp.Or(e.File, "mcp.json"), offered)
	}
	msg := fmt.Sprintf("%s in %s names tool %q, which the server does not offer (it offers: %s)", e.Field, cmp.Or(e.File, "mcp.json"), e.Tool, offered)
	if e.Meant != "" {
		msg += fmt.Sprintf("; a filter names tools as the server lists them: %q", e.Meant)
	}
	return msg
}

// filterTools keeps the tools of st that s's filter lets through, and
// notes every name of the filter that st's server does not list.
func filterTools(st *ServerTools, s *mcpconfig.Server, file string) {
	field, names := "allowedTools", s.AllowedTools
	if names == nil {
		field, names = "disabledTools", s.DisabledTools
	}
	if len(names) == 0 {
		return
	}
	listed := make([]string, 0, len(st.Tools))
	for _, t := range st.Tools {
		listed = append(listed, t.Name)
	}
	for _, n := range names {
		if slices.Contains(listed, n) {
			continue
		}
		fe := &FilterError{File: file, Field: field, Tool: n, Offered: listed}
		if i := slices.IndexFunc(listed, func(t string) bool { return ToolName(st.Server.Name, t) == n }); i >= 0 {
			fe.Meant = listed[i]
		}
		st.Notes = append(st.Notes, &DiscoveryError{Server: st.Server.Name, Err: fe})
	}
	allow := s.AllowedTools != nil
	st.Tools = slices.DeleteFunc(slices.Clone(st.Tools), func(t *mcp.Tool) bool {
		return slices.Contains(names, t.Name) != allow
	})
	if len(st.Tools) == 0 && len(listed) > 0 && len(st.Notes) == 0 {
		st.Notes = append(st.Notes, &DiscoveryError{Server: st.Server.Name, Err: &FilterError{File: file, Field: field, Offered: listed}})
	}
}

// list fills in the tools of every entry without an error, concurrently.
func list(ctx context.Context, c Caller, found []ServerTools) []ServerTools {
	var wg sync.WaitGroup
	for i := range found {
		if found[i].Err != nil {
			continue
		}
		wg.Go(func() {
			found[i].Tools, found[i].Err = c.ListTools(ctx, found[i].Server)
		})
	}
	wg.Wait()
	return found
}

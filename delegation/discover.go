package delegation

import (
	"context"
	"sync"

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
	// nil cfg they are all that is discovered.
	Servers []*pool.Server
}

// Discover lists the tools of every server in cfg concurrently and returns
// them as a Toolbox. A server that fails discovery is reported in
// Toolbox.Unavailable and does not affect the others. A nil cfg gives an
// empty Toolbox.
func Discover(ctx context.Context, c Caller, cfg *mcpconfig.Config, opts *DiscoverOptions) *Toolbox {
	if opts == nil {
		opts = &DiscoverOptions{}
	}
	var found []ServerTools
	for _, srv := range opts.Servers {
		found = append(found, ServerTools{Server: srv})
	}
	if cfg != nil {
		for _, s := range cfg.Servers {
			st := ServerTools{Server: s.Pool(), Timeout: s.Timeout}
			if opts.Check != nil {
				st.Err = opts.Check(s)
			}
			found = append(found, st)
		}
	}
	return NewToolbox(list(ctx, c, found))
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

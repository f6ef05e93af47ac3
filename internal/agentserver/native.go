package agentserver

// An agent's model is offered its own native tools (the toolsets its
// agent.json names) as well as its siblings' tools, so that `ask --agent
// abacus` can calculate. The native tools are reached through an in-memory
// MCP session to the agent's own server: the same handlers, schemas and
// middleware run as for any caller, and no socket is opened. Two things
// differ for that one session, and both are decided by its identity, never
// by anything a remote caller could send:
//
//   - the delegation chain is taken as it is: the turn already entered this
//     agent, and entering again would be refused as a cycle;
//   - the call takes no --max-concurrent slot: the ask that makes it already
//     holds one, so a cap of 1 would otherwise wait on itself.
//
// The session lists every tool but ask (an agent asking itself would loop).

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/pool"
)

// nativeScheme marks the pool.Server of an agent's own tools; no pool ever
// dials it (nativeCaller answers it first).
const nativeScheme = "native:"

// selfSession holds the server side of the in-memory session, so that the
// middleware can recognize it.
type selfSession struct {
	p atomic.Pointer[mcp.ServerSession]
}

func (s *selfSession) is(req mcp.Request) bool {
	if s == nil || req == nil {
		return false
	}
	ss, ok := req.GetSession().(*mcp.ServerSession)
	return ok && ss != nil && ss == s.p.Load()
}

// nativeCaller answers calls to the agent's own server from the in-memory
// session and passes every other call to the pool.
type nativeCaller struct {
	self    *pool.Server
	session *mcp.ClientSession
	next    delegation.Caller
}

var _ delegation.Caller = (*nativeCaller)(nil)

// connectNative opens the in-memory session to srv and returns the caller
// and the pool.Server the runtime offers as the agent's own tools.
func connectNative(ctx context.Context, srv *mcp.Server, self *selfSession, agent string, next delegation.Caller) (*nativeCaller, error) {
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		return nil, fmt.Errorf("agent %s: connecting to its own tools: %w", agent, err)
	}
	self.p.Store(ss)
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-agent-" + agent + "-self", Version: version()}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		ss.Close()
		return nil, fmt.Errorf("agent %s: connecting to its own tools: %w", agent, err)
	}
	return &nativeCaller{
		self:    &pool.Server{Name: agent, URL: nativeScheme + agent},
		session: cs,
		next:    next,
	}, nil
}

func (c *nativeCaller) isSelf(srv *pool.Server) bool {
	return srv == c.self || srv != nil && srv.URL == c.self.URL && srv.Name == c.self.Name
}

func (c *nativeCaller) CallTool(ctx context.Context, srv *pool.Server, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	if !c.isSelf(srv) {
		return c.next.CallTool(ctx, srv, params)
	}
	if params.Name == "ask" {
		return nil, fmt.Errorf("agent %s: a turn cannot ask its own agent", srv.Name)
	}
	return c.session.CallTool(ctx, params)
}

func (c *nativeCaller) ListTools(ctx context.Context, srv *pool.Server) ([]*mcp.Tool, error) {
	if !c.isSelf(srv) {
		return c.next.ListTools(ctx, srv)
	}
	var tools []*mcp.Tool
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return slices.DeleteFunc(tools, func(t *mcp.Tool) bool { return t.Name == "ask" }), nil
}

func (c *nativeCaller) close() error { return c.session.Close() }

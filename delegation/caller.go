package delegation

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/pool"
)

// A Caller reaches sibling agents' MCP servers. *pool.Pool satisfies it; the
// turn loop depends on this interface so that it can be tested without one.
//
// Errors should be (or wrap) *pool.Error so that a failure can be explained
// to the model; any other error is rendered with what it says.
type Caller interface {
	CallTool(ctx context.Context, srv *pool.Server, params *mcp.CallToolParams) (*mcp.CallToolResult, error)
	ListTools(ctx context.Context, srv *pool.Server) ([]*mcp.Tool, error)
}

var _ Caller = (*pool.Pool)(nil)

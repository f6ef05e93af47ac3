package pool

import (
	"context"
	"fmt"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type progressKey struct{}

// WithProgress returns a context under which CallTool asks the server for
// progress notifications (it sets a progress token of its own) and passes
// each one to fn as it arrives. fn must not block for long: it runs on the
// session's notification path.
func WithProgress(ctx context.Context, fn func(*mcp.ProgressNotificationParams)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// withProgressToken returns params with a fresh progress token when ctx
// asks for progress, registering the token's callback. The caller's params
// are not modified.
func (p *Pool) withProgressToken(ctx context.Context, params *mcp.CallToolParams) *mcp.CallToolParams {
	fn, ok := ctx.Value(progressKey{}).(func(*mcp.ProgressNotificationParams))
	if !ok || fn == nil {
		return params
	}
	c := *params
	c.Meta = maps.Clone(params.Meta)
	if c.Meta == nil {
		c.Meta = mcp.Meta{}
	}
	tok := fmt.Sprintf("switchboard-%d", p.tokenID.Add(1))
	c.Meta["progressToken"] = tok
	p.progress.Store(tok, fn)
	return &c
}

func (p *Pool) routeProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	if fn, ok := p.progress.Load(fmt.Sprint(req.Params.ProgressToken)); ok {
		fn.(func(*mcp.ProgressNotificationParams))(req.Params)
	}
}

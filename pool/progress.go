package pool

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

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
	tok := fmt.Sprintf("switchboard-%d", p.tokenID.Add(1))
	p.progress.Store(tok, fn)
	return withMeta(params, map[string]string{"progressToken": tok})
}

// withMeta returns a copy of params whose _meta also holds kv; the caller's
// params and _meta are not modified.
func withMeta(params *mcp.CallToolParams, kv map[string]string) *mcp.CallToolParams {
	c := *params
	c.Meta = maps.Clone(params.Meta)
	if c.Meta == nil {
		c.Meta = mcp.Meta{}
	}
	for k, v := range kv {
		c.Meta[k] = v
	}
	return &c
}

// progressLinger is how long a finished call's progress token keeps
// routing. go-sdk dispatches notifications asynchronously, so ones the server
// sent before its response can be handled after the call has returned.
const progressLinger = 2 * time.Second

// forgetProgress stops routing tok's notifications after progressLinger.
func (p *Pool) forgetProgress(tok any) {
	key := fmt.Sprint(tok)
	t := time.AfterFunc(progressLinger, func() { p.progress.Delete(key) })
	p.mu.Lock()
	if p.closed {
		t.Stop()
		p.progress.Delete(key)
	} else {
		p.lingering = append(p.lingering, t)
		if len(p.lingering) > 1024 {
			p.lingering = slices.DeleteFunc(p.lingering, func(t *time.Timer) bool { return !t.Stop() })
		}
	}
	p.mu.Unlock()
}

func (p *Pool) routeProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	if fn, ok := p.progress.Load(fmt.Sprint(req.Params.ProgressToken)); ok {
		fn.(func(*mcp.ProgressNotificationParams))(req.Params)
	}
}

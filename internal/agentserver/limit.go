package agentserver

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A limiter caps the tools/call requests of one agent server that run at
// once (Options.MaxConcurrentCalls). A call beyond the cap waits for a slot
// for as long as its request lives: until its caller gives up, which reaches
// the server as notifications/cancelled when the caller's deadline passes.
// go-sdk sends that notification just after the caller has returned, so a
// slot that frees up in between still goes to the abandoned call; its caller
// already holds an outcome_unknown error, which says exactly that it may
// have run. A call that never got a slot never ran, and its error says so.
//
// Other methods (initialize, tools/list, ping) are not capped: they are
// cheap, and a client must be able to tell a busy agent from a dead one.
type limiter struct {
	agent   string
	slots   chan struct{}
	waiting atomic.Int64 // calls waiting for a slot now
	logger  *slog.Logger
	self    *selfSession // its calls come from an ask that holds a slot
}

func newLimiter(agent string, n int, logger *slog.Logger, self *selfSession) *limiter {
	return &limiter{agent: agent, slots: make(chan struct{}, n), logger: logger, self: self}
}

func (l *limiter) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" || l.self.is(req) {
			return next(ctx, method, req)
		}
		select {
		case l.slots <- struct{}{}:
		default:
			tool := toolName(req.GetParams())
			l.logger.Debug("call waits for a slot", "tool", tool, "max_concurrent", cap(l.slots))
			l.waiting.Add(1)
			select {
			case l.slots <- struct{}{}:
				l.waiting.Add(-1)
			case <-ctx.Done():
				l.waiting.Add(-1)
				return nil, fmt.Errorf("agent %s: the call to %s did not run: it waited for one of %d slots (--max-concurrent) until its caller gave up: %w",
					l.agent, tool, cap(l.slots), context.Cause(ctx))
			}
		}
		defer func() { <-l.slots }()
		return next(ctx, method, req)
	}
}

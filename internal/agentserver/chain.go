package agentserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
)

// The delegation chain is checked in receiving middleware rather than in each
// tool handler, so that no toolset, present or future, can forget it: a
// tools/call whose chain would loop back into this agent, grow past its
// depth limit, or cannot be read never reaches a handler. The refusal is a
// tool error (isError), not a JSON-RPC error, so that the calling model reads
// it as the outcome of its call and can decide what to do.

type chainKey struct{}

// ChainFrom returns the delegation chain of the tools/call being handled,
// already entered by this agent. ok is false outside a tools/call.
func ChainFrom(ctx context.Context) (c delegation.Chain, ok bool) {
	c, ok = ctx.Value(chainKey{}).(delegation.Chain)
	return c, ok
}

// WithChain returns ctx carrying c, for tests and in-process callers of tool
// handlers.
func WithChain(ctx context.Context, c delegation.Chain) context.Context {
	return context.WithValue(ctx, chainKey{}, c)
}

// NewRunID returns a fresh, unguessable run id for a chain that starts here.
func NewRunID() string { return rand.Text() }

func chainMiddleware(agent string, maxDepth int, logger *slog.Logger, self *selfSession) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			params := req.GetParams()
			tool := toolName(params)
			var meta map[string]any
			if params != nil {
				meta = params.GetMeta()
			}
			chain, found, err := delegation.FromMeta(meta)
			if err != nil {
				raw, _ := json.Marshal(meta[delegation.MetaKey])
				if len(raw) > maxShownChain {
					// The chain is the client's; a log line or a result
					// never carries more than a glimpse of it.
					raw = append(raw[:maxShownChain:maxShownChain], "…"...)
				}
				logger.Warn("refusing a call with a malformed delegation chain", "tool", tool, "chain", string(raw), "err", err)
				return toolError("agent %s refused the call to %s: the delegation chain %s cannot be read: %v", agent, tool, raw, err), nil
			}
			if found && self.is(req) {
				// The agent's own turn calling its native tools (native.go):
				// the chain already holds this agent.
				return next(WithChain(withRun(ctx, chain.RunID), chain), method, req)
			}
			if !found {
				chain = delegation.Chain{RunID: NewRunID()}
			}
			entered, err := chain.Enter(agent, maxDepth)
			if err != nil {
				// Enter's error names the chain, the run and the reason.
				logger.Warn("refusing a delegated call", "tool", tool, "err", err)
				return toolError("agent %s refused the call to %s: %v", agent, tool, err), nil
			}
			return next(WithChain(withRun(ctx, entered.RunID), entered), method, req)
		}
	}
}

// refuseUnreadableChain is the chain check's first half, run by the
// middleware on the raw _meta before go-sdk decodes the body (see
// delegation.RefuseUnreadable); cycles and depth are checked in
// chainMiddleware, on the decoded chain.
func refuseUnreadableChain(agent string) func(*mcphttp.Message) string {
	return func(m *mcphttp.Message) string {
		return delegation.RefuseUnreadable(agent, m.Tool, m.Meta[delegation.MetaKey])
	}
}

// maxShownChain bounds how much of an unreadable chain a refusal quotes.
const maxShownChain = 256

// toolName is the called tool's name for logs and refusals, bounded: it is
// whatever the client sent.
func toolName(p mcp.Params) string {
	name := "a tool"
	switch p := p.(type) {
	case *mcp.CallToolParamsRaw:
		name = p.Name
	case *mcp.CallToolParams:
		name = p.Name
	}
	if len(name) > maxShownTool {
		name = name[:maxShownTool] + "…"
	}
	return name
}

// maxShownTool bounds a tool name quoted in a log line or a refusal.
const maxShownTool = 128

package agentserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/agentdef"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime"
)

// This file is the one place where the agent server meets the turn loop:
// the ask tool, the runtime.Agent behind it, and the progress channel back
// to the caller. Extend it here.

type askInput struct {
	Task string `json:"task" jsonschema:"the task for this agent, in plain language; the agent works on it with its own model and tools and answers in text"`
}

// asker owns the runtime.Agent behind the ask tool. Both the agent and its
// pool are made on first use: most calls to an agent server are to its
// native tools, and an agent without a model should not pay for a pool.
type asker struct {
	def     *agentdef.Definition
	logger  *slog.Logger
	metrics *serverMetrics // set once by New, before any call

	mu      sync.Mutex // protects following fields
	pool    *pool.Pool
	ownPool bool // pool was made here; close it
	agent   *runtime.Agent
	closed  bool
}

func newAsker(def *agentdef.Definition, p *pool.Pool, logger *slog.Logger) *asker {
	return &asker{def: def, logger: logger, pool: p}
}

func (a *asker) register(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name:        "ask",
		Description: fmt.Sprintf("Give agent %s a task. %s", a.def.Name, a.def.Description),
	}, a.handle)
}

func (a *asker) handle(ctx context.Context, req *mcp.CallToolRequest, in askInput) (*mcp.CallToolResult, any, error) {
	name := a.def.Name
	if strings.TrimSpace(in.Task) == "" {
		return toolError("agent %s: the task is empty", name), nil, nil
	}
	chain, ok := ChainFrom(ctx)
	if !ok {
		// The chain middleware runs before every tools/call; reaching this
		// means it was not installed.
		return toolError("agent %s: internal error: no delegation chain", name), nil, nil
	}

	report, stopReporting := progressReporter(ctx, req, a.logger)
	defer stopReporting()
	if report != nil {
		report(fmt.Sprintf("agent %s: working on the task (run %s)", name, chain.RunID))
		// Each delegation of the turn, as it starts and as it finishes,
		// reaches the caller as one progress message: a delegation.Event
		// as a JSON line.
		ctx = runtime.WithEventHandler(ctx, func(e delegation.Event) {
			b, err := json.Marshal(e)
			if err != nil {
				return
			}
			report(string(b))
		})
	}

	agent, err := a.runtimeAgent()
	if err != nil {
		return toolError("agent %s: %v", name, err), nil, nil
	}
	res, err := agent.Run(ctx, in.Task, chain)
	if a.metrics != nil && res != nil {
		a.metrics.observeAsk(res.Duration, err != nil)
	}
	if err != nil {
		a.logger.InfoContext(ctx, "ask failed", "run", chain.RunID, "err", err)
		return toolError("agent %s: %v", name, err), nil, nil
	}
	// The structured result (runtime.Result) lists every delegation: the
	// caller's client may handle the last progress notifications after the
	// response, too late to show them.
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Answer}}}, res, nil
}

// runtimeAgent returns the agent's turn loop, making it (and its pool) on
// first use. A failure is not cached: the next ask tries again.
func (a *asker) runtimeAgent() (*runtime.Agent, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, fmt.Errorf("the agent server is shutting down")
	}
	if a.agent != nil {
		return a.agent, nil
	}
	p := a.pool
	if p == nil {
		p = pool.New(&pool.Options{
			Logger:     a.logger.With("component", "pool"),
			ClientInfo: &mcp.Implementation{Name: "switchboard-agent-" + a.def.Name, Version: version()},
		})
	}
	ro := &runtime.Options{Logger: a.logger.With("component", "runtime")}
	if a.metrics != nil {
		ro.OnEvent = a.metrics.delegations.Observe
	}
	agent, err := runtime.NewWithOptions(a.def, p, ro)
	if err != nil {
		if a.pool == nil {
			p.Close()
		}
		return nil, err
	}
	if a.pool == nil {
		a.pool, a.ownPool = p, true
	}
	a.agent = agent
	return agent, nil
}

// poolStats is the stats of the pool carrying the agent's delegations, or
// zero before the first ask made it.
func (a *asker) poolStats() pool.Stats {
	a.mu.Lock()
	p := a.pool
	a.mu.Unlock()
	if p == nil {
		return pool.Stats{}
	}
	return p.Stats()
}

func (a *asker) close() error {
	a.mu.Lock()
	a.closed = true
	p := a.pool
	own := a.ownPool
	a.mu.Unlock()
	if own {
		// Outside the lock: closing sends DELETEs and waits for them.
		return p.Close()
	}
	return nil
}

// progressQueue bounds how many progress messages wait to be sent; past it
// a message is dropped (progress is a courtesy: the ask result carries every
// delegation).
const progressQueue = 256

// progressReporter returns a func that sends its message as an MCP progress
// notification on the request's progress token, numbered in order, and a
// func that sends what is queued and stops; without a token (the caller
// asked for no progress) report is nil. ctx must be the request's: go-sdk
// sends a notification made under it on the request's own SSE stream, and
// anything else on the standalone GET stream, which the caller may not have
// open.
//
// report only queues: the notification is written to the caller's stream
// by a goroutine of its own, because the delegation executor calls its event
// handler in order, under a lock, and a slow caller must not hold up the
// turn's delegations. stop waits for that goroutine, so every message
// queued goes out before the ask's result.
func progressReporter(ctx context.Context, req *mcp.CallToolRequest, logger *slog.Logger) (report func(msg string), stop func()) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil, func() {}
	}
	queue := make(chan string, progressQueue)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n := 0
		for msg := range queue {
			n++
			// A late event after the request ended fails to send; a lost
			// progress note is not worth failing the call for.
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      float64(n),
				Message:       msg,
			})
			if err != nil {
				logger.Debug("progress notification not sent", "err", err)
			}
		}
	}()
	var mu sync.Mutex // guards closed and the sends on queue
	closed := false
	report = func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return // the ask has answered; nobody reads its progress now
		}
		select {
		case queue <- msg:
		default:
			logger.Debug("progress notification dropped: the caller reads too slowly", "queued", progressQueue)
		}
	}
	stop = func() {
		mu.Lock()
		if !closed {
			closed = true
			close(queue)
		}
		mu.Unlock()
		<-done
	}
	return report, stop
}

func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

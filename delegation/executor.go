package delegation

// The model may ask for several tool calls in one response. They run
// concurrently, at most Limit at a time (errgroup.SetLimit), each with the
// turn's context, so cancelling the turn cancels every call in flight and
// go-sdk sends the sibling notifications/cancelled. Results come back in the
// model's order whatever order the calls finish in, because the tool
// messages must answer the tool_call ids in the order they were asked.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/pool"
	"golang.org/x/sync/errgroup"
)

// ErrCallTimeout is the cause of a call that outlived its deadline: its
// server's mcp.json "timeout", else the agent's "call_timeout"
// (Executor.CallTimeout). The error is a *CallTimeoutError.
var ErrCallTimeout = errors.New("the call timed out")

// A CallTimeoutError is the cause of a call stopped at its deadline. It
// matches ErrCallTimeout.
type CallTimeoutError struct {
	After  time.Duration
	Source string // where the deadline was set: `the server's "timeout" in mcp.json` or `"call_timeout" in agent.json`
}

func (e *CallTimeoutError) Error() string {
	return fmt.Sprintf("timed out after %v (%s)", e.After, e.Source)
}

func (e *CallTimeoutError) Unwrap() error { return ErrCallTimeout }

// DefaultLimit is the number of tool calls an Executor runs at once when its
// Limit is zero.
const DefaultLimit = 4

// A Call is one tool call from a model response.
type Call struct {
	ID        string // the model's tool_call id
	Name      string // the model tool name
	Arguments string // JSON object text, as the model wrote it
}

// A Result is the outcome of one Call, ready to become a tool message.
type Result struct {
	CallID string
	Name   string
	// Agent and Tool are the sibling and its MCP tool; empty when the model
	// named a tool it was not offered.
	Agent string
	Tool  string
	// Content is the tool message's text: the tool's output, or a
	// description of the failure written for the model.
	Content string
	// IsError marks a failure of any kind, including a tool's own isError.
	IsError bool
	Outcome Outcome
	// Err is the error behind a failure the tool did not report itself.
	Err error
	// Event is the finish event of the delegation (zero for a call that was
	// never sent to an agent).
	Event Event
	// Meta is the _meta of the tool's result as the sibling sent it, a
	// failed tool's (isError) included; nil for a call that got no result.
	// A sibling agent's ask tool reports there what its turn cost, which
	// the delegating turn adds to its own bill; this package passes it on
	// unread, since what it means is the runtime's business.
	Meta mcp.Meta
}

// An Executor runs a model response's tool calls against the sibling agents
// in Tools. The zero value of each field except Caller and Tools is its
// default. An Executor may be used for many responses, concurrently.
type Executor struct {
	Caller Caller
	Tools  *Toolbox
	// Chain is the delegation chain of the delegating agent (already entered
	// by it); it travels in the _meta of each tools/call.
	Chain Chain
	// Limit bounds the calls in flight; zero means DefaultLimit.
	Limit int
	// CallTimeout bounds each call whose server has no "timeout" of its
	// own (agent.json's "call_timeout"); zero: the turn's deadline only.
	CallTimeout time.Duration
	// OnEvent, when set, is told of each delegation as it starts and as it
	// finishes. Calls to it are serialized.
	OnEvent func(Event)
	// Secrets are the delegating agent's configured credentials
	// (mcpconfig.Config.Secrets). A failure's text quotes what the pool
	// and the server said, which may hold a server's URL, query and all,
	// or a header it echoes; Content and the event's message go through
	// logging.Scrub with these (and the environment's), as the logs do,
	// before the model or an observer reads them. A successful result is
	// the tool's data and is left as it is.
	Secrets []string

	mu sync.Mutex // serializes OnEvent
}

// Run executes calls and returns one Result per call, in the same order. It
// never fails: every failure is a Result with IsError set. When ctx is
// cancelled, calls in flight are cancelled and calls not yet sent are not
// sent.
func (e *Executor) Run(ctx context.Context, calls []Call) []Result {
	limit := e.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	results := make([]Result, len(calls))
	var g errgroup.Group
	g.SetLimit(limit)
	for i, c := range calls {
		g.Go(func() error {
			results[i] = e.run(ctx, c)
			return nil
		})
	}
	_ = g.Wait() // the goroutines return nil; failures are Results
	return results
}

func (e *Executor) run(ctx context.Context, c Call) Result {
	r := Result{CallID: c.ID, Name: c.Name, IsError: true}
	t, ok := e.Tools.Lookup(c.Name)
	if !ok {
		r.Outcome = OutcomeUnknownTool
		r.Content = fmt.Sprintf("Error: there is no tool named %q. Use one of the tools offered.", c.Name)
		return r
	}
	r.Agent, r.Tool = t.Server.Name, t.Tool.Name
	args, err := arguments(c.Arguments)
	if err != nil {
		r.Outcome, r.Err = OutcomeBadArguments, err
		r.Content = fmt.Sprintf("Error: the arguments for %s are not valid: %v. The call was not sent; send a JSON object that matches the tool's parameters.", c.Name, err)
		return r
	}

	ev := Event{
		Phase: PhaseStart, RunID: e.Chain.RunID, Depth: e.Chain.Depth,
		CallID: c.ID, Agent: r.Agent, Tool: r.Tool, Time: time.Now(),
	}
	e.emit(ev)
	start := time.Now()
	sctx, span := e.startSpan(ctx, c, t)
	var info pool.CallInfo // what the pool did, also for a call that succeeded
	res, err := e.call(pool.WithCallInfo(delegationContext(sctx, e.Chain, c, t), &info), t, args)
	ev.Phase, ev.Time = PhaseFinish, time.Now()
	if res != nil {
		r.Meta = res.Meta
	}
	ev.DurationMS = float64(time.Since(start)) / float64(time.Millisecond)

	switch {
	case err != nil:
		f := describe(r.Agent, r.Tool, err, ctx.Err() != nil)
		r.Err, r.Content, r.Outcome = logging.RedactError(err, e.Secrets...), logging.Scrub(f.text, e.Secrets...), f.outcome
		ev.Code, ev.Message, ev.Retried = f.code, logging.Scrub(f.message, e.Secrets...), f.retried
	case res.IsError:
		r.Content, r.Outcome = logging.Scrub(toolErrorText(r.Agent, r.Tool, res), e.Secrets...), OutcomeToolError
	default:
		r.Content, r.Outcome, r.IsError = ResultText(res), OutcomeOK, false
	}
	if info.Retried {
		// The session had expired; the pool re-initialized it and sent the
		// call again, which it does only when the first attempt provably
		// did not run.
		ev.Retried = true
		ev.Recovered = err == nil
	}
	noteReplay(&r, &ev, &info) // idempotency.go
	ev.Outcome = r.Outcome
	endSpan(span, ev)
	r.Event = ev
	e.emit(ev)
	return r
}

func (e *Executor) call(ctx context.Context, t *Target, args json.RawMessage) (*mcp.CallToolResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // do not start a call for a turn that is over
	}
	params := &mcp.CallToolParams{Meta: e.Chain.Meta(), Name: t.Tool.Name, Arguments: args}
	// The server's own "timeout" wins over the agent's default: whoever
	// configured that server knows how long its calls take.
	timeout := &CallTimeoutError{After: t.Timeout, Source: `the server's "timeout" in mcp.json`}
	if t.Timeout <= 0 {
		timeout = &CallTimeoutError{After: e.CallTimeout, Source: `"call_timeout" in agent.json`}
	}
	if timeout.After > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout.After, timeout)
		defer cancel()
	}
	res, err := e.Caller.CallTool(ctx, t.Server, params)
	if err != nil && timeout.After > 0 && errors.Is(context.Cause(ctx), ErrCallTimeout) {
		err = fmt.Errorf("%w: %w", context.Cause(ctx), err)
	}
	if err == nil && res == nil {
		err = errors.New("the server returned no result")
	}
	return res, err
}

func (e *Executor) emit(ev Event) {
	if e.OnEvent == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.OnEvent(ev)
}

// arguments checks that s is a JSON object (empty means {}) and returns it
// unchanged, so numbers keep the model's precision on the way to the tool.
func arguments(s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		return nil, fmt.Errorf("want a JSON object: %w", err)
	}
	if obj == nil {
		return nil, errors.New("want a JSON object, got null")
	}
	return json.RawMessage(s), nil
}

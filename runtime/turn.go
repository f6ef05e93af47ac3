package runtime

// The turn loop: [system, user] → completion with the siblings' tools → if
// the model called tools, run them all (concurrently, through the pool),
// append the assistant message and one tool message per call in the model's
// order, and ask again; stop at the first answer in text, or after
// max_steps completions. The siblings' tools are discovered once per turn
// (from the pool's cache while it is fresh), so every step of a turn offers
// the model the same tools; a sibling that changes its tools is seen by the
// next turn.

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/agentdef"
	"github.com/switchboard-run/switchboard/internal/logging"
)

// Result is what a turn produced.
type Result struct {
	Agent  string `json:"agent"`
	Model  string `json:"model"`
	RunID  string `json:"run_id"`
	Answer string `json:"answer"`
	// Steps is the number of model completions the turn made.
	Steps int `json:"steps"`
	// Delegations are the finish events of every delegation, in the order
	// the calls finished.
	Delegations []delegation.Event `json:"delegations"`
	// Unavailable lists siblings (or their tools) that discovery could not
	// offer, and why.
	Unavailable []string      `json:"unavailable,omitempty"`
	Duration    time.Duration `json:"-"`
}

// Run runs one turn on task, as part of chain (already entered by this
// agent; a chain without a run id gets a fresh one). It returns the Result
// even when it also returns an error, so that a caller can report what the
// turn did before it ended: the delegations made before a step limit or a
// cancellation.
func (a *Agent) Run(ctx context.Context, task string, chain delegation.Chain) (*Result, error) {
	start := time.Now()
	if chain.RunID == "" {
		chain.RunID = newRunID()
	}
	res := &Result{Agent: a.def.Name, Model: a.model.name, RunID: chain.RunID}
	defer func() { res.Duration = time.Since(start) }()
	if a.model.err != nil {
		return res, a.model.err
	}

	tools := delegation.Discover(ctx, a.caller, a.def.MCP, &delegation.DiscoverOptions{Check: a.def.CheckServer})
	for _, u := range tools.Unavailable() {
		res.Unavailable = append(res.Unavailable, u.Error())
		a.log.Warn("sibling unavailable", "agent", a.def.Name, "run", chain.RunID, "err", u)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}

	exec := &delegation.Executor{
		Caller: a.caller,
		Tools:  tools,
		Chain:  chain,
		Limit:  a.opts.Parallel,
		OnEvent: fanOut(a.opts.OnEvent, eventHandler(ctx), func(ev delegation.Event) {
			// The executor serializes OnEvent and has returned before
			// res is read.
			if ev.Phase == delegation.PhaseFinish {
				res.Delegations = append(res.Delegations, ev)
			}
		}),
	}

	req := openai.ChatCompletionRequest{
		Model:    a.model.name,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: a.systemPrompt(res.Unavailable)}, {Role: openai.ChatMessageRoleUser, Content: task}},
		Tools:    modelTools(tools),
	}
	maxSteps := cmp.Or(a.opts.MaxSteps, a.def.MaxSteps, DefaultMaxSteps)
	perStep := cmp.Or(a.def.MaxCallsPerStep, agentdef.DefaultMaxCallsPerStep)
	perTurn := cmp.Or(a.def.MaxCallsPerTurn, agentdef.DefaultMaxCallsPerTurn)
	made := 0 // delegations run this turn
	for res.Steps < maxSteps {
		res.Steps++
		resp, err := a.chat(ctx, req, res.Steps)
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			name, where := a.Model()
			// The endpoint's error body may echo the key it was sent
			// ("Incorrect API key provided: sk-..."); the error goes into a
			// tool result and logs, so it is scrubbed like a log line.
			return res, fmt.Errorf("%w: model %q at %s, step %d: %w", ErrModel, name, where, res.Steps, logging.RedactError(err, a.model.apiKey))
		}
		if len(resp.Choices) == 0 {
			return res, fmt.Errorf("%w: step %d: the response has no choices", ErrModel, res.Steps)
		}
		msg := resp.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			res.Answer = msg.Content
			a.log.Info("answered", "agent", a.def.Name, "run", chain.RunID, "steps", res.Steps, "delegations", len(res.Delegations))
			return res, nil
		}

		calls := make([]delegation.Call, len(msg.ToolCalls))
		for i := range msg.ToolCalls {
			tc := &msg.ToolCalls[i]
			if tc.ID == "" {
				// Some local servers omit ids; the tool messages must still
				// answer each call, so give it one.
				tc.ID = fmt.Sprintf("call_%d_%d", res.Steps, i)
			}
			if tc.Type == "" {
				tc.Type = openai.ToolTypeFunction
			}
			tc.Index = nil // only meaningful in stream chunks
			calls[i] = delegation.Call{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
		}
		// The caps: the calls past them are not made; each still gets a
		// tool message (the API requires one per call) that says why, so
		// the model can go on with what it has.
		allowed := min(len(calls), perStep, max(0, perTurn-made))
		made += allowed
		a.log.Info("delegating", "agent", a.def.Name, "run", chain.RunID, "step", res.Steps, "calls", allowed, "refused", len(calls)-allowed)
		results := exec.Run(ctx, calls[:allowed])
		if err := ctx.Err(); err != nil {
			return res, err
		}
		for _, c := range calls[allowed:] {
			why := fmt.Sprintf("not called: this step asked for %d tool calls and an agent makes at most %d per step (max_calls_per_step)", len(calls), perStep)
			if made >= perTurn {
				why = fmt.Sprintf("not called: this turn has made %d tool calls, the most it may (max_calls_per_turn); answer with what you have", made)
			}
			results = append(results, delegation.Result{CallID: c.ID, Name: c.Name, Content: why, IsError: true})
		}
		req.Messages = append(req.Messages, openai.ChatCompletionMessage{
			Role: openai.ChatMessageRoleAssistant, Content: msg.Content, ToolCalls: msg.ToolCalls,
		})
		for _, r := range results {
			req.Messages = append(req.Messages, openai.ChatCompletionMessage{
				Role: openai.ChatMessageRoleTool, ToolCallID: r.CallID, Content: r.Content,
			})
		}
	}
	return res, fmt.Errorf("%w: agent %q made %d model steps, each calling tools, without a final answer (max_steps)", ErrStepLimit, a.def.Name, maxSteps)
}

// systemPrompt is the agent's instructions, plus a note of the siblings (or
// tools) that are unavailable, so that the model can say so instead of
// guessing.
func (a *Agent) systemPrompt(unavailable []string) string {
	p := a.def.Instructions
	if strings.TrimSpace(p) == "" {
		p = fmt.Sprintf("You are %s. Use the tools offered to complete the task, then answer.", a.def.Name)
	}
	if len(unavailable) > 0 {
		p += "\n\nThese agents or tools are unavailable for this task:\n- " + strings.Join(unavailable, "\n- ")
	}
	return p
}

// modelTools offers the toolbox as chat API functions.
func modelTools(tb *delegation.Toolbox) []openai.Tool {
	var tools []openai.Tool
	for _, t := range tb.Targets() {
		tools = append(tools, openai.Tool{
			Type: openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{
				Name:        t.Name,
				Description: t.Tool.Description,
				Parameters:  t.Parameters,
			},
		})
	}
	return tools
}

// fanOut returns a handler calling each non-nil fn in turn.
func fanOut(fns ...func(delegation.Event)) func(delegation.Event) {
	return func(ev delegation.Event) {
		for _, fn := range fns {
			if fn != nil {
				fn(ev)
			}
		}
	}
}

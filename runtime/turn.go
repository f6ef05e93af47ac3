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
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// Status says whether a turn did its task; see Result.Status.
type Status string

// The statuses of a turn, most severe first when several apply (a turn
// that had a delegation fail and a sibling unavailable is
// StatusDelegationFailed).
const (
	// StatusDelegationFailed: a tool call of the turn failed (a tool error,
	// a transport or protocol failure, an unknown outcome, arguments that
	// are not an object) and no later call of the same tool succeeded, or
	// the model named a tool that does not exist and no later call
	// succeeded. The answer may be partial.
	StatusDelegationFailed Status = "delegation_failed"
	// StatusUnavailable: a sibling (or a tool) could not be offered, and
	// the turn did nothing else: the model refused, or answered without a
	// single successful delegation, so the answer may well lack what the
	// missing sibling would have done. A turn that did its task through the
	// siblings it had is StatusAnswered, with Unavailable still listed.
	StatusUnavailable Status = "unavailable"
	// StatusNotAnswered: the model said it could not do the task (a
	// refusal in the chat API's sense), its answer was empty (null, blank,
	// only reasoning), cut at the output limit (finish_reason "length") or
	// stopped by a content filter, or the turn ended without an answer.
	// Reason says which.
	StatusNotAnswered Status = "not_answered"
	// StatusAnswered: the model answered and every delegation succeeded.
	StatusAnswered Status = "answered"
	// StatusFailed: the turn itself failed (the model API, the caller's
	// context); Run returned the error.
	StatusFailed Status = "failed"
)

// Result is what a turn produced.
type Result struct {
	Agent  string `json:"agent"`
	Model  string `json:"model"`
	RunID  string `json:"run_id"`
	Answer string `json:"answer"`
	// Status is how the turn ended (StatusAnswered only when the task was
	// done with every delegation succeeding); Reason says why otherwise.
	Status Status `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Steps is the number of model completions the turn made.
	Steps int `json:"steps"`
	// Delegations are the finish events of every delegation, in the order
	// the calls finished.
	Delegations []delegation.Event `json:"delegations"`
	// Reasoning is what the model thought on the way, in step order: its
	// reasoning_content (DeepSeek, vLLM's reasoning parsers) and the
	// <think> blocks some models write into the content, which are kept
	// here and out of Answer, what the person reads.
	Reasoning string `json:"reasoning,omitempty"`
	// NameRepairs lists the tool calls whose name the model wrote in
	// another spelling of an offered tool ("abacus.calculate",
	// "functions.abacus__calculate", a bare "calculate"), and the tool
	// they were routed to.
	NameRepairs []NameRepair `json:"name_repairs,omitempty"`
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
	res := &Result{Agent: a.def.Name, Model: a.model.name, RunID: chain.RunID, Status: StatusFailed}
	defer func() { res.Duration = time.Since(start) }()
	if a.model.err != nil {
		return res, a.model.err
	}

	tools := delegation.Discover(ctx, a.caller, a.def.MCP, &delegation.DiscoverOptions{Check: a.def.CheckServer, Servers: a.opts.Servers})
	note := noteHandler(ctx)
	unavailable := make([]string, 0, len(tools.Unavailable()))
	for _, u := range tools.Unavailable() {
		// A server's error names its URL, which may carry an expanded
		// ${TOKEN}: the model, every MCP caller of ask and the person see
		// this text, so it is scrubbed as logs are.
		unavailable = append(unavailable, logging.Scrub(u.Error(), a.secrets...))
	}
	if tools.Len() == 0 && len(unavailable) == 0 {
		// Nothing failed, and yet there is nothing to offer: say where the
		// tools were expected (an mcp.json that was deleted looks like
		// this), rather than let the model say only that it has none.
		where := "its mcp.json"
		if a.def.MCP != nil && a.def.MCP.Path != "" {
			where = a.def.MCP.Path
		}
		unavailable = append(unavailable, fmt.Sprintf("agent %q has no tools: %s lists no servers (or is missing) and agent.json names no native toolsets", a.def.Name, where))
	}
	for _, u := range unavailable {
		res.Unavailable = append(res.Unavailable, u)
		a.log.Warn("sibling unavailable", "run", chain.RunID, "err", u)
		if note != nil {
			note("unavailable: " + u)
		}
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
	// tried is every call the executor ran or refused, in the model's
	// order: unlike Result.Delegations it holds the calls that never
	// reached a sibling (an unknown tool name, arguments that are not an
	// object), which a truthful status must count.
	var tried []delegation.Result
	var names *toolIndex // built at the first name that is not offered exactly (names.go)
	for res.Steps < maxSteps {
		res.Steps++
		resp, err := a.complete(ctx, req, res.Steps)
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			return res, err
		}
		msg := resp.Choices[0].Message
		content, thought := splitThink(msg.Content)
		res.addReasoning(msg.ReasoningContent, thought)
		if len(msg.ToolCalls) == 0 {
			res.Answer = cmp.Or(content, msg.Refusal)
			res.Status, res.Reason = judge(res, tried, resp.Choices[0].FinishReason, content, msg)
			a.log.Info("answered", "run", chain.RunID, "steps", res.Steps, "delegations", len(res.Delegations), "status", res.Status)
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
		var unknown map[string]string // call id → the tool message for a name that is no tool
		for i := range calls {
			c := &calls[i]
			if _, ok := tools.Lookup(c.Name); ok {
				continue
			}
			if names == nil {
				names = newToolIndex(tools)
			}
			to, could, ambiguous := names.resolve(c.Name)
			if to == "" {
				if unknown == nil {
					unknown = map[string]string{}
				}
				unknown[c.ID] = unknownToolText(c.Name, could, ambiguous)
				continue
			}
			a.log.Info("tool name repaired", "run", chain.RunID, "step", res.Steps, "call", c.ID, "from", c.Name, "to", to)
			res.NameRepairs = append(res.NameRepairs, NameRepair{Step: res.Steps, CallID: c.ID, From: c.Name, To: to})
			c.Name = to
			msg.ToolCalls[i].Function.Name = to
		}
		// The caps: the calls past them are not made; each still gets a
		// tool message (the API requires one per call) that says why, so
		// the model can go on with what it has.
		allowed := min(len(calls), perStep, max(0, perTurn-made))
		made += allowed
		a.log.Info("delegating", "run", chain.RunID, "step", res.Steps, "calls", allowed, "refused", len(calls)-allowed)
		results := exec.Run(ctx, calls[:allowed])
		for i := range results {
			if text, ok := unknown[results[i].CallID]; ok && results[i].Outcome == delegation.OutcomeUnknownTool {
				results[i].Content = text
			}
		}
		tried = append(tried, results...)
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
			// reasoning_content goes back as it came: DeepSeek's thinking
			// mode with tools needs it in the same turn.
			Role: openai.ChatMessageRoleAssistant, Content: msg.Content, ToolCalls: msg.ToolCalls,
			ReasoningContent: msg.ReasoningContent,
		})
		for _, r := range results {
			req.Messages = append(req.Messages, openai.ChatCompletionMessage{
				Role: openai.ChatMessageRoleTool, ToolCallID: r.CallID, Content: r.Content,
			})
		}
	}
	res.Status = StatusNotAnswered
	res.Reason = fmt.Sprintf("not answered: the model made %d steps, each calling tools, without a final answer (max_steps)", maxSteps)
	return res, fmt.Errorf("%w: agent %q made %d model steps, each calling tools, without a final answer (max_steps)", ErrStepLimit, a.def.Name, maxSteps)
}

// judge decides a turn's status from what it did and how the model's last
// message ended: the severest of a failed call, an unavailable sibling and
// an answer that is not one (a refusal, an empty answer, one cut at the
// output limit or by a content filter). A failed call is forgiven only
// when a later call of the same tool succeeded (the model fixed its
// argument and tried again); a call to a tool that does not exist, when a
// later call of any tool succeeded (the model found the right name).
func judge(res *Result, tried []delegation.Result, finish openai.FinishReason, answer string, msg openai.ChatCompletionMessage) (Status, string) {
	var failed []string
	succeeded := 0
	for i, r := range tried {
		if r.Outcome == delegation.OutcomeOK {
			succeeded++
			continue
		}
		if r.Outcome == "" {
			continue // refused by the turn's own caps, and said so to the model
		}
		fixed := false
		for _, later := range tried[i+1:] {
			if later.Outcome == delegation.OutcomeOK && (r.Agent == "" || later.Agent == r.Agent && later.Tool == r.Tool) {
				fixed = true
			}
		}
		if fixed {
			continue
		}
		what := fmt.Sprintf("%s.%s: %s", r.Agent, r.Tool, r.Outcome)
		if r.Agent == "" {
			what = fmt.Sprintf("%q: %s", r.Name, r.Outcome)
		}
		if r.Event.Message != "" {
			what += ": " + r.Event.Message
		}
		failed = append(failed, what)
	}
	refusal := strings.TrimSpace(msg.Refusal)
	var notAnswer string
	switch {
	case refusal != "":
		notAnswer = "the model refused: " + refusal
	case finish == openai.FinishReasonLength:
		notAnswer = `the answer was cut off at the model's output limit (finish_reason "length")`
	case finish == openai.FinishReasonContentFilter:
		notAnswer = `the provider's content filter stopped the answer (finish_reason "content_filter")`
	case strings.TrimSpace(answer) == "" && strings.TrimSpace(msg.ReasoningContent) != "":
		notAnswer = "the model's answer was empty (it gave only its reasoning)"
	case strings.TrimSpace(answer) == "":
		notAnswer = "the model's answer was empty"
	}
	also := ""
	if notAnswer != "" {
		also = "; and " + notAnswer
	}
	switch {
	case len(failed) > 0:
		return StatusDelegationFailed, "delegation failed: " + strings.Join(failed, "; ") + also
	case len(res.Unavailable) > 0 && (succeeded == 0 || notAnswer != ""):
		return StatusUnavailable, "unavailable: " + strings.Join(res.Unavailable, "; ") + also
	case notAnswer != "":
		return StatusNotAnswered, "not answered: " + notAnswer
	}
	return StatusAnswered, ""
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

package builtin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// This file is the model proper: one request in, one reply out. The handler
// keeps no state, so everything a turn has done is read back from the
// messages: the task is the latest user message; the assistant tool calls
// after it, with their tool messages, are the steps already done. The plan
// is recomputed (it depends on the task and tools only) and the done calls
// are laid over its steps in order; the first batch not done is the reply,
// or, when none is left, the answer.

// reply is what the model says: tool calls, or, when there are none, text.
type reply struct {
	calls []outCall
	text  string
}

type outCall struct {
	name string
	args string // JSON object
}

// issued is a tool call the conversation already made in this turn.
type issued struct {
	id, name, args string
	result         string
	answered       bool // a tool message with its id exists
}

// toolChoice is the request's tool_choice: "auto" (default), "none",
// "required", or one named function.
type toolChoice struct {
	mode string // auto, none, required, function
	name string
}

func parseToolChoice(raw json.RawMessage) (toolChoice, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return toolChoice{mode: "auto"}, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return toolChoice{mode: s}, nil
		}
		return toolChoice{}, fmt.Errorf("tool_choice %q must be \"auto\", \"none\", \"required\" or a function object", s)
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Type != "function" || obj.Function.Name == "" {
		return toolChoice{}, errors.New(`tool_choice object must be {"type":"function","function":{"name":...}}`)
	}
	return toolChoice{mode: "function", name: obj.Function.Name}, nil
}

// outcome is what became of one step with a tool.
type outcome struct {
	step    *step
	call    *issued // nil if not called
	skipped error   // why the step was not called, if it was not
}

// respond decides the reply to a validated request.
func respond(req *chatRequest, tools []*tool, choice toolChoice) reply {
	last := lastUser(req.Messages)
	task := strings.TrimSpace(string(req.Messages[last].Content))
	if task == "" {
		return reply{text: "There is nothing to do: the latest user message is empty."}
	}
	if len(tools) == 0 {
		return reply{text: fmt.Sprintf("I am the builtin offline model, a deterministic planner rather than a language model, "+
			"and I have no tools in this conversation, so I cannot do this task: %q.", task)}
	}
	if choice.mode == "function" {
		for _, t := range tools {
			if t.name == choice.name {
				tools = []*tool{t}
			}
		}
	}
	parallel := req.ParallelToolCalls == nil || *req.ParallelToolCalls
	steps := plan(task, tools, parallel)
	if choice.mode == "function" || choice.mode == "required" {
		steps = forceTool(steps, task, tools)
	}
	calls := issuedCalls(req.Messages[last+1:])

	var outcomes []outcome
	var next []outCall
	pending := -1 // the batch being collected for the reply
	j := 0
	for i := range steps {
		s := &steps[i]
		if s.tool == nil {
			continue
		}
		if pending >= 0 && s.batch != pending {
			break
		}
		args, err := fillArgs(s.text, s.tool, priorsBefore(outcomes, s.batch))
		switch {
		case err != nil:
			outcomes = append(outcomes, outcome{step: s, skipped: err})
		case j < len(calls):
			outcomes = append(outcomes, outcome{step: s, call: &calls[j]})
			j++
		case choice.mode != "none":
			pending = s.batch
			next = append(next, outCall{name: s.tool.name, args: encodeArgs(args)})
		}
	}
	if len(next) > 0 {
		return reply{calls: next}
	}
	return reply{text: answer(task, steps, outcomes, calls[j:], tools)}
}

// forceTool makes sure some step calls a tool when tool_choice demands one:
// if the plan matched none, the whole task goes to the best-scoring tool,
// however low its score. The result depends on the task and tools only, so
// once that call is done the next request answers instead of calling again.
func forceTool(steps []step, task string, tools []*tool) []step {
	for _, s := range steps {
		if s.tool != nil {
			return steps
		}
	}
	intents := detectIntents(task)
	st := stems(task)
	best, bestScore := tools[0], -1.0
	for _, t := range tools {
		if sc := score(t, st, intents); sc > bestScore {
			best, bestScore = t, sc
		}
	}
	return []step{{text: task, sep: sepFirst, tool: best, score: bestScore}}
}

// priorsBefore returns the calls of batches before batch, so that a step's
// arguments only ever depend on results that existed when it was due.
func priorsBefore(outcomes []outcome, batch int) []prior {
	var out []prior
	for _, o := range outcomes {
		if o.call == nil || o.step.batch >= batch || !o.call.answered {
			continue
		}
		out = append(out, prior{tool: o.step.tool, content: o.call.result, failed: failed(o.call.result)})
	}
	return out
}

func lastUser(msgs []chatMessage) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return i
		}
	}
	return -1
}

// issuedCalls lists the tool calls in msgs (the messages after the task) in
// order, each with its tool message's content.
func issuedCalls(msgs []chatMessage) []issued {
	var calls []issued
	index := map[string]int{}
	for _, m := range msgs {
		switch m.Role {
		case "assistant":
			for _, tc := range m.ToolCalls {
				index[tc.ID] = len(calls)
				calls = append(calls, issued{id: tc.ID, name: tc.Function.Name, args: tc.Function.Arguments})
			}
		case "tool":
			if k, ok := index[m.ToolCallID]; ok {
				calls[k].result = strings.TrimSpace(string(m.Content))
				calls[k].answered = true
			}
		}
	}
	return calls
}

// encodeArgs renders arguments as a JSON object with sorted keys (what
// encoding/json does for maps), so equal requests give equal bytes.
func encodeArgs(args map[string]any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(args); err != nil {
		return "{}"
	}
	return strings.TrimSpace(b.String())
}

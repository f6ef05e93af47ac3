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
// messages: the task is the latest user message; the tool calls after it,
// with their tool messages, are the steps already done, in order. Each step
// is planned only once the one before it has its result (a step may use
// that result), and one tool call goes out per reply.

// reply is what the model says: tool calls, or, when there are none, text.
// refusal is set when the text says a part of the task was not done; it is
// the chat API's "refusal", which the runtime reads as "not answered".
type reply struct {
	calls   []outCall
	text    string
	refusal string
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

// failed reports a tool message that is an error: the runtime's rendering
// of every failure starts with "Error:".
func (c *issued) failed() bool {
	return strings.HasPrefix(c.result, "Error:") || strings.HasPrefix(c.result, "error:")
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

// maxTaskBytes bounds the task the planner reads. It is a grammar for
// short tasks, and reading one costs a pass over the words after each
// "and" (splitAnd): this keeps a request's cost small and predictable.
const maxTaskBytes = 16 << 10

// errNotDone is the class of a step that was read but not done, because a
// step before it failed.
var errNotDone = errors.New("not done")

// stepOutcome is what became of one step.
type stepOutcome struct {
	step string
	call *issued // the call that did it; nil if none
	err  error   // why it was not done
}

// respond decides the reply to a validated request.
func respond(req *chatRequest, tools []*tool, choice toolChoice) reply {
	last := lastUser(req.Messages)
	task := strings.TrimSpace(string(req.Messages[last].Content))
	unavailable := unavailableIn(req.Messages[:last])
	if task == "" {
		return refuse("There is nothing to do: the latest user message is empty.", unavailable)
	}
	if choice.mode == "function" {
		tools = []*tool{toolNamed(tools, choice.name)}
	}
	if len(tools) == 0 || choice.mode == "none" {
		why := "I have no tools in this conversation"
		if choice.mode == "none" {
			why = `tool_choice is "none"`
		}
		return refuse(fmt.Sprintf("I did not do %q: %s, and the builtin model (a deterministic planner, not a language model) works only through tools.", task, why), unavailable)
	}

	if len(task) > maxTaskBytes {
		return refuse(fmt.Sprintf("I did not do the task: it is %d bytes long, and the builtin model reads tasks of at most %d bytes; split it into several, or use a language model (OPENAI_BASE_URL).", len(task), maxTaskBytes), unavailable)
	}
	steps := splitTask(task, tools)
	if len(steps) == 0 {
		return refuse(fmt.Sprintf("I did not do %q: it has no step to read.", task), unavailable)
	}
	calls := issuedCalls(req.Messages[last+1:])
	// Read the whole task before doing any of it: a part that cannot be
	// read with certainty is refused, and then no part is done, so that
	// nothing is done while the rest is silently dropped. A step that uses
	// the previous step's result is read with a stand-in for it here; it
	// is read again with the real one when its turn comes.
	var unread []stepOutcome
	unreadAt := map[int]bool{}
	for i, step := range steps {
		prior := ""
		if i > 0 {
			prior = standIn
		}
		err := tooManyAnds(step)
		if err == nil {
			var m mapping
			if m, err = mapStep(step, tools, prior); err == nil {
				_, err = fill(m, prior)
			}
		}
		if err != nil {
			unread = append(unread, stepOutcome{step: step, err: err})
			unreadAt[i] = true
		}
	}
	if len(unread) > 0 {
		r := answer(unread, calls, unavailable)
		if len(unread) < len(steps) {
			var readable []string
			for i, s := range steps {
				if !unreadAt[i] {
					readable = append(readable, fmt.Sprintf("%q", s))
				}
			}
			why := fmt.Sprintf("I did none of the task, so that no part of it is done without the rest: %s %s not done either.",
				strings.Join(readable, ", "), map[bool]string{true: "is", false: "are"}[len(readable) == 1])
			r = withRefusal(r, why)
		}
		return r
	}

	var outcomes []stepOutcome
	prior, priorOK := "", true
	j := 0
	for _, step := range steps {
		m, err := mapStep(step, tools, prior)
		var args map[string]any
		if err == nil {
			args, err = fill(m, prior)
		}
		if err != nil {
			if !priorOK {
				err = &stepError{kind: errNotDone, reason: "it may depend on the step before, which failed"}
			}
			outcomes = append(outcomes, stepOutcome{step: step, err: err})
			prior, priorOK = "", true
			continue
		}
		if j < len(calls) {
			c := &calls[j]
			j++
			outcomes = append(outcomes, stepOutcome{step: step, call: c})
			prior, priorOK = figure(c.result), !c.failed()
			if !priorOK {
				prior = ""
			}
			continue
		}
		return reply{calls: []outCall{{name: m.tool.name, args: encodeArgs(args)}}}
	}
	return answer(outcomes, calls[j:], unavailable)
}

// answer reports every step: the tool that did it and what it returned, a
// failure as a failure, and each step not done with the reason.
func answer(outcomes []stepOutcome, extra []issued, unavailable []string) reply {
	var done, notDone []string
	for _, o := range outcomes {
		switch {
		case o.call != nil && o.call.failed():
			done = append(done, fmt.Sprintf("%s failed: %s", displayName(o.call.name), summarize(strings.TrimPrefix(o.call.result, "Error: "))))
		case o.call != nil:
			done = append(done, fmt.Sprintf("%s: %s", displayName(o.call.name), summarize(o.call.result)))
		case errors.Is(o.err, errNotDone):
			notDone = append(notDone, fmt.Sprintf("I did not do %q: %s.", o.step, reasonOf(o.err)))
		default:
			notDone = append(notDone, fmt.Sprintf("I can't tell what to do with %q: %s.", o.step, reasonOf(o.err)))
		}
	}
	for _, c := range extra {
		// Calls this plan did not make (another model's, earlier in the
		// conversation): reported, not interpreted.
		done = append(done, fmt.Sprintf("%s: %s", displayName(c.name), summarize(c.result)))
	}
	text := strings.Join(done, "\n")
	if len(notDone) == 0 {
		return reply{text: text}
	}
	r := refuse(strings.Join(notDone, "\n"), unavailable)
	if text != "" {
		r.text = text + "\n" + r.text
	}
	return r
}

// withRefusal adds a line to r's refusal, before the list of unavailable
// siblings.
func withRefusal(r reply, line string) reply {
	why, tail, _ := strings.Cut(r.refusal, "\nUnavailable in this conversation: ")
	why += "\n" + line
	if tail != "" {
		why += "\nUnavailable in this conversation: " + tail
	}
	text := strings.TrimSuffix(r.text, r.refusal)
	return reply{calls: r.calls, text: text + why, refusal: why}
}

// refuse is a reply saying what was not done, naming the unavailable
// siblings the system prompt listed.
func refuse(why string, unavailable []string) reply {
	if len(unavailable) > 0 {
		why += "\nUnavailable in this conversation: " + strings.Join(unavailable, "; ") + "."
	}
	return reply{text: why, refusal: why}
}

// unavailableIn reads the runtime's list of unavailable siblings from the
// system messages ("These agents or tools are unavailable for this task:"
// followed by "- " lines).
func unavailableIn(msgs []chatMessage) []string {
	var out []string
	for _, m := range msgs {
		if m.Role != "system" && m.Role != "developer" {
			continue
		}
		_, list, ok := strings.Cut(string(m.Content), "unavailable for this task:\n")
		if !ok {
			continue
		}
		for _, line := range strings.Split(list, "\n") {
			item, ok := strings.CutPrefix(strings.TrimSpace(line), "- ")
			if !ok {
				break
			}
			out = append(out, item)
		}
	}
	return out
}

// figure is what a later step means by "the result": the value after the
// last " = " ("2+2 = 4" gives 4), else the only number in the result, else
// the result's first line.
func figure(result string) string {
	r := strings.TrimSpace(result)
	if i := strings.LastIndex(r, " = "); i >= 0 {
		return strings.TrimRight(strings.TrimSpace(r[i+3:]), ".")
	}
	if nums := numberRE.FindAllString(r, -1); len(nums) == 1 {
		return nums[0]
	}
	first, _, _ := strings.Cut(r, "\n")
	return strings.TrimRight(first, ".")
}

// summarize is a result on one line, bounded.
func summarize(result string) string {
	s := strings.Join(strings.Fields(result), " ")
	const max = 600
	if len(s) > max {
		cut := max
		for cut > 0 && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 rune
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
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

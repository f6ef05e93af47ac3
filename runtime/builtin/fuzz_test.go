package builtin

import (
	"encoding/json"
	"testing"
)

// FuzzRespond checks that no task text makes the planner panic, that every
// reply is either tool calls with JSON-object arguments or text, and that
// the same task always gets the same reply.
func FuzzRespond(f *testing.F) {
	for _, s := range []string{readmeTask, "what is 12*(3+4)?", "convert 5 km to miles and add 2 weeks to 2025-02-20",
		"save a note titled \"x\" tagged a, b", "((((", "how many days until march 3", "delete #", "remember that"} {
		f.Add(s, "Stored note 3.")
	}
	tools := internalTools(f, packratSchemas, abacusSchemas)
	f.Fuzz(func(t *testing.T, task, result string) {
		req := &chatRequest{Messages: []chatMessage{{Role: "user", Content: content(task)}}}
		first := respond(req, tools, toolChoice{mode: "auto"})
		if again := respond(req, tools, toolChoice{mode: "auto"}); !equalReply(first, again) {
			t.Fatalf("not deterministic: %+v vs %+v", first, again)
		}
		if len(first.calls) == 0 {
			return
		}
		for _, c := range first.calls {
			var obj map[string]any
			if err := json.Unmarshal([]byte(c.args), &obj); err != nil {
				t.Fatalf("arguments %s: %v", c.args, err)
			}
		}
		// Answer every call with result and go on to the end of the turn.
		for round := 0; round < 20 && len(first.calls) > 0; round++ {
			var tcs []toolCall
			for i, c := range first.calls {
				tc := toolCall{ID: string(rune('a'+round)) + string(rune('a'+i)), Type: "function"}
				tc.Function.Name, tc.Function.Arguments = c.name, c.args
				tcs = append(tcs, tc)
			}
			req.Messages = append(req.Messages, chatMessage{Role: "assistant", ToolCalls: tcs})
			for _, tc := range tcs {
				req.Messages = append(req.Messages, chatMessage{Role: "tool", ToolCallID: tc.ID, Content: content(result)})
			}
			first = respond(req, tools, toolChoice{mode: "auto"})
		}
		if len(first.calls) > 0 || first.text == "" {
			t.Fatalf("turn did not end in an answer: %+v", first)
		}
	})
}

func equalReply(a, b reply) bool {
	if a.text != b.text || len(a.calls) != len(b.calls) {
		return false
	}
	for i := range a.calls {
		if a.calls[i] != b.calls[i] {
			return false
		}
	}
	return true
}

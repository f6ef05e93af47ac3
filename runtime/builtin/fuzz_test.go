package builtin

import (
	"testing"
)

// FuzzRespond: any task, against the bundled agents' tools and a
// third-party server's, gives a reply (never a panic), the same reply
// every time, and either tool calls to offered tools or text.
func FuzzRespond(f *testing.F) {
	for _, s := range []string{
		readmeTask, "add 2 and 3", "calculate 2 + ", "what is 2+2, then remember the result",
		"convert 5 km to mi", `store_note {"text":1}`, "what is ((", "multiply it by", "search x=", "; ; then",
		"get_note 3, then delete_note it", "tell me about", "17% of", "abacus__date_math operation=add",
	} {
		f.Add(s)
	}
	tools := internalTools(f, packratSchemas, abacusSchemas, memorySchemas)
	f.Fuzz(func(t *testing.T, task string) {
		req := &chatRequest{Messages: []chatMessage{{Role: "user", Content: content(task)}}}
		a := respond(req, tools, toolChoice{mode: "auto"})
		b := respond(req, tools, toolChoice{mode: "auto"})
		if len(a.calls) != len(b.calls) || a.text != b.text || a.refusal != b.refusal {
			t.Fatalf("two replies to %q: %+v, %+v", task, a, b)
		}
		if len(a.calls) == 0 && a.text == "" && task != "" {
			t.Fatalf("no calls and no text for %q", task)
		}
		for _, c := range a.calls {
			if toolNamed(tools, c.name) == nil {
				t.Fatalf("call to %q, which is not offered", c.name)
			}
		}
	})
}

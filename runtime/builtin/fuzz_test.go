package builtin

import (
	"testing"
)

// FuzzRespond: any task, against the bundled agents' tools and a
// third-party server's, gives a reply (never a panic), the same reply
// every time, and either tool calls to offered tools or text. Before any
// tool has run, text is always a refusal: an answer that claims nothing
// went wrong while nothing was done is the silent failure this model must
// not have.
func FuzzRespond(f *testing.F) {
	for _, s := range []string{
		readmeTask, "add 2 and 3", "calculate 2 + ", "what is 2+2, then remember the result",
		"convert 5 km to mi", `store_note {"text":1}`, "what is ((", "multiply it by", "search x=", "; ; then",
		"get_note 3, then delete_note it", "tell me about", "17% of", "abacus__date_math operation=add",
		"remember that the launch moved to Friday and work out 17% of 2340", "remember that Alice and Bob met and",
		"how many days between March 1, 2026 and 03/04/2026", "what weekday is it", "how many grams in 3.5 pounds",
		"what date is 90 days after 2025-01-15, then what weekday is it", `store_note {"text":"a and calculate 2"}`,
		"what percent of 200 is 50 and", "convert 5 km to mi and 3 lb to kg", "the average of , and",
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
		if len(a.calls) == 0 && a.refusal == "" {
			t.Fatalf("answer %q to %q without a refusal, and no tool was called", a.text, task)
		}
		for _, c := range a.calls {
			if toolNamed(tools, c.name) == nil {
				t.Fatalf("call to %q, which is not offered", c.name)
			}
		}
	})
}

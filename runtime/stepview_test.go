package runtime_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"

	"github.com/switchboard-run/switchboard/internal/journal"
	"github.com/switchboard-run/switchboard/runtime"
)

// TestJournaledStepRebuildsWhatWasSent: a journaled three-step run (a
// delegation, another, the answer); each step rebuilt from the journal has
// the messages the model was sent for it, and the response it got, with
// nothing asked of the model and no tool called again. A step past the
// journal's is ErrStepNotJournaled; with other instructions the step is
// still shown, not exact.
func TestJournaledStepRebuildsWhatWasSent(t *testing.T) {
	var stored atomic.Int32
	packrat := scriptedPackrat(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		stored.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Stored."}}}, nil
	})
	var sent [3][]openai.ChatCompletionMessage
	keep := func(i int) func(*testing.T, *openai.ChatCompletionRequest) {
		return func(_ *testing.T, req *openai.ChatCompletionRequest) { sent[i] = req.Messages }
	}
	model := newScriptedModel(t,
		step{check: keep(0), reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c1", "packrat__store_note", `{"text":"milk"}`)}}},
		step{check: keep(1), reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c2", "packrat__store_note", `{"text":"eggs"}`)}}},
		step{check: keep(2), reply: openai.ChatCompletionMessage{Content: "Stored milk and eggs."}},
	)
	def := oracle(model.URL, packrat)
	agent := newAgent(t, def, nil)
	j := openJournal(t)
	run, err := j.Begin(t.Context(), journal.Start{RunID: chain.RunID, ParentKey: "parent-1", Task: "remember milk and eggs"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Run(runtime.WithJournal(t.Context(), run), "remember milk and eggs", chain); err != nil {
		t.Fatal(err)
	}
	run.Release()
	info, rp, err := j.Entries(t.Context(), chain.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != journal.StateDone || len(rp.Steps) != 3 || len(rp.Delegations) != 2 {
		t.Fatalf("entries: %s with %d steps and %d delegations, want done with 3 and 2", info.State, len(rp.Steps), len(rp.Delegations))
	}
	for n := 1; n <= 3; n++ {
		got, err := agent.JournaledStep(t.Context(), info.Task, chain, rp, n)
		if err != nil {
			t.Fatalf("step %d: %v", n, err)
		}
		if g, w := messagesText(got.Request.Messages), messagesText(sent[n-1]); g != w || !got.Exact {
			t.Errorf("step %d rebuilt (exact %v):\n%s\nwant what was sent:\n%s", n, got.Exact, g, w)
		}
		if len(got.Response.Choices) != 1 || got.Step != n {
			t.Errorf("step %d: response %+v", n, got.Response)
		}
	}
	if n, m := stored.Load(), model.Served(); n != 2 || m != 3 {
		t.Errorf("store_note ran %d times and the model was asked %d times; want 2 and 3 (the views asked and ran nothing)", n, m)
	}
	if _, err := agent.JournaledStep(t.Context(), info.Task, chain, rp, 4); !errors.Is(err, runtime.ErrStepNotJournaled) {
		t.Errorf("step 4 of 3: %v, want ErrStepNotJournaled", err)
	}
	changed := oracle(model.URL, packrat)
	changed.Instructions = "You coordinate your siblings, and say so."
	got, err := newAgent(t, changed, nil).JournaledStep(t.Context(), info.Task, chain, rp, 2)
	if err != nil || got.Exact || got.Request.Messages[0].Content != changed.Instructions {
		t.Errorf("with other instructions: %v, exact %v; want the step shown as rebuilt, not exact", err, got != nil && got.Exact)
	}
	// A journal whose step 1 lost its delegation's outcome cannot rebuild
	// step 2: the view says so rather than call the tool.
	cut := rp
	cut.Delegations = cut.Delegations[1:]
	if _, err := agent.JournaledStep(t.Context(), info.Task, chain, cut, 2); !errors.Is(err, runtime.ErrStepNotRebuilt) {
		t.Errorf("step 2 without step 1's outcome: %v, want ErrStepNotRebuilt", err)
	}
	if n := stored.Load(); n != 2 {
		t.Errorf("store_note ran %d times, want 2", n)
	}
}

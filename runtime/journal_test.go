package runtime_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/journal"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime"
)

// openJournal is a real run journal (SQLite) in a temporary directory.
func openJournal(t *testing.T) *journal.Journal {
	t.Helper()
	j, err := journal.Open(filepath.Join(t.TempDir(), journal.File), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// TestJournalResumeReplaysWhatWasDone: a turn is cut off (its caller
// cancels) while step 2's model request is in flight, after step 1's
// delegation ran. Resumed from its journal, step 1 is not asked again and
// its delegation is not sent again (the sibling ran it once), and only
// step 2 is asked again, with the same conversation.
func TestJournalResumeReplaysWhatWasDone(t *testing.T) {
	var stored atomic.Int32
	packrat := scriptedPackrat(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n := stored.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Stored note " + string(rune('0'+n)) + "."}}}, nil
	})
	store := toolCall("call_1", "packrat__store_note", `{"text":"milk"}`)
	first, cancelFirst := context.WithCancel(t.Context())
	defer cancelFirst()
	var step2 []openai.ChatCompletionMessage
	hold := make(chan struct{}) // the cut request is never answered (see TestJournalResumeDiverged)
	model := newScriptedModel(t,
		step{reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{store}}},
		// Step 2 of the first attempt: its caller goes away meanwhile.
		step{
			check:  func(t *testing.T, req *openai.ChatCompletionRequest) { step2 = req.Messages },
			before: func() { cancelFirst(); <-hold },
			reply:  openai.ChatCompletionMessage{Content: "never read"},
		},
		// Step 2 again, in the resumed attempt: the same request.
		step{
			check: func(t *testing.T, req *openai.ChatCompletionRequest) {
				if got, want := messagesText(req.Messages), messagesText(step2); got != want {
					t.Errorf("the resumed step 2 asks\n%s\nwant what the first attempt asked\n%s", got, want)
				}
			},
			reply: openai.ChatCompletionMessage{Content: "Stored: milk."},
		},
	)
	t.Cleanup(func() { close(hold) }) // before the model's server closes
	agent := newAgent(t, oracle(model.URL, packrat), nil)
	j := openJournal(t)

	run, err := j.Begin(t.Context(), journal.Start{RunID: chain.RunID, ParentKey: "parent-1", Task: "remember milk"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := agent.Run(runtime.WithJournal(first, run), "remember milk", chain)
	run.Release()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first attempt: %v (result %+v), want cancelled", err, res)
	}
	if res.Resumed {
		t.Error("a first attempt says it was resumed")
	}

	again, err := j.Resume(t.Context(), run.Info().ID)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if rp := again.Replay(); rp.Attempt != 2 || len(rp.Steps) != 1 || len(rp.Delegations) != 1 {
		t.Fatalf("replay %+v, want attempt 2 with 1 step and 1 delegation", rp)
	}
	// The resumed attempt runs in a span, as under the agent server's
	// tools/call: the span says it was resumed, and what was replayed.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	spanCtx, span := tp.Tracer("test").Start(t.Context(), "tools/call ask")
	res, err = agent.Run(runtime.WithJournal(spanCtx, again), "remember milk", chain)
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	attrs := map[string]string{}
	for _, sp := range rec.Ended() {
		if sp.Name() == "tools/call ask" {
			for _, kv := range sp.Attributes() {
				attrs[string(kv.Key)] = kv.Value.String()
			}
		}
	}
	if attrs["switchboard.run.resumed"] != "true" || attrs["switchboard.run.replayed_steps"] != "1" || attrs["switchboard.run.replayed_delegations"] != "1" {
		t.Errorf("the resumed attempt's span has %v, want resumed with 1 step and 1 delegation replayed", attrs)
	}
	if res.Answer != "Stored: milk." || res.Status != runtime.StatusAnswered {
		t.Errorf("answer %q, status %s", res.Answer, res.Status)
	}
	if !res.Resumed || res.ReplayedSteps != 1 || res.ReplayedDelegations != 1 || res.Steps != 2 {
		t.Errorf("resumed %v, replayed %d steps and %d delegations of %d steps; want resumed, 1, 1 of 2", res.Resumed, res.ReplayedSteps, res.ReplayedDelegations, res.Steps)
	}
	if n := stored.Load(); n != 1 {
		t.Errorf("store_note ran %d times, want once", n)
	}
	if n := model.Served(); n != 3 {
		t.Errorf("the model was asked %d times, want 3 (step 1 once, step 2 twice)", n)
	}
	if len(res.Delegations) != 1 || res.Delegations[0].Tool != "store_note" {
		t.Errorf("delegations %+v, want the replayed store_note", res.Delegations)
	}
	info, err := j.ByRunID(t.Context(), chain.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != journal.StateDone || info.Attempts != 2 {
		t.Errorf("journal says %s after %d attempts, want done after 2", info.State, info.Attempts)
	}
}

// TestJournalResumeDiverged: the agent's instructions changed between the
// attempts, so the rebuilt step 1 is not the journaled one: the run is
// refused (ErrResumeDiverged), nothing is asked or sent, and the journal
// marks it broken.
func TestJournalResumeDiverged(t *testing.T) {
	var stored atomic.Int32
	packrat := scriptedPackrat(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		stored.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Stored."}}}, nil
	})
	first, cancelFirst := context.WithCancel(t.Context())
	defer cancelFirst()
	// Step 2's request is cut by the caller and never answered: an answer
	// sent after the cancel could still reach the turn first.
	hold := make(chan struct{})
	model := newScriptedModel(t,
		step{reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c", "packrat__store_note", `{"text":"milk"}`)}}},
		step{before: func() { cancelFirst(); <-hold }, reply: openai.ChatCompletionMessage{Content: "never read"}},
	)
	t.Cleanup(func() { close(hold) }) // before the model's server closes
	j := openJournal(t)
	run, err := j.Begin(t.Context(), journal.Start{RunID: chain.RunID, ParentKey: "parent-1", Task: "remember milk"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newAgent(t, oracle(model.URL, packrat), nil).Run(runtime.WithJournal(first, run), "remember milk", chain); !errors.Is(err, context.Canceled) {
		t.Fatalf("first attempt: %v", err)
	}
	run.Release()

	changed := oracle(model.URL, packrat)
	changed.Instructions = "You coordinate your siblings, and say so."
	again, err := j.Resume(t.Context(), run.Info().ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = newAgent(t, changed, nil).Run(runtime.WithJournal(t.Context(), again), "remember milk", chain)
	again.Release()
	if !errors.Is(err, runtime.ErrResumeDiverged) || !strings.Contains(err.Error(), "step 1") {
		t.Fatalf("resume with other instructions: %v, want ErrResumeDiverged at step 1", err)
	}
	if n, m := stored.Load(), model.Served(); n != 1 || m != 2 {
		t.Errorf("store_note ran %d times and the model was asked %d times; want 1 and 2", n, m)
	}
	if _, err := j.Resume(t.Context(), run.Info().ID); !errors.Is(err, journal.ErrNotResumable) {
		t.Errorf("a diverged run resumed again: %v, want ErrNotResumable", err)
	}
}

func messagesText(msgs []openai.ChatCompletionMessage) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Role + ": " + m.Content)
		for _, tc := range m.ToolCalls {
			b.WriteString(" [" + tc.ID + " " + tc.Function.Name + " " + tc.Function.Arguments + "]")
		}
		b.WriteString(" (" + m.ToolCallID + ")\n")
	}
	return b.String()
}

// TestJournalResumeResendsACancelledDelegation: the turn is cut off (its
// caller goes away) while a delegation runs, after the sibling did the
// work. The cut-off call is not journaled as an outcome; the resume sends
// it again under the same derived key, and the sibling (which keeps
// records: the idempotency guard) answers from its record: the tool ran
// once, and the model reads its result, marked replayed.
func TestJournalResumeResendsACancelledDelegation(t *testing.T) {
	l, err := ledger.Open(filepath.Join(t.TempDir(), "sibling.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var stored atomic.Int32
	started := make(chan struct{}, 1)
	s := mcp.NewServer(&mcp.Implementation{Name: "packrat", Version: "test"}, nil)
	s.AddTool(&mcp.Tool{Name: "store_note", Description: "Store a note.", InputSchema: json.RawMessage(noteSchema)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			stored.Add(1)
			started <- struct{}{}
			<-ctx.Done() // the effect is done; the answer is cut off
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Stored note 1."}}}, nil
		})
	s.AddReceivingMiddleware(ledger.NewGuard(l, nil).Middleware)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	packrat := &mcpconfig.Server{Name: "packrat", Type: "http", URL: ts.URL}

	store := toolCall("call_1", "packrat__store_note", `{"text":"milk"}`)
	model := newScriptedModel(t,
		step{reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{store}}},
		step{
			check: func(t *testing.T, req *openai.ChatCompletionRequest) {
				last := req.Messages[len(req.Messages)-1]
				if last.ToolCallID != "call_1" || !strings.HasPrefix(last.Content, "Stored note 1.") || !strings.Contains(last.Content, "(replayed:") {
					t.Errorf("the resumed step 2 reads %+v, want the sibling's recorded result, replayed", last)
				}
			},
			reply: openai.ChatCompletionMessage{Content: "Stored: milk."},
		},
	)
	agent := newAgent(t, oracle(model.URL, packrat), nil)
	j := openJournal(t)
	run, err := j.Begin(t.Context(), journal.Start{RunID: chain.RunID, ParentKey: "parent-1", Task: "remember milk"})
	if err != nil {
		t.Fatal(err)
	}
	first, cancelFirst := context.WithCancel(delegation.WithParentKey(t.Context(), "parent-1"))
	go func() {
		<-started
		cancelFirst()
	}()
	if _, err := agent.Run(runtime.WithJournal(first, run), "remember milk", chain); !errors.Is(err, context.Canceled) {
		t.Fatalf("first attempt: %v, want cancelled", err)
	}
	run.Release()

	again, err := j.Resume(t.Context(), run.Info().ID)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if rp := again.Replay(); len(rp.Steps) != 1 || len(rp.Delegations) != 0 {
		t.Fatalf("replay %+v, want step 1 and no delegation outcome", rp)
	}
	res, err := agent.Run(runtime.WithJournal(delegation.WithParentKey(t.Context(), "parent-1"), again), "remember milk", chain)
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "Stored: milk." || res.ReplayedSteps != 1 || res.ReplayedDelegations != 0 {
		t.Errorf("answer %q, replayed %d steps and %d delegations; want the answer, 1 and 0", res.Answer, res.ReplayedSteps, res.ReplayedDelegations)
	}
	if len(res.Delegations) != 1 || !res.Delegations[0].Replayed {
		t.Errorf("delegations %+v, want one, answered by the sibling from its record", res.Delegations)
	}
	if n := stored.Load(); n != 1 {
		t.Errorf("store_note ran %d times, want once", n)
	}
}

// TestJournalStepIsDurableBeforeItsCalls: when a sibling's tool runs, the
// step that called it and the run's start are already committed: another
// connection to the journal's file (what the next process would read)
// finds them. The answering step and the end, which nothing acts on, are
// committed by the journal's writer later, and are there once it closes.
func TestJournalStepIsDurableBeforeItsCalls(t *testing.T) {
	path := filepath.Join(t.TempDir(), journal.File)
	stored := func() (runs, steps int) {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.QueryRow(`SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM entries WHERE kind = 'step')`).Scan(&runs, &steps); err != nil {
			t.Fatal(err)
		}
		return runs, steps
	}
	var atCall [2]int
	packrat := scriptedPackrat(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		atCall[0], atCall[1] = stored()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Stored note 1."}}}, nil
	})
	model := newScriptedModel(t,
		step{reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("call_1", "packrat__store_note", `{"text":"milk"}`)}}},
		step{reply: openai.ChatCompletionMessage{Content: "Stored: milk."}},
	)
	j, err := journal.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := j.Begin(t.Context(), journal.Start{RunID: chain.RunID, ParentKey: "parent-1", Task: "remember milk"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newAgent(t, oracle(model.URL, packrat), nil).Run(runtime.WithJournal(t.Context(), run), "remember milk", chain); err != nil {
		t.Fatal(err)
	}
	run.Release()
	if atCall != [2]int{1, 1} {
		t.Errorf("when the tool ran the journal's file held %d runs and %d steps, want the run and step 1", atCall[0], atCall[1])
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if runs, steps := stored(); runs != 1 || steps != 2 {
		t.Errorf("after Close the file holds %d runs and %d steps, want 1 and 2", runs, steps)
	}
}

package runtime

// A journaled step, shown: the messages a step's request carried and the
// response it got, for a person reading a run (the console's run page).
// The journal keeps each step's response and a fingerprint of its request,
// not the request, because the request is what a resume rebuilds: the
// turn loop run again with every step and delegation answered from the
// journal. JournaledStep is that same loop (run, step, delegate, the
// context budget's history), stopped at the step asked for, in a view
// mode in which nothing is asked of the model, no tool is called and
// nothing is written: a step or a delegation the journal lacks ends the
// view instead. So what it shows is what a resume would send, and the
// fingerprint says whether that is what was sent.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/delegation"
)

// Errors of JournaledStep, for errors.Is.
var (
	// ErrStepNotJournaled: the journal holds no such step of the run
	// (beyond its last, or the one in flight when it was cut off).
	ErrStepNotJournaled = errors.New("the step is not in the run's journal")
	// ErrStepNotRebuilt: the step is journaled but its request cannot be
	// rebuilt, because an earlier step's delegation is not (it was cut
	// off): a resume would send that call again, and a view does not.
	ErrStepNotRebuilt = errors.New("the step's request cannot be rebuilt from the journal")
)

// errViewed ends a view's turn at the step asked for.
var errViewed = errors.New("the step asked for was rebuilt")

// JournaledStep is one model step of a journaled run, as rebuilt.
type JournaledStep struct {
	Step int
	// Request is the step's chat request as the turn loop rebuilt it: the
	// system prompt, the task, the earlier responses and tool results (cut
	// and left out as the context budget did), and the tools offered.
	Request openai.ChatCompletionRequest
	// Response is the step's response, as journaled.
	Response openai.ChatCompletionResponse
	// Usage is the step's usage as journaled.
	Usage StepUsage
	// Exact: the rebuilt request has the fingerprint journaled for the
	// step, so it is the request the model was sent. False when the agent's
	// tools or instructions changed since (a sibling that is down now, a
	// new tool), at this step or one before it: then the messages from the
	// journal are as sent, the system prompt and tools may not be.
	Exact bool
}

// JournaledStep rebuilds step n (from 1) of the run the journal replay rp
// holds, started with task under chain, as a resume would: the siblings'
// tools are discovered again (the system prompt and the tools offered
// come from them), every step before n is answered from rp, and every
// delegation too. Nothing is sent to the model and no tool is called; the
// turn's log lines, events and metrics are not made.
func (a *Agent) JournaledStep(ctx context.Context, task string, chain delegation.Chain, rp JournalReplay, n int) (*JournaledStep, error) {
	if n < 1 || n > len(rp.Steps) {
		return nil, fmt.Errorf("agent %q: run %s: step %d: %w (it journaled %d)", a.def.Name, chain.RunID, n, ErrStepNotJournaled, len(rp.Steps))
	}
	// A quiet copy: the turn's lines ("delegating", "answered") and its
	// events would say that the run ran again.
	v := &Agent{def: a.def, caller: a.caller, model: a.model, opts: a.opts, log: slog.New(slog.DiscardHandler),
		retries: a.retries, budget: a.budget, secrets: a.secrets, wait: a.wait, plain: a.plain}
	v.opts.OnEvent, v.opts.OnModelRequest = nil, nil
	tj := newTurnJournal(readOnlyJournal{rp})
	tj.view = &stepView{step: n, exact: true}
	res := &Result{Agent: a.def.Name, Model: a.model.name, RunID: chain.RunID}
	err := v.run(ctx, task, chain, res, tj)
	if !errors.Is(err, errViewed) {
		if err == nil {
			// The turn answered before step n: the journal's steps do not
			// follow one another as the loop does.
			err = fmt.Errorf("agent %q: run %s: the turn rebuilt from the journal ended at step %d: %w", a.def.Name, chain.RunID, res.Steps, ErrStepNotRebuilt)
		}
		return nil, err
	}
	out := tj.view.got
	out.Exact = tj.view.exact
	return &out, nil
}

// stepView is what a view's turn looks for and what it found.
type stepView struct {
	step  int
	exact bool // every step up to step had its journaled fingerprint
	got   JournaledStep
}

// readOnlyJournal is a replay for a view: nothing is recorded (a view never
// gets as far as recording anything; if it did, that is a bug).
type readOnlyJournal struct{ rp JournalReplay }

var errReadOnly = errors.New("a journaled step's view records nothing")

func (j readOnlyJournal) Replay() JournalReplay                                   { return j.rp }
func (readOnlyJournal) RecordStep(context.Context, JournalStep) error             { return errReadOnly }
func (readOnlyJournal) RecordDelegation(context.Context, JournalDelegation) error { return errReadOnly }
func (readOnlyJournal) RecordEnd(context.Context, JournalEnd) error               { return errReadOnly }
func (readOnlyJournal) Sync(context.Context) error                                { return nil }

// viewStep is step's part in a view: a replayed step n's request and
// response are kept when n is the step asked for, which ends the turn.
func (tj *turnJournal) viewStep(n int, req *openai.ChatCompletionRequest, resp openai.ChatCompletionResponse, su StepUsage) error {
	if tj.view == nil || n != tj.view.step {
		return nil
	}
	r := *req
	r.Messages = slices.Clone(req.Messages)
	tj.view.got = JournaledStep{Step: n, Request: r, Response: resp, Usage: su}
	return errViewed
}

// viewCalls is delegate's part in a view: every call of the step must be
// journaled, since a view calls no tool.
func (tj *turnJournal) viewCalls(step int, calls []delegation.Call) error {
	if tj.view == nil {
		return nil
	}
	for _, c := range calls {
		if _, ok := tj.delegation(step, c.ID); !ok {
			return fmt.Errorf("step %d's call %s (%s) has no outcome in the journal (it was cut off, and a resume sends it again): %w", step, c.ID, c.Name, ErrStepNotRebuilt)
		}
	}
	return nil
}

package runtime

// The journal seam (docs/DURABILITY.md). A turn run with a Journal in its
// context writes down what it would otherwise have to ask for again: each
// model step's response (durable, Journal.Sync, before its tool calls run)
// and each delegation's outcome (recorded as it returns, durable with the
// journal's next commit: a resume that finds it missing sends the call
// again under its key, and the sibling answers from its record).
// Run again with the same Journal (a resume), the turn replays those
// entries instead of asking the model or the siblings again; only the step
// that was in flight runs again. The interface lives here so that runtime
// stays free of any storage; internal/journal implements it on SQLite and
// PostgreSQL.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"reflect"
	"slices"
	"strings"

	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/idempotency"
	"golang.org/x/sync/errgroup"
)

// errUnreadable ends a resume at an entry that cannot be read back: the
// run is not resumed from it, now or later.
var errUnreadable = errors.New("the run is not resumed from an entry it cannot read")

// Errors of a journaled turn, for errors.Is.
var (
	// ErrJournal wraps a failure to write the run's journal, or an entry
	// that cannot be read back: the turn stops rather than act on
	// something it could not make durable, or go on from a state it
	// cannot trust.
	ErrJournal = errors.New("run journal")
	// ErrResumeDiverged: on resume, a step's request, rebuilt from the
	// replayed entries, differs from the request journaled for that step
	// (the agent's tools, instructions or model changed in between), so
	// the journaled response does not answer it.
	ErrResumeDiverged = errors.New("resumed run diverged from its journal")
)

// A Journal is the durable record of one run, as Run reads and writes it.
// Calls are made from the turn's goroutines: RecordDelegation may be called
// concurrently for the calls of one step.
//
// The Record methods may return before what they record is durable (a
// journal that batches its commits); Sync makes it so. The turn calls Sync
// where it is about to act on what it recorded: before a step's tool calls
// run. What it recorded and had not yet acted on (the outcome of a
// delegation, whose sibling answers its key again from its own record; the
// answer, which a keyed caller gets from the idempotency ledger) may be
// lost with the process, and is then done again, never twice.
type Journal interface {
	// Replay returns what earlier attempts of the run recorded; the zero
	// JournalReplay for a fresh run.
	Replay() JournalReplay
	// RecordStep records a model step's response.
	RecordStep(ctx context.Context, s JournalStep) error
	// RecordDelegation records a delegation's outcome as it returned.
	RecordDelegation(ctx context.Context, d JournalDelegation) error
	// RecordEnd records how the run ended.
	RecordEnd(ctx context.Context, e JournalEnd) error
	// Sync returns once everything recorded so far is durable, or with
	// the error that kept it from being.
	Sync(ctx context.Context) error
}

// JournalReplay is what a journal holds of a run when it is resumed.
type JournalReplay struct {
	// Attempt counts the times the run was started, this one included: 1
	// for a fresh run, more for a resumed one.
	Attempt     int
	Steps       []JournalStep
	Delegations []JournalDelegation
}

// JournalStep is one model step as journaled.
type JournalStep struct {
	Step int
	// Fingerprint identifies the request the step sent (model, messages
	// and tools, before any trimming for the context): on resume the
	// rebuilt request must have the same one.
	Fingerprint string
	// Response is the chat completion as received (JSON).
	Response json.RawMessage
	// Usage is the step's usage, trims included.
	Usage StepUsage
}

// JournalDelegation is one delegation's outcome as journaled.
type JournalDelegation struct {
	Step   int
	CallID string
	// Key is the derived idempotency key the call was sent with (empty
	// for a call never sent: an unknown tool, bad arguments).
	Key     string
	Outcome delegation.Outcome
	// Result is the delegation's result as the turn read it (JSON of a
	// private shape: only runtime reads it back).
	Result json.RawMessage
}

// JournalEnd is how a run ended.
type JournalEnd struct {
	// Result is the Result as JSON.
	Result json.RawMessage
	// Err is the error Run returned, "" when none.
	Err string
	// Resumable: the run ended by something outside it (the model
	// endpoint past its retries, a cancellation, a journal failure) and
	// may be resumed by hand; false for a run that answered or ended by
	// its own doing (max_steps), which would end the same way again.
	Resumable bool
	// Broken: the journal cannot answer this run's requests (a resume
	// diverged from it, or an entry could not be read back): it is never
	// resumed again.
	Broken bool
}

type journalKey struct{}

// WithJournal returns ctx under which Run journals the turn in j (and, if
// j holds entries, resumes from them). Delegations of a journaled turn need
// stable idempotency keys across attempts: put the run's parent key in the
// context too (delegation.WithParentKey), the same on every attempt, with
// the same chain run id.
func WithJournal(ctx context.Context, j Journal) context.Context {
	return context.WithValue(ctx, journalKey{}, j)
}

func journalFrom(ctx context.Context) Journal {
	j, _ := ctx.Value(journalKey{}).(Journal)
	return j
}

// requestFingerprint identifies what a step asks: the model, the messages
// and the tools, which are all a model's answer depends on. Stream and
// other transport settings are left out: they may differ between attempts
// (an endpoint found to refuse streams) without changing the question.
//
// It is a hash chain, so that a turn's steps, whose messages only grow,
// hash only what each step added (fingerprinter): the head hashes the
// model and the tools, and each message is hashed with the hash of those
// before it. So it is still a function of the whole request: a changed
// earlier message changes it. Its "2:" prefix tells it from the
// fingerprints journaled before the chain (requestFingerprintV1, the
// SHA-256 of the request's JSON), which a resume still checks.
func requestFingerprint(req *openai.ChatCompletionRequest) (string, error) {
	var f fingerprinter
	return f.fingerprint(req)
}

// fingerprintV2 is requestFingerprint's prefix.
const fingerprintV2 = "2:"

// requestFingerprintV1 is the fingerprint of the journals written before
// requestFingerprint was a chain: a resume of one of those compares its
// steps with it.
func requestFingerprintV1(req *openai.ChatCompletionRequest) (string, error) {
	b, err := json.Marshal(struct {
		Model    string                         `json:"model"`
		Messages []openai.ChatCompletionMessage `json:"messages"`
		Tools    []openai.Tool                  `json:"tools"`
	}{req.Model, req.Messages, req.Tools})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// same reports whether fp, journaled for a step, is the
// fingerprint of req, in the version fp was written in.
func (f *fingerprinter) same(fp, now string, req *openai.ChatCompletionRequest) (bool, error) {
	if strings.HasPrefix(fp, fingerprintV2) {
		return fp == now, nil
	}
	v1, err := requestFingerprintV1(req)
	return fp == v1, err
}

// A fingerprinter computes requestFingerprint for the steps of one turn,
// hashing only what changed since the last step: the tools (the same slice
// for the whole turn, built once in run; for an agent with many tools
// their schemas are most of the request) and the model once, and then
// each message once, as long as the earlier ones are as they were hashed.
// One that changed (a tool result left out to fit the context) starts the
// chain again from the head.
type fingerprinter struct {
	tools     []openai.Tool // the slice head was hashed from
	model     string
	head      [sha256.Size]byte
	hashed    []openai.ChatCompletionMessage // copies of the messages chain covers
	chain     [sha256.Size]byte              // the hash of head and hashed
	headValid bool
}

func (f *fingerprinter) fingerprint(req *openai.ChatCompletionRequest) (string, error) {
	if !f.headValid || !sameSlice(f.tools, req.Tools) || f.model != req.Model {
		tools, err := json.Marshal(req.Tools)
		if err != nil {
			return "", err
		}
		model, err := json.Marshal(req.Model)
		if err != nil {
			return "", err
		}
		h := sha256.New()
		h.Write([]byte("switchboard request fingerprint v2\x00"))
		writeLenPrefixed(h, model)
		writeLenPrefixed(h, tools)
		h.Sum(f.head[:0])
		f.tools, f.model, f.headValid = req.Tools, req.Model, true
		f.hashed, f.chain = f.hashed[:0], f.head
	}
	if len(req.Messages) < len(f.hashed) || !slices.EqualFunc(f.hashed, req.Messages[:len(f.hashed)], sameMessage) {
		f.hashed, f.chain = f.hashed[:0], f.head
	}
	for _, m := range req.Messages[len(f.hashed):] {
		b, err := json.Marshal(m)
		if err != nil {
			return "", err
		}
		h := sha256.New()
		h.Write(f.chain[:])
		writeLenPrefixed(h, b)
		h.Sum(f.chain[:0])
		f.hashed = append(f.hashed, copyMessage(m))
	}
	return fingerprintV2 + hex.EncodeToString(f.chain[:]), nil
}

func writeLenPrefixed(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// copyMessage copies m deep enough that a later change of the request's
// message (its slices' elements included) is seen by sameMessage.
func copyMessage(m openai.ChatCompletionMessage) openai.ChatCompletionMessage {
	m.MultiContent = slices.Clone(m.MultiContent)
	m.ToolCalls = slices.Clone(m.ToolCalls)
	return m
}

// sameMessage reports whether a, a copy the chain hashed, is still b.
func sameMessage(a, b openai.ChatCompletionMessage) bool { return reflect.DeepEqual(a, b) }

// sameSlice reports whether a and b are the same slice (not merely equal):
// same array, same length, both nil or neither.
func sameSlice[T any](a, b []T) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0]
}

// journaledResult is a delegation.Result as the journal keeps it: Err
// survives as its text only, which is all the turn reads of it.
type journaledResult struct {
	CallID  string             `json:"call_id"`
	Name    string             `json:"name"`
	Agent   string             `json:"agent,omitempty"`
	Tool    string             `json:"tool,omitempty"`
	Content string             `json:"content"`
	IsError bool               `json:"is_error,omitempty"`
	Outcome delegation.Outcome `json:"outcome,omitempty"`
	Err     string             `json:"err,omitempty"`
	Event   delegation.Event   `json:"event"`
	Meta    map[string]any     `json:"meta,omitempty"`
}

// errJournaled is the error of a delegation replayed from the journal.
type errJournaled struct{ msg string }

func (e errJournaled) Error() string { return e.msg }

func encodeResult(r delegation.Result) (json.RawMessage, error) {
	jr := journaledResult{CallID: r.CallID, Name: r.Name, Agent: r.Agent, Tool: r.Tool, Content: r.Content,
		IsError: r.IsError, Outcome: r.Outcome, Event: r.Event, Meta: r.Meta}
	if r.Err != nil {
		jr.Err = r.Err.Error()
	}
	return json.Marshal(jr)
}

func decodeResult(raw json.RawMessage) (delegation.Result, error) {
	var jr journaledResult
	if err := json.Unmarshal(raw, &jr); err != nil {
		return delegation.Result{}, err
	}
	r := delegation.Result{CallID: jr.CallID, Name: jr.Name, Agent: jr.Agent, Tool: jr.Tool, Content: jr.Content,
		IsError: jr.IsError, Outcome: jr.Outcome, Event: jr.Event, Meta: jr.Meta}
	if jr.Err != "" {
		r.Err = errJournaled{jr.Err}
	}
	return r, nil
}

// turnJournal is a Run's view of its Journal: the replayed entries by
// step and call, and what this attempt replayed.
type turnJournal struct {
	j       Journal
	attempt int
	steps   map[int]JournalStep
	dels    map[[2]string]JournalDelegation // (step, call id)
	fp      fingerprinter
	// view, when set, is a JournaledStep's: nothing is asked or run, and
	// the turn ends at the step it looks for (stepview.go).
	view *stepView
}

func newTurnJournal(j Journal) *turnJournal {
	rp := j.Replay()
	tj := &turnJournal{j: j, attempt: max(rp.Attempt, 1), steps: map[int]JournalStep{}, dels: map[[2]string]JournalDelegation{}}
	for _, s := range rp.Steps {
		tj.steps[s.Step] = s
	}
	for _, d := range rp.Delegations {
		tj.dels[[2]string{fmt.Sprint(d.Step), d.CallID}] = d
	}
	return tj
}

func (tj *turnJournal) delegation(step int, callID string) (JournalDelegation, bool) {
	d, ok := tj.dels[[2]string{fmt.Sprint(step), callID}]
	return d, ok
}

// derivedKey is the key delegation.Executor sends the call with
// (delegation/idempotency.go, delegationContext): the same parts, so the
// journal names the key the sibling recorded.
func derivedKey(ctx context.Context, runID, callID, server, tool string) string {
	parent, ok := idempotency.KeyFrom(ctx)
	if !ok {
		return ""
	}
	created, _ := idempotency.KeyTime(parent)
	return idempotency.DerivedKey(created, parent, runID, callID, server, tool)
}

// step gets step n's response: from the journal when an earlier attempt
// recorded it (replayed), else from the model, journaled before the turn
// acts on it.
func (a *Agent) step(ctx context.Context, tj *turnJournal, req *openai.ChatCompletionRequest, tools *delegation.Toolbox, hist *history, n int, su *StepUsage) (resp openai.ChatCompletionResponse, replayed bool, err error) {
	var fp string
	if tj != nil {
		// Before any trimming: the request as the loop built it is what an
		// attempt that resumes rebuilds.
		if fp, err = tj.fp.fingerprint(req); err != nil {
			return resp, false, fmt.Errorf("%w: agent %q, step %d: fingerprint of the request: %w", ErrJournal, a.def.Name, n, err)
		}
		st, ok := tj.steps[n]
		if !ok && tj.view != nil {
			return resp, false, fmt.Errorf("agent %q: step %d: %w", a.def.Name, n, ErrStepNotJournaled)
		}
		if ok {
			same, err := tj.fp.same(st.Fingerprint, fp, req)
			if err != nil {
				return resp, false, fmt.Errorf("%w: agent %q, step %d: fingerprint of the request: %w", ErrJournal, a.def.Name, n, err)
			}
			if !same && tj.view != nil {
				// Shown all the same, said to be rebuilt, not as sent.
				tj.view.exact, same = false, true
			}
			if !same {
				return resp, false, fmt.Errorf("%w: agent %q, step %d: the request rebuilt from the journal is not the one journaled (the agent's tools, instructions or model changed since); the journaled response does not answer it, so the run is not resumed",
					ErrResumeDiverged, a.def.Name, n)
			}
			if err := json.Unmarshal(st.Response, &resp); err != nil || len(resp.Choices) == 0 {
				return resp, false, fmt.Errorf("%w: agent %q, step %d: the journaled response cannot be read (%v): %w", ErrJournal, a.def.Name, n, err, errUnreadable)
			}
			*su = st.Usage
			su.Step = n
			if su.Trimmed > 0 {
				// The first attempt left the oldest tool results out to fit
				// the model's context, and later requests were built on that.
				hist.trim(req)
			}
			if err := tj.viewStep(n, req, resp, *su); err != nil {
				return resp, true, err
			}
			return resp, true, nil
		}
	}
	resp, err = a.complete(ctx, *req, tools, n, su)
	if err != nil && !a.plain && errors.Is(err, ErrContextLength) && ctx.Err() == nil {
		resp, err = a.makeRoom(ctx, req, tools, hist, n, su, err)
	}
	if err != nil || tj == nil {
		return resp, false, err
	}
	raw, err := json.Marshal(resp)
	if err == nil {
		// Not cancellable: the response has been paid for, and an answer
		// the caller no longer waits for is still worth keeping for a resume.
		err = tj.j.RecordStep(context.WithoutCancel(ctx), JournalStep{Step: n, Fingerprint: fp, Response: raw, Usage: *su})
	}
	if err == nil && len(resp.Choices) > 0 && len(resp.Choices[0].Message.ToolCalls) > 0 {
		// Its tool calls are about to run: the step (and the run's start,
		// and everything before) is durable first, so that a resume never
		// asks again for a step whose calls were made. A step that only
		// answers acts on nothing here; it rides with the end.
		err = tj.j.Sync(context.WithoutCancel(ctx))
	}
	if err != nil {
		return resp, false, fmt.Errorf("%w: agent %q, step %d: the model's response could not be journaled, so it is not acted on: %w", ErrJournal, a.def.Name, n, err)
	}
	return resp, false, nil
}

// delegate runs a step's calls. Without a journal it is exec.Run. With
// one, a call an earlier attempt journaled is answered from the journal;
// every other is run (with the derived key it had, so a sibling that ran it
// before answers from its own record) and journaled as it returns, each on
// its own so that one slow call does not hold the others' entries back.
func (a *Agent) delegate(ctx context.Context, exec *delegation.Executor, tj *turnJournal, runID string, res *Result, calls []delegation.Call) ([]delegation.Result, error) {
	if tj == nil {
		return exec.Run(ctx, calls), nil
	}
	if err := tj.viewCalls(res.Steps, calls); err != nil {
		return nil, err
	}
	results := make([]delegation.Result, len(calls))
	errs := make([]error, len(calls))
	var replayed []delegation.Event
	// The events of the calls run now are appended by the executor's
	// OnEvent, from its goroutines: the replayed ones, which finished in an
	// earlier attempt, go in front of them once those are done.
	before, step := len(res.Delegations), res.Steps
	var g errgroup.Group
	g.SetLimit(cmp.Or(a.opts.Parallel, delegation.DefaultLimit))
	for i, c := range calls {
		if d, ok := tj.delegation(res.Steps, c.ID); ok {
			r, err := decodeResult(d.Result)
			if err != nil || r.CallID != c.ID {
				return nil, fmt.Errorf("%w: agent %q, step %d: the journaled outcome of call %s cannot be read (%v): %w", ErrJournal, a.def.Name, res.Steps, c.ID, err, errUnreadable)
			}
			results[i] = r
			// The executor reports the delegations it runs; this one it
			// does not run, but it is part of what the turn did.
			if r.Event.Phase == delegation.PhaseFinish {
				replayed = append(replayed, r.Event)
			}
			res.ReplayedDelegations++
			continue
		}
		g.Go(func() error {
			r := exec.Run(ctx, []delegation.Call{c})[0]
			results[i] = r
			if r.Outcome == delegation.OutcomeCanceled || ctx.Err() != nil {
				// Cut off by the turn's own end (its caller went away): not
				// an outcome of the call, so not journaled. A resume sends
				// it again under its key, and the sibling answers it from
				// its record if it ran.
				return nil
			}
			raw, err := encodeResult(r)
			if err == nil {
				err = tj.j.RecordDelegation(context.WithoutCancel(ctx), JournalDelegation{
					Step: step, CallID: c.ID, Key: sentKey(ctx, runID, c, r), Outcome: r.Outcome, Result: raw,
				})
			}
			errs[i] = err
			return nil
		})
	}
	_ = g.Wait()
	res.Delegations = slices.Insert(res.Delegations, min(before, len(res.Delegations)), replayed...)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: agent %q, step %d: a delegation's outcome could not be journaled: %w", ErrJournal, a.def.Name, res.Steps, err)
	}
	return results, nil
}

// sentKey is the idempotency key call c went to its sibling with, "" for a
// call never sent.
func sentKey(ctx context.Context, runID string, c delegation.Call, r delegation.Result) string {
	if r.Agent == "" || r.Outcome == delegation.OutcomeBadArguments {
		return ""
	}
	return derivedKey(ctx, runID, c.ID, r.Agent, r.Tool)
}

// endJournal records how the run ended.
func (a *Agent) endJournal(ctx context.Context, tj *turnJournal, res *Result, runErr error) error {
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	e := JournalEnd{Result: raw}
	if runErr != nil {
		e.Err = runErr.Error()
		// A run that ends by its own doing would end the same way again;
		// one ended from outside (the endpoint, the caller, the journal) may
		// go on once that is fixed. A diverged run cannot: its journal does
		// not answer its requests.
		e.Broken = errors.Is(runErr, ErrResumeDiverged) || errors.Is(runErr, errUnreadable)
		e.Resumable = !e.Broken && !errors.Is(runErr, ErrStepLimit) && !errors.Is(runErr, ErrNoModel)
	}
	return tj.j.RecordEnd(context.WithoutCancel(ctx), e)
}

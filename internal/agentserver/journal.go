package agentserver

// Durable runs (docs/DURABILITY.md). Every ask runs journaled in
// DataDir/journal.db, or with Options.DatabaseURL in the PostgreSQL
// database its replicas share (internal/journal): its task and settings, each model
// step's response, each delegation's outcome, its end. Three ways in:
//
//   - a new ask starts a run (Begin), refused when the journal is full;
//   - an ask whose idempotency key names a run a crash cut off: the guard
//     asks canResume, takes the ledger's record over instead of answering
//     -32073, and the ask resumes the run from its journal;
//   - an ask with "resume": RUN (switchboard ask --resume) resumes a run
//     that failed (the model down past its retries, a timeout, Ctrl-C), or
//     returns the end of one that is over.
//
// A resumed run has the chain, the task and the parent key of its first
// attempt, so its delegations carry the keys they had and a sibling answers
// the ones it ran from its own record.
//
// A run cut off by this process's own shutdown (the drain's grace ended,
// or a second signal aborted it: drain.go) did not end: it ends as after a
// SIGKILL. Its end is not journaled (the run stays running, and the next
// process's journal marks it interrupted), the ledger does not record the
// cancelled ask as its outcome (ledger.CutOff), and the caller is told to
// send the ask again with its key, which the next process resumes
// (cutOff). Without this, the cancel would be the run's end (failed) and
// the ask's recorded answer, which a keyed retry would replay.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/journal"
	"github.com/switchboard-run/switchboard/runtime"
)

// runSettings are what a run is journaled with besides its task: a resume
// checks the model against them and takes the chain from them.
type runSettings struct {
	Model    string           `json:"model"`
	Endpoint string           `json:"endpoint"`
	Chain    delegation.Chain `json:"chain"`
}

// startJournal opens the run journal and lets the guard resume the asks it
// holds. Call it once the asker and the guard exist.
func (s *Server) startJournal(opts *journal.Options) error {
	var (
		j   *journal.Journal
		err error
	)
	if s.dbURL != "" {
		// Where the ledger is (idempotency.go): the replicas share both.
		po := &journal.PostgresOptions{Schema: s.dbSchema}
		if opts != nil {
			po.Options = *opts
		}
		j, err = journal.OpenPostgres(context.Background(), s.dbURL, po)
	} else {
		j, err = journal.Open(filepath.Join(s.dataDir, journal.File), opts)
	}
	if err != nil {
		return fmt.Errorf("agent %s: %w", s.def.Name, err)
	}
	s.ask.journal = j
	s.idem.guard.Resumable("ask", s.ask.canResume)
	// After the asker has closed its pool (Close), so a turn that ends as
	// the server stops can still record its end.
	s.journal = j
	return nil
}

// canResume is the guard's Resumer for the ask tool: the journal holds a
// run started under key that nobody runs, or provably never journaled
// one (journal.CanResume).
func (a *asker) canResume(ctx context.Context, key string) bool {
	ok, err := a.journal.CanResume(ctx, key)
	if err != nil {
		a.logger.Warn("looking up an interrupted ask in the run journal", "err", err)
	}
	return ok
}

// credentialDigest is what a run keeps of its caller's credential.
func credentialDigest(req *mcp.CallToolRequest) string {
	var cred string
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		cred = req.Extra.Header.Get("Authorization")
	}
	return credentialOf(cred)
}

// credentialOf is the digest a run keeps of an Authorization header.
func credentialOf(auth string) string {
	sum := sha256.Sum256([]byte(auth))
	return hex.EncodeToString(sum[:])
}

// journaled is a turn to run (or an end to return) as the journal decided.
type journaled struct {
	run   *journal.Run // nil: nothing to run, end holds the answer
	task  string
	chain delegation.Chain
	// end is the stored end of a run that is over (a resume of a done
	// run): returned as it was.
	end    *runtime.Result
	endErr error
	// note is what the caller is told of a resume.
	note string
}

// errJournalRefused is a refusal to start or resume, with its text for
// the caller.
type errJournalRefused struct{ msg string }

func (e *errJournalRefused) Error() string { return e.msg }

// openRun decides what this ask runs: a new run, or the resume of one
// named by its key or by "resume".
func (a *asker) openRun(ctx context.Context, req *mcp.CallToolRequest, in askInput, chain delegation.Chain, agent *runtime.Agent) (*journaled, error) {
	name := a.def.Name
	model, endpoint := agent.Model()
	key, keyed := idempotency.KeyFrom(ctx)
	cred := credentialDigest(req)
	var info *journal.Info
	switch {
	case in.Resume != "":
		i, err := a.journal.ByRunID(ctx, in.Resume)
		if errors.Is(err, journal.ErrNotFound) || err == nil && i.Credential != cred {
			// Another caller's run is not found either: its id says nothing.
			return nil, &errJournalRefused{fmt.Sprintf("agent %s: no run %q in its journal to resume (never run here, or older than the journal keeps runs)", name, in.Resume)}
		}
		if err != nil {
			return nil, err
		}
		info = i
	case keyed:
		i, err := a.journal.ByKey(ctx, key)
		if err != nil && !errors.Is(err, journal.ErrNotFound) {
			return nil, err
		}
		info = i // the guard let a crash-interrupted ask through (canResume)
	}
	if info == nil {
		parent := key
		if !keyed {
			// A parent key of the run's own, so that its delegations'
			// keys are the same on every attempt.
			parent = idempotency.NewKey(time.Now())
		}
		settings, _ := json.Marshal(runSettings{Model: model, Endpoint: endpoint, Chain: chain})
		run, err := a.journal.Begin(ctx, journal.Start{RunID: chain.RunID, Key: key, ParentKey: parent, Credential: cred, Task: in.Task, Settings: settings})
		if errors.Is(err, journal.ErrFull) {
			return nil, &errJournalRefused{fmt.Sprintf("agent %s: %v", name, err)}
		}
		if err != nil {
			return nil, err
		}
		return &journaled{run: run, task: in.Task, chain: chain}, nil
	}

	var st runSettings
	if err := json.Unmarshal(info.Settings, &st); err != nil {
		return nil, &errJournalRefused{fmt.Sprintf("agent %s: run %s cannot be resumed: its settings in the journal do not parse: %v", name, info.RunID, err)}
	}
	if info.State == journal.StateDone {
		var res runtime.Result
		if err := json.Unmarshal(info.Result, &res); err != nil {
			return nil, &errJournalRefused{fmt.Sprintf("agent %s: run %s is over, and its end in the journal does not parse: %v", name, info.RunID, err)}
		}
		// The end says itself that it comes from the journal (the note
		// below is a notification the response may overtake): everything
		// of it was replayed, nothing asked or sent again.
		res.Resumed, res.ReplayedSteps, res.ReplayedDelegations = true, res.Steps, len(res.Delegations)
		j := &journaled{end: &res, chain: st.Chain, note: fmt.Sprintf("run %s is over; its end, from the journal", info.RunID)}
		if info.Error != "" {
			j.endErr = errors.New(info.Error)
		}
		return j, nil
	}
	if info.State == journal.StateBroken {
		return nil, &errJournalRefused{fmt.Sprintf("agent %s: run %s cannot be resumed: %s; whether the step it was cut off in took effect is unknown", name, info.RunID, info.Error)}
	}
	if st.Model != model || st.Endpoint != endpoint {
		return nil, &errJournalRefused{fmt.Sprintf("agent %s: run %s was started with model %q at %s and this agent now runs %q at %s; it is not resumed with another model", name, info.RunID, st.Model, st.Endpoint, model, endpoint)}
	}
	run, err := a.journal.Resume(ctx, info.ID)
	switch {
	case errors.Is(err, journal.ErrRunning):
		// The idempotency protocol's "still running": the caller's pool
		// sends the resume again, with backoff, and the guard forgets this
		// call's key since it did not run.
		data, _ := json.Marshal(map[string]any{"retryAfterMs": 500})
		return nil, &jsonrpc.Error{Code: idempotency.CodeStillRunning, Data: data,
			Message: fmt.Sprintf("agent %s: run %s is still running (another caller resumes it, or its first attempt has not ended yet); ask again later", name, info.RunID)}
	case errors.Is(err, journal.ErrCorrupt), errors.Is(err, journal.ErrNotResumable):
		return nil, &errJournalRefused{fmt.Sprintf("agent %s: run %s cannot be resumed: %v; whether the step it was cut off in took effect is unknown", name, info.RunID, err)}
	case err != nil:
		return nil, err
	}
	rp := run.Replay()
	return &journaled{run: run, task: info.Task, chain: st.Chain, note: fmt.Sprintf("resuming run %s from its journal (attempt %d: %d model steps and %d delegations journaled)",
		info.RunID, rp.Attempt, len(rp.Steps), len(rp.Delegations))}, nil
}

// EnvJournalSync is the default of `agent serve --journal-sync` (the
// studio passes its environment on to its agents, so one setting covers
// them all).
const EnvJournalSync = "SWITCHBOARD_JOURNAL_SYNC"

// Values of --journal-sync.
const (
	// JournalSyncProcess: a committed entry survives the process's death
	// (SQLite synchronous=NORMAL), what a resume is for. The default.
	JournalSyncProcess = "process"
	// JournalSyncPower: it survives the machine's power loss too (FULL: an
	// fsync per commit, docs/DURABILITY.md §7 has the cost).
	JournalSyncPower = "power"
)

// errJournalSync is the error for a --journal-sync that is neither.
var errJournalSync = errors.New(`want "process" (the default: survives the process's death) or "power" (survives a power loss: an fsync per commit)`)

// JournalOptions is the run journal's options for a --journal-sync value
// ("" is the default).
func JournalOptions(sync string) (*journal.Options, error) {
	switch sync {
	case "", JournalSyncProcess:
		return &journal.Options{}, nil
	case JournalSyncPower:
		return &journal.Options{PowerLossDurable: true}, nil
	}
	return nil, fmt.Errorf("journal sync %q: %w", sync, errJournalSync)
}

// EnvJournalLog is the default of `agent serve --journal-log`, passed on
// to the studio's agents the way EnvJournalSync is.
const EnvJournalLog = "SWITCHBOARD_JOURNAL_LOG"

// Values of --journal-log: how the SQLite journal commits a batch.
const (
	// JournalLogTables: a transaction on the journal's tables. The default.
	JournalLogTables = "tables"
	// JournalLogAppend: an append to a segment file, folded into the
	// tables later (journal.Options.AppendLog, docs/DURABILITY.md §5).
	// Opt-in while it is new; a PostgreSQL journal ignores it.
	JournalLogAppend = "append"
)

// errJournalLog is the error for a --journal-log that is neither.
var errJournalLog = errors.New(`want "tables" (the default: each commit is a transaction on the journal's tables) or "append" (each commit is an append to a segment file, folded into the tables later)`)

// WithJournalLog sets opts' write path for a --journal-log value ("" is
// the default) and returns opts. It is separate from JournalOptions so
// each flag's error names that flag.
func WithJournalLog(opts *journal.Options, log string) (*journal.Options, error) {
	switch log {
	case "", JournalLogTables:
		opts.AppendLog = false
	case JournalLogAppend:
		opts.AppendLog = true
	default:
		return nil, fmt.Errorf("journal log %q: %w", log, errJournalLog)
	}
	return opts, nil
}

// cutJournal is an attempt's journal that leaves the run unended when
// this process's shutdown cut it off: runtime.Run records every end, and
// a cancelled turn ends resumable (failed), which is the one end a
// shutdown must not write.
type cutJournal struct {
	*journal.Run
	attempt context.Context // the ask's own context: its cause says who cancelled it
	left    atomic.Bool     // RecordEnd left the run running
}

// RecordEnd implements runtime.Journal.
func (j *cutJournal) RecordEnd(ctx context.Context, e runtime.JournalEnd) error {
	if e.Resumable && cutByShutdown(j.attempt) {
		j.left.Store(true)
		return nil
	}
	return j.Run.RecordEnd(ctx, e)
}

// cutByShutdown reports whether ctx was cancelled by this process's
// shutdown (drain.go), not by its caller or a deadline.
func cutByShutdown(ctx context.Context) bool {
	cause := context.Cause(ctx)
	return errors.Is(cause, ErrGraceEnded) || errors.Is(cause, ErrAborted)
}

// cutOff is the answer to an ask whose run the shutdown cut off. A keyed
// ask stays unfinished in the ledger, and its caller is answered the
// idempotency protocol's still running (-32072: not finished, send the
// same key again later), which our pool sends again with backoff while the
// studio holds it for the agent's next process; there the guard finds the
// key interrupted and the run resumes from its journal. An ask without a
// key gets CodeShuttingDown, naming the run to resume by hand.
//
// An ask that was itself a resume ("resume": RUN) names its run by id, not
// by its key: its key is not left unfinished (the guard forgets it, as for
// any JSON-RPC error), and its resend, run anew, resumes the run by id
// again, which is safe whatever the first attempt did.
func (a *asker) cutOff(ctx context.Context, runID string, byID bool) error {
	name := a.def.Name
	why := context.Cause(ctx).Error()
	a.logger.InfoContext(ctx, "run cut off by the agent's shutdown; kept in the journal to be resumed", "run", runID, "why", why)
	_, keyed := idempotency.KeyFrom(ctx)
	if byID && keyed || !byID && ledger.CutOff(ctx) {
		data, _ := json.Marshal(map[string]any{"retryAfterMs": 1000, "run": runID, "resumable": true, "shuttingDown": true})
		return &jsonrpc.Error{Code: idempotency.CodeStillRunning, Data: data, Message: fmt.Sprintf(
			"agent %s is shutting down (%s) and stopped run %s where it was; it is kept in the journal: send this call again with the same idempotency key once the agent is back and the run goes on from there (or: switchboard ask --agent %s --resume %s)",
			name, why, runID, name, runID)}
	}
	data, _ := json.Marshal(map[string]any{"agent": name, "run": runID, "resumable": true, "shuttingDown": true})
	return &jsonrpc.Error{Code: CodeShuttingDown, Data: data, Message: fmt.Sprintf(
		"agent %s shut down while run %s ran (%s); the run is kept in the journal: resume it once the agent is back with switchboard ask --agent %s --resume %s",
		name, runID, why, name, runID)}
}

// Package journal is an agent's run journal (docs/DURABILITY.md): for each
// run of its ask tool, the task and settings, each model step's response,
// each delegation's outcome and how the run ended, so that a run cut off by
// the death of its process goes on from where it was. It implements
// runtime.Journal. It lives in one SQLite file in the agent's data
// directory (Open) or, for the replicas of one agent, in the agent's schema
// of a PostgreSQL database (OpenPostgres).
//
// Writes are queued and committed by one writer goroutine, everything
// queued at once in one transaction (group commit): a turn waits for its
// writes only where it is about to act on them (Run.Sync, before a step's
// tool calls run), so a run of one step costs no wait at all, and one of
// n steps with tool calls n commits. Whatever the turn acted on is in the
// journal; what it had not yet acted on may be missing after a crash and
// is then done again (docs/DURABILITY.md §1, §5).
//
// Every entry carries a SHA-256 of its fields and payload: an entry that
// does not match its sum, does not parse, or is out of sequence fails the
// run's resume with ErrCorrupt, and the run is marked broken rather than
// resumed from a state nobody can trust. The journal is bounded: runs that
// ended are deleted past the retention, and a journal at its cap (runs or
// bytes), with nothing ended left to evict, refuses new runs with ErrFull
// instead of dropping one that may still be resumed.
package journal

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/runtime"
)

// File is the journal's file name in an agent's data directory.
const File = "journal.db"

// Defaults of Options.
const (
	// DefaultRetention keeps an ended run as long as a sibling keeps the
	// records its delegations' keys name (idempotency.DefaultRetention):
	// resumed later, they could not be answered from those records.
	DefaultRetention = 24 * time.Hour
	DefaultMaxRuns   = 10_000
	DefaultMaxBytes  = 256 << 20
)

// evictEvery is how often a new run evicts runs past the retention; on a
// shared journal it is also how often a replica reads the totals the caps
// are checked against (the others' runs included).
const evictEvery = time.Minute

// commitDelay is how long the writer lets writes nobody waits for gather
// before it commits them (PostgreSQL's commit_delay and wal_writer_delay
// are the same idea): a run of one step waits for no commit at all, and a
// busy agent's runs share one. A write someone waits for (Run.Sync, a
// resume reading the store) is committed at once, with whatever is queued.
// It bounds how long a write nobody waited for may be lost with the
// process: each of those is done again on a resume, never twice
// (docs/DURABILITY.md §5).
const commitDelay = 5 * time.Millisecond

// totalsEvery is how often a replica of a shared journal reads the totals
// the caps are checked against, the other replicas' runs included: the
// caps hold within what the others start in that time.
const totalsEvery = time.Second

// maxQueued bounds the writes queued and not yet taken by the writer: past
// it, a write waits for the commit in flight, so a writer slower than the
// turns (a slow disk) slows them rather than grow the queue.
const maxQueued = 4096

// Errors, for errors.Is.
var (
	// ErrFull: the journal is at its cap and holds nothing it may evict;
	// the new run was not started.
	ErrFull = errors.New("run journal full")
	// ErrCorrupt: an entry of the run cannot be trusted (its sum does not
	// match, it does not parse, one is missing); the run is not resumed.
	ErrCorrupt = errors.New("run journal entry corrupt")
	// ErrRunning: the run is running (in this process, or in a live
	// replica sharing the journal): a second resume, or a resume of a run
	// not yet ended.
	ErrRunning = errors.New("run still running")
	// ErrNotFound: the journal holds no such run (never run here, or
	// evicted past the retention).
	ErrNotFound = errors.New("no such run in the journal")
	// ErrNotResumable: the run ended in a way that a resume would repeat
	// (max_steps) or cannot mend (a diverged or corrupt journal).
	ErrNotResumable = errors.New("run cannot be resumed")
	// ErrWrite: a commit of the journal failed; the run it was for stops
	// rather than act on what is not durable.
	ErrWrite = errors.New("run journal write failed")
	// ErrClosed: the journal was closed.
	ErrClosed = errors.New("run journal closed")
)

// State is where a run is.
type State string

const (
	StateRunning State = "running"
	// StateInterrupted: it was running when its process died (set by Open
	// for SQLite; on a shared journal, when a replica finds its owner gone).
	StateInterrupted State = "interrupted"
	// StateFailed: it ended with an error from outside it (the model
	// endpoint past its retries, a cancellation); resumable by hand.
	StateFailed State = "failed"
	// StateDone: it ended by itself (answered, or max_steps).
	StateDone State = "done"
	// StateBroken: it cannot be resumed (corrupt, diverged).
	StateBroken State = "broken"
)

// Options configure Open and OpenPostgres. The zero value of each field is
// its default.
type Options struct {
	Retention time.Duration    // default DefaultRetention
	MaxRuns   int              // default DefaultMaxRuns
	MaxBytes  int64            // payload bytes of all runs; default DefaultMaxBytes
	Now       func() time.Time // default time.Now
	// PowerLossDurable (SQLite) commits with synchronous=FULL, an fsync of
	// the WAL per commit: what was committed survives the machine's power
	// loss too. The default, synchronous=NORMAL, survives the death of the
	// process (what a resume is for: the WAL is written before a commit
	// returns, and the kernel keeps it), not the machine's, where the last
	// commits may be lost and a step already acted on be asked again
	// (docs/DURABILITY.md §5 and §7 have both costs). On PostgreSQL
	// durability is the server's (synchronous_commit).
	PowerLossDurable bool
	// AppendLog (SQLite) commits the writer's batches by appending them to
	// a segment file next to the database (File+SegmentSuffix), one
	// write(2) a batch (and an fsync with PowerLossDurable), and folds
	// them into the tables later, many at once: before a read that could
	// see them, past a few thousand ops, and on Close (segment.go). A
	// journal opened without it folds what a segment left, then removes
	// the segment.
	AppendLog bool
}

func (o *Options) defaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Retention <= 0 {
		r.Retention = DefaultRetention
	}
	if r.MaxRuns <= 0 {
		r.MaxRuns = DefaultMaxRuns
	}
	if r.MaxBytes <= 0 {
		r.MaxBytes = DefaultMaxBytes
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	return r
}

// Journal is one agent's run journal. It is safe for concurrent use. A
// SQLite journal must not be shared by two live processes (the second
// would take the first one's running runs for interrupted); a PostgreSQL
// one is shared by the agent's replicas.
type Journal struct {
	st   store
	opts Options
	// shared: other processes write the same journal (PostgreSQL), so the
	// totals are read from the store, and a run running under another
	// owner is asked about its owner.
	shared  bool
	created time.Time // the journal's creation (store.created)

	mu         sync.Mutex       // protects following
	active     map[int64]bool   // runs claimed by a Run of this process
	pendingKey map[string]int64 // keys of runs whose start is queued, not committed
	runs       int64            // totals as this process knows them
	bytes      int64
	lastEvict  time.Time // when evict last ran
	lastTotals time.Time // when runs and bytes were last read from the store (shared)
	closed     bool

	wmu     sync.Mutex    // protects following: the writer's queue
	fill    *batch        // the batch being filled, not yet taken by the writer
	flying  *batch        // the batch being committed
	closing bool          // Close has begun: the writer drains and exits
	kick    chan struct{} // wakes the writer (capacity 1)
	urge    chan struct{} // someone waits: the writer commits now (capacity 1)
	wdone   chan struct{} // closed when the writer has exited

	closeOnce sync.Once
	closeErr  error
}

// A batch is the ops the writer commits in one transaction.
type batch struct {
	ops  []op
	done chan struct{} // closed once committed (or failed)
	err  error         // set before done is closed
}

func newBatch() *batch { return &batch{done: make(chan struct{})} }

func newJournal(st store, o Options, shared bool) (*Journal, error) {
	ctx := context.Background()
	j := &Journal{st: st, opts: o, shared: shared, active: map[int64]bool{}, pendingKey: map[string]int64{},
		fill: newBatch(), kick: make(chan struct{}, 1), urge: make(chan struct{}, 1), wdone: make(chan struct{})}
	var err error
	if j.created, err = st.created(ctx); err != nil {
		return nil, fmt.Errorf("run journal %s: %w", st.where(), err)
	}
	if err := j.evict(ctx); err != nil {
		return nil, err
	}
	if j.runs, j.bytes, err = st.totals(ctx); err != nil {
		return nil, fmt.Errorf("run journal %s: %w", st.where(), err)
	}
	go j.writeLoop()
	return j, nil
}

// Where names the journal: its file, or its database.
func (j *Journal) Where() string { return j.st.where() }

// Close commits what is queued, then closes the store; it is idempotent.
func (j *Journal) Close() error {
	j.closeOnce.Do(func() {
		j.mu.Lock()
		j.closed = true
		j.mu.Unlock()
		j.wmu.Lock()
		j.closing = true
		j.wmu.Unlock()
		j.wake()
		j.hurry()
		<-j.wdone
		j.closeErr = j.st.close()
	})
	return j.closeErr
}

// Start is what a new run is journaled with.
type Start struct {
	RunID string
	// Key is the idempotency key of the ask that started the run ("" when
	// it had none): a resend of that ask finds the run by it (ByKey).
	Key string
	// ParentKey is what the run's delegation keys derive from, the same on
	// every attempt (delegation.WithParentKey).
	ParentKey string
	// Credential is a digest of the caller's credential: only the same
	// credential may resume the run by its id.
	Credential string
	Task       string
	// Settings are what the run was started with (model, endpoint, chain),
	// as JSON: a resume checks them.
	Settings json.RawMessage
}

// Info is what the journal knows of a run, without its entries.
type Info struct {
	ID         int64
	RunID      string
	Key        string
	ParentKey  string
	Credential string
	Task       string
	Settings   json.RawMessage
	State      State
	Attempts   int
	Result     json.RawMessage // the runtime.Result of its end, if it ended
	Error      string
	Bytes      int64
	Created    time.Time
	Updated    time.Time
}

// Begin journals a new run and claims it for the returned Run. The run's
// row is queued, not committed: it is committed with the run's first
// entries, at the latest before the run acts on anything (Run.Sync). A
// journal at its cap evicts ended runs, oldest first; with none to evict
// it refuses with ErrFull.
func (j *Journal) Begin(ctx context.Context, s Start) (*Run, error) {
	if s.RunID == "" || s.ParentKey == "" {
		return nil, fmt.Errorf("run journal %s: a run needs a run id and a parent key", j.Where())
	}
	j.mu.Lock()
	closed := j.closed
	j.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("run journal %s: %w", j.Where(), ErrClosed)
	}
	settings := []byte(s.Settings)
	if len(settings) == 0 {
		settings = []byte("{}")
	}
	s.Settings = settings
	size := int64(len(s.Task) + len(settings))
	if err := j.makeRoom(ctx); err != nil {
		return nil, err
	}
	id, err := j.st.newID()
	if err != nil {
		return nil, fmt.Errorf("run journal %s: %w", j.Where(), err)
	}
	now := j.opts.Now()
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil, fmt.Errorf("run journal %s: %w", j.Where(), ErrClosed)
	}
	j.active[id] = true
	if s.Key != "" {
		j.pendingKey[s.Key] = id
	}
	j.runs++ // its bytes are counted as its start is queued
	j.mu.Unlock()
	info := Info{ID: id, RunID: s.RunID, Key: s.Key, ParentKey: s.ParentKey, Credential: s.Credential, Task: s.Task,
		Settings: settings, State: StateRunning, Attempts: 1, Created: now, Updated: now}
	r := &Run{j: j, info: info, replay: runtime.JournalReplay{Attempt: 1}}
	st := s
	if err := r.enqueue(op{kind: opStart, start: &st, sum: runSum(s.RunID, s.ParentKey, s.Task, settings), bytes: size}); err != nil {
		r.Release()
		return nil, err
	}
	return r, nil
}

// randomID is a run's journal id on a shared journal: random, so that
// replicas need no round trip to number their runs.
func randomID() (int64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(b[:]) >> 1), nil
}

// Resume claims the run with journal id id and loads its entries, for an
// attempt that goes on from them. It fails with ErrRunning when the run is
// running (claimed in this process, or by a live replica), ErrNotResumable
// when it ended by itself or cannot be trusted, and ErrCorrupt when an
// entry does not check (the run is then marked broken).
func (j *Journal) Resume(ctx context.Context, id int64) (*Run, error) {
	if !j.claimHere(id) {
		return nil, fmt.Errorf("run journal %s: run #%d: %w", j.Where(), id, ErrRunning)
	}
	r, err := j.resume(ctx, id)
	if err != nil {
		j.release(id)
		return nil, err
	}
	return r, nil
}

func (j *Journal) resume(ctx context.Context, id int64) (*Run, error) {
	// Whatever this process queued for the run (its last attempt's end)
	// is in the store before its state is read.
	if err := j.flush(ctx); err != nil {
		return nil, err
	}
	info, err := j.st.get(ctx, query{id: id})
	if err != nil {
		return nil, err
	}
	switch info.State {
	case StateDone, StateBroken:
		return nil, fmt.Errorf("run journal %s: run %s is %s: %w", j.Where(), info.RunID, info.State, ErrNotResumable)
	}
	now := j.opts.Now().UnixMilli()
	if runSum(info.RunID, info.ParentKey, info.Task, info.Settings) != info.sum {
		j.markBroken(ctx, id, "its task or settings do not match their sum")
		return nil, fmt.Errorf("run journal %s: run %s: its task or settings do not match their sum: %w", j.Where(), info.RunID, ErrCorrupt)
	}
	replay, seq, err := j.load(ctx, &info.Info)
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			j.markBroken(ctx, id, err.Error())
		}
		return nil, err
	}
	ok, err := j.st.claim(ctx, id, now)
	if err != nil {
		return nil, fmt.Errorf("run journal %s: resuming run %s: %w", j.Where(), info.RunID, err)
	}
	if !ok {
		// Running under another owner that is alive, or taken by a
		// replica between the read and the claim.
		return nil, fmt.Errorf("run journal %s: run %s: %w", j.Where(), info.RunID, ErrRunning)
	}
	replay.Attempt = info.Attempts + 1
	info.State, info.Attempts = StateRunning, info.Attempts+1
	return &Run{j: j, info: info.Info, replay: replay, seq: seq}, nil
}

// load reads and checks every entry of run, in order.
func (j *Journal) load(ctx context.Context, info *Info) (runtime.JournalReplay, int, error) {
	var rp runtime.JournalReplay
	rows, err := j.st.entries(ctx, info.ID)
	if err != nil {
		return rp, 0, fmt.Errorf("run journal %s: reading run %s: %w", j.Where(), info.RunID, err)
	}
	seq := 0
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("run journal %s: run %s, entry %d: %s: %w", j.Where(), info.RunID, seq, fmt.Sprintf(format, args...), ErrCorrupt)
	}
	for _, e := range rows {
		seq++
		if e.seq != seq {
			return rp, 0, corrupt("entry %d is missing (the next one is %d)", seq, e.seq)
		}
		if entrySum(e.kind, e.step, e.callID, e.key, e.fingerprint, e.payload) != e.sum {
			return rp, 0, corrupt("it does not match its sum (truncated or altered)")
		}
		switch e.kind {
		case "step":
			var s runtime.JournalStep
			if err := json.Unmarshal(e.payload, &s); err != nil {
				return rp, 0, corrupt("step %d does not parse: %v", e.step, err)
			}
			if s.Step != e.step || e.step != len(rp.Steps)+1 {
				return rp, 0, corrupt("step %d out of order (after %d steps)", e.step, len(rp.Steps))
			}
			rp.Steps = append(rp.Steps, s)
		case "delegation":
			var d runtime.JournalDelegation
			if err := json.Unmarshal(e.payload, &d); err != nil {
				return rp, 0, corrupt("delegation %s of step %d does not parse: %v", e.callID, e.step, err)
			}
			if d.Step != e.step || d.CallID != e.callID || e.step < 1 || e.step > len(rp.Steps) {
				return rp, 0, corrupt("delegation %s of step %d does not follow its step", e.callID, e.step)
			}
			rp.Delegations = append(rp.Delegations, d)
		default:
			return rp, 0, corrupt("unknown kind %q", e.kind)
		}
	}
	return rp, seq, nil
}

// ByKey returns the run started by the ask with idempotency key key, or
// ErrNotFound.
func (j *Journal) ByKey(ctx context.Context, key string) (*Info, error) {
	j.mu.Lock()
	_, pending := j.pendingKey[key]
	j.mu.Unlock()
	if pending {
		if err := j.flush(ctx); err != nil {
			return nil, err
		}
	}
	info, err := j.st.get(ctx, query{key: key})
	if err != nil {
		return nil, err
	}
	return &info.Info, nil
}

// ByRunID returns the newest run with chain run id runID, or ErrNotFound.
func (j *Journal) ByRunID(ctx context.Context, runID string) (*Info, error) {
	if err := j.flush(ctx); err != nil {
		return nil, err
	}
	info, err := j.st.get(ctx, query{runID: runID})
	if err != nil {
		return nil, err
	}
	return &info.Info, nil
}

// Running reports whether run id is claimed in this process.
func (j *Journal) Running(id int64) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.active[id]
}

// CanResume reports whether the ask with idempotency key key, which a
// crash interrupted (its record in the idempotency ledger says it started
// and never ended), may go on: the journal holds its run and nobody runs
// it (not this process, not a live replica); or the journal holds no trace
// of it although the journal was in place when the key was made and keeps
// runs that long. Then the run never journaled its first step, so it acted
// on nothing (a step's tool calls run only once the step and the run's
// start are committed), and the ask may start it afresh. A key without a
// time, or made before the journal (which was then lost, or replaced),
// cannot tell "never journaled" from "lost": false, and the ask is
// answered interrupted as without a journal.
func (j *Journal) CanResume(ctx context.Context, key string) (bool, error) {
	info, err := j.ByKey(ctx, key)
	if errors.Is(err, ErrNotFound) {
		made, timed := idempotency.KeyTime(key)
		now := j.opts.Now()
		return timed && made.After(j.created) && now.Sub(made) < j.opts.Retention, nil
	}
	if err != nil {
		return false, err
	}
	if j.Running(info.ID) {
		return false, nil
	}
	if info.State != StateRunning || !j.shared {
		// Running in a SQLite journal but not here: a run this process
		// released without its end (the next Open marks it interrupted).
		return true, nil
	}
	// Running under another owner. CanResume is asked once the ledger
	// found the ask's owner gone, but the ledger's connections and the
	// journal's are not the same ones, and the server notices each closed
	// connection on its own: the journal's owner lock may outlive the
	// ledger's by a moment. So a lock still held is asked again, more and
	// more rarely, for at most ownerGoneWait before the run is taken for
	// a live replica's.
	wait := ownerPollFirst
	deadline := time.Now().Add(ownerGoneWait)
	for {
		si, err := j.st.get(ctx, query{id: info.ID})
		if err != nil {
			return false, err
		}
		live, err := j.st.live(ctx, si)
		if err != nil || !live {
			return !live && err == nil, err
		}
		if time.Now().Add(wait).After(deadline) {
			return false, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		}
		wait = min(2*wait, ownerPollMax)
	}
}

// Bounds of CanResume's wait for a gone owner's lock to be released.
const (
	ownerGoneWait  = 5 * time.Second
	ownerPollFirst = 10 * time.Millisecond
	ownerPollMax   = 250 * time.Millisecond
)

// List returns the newest runs, at most limit, without their entries.
func (j *Journal) List(ctx context.Context, limit int) ([]Info, error) {
	if err := j.flush(ctx); err != nil {
		return nil, err
	}
	rows, err := j.st.list(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("run journal %s: listing: %w", j.Where(), err)
	}
	out := make([]Info, len(rows))
	for i, r := range rows {
		out[i] = r.Info
	}
	return out, nil
}

func (j *Journal) claimHere(id int64) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.active[id] || j.closed {
		return false
	}
	j.active[id] = true
	return true
}

func (j *Journal) release(id int64) {
	j.mu.Lock()
	delete(j.active, id)
	j.mu.Unlock()
}

func (j *Journal) markBroken(ctx context.Context, id int64, why string) {
	_ = j.st.markBroken(context.WithoutCancel(ctx), id, why, j.opts.Now().UnixMilli())
}

// makeRoom evicts what the bounds allow and refuses a new run when the
// journal is still at its cap.
func (j *Journal) makeRoom(ctx context.Context) error {
	// Eviction by age is a write transaction: once a minute is enough for
	// a retention of hours, and at the cap below it runs anyway.
	now := j.opts.Now()
	j.mu.Lock()
	due := now.Sub(j.lastEvict) >= evictEvery
	full := j.runs >= int64(j.opts.MaxRuns) || j.bytes >= j.opts.MaxBytes
	refresh := j.shared && now.Sub(j.lastTotals) >= totalsEvery
	j.mu.Unlock()
	if refresh && !due && !full {
		runs, bytes, err := j.st.totals(ctx)
		if err != nil {
			return fmt.Errorf("run journal %s: %w", j.Where(), err)
		}
		j.mu.Lock()
		j.runs, j.bytes, j.lastTotals = runs, bytes, now
		full = j.runs >= int64(j.opts.MaxRuns) || j.bytes >= j.opts.MaxBytes
		j.mu.Unlock()
	}
	if !due && !full {
		return nil
	}
	// What is queued is in the store before it is counted and evicted.
	if err := j.flush(ctx); err != nil {
		return err
	}
	if err := j.evict(ctx); err != nil {
		return err
	}
	runs, bytes, err := j.st.totals(ctx)
	if err != nil {
		return fmt.Errorf("run journal %s: %w", j.Where(), err)
	}
	if runs >= int64(j.opts.MaxRuns) || bytes >= j.opts.MaxBytes {
		// Ended runs make room first, oldest first; a run that may still
		// be resumed (running, interrupted, failed) is never dropped for
		// space.
		if runs, bytes, err = j.st.evictEnded(ctx, int64(j.opts.MaxRuns), j.opts.MaxBytes); err != nil {
			return fmt.Errorf("run journal %s: %w", j.Where(), err)
		}
	}
	j.mu.Lock()
	j.runs, j.bytes, j.lastTotals = runs, bytes, now
	j.mu.Unlock()
	if runs >= int64(j.opts.MaxRuns) || bytes >= j.opts.MaxBytes {
		return fmt.Errorf("run journal %s holds %d runs and %d bytes that may still be resumed (caps: %d runs, %d bytes; ended runs are kept %v): %w; the new run was not started",
			j.Where(), runs, bytes, j.opts.MaxRuns, j.opts.MaxBytes, j.opts.Retention, ErrFull)
	}
	return nil
}

// evict deletes runs not running that were last touched before the
// retention.
func (j *Journal) evict(ctx context.Context) error {
	now := j.opts.Now()
	j.mu.Lock()
	j.lastEvict = now
	j.mu.Unlock()
	if err := j.st.evictOld(ctx, now.Add(-j.opts.Retention).UnixMilli()); err != nil {
		return fmt.Errorf("run journal %s: evict: %w", j.Where(), err)
	}
	return nil
}

// enqueue queues ops for the writer and returns the batch they went into.
func (j *Journal) enqueue(ops ...op) (*batch, error) {
	j.wmu.Lock()
	for len(j.fill.ops) >= maxQueued && !j.closing {
		f := j.fill
		j.wmu.Unlock()
		j.hurry()
		<-f.done
		j.wmu.Lock()
	}
	if j.closing {
		j.wmu.Unlock()
		return nil, fmt.Errorf("run journal %s: %w", j.Where(), ErrClosed)
	}
	j.fill.ops = append(j.fill.ops, ops...)
	b := j.fill
	j.wmu.Unlock()
	j.wake()
	return b, nil
}

func (j *Journal) wake() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// hurry tells the writer that someone waits for what is queued.
func (j *Journal) hurry() {
	select {
	case j.urge <- struct{}{}:
	default:
	}
}

// wait waits for b's commit, hurrying the writer.
func (j *Journal) wait(ctx context.Context, b *batch) error {
	select {
	case <-b.done:
		return nil
	default:
	}
	j.hurry()
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush waits until everything queued so far is committed.
func (j *Journal) flush(ctx context.Context) error {
	j.wmu.Lock()
	b := j.fill
	if len(b.ops) == 0 {
		b = j.flying
	}
	j.wmu.Unlock()
	if b == nil {
		return nil
	}
	return j.wait(ctx, b)
}

// writeLoop is the writer: it takes everything queued and commits it in
// one transaction, until Close, after which it drains the queue and exits.
func (j *Journal) writeLoop() {
	defer close(j.wdone)
	for {
		j.wmu.Lock()
		for len(j.fill.ops) == 0 && !j.closing {
			j.wmu.Unlock()
			<-j.kick
			j.wmu.Lock()
		}
		if len(j.fill.ops) == 0 {
			j.flying = nil
			j.wmu.Unlock()
			return
		}
		if !j.closing {
			// Let more gather, unless someone waits.
			j.wmu.Unlock()
			t := time.NewTimer(commitDelay)
			select {
			case <-t.C:
			case <-j.urge:
			}
			t.Stop()
			j.wmu.Lock()
		}
		b := j.fill
		j.fill, j.flying = newBatch(), b
		j.wmu.Unlock()
		b.err = j.write(b.ops)
		close(b.done)
	}
}

// write commits ops. A run another process took over has its writes
// dropped and is told (Run.failed); the rest are committed without them.
// Any other failure fails every run of the batch.
func (j *Journal) write(ops []op) error {
	ctx := context.Background()
	// A run whose earlier write failed writes nothing more: what follows
	// the gap would be read back as a journal with an entry missing.
	ops = slices.DeleteFunc(ops, func(o op) bool { return o.run.failed() != nil })
	for range len(ops) + 1 {
		err := j.st.commit(ctx, ops)
		var lost *lostRunError
		if !errors.As(err, &lost) {
			if err != nil {
				err = fmt.Errorf("%w: %s: %w", ErrWrite, j.Where(), err)
				for _, o := range ops {
					o.run.fail(err)
				}
			} else {
				j.committed(ops)
			}
			return err
		}
		kept := ops[:0:0]
		for _, o := range ops {
			if o.id == lost.id {
				o.run.fail(fmt.Errorf("%w: %s: %w", ErrWrite, j.Where(), lost))
				continue
			}
			kept = append(kept, o)
		}
		ops = kept
	}
	return nil
}

// committed forgets the pending keys of the runs whose start is now in the
// store.
func (j *Journal) committed(ops []op) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, o := range ops {
		if o.kind == opStart && o.start.Key != "" && j.pendingKey[o.start.Key] == o.id {
			delete(j.pendingKey, o.start.Key)
		}
	}
}

func runSum(runID, parentKey, task string, settings []byte) string {
	h := sha256.New()
	for _, p := range []string{runID, parentKey, task, string(settings)} {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func entrySum(kind string, step int, callID, key, fp string, payload []byte) string {
	h := sha256.New()
	var n, sn [20]byte
	for _, p := range [][]byte{[]byte(kind), strconv.AppendInt(sn[:0], int64(step), 10), []byte(callID), []byte(key), []byte(fp), payload} {
		h.Write(strconv.AppendInt(n[:0], int64(len(p)), 10))
		h.Write([]byte{':'})
		h.Write(p)
		h.Write([]byte{';'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

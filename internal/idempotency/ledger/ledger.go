package ledger

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-run/switchboard/internal/idempotency"
)

// The ledger is one SQLite file in the agent's data directory (sqlite.go),
// or, for the replicas of one agent, tables in one PostgreSQL database
// (postgres.go). A call is
// recorded as running, and committed, before its tool runs; its result is
// committed before it is answered. So after a crash every key is in one of
// three states: absent (the tool never started: safe to run), done (replay
// the result), or running from a previous process, which Open turns into
// interrupted: the tool started and nobody knows whether its effect
// happened. On PostgreSQL "a previous process" is any process whose owner
// lock is free: the replicas share the records, and a running record of a
// live replica is still running. That last state is the honest outcome_unknown, and it stays
// final for the key. Tools that commit their effect and their record in one
// transaction (TxLedger) never reach it.

// State is the state of a recorded call.
type State string

const (
	StateRunning     State = "running"
	StateDone        State = "done"
	StateInterrupted State = "interrupted"
)

// A Record is what the ledger knows about one key.
type Record struct {
	Key         string
	Tool        string
	Fingerprint string
	State       State
	Result      json.RawMessage // the CallToolResult, for StateDone
	Incarnation string          // the process that ran it
	Created     time.Time
}

// A TxLedger is the record table of a transactional tool: one that commits
// its effect and the record of the call (key, fingerprint, result) in one
// transaction of its own store, so that a crash leaves either both or
// neither. The guard looks a key up there instead of in the Ledger, and
// passes the Call to the tool (CallFrom) when there is no record.
type TxLedger interface {
	// Lookup returns the record committed under key for tool, or nil.
	Lookup(ctx context.Context, tool, key string) (*Record, error)
}

// A KeyLocker is a TxLedger shared by several processes (packrat on
// PostgreSQL): LockKey holds key against every other process until unlock
// is called, so that of two replicas given one key at once, one runs the
// tool and the other, after it, finds its record. It returns an error
// wrapping ctx's when ctx ends first.
type KeyLocker interface {
	LockKey(ctx context.Context, key string) (unlock func(), err error)
}

// Options configure Open. The zero value of every field means its default.
type Options struct {
	Retention  time.Duration    // records older than this are evicted; default DefaultRetention
	MaxRecords int64            // at most this many records are kept; default DefaultMaxRecords
	Now        func() time.Time // default time.Now
}

func (o *Options) defaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Retention <= 0 {
		r.Retention = idempotency.DefaultRetention
	}
	if r.MaxRecords <= 0 {
		r.MaxRecords = idempotency.DefaultMaxRecords
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	return r
}

// evictEvery: the ledger evicts once per this many new records, so the
// cost of eviction is spread thin and the table never exceeds MaxRecords by
// more than this.
const evictEvery = 256

// storage is where a Ledger keeps its records: one SQLite file
// (sqliteStore) or one PostgreSQL database shared by replicas (pgStore).
// The Ledger around it holds what is the same for both: options, this
// process's incarnation, when to evict, the horizon.
type storage interface {
	// begin records r (state running) and returns nil, or, when r.Key is
	// recorded, records nothing and returns its record, with a running
	// record of a process that is gone reported as StateInterrupted.
	// It also returns the eviction horizon it knows (unix ms; 0: none).
	begin(ctx context.Context, r Record) (*Record, int64, error)
	// finish records the result of the call incarnation recorded as key.
	finish(ctx context.Context, key, incarnation string, result []byte) error
	// abandon forgets key, recorded running by incarnation.
	abandon(ctx context.Context, key, incarnation string) error
	// reclaim records key, interrupted (or running by a process that is
	// gone), as running by incarnation, and reports whether it did.
	reclaim(ctx context.Context, key, incarnation string) (bool, error)
	get(ctx context.Context, key string) (*Record, error)
	count(ctx context.Context) (int64, error)
	// evict drops records created before cutoff (unix ms), then the oldest
	// beyond maxRecords, and returns the horizon.
	evict(ctx context.Context, cutoff, maxRecords int64) (int64, error)
	close() error
}

// Ledger is the durable record of the calls an agent has run: one process
// and its predecessors on one data directory (Open), or every replica of
// the agent on one PostgreSQL database (OpenPostgres). It is safe for
// concurrent use.
type Ledger struct {
	st          storage
	opts        Options
	incarnation string
	inserts     atomic.Int64
	horizon     atomic.Int64 // unix ms: the newest creation time of an evicted record

	closeOnce sync.Once
	closeErr  error
}

func newLedger(st storage, opts *Options, incarnation string) *Ledger {
	return &Ledger{st: st, opts: opts.defaults(), incarnation: incarnation}
}

// newIncarnation names one process's use of a ledger.
func newIncarnation() string { return rand.Text() }

// Incarnation identifies this process's use of the ledger.
func (l *Ledger) Incarnation() string { return l.incarnation }

// Retention is the configured time retention; MaxRecords the count bound.
func (l *Ledger) Retention() time.Duration { return l.opts.Retention }
func (l *Ledger) MaxRecords() int64        { return l.opts.MaxRecords }

// Horizon is the creation time of the newest record ever evicted for space:
// a timestamped key created at or before it and not in the ledger may have
// been evicted, so it is refused as expired.
func (l *Ledger) Horizon() time.Time { return time.UnixMilli(l.horizon.Load()) }

func (l *Ledger) raiseHorizon(h int64) {
	for {
		cur := l.horizon.Load()
		if h <= cur || l.horizon.CompareAndSwap(cur, h) {
			return
		}
	}
}

// Begin records key as running for tool and fingerprint, committed, and
// returns nil; or, when key is already recorded, returns its record and
// records nothing. A record left running by a process that is gone comes
// back as StateInterrupted.
func (l *Ledger) Begin(ctx context.Context, key, tool, fingerprint string) (*Record, error) {
	rec, horizon, err := l.st.begin(ctx, Record{Key: key, Tool: tool, Fingerprint: fingerprint,
		State: StateRunning, Incarnation: l.incarnation, Created: l.opts.Now()})
	if err != nil {
		return nil, err
	}
	l.raiseHorizon(horizon)
	if rec != nil {
		return rec, nil
	}
	if l.inserts.Add(1)%evictEvery == 0 {
		if err := l.evict(ctx); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// Finish records the result of the call under key, committed.
func (l *Ledger) Finish(ctx context.Context, key string, result json.RawMessage) error {
	return l.st.finish(ctx, key, l.incarnation, result)
}

// Reclaim takes over key, recorded as interrupted by a previous process,
// for this process: it is running again, here. It reports false when the
// record is in no such state (another caller took it over first).
func (l *Ledger) Reclaim(ctx context.Context, key string) (bool, error) {
	return l.st.reclaim(ctx, key, l.incarnation)
}

// Abandon forgets key, recorded by Begin, for a call that provably did not
// run its tool (the server refused it before the handler).
func (l *Ledger) Abandon(ctx context.Context, key string) error {
	return l.st.abandon(ctx, key, l.incarnation)
}

// Get returns the record of key, or nil.
func (l *Ledger) Get(ctx context.Context, key string) (*Record, error) { return l.st.get(ctx, key) }

// Count returns the number of records.
func (l *Ledger) Count(ctx context.Context) (int64, error) { return l.st.count(ctx) }

// evict drops records older than the retention, then the oldest beyond
// MaxRecords, advancing the horizon past the latter.
func (l *Ledger) evict(ctx context.Context) error {
	h, err := l.st.evict(ctx, l.opts.Now().Add(-l.opts.Retention).UnixMilli(), l.opts.MaxRecords)
	if err != nil {
		return err
	}
	l.raiseHorizon(h)
	return nil
}

// Close closes the database. It is idempotent.
func (l *Ledger) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.st.close() })
	return l.closeErr
}

func scanRecord(row interface{ Scan(...any) error }) (*Record, error) {
	var (
		r       Record
		result  []byte
		created int64
	)
	if err := row.Scan(&r.Key, &r.Tool, &r.Fingerprint, &r.State, &result, &r.Incarnation, &created); err != nil {
		return nil, err
	}
	r.Result = result
	r.Created = time.UnixMilli(created)
	return &r, nil
}

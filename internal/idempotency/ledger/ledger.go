package ledger

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver

	"github.com/switchboard-run/switchboard/internal/idempotency"
)

// The ledger is one SQLite file in the agent's data directory. A call is
// recorded as running, and committed, before its tool runs; its result is
// committed before it is answered. So after a crash every key is in one of
// three states: absent (the tool never started: safe to run), done (replay
// the result), or running from a previous process, which Open turns into
// interrupted: the tool started and nobody knows whether its effect
// happened. That last state is the honest outcome_unknown, and it stays
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

// Ledger is the durable record of the calls one agent process (and its
// predecessors on the same data directory) has run. It is safe for
// concurrent use; it must not be shared by two live processes.
type Ledger struct {
	db          *sql.DB
	opts        Options
	incarnation string
	inserts     atomic.Int64
	horizon     atomic.Int64 // unix ms: the newest creation time of an evicted record

	closeOnce sync.Once
	closeErr  error
}

const ledgerSchema = `
CREATE TABLE IF NOT EXISTS calls (
	key         TEXT PRIMARY KEY,
	tool        TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	state       TEXT NOT NULL,
	result      BLOB,
	incarnation TEXT NOT NULL,
	created_ms  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_created ON calls(created_ms);
CREATE TABLE IF NOT EXISTS ledger_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
`

// Open opens (creating if needed) the ledger at path. Calls a previous
// process left running are marked interrupted. A directory Open creates is
// 0700, and the database and its -wal, -shm and -journal files are 0600,
// also when they existed with a looser mode (see secureFiles).
func Open(path string, opts *Options) (*Ledger, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open idempotency ledger: path %q must not contain '?' or '#'", path)
	}
	if err := secureFiles(path); err != nil {
		return nil, fmt.Errorf("open idempotency ledger %s: %w", path, err)
	}
	// synchronous=FULL: a record is durable before the call it records
	// runs, and a result before it is answered.
	dsn := fmt.Sprintf("%s?_busy_timeout=5000&_journal_mode=WAL&_synchronous=FULL&_txlock=immediate", path)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open idempotency ledger %s: %w", path, err)
	}
	l := &Ledger{db: db, opts: opts.defaults(), incarnation: rand.Text()}
	if err := l.init(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("open idempotency ledger %s: %w", path, err)
	}
	// SQLite gives the files it creates the database's mode, but whatever
	// created them (an older version, another tool) is not trusted with it.
	if err := tightenSidecars(path); err != nil {
		db.Close()
		return nil, fmt.Errorf("open idempotency ledger %s: %w", path, err)
	}
	return l, nil
}

// The ledger holds every keyed call's arguments' fingerprint and its whole
// result: what one caller's tools returned, readable by any local user at
// 0644 (and a result may carry a secret). So it is kept as tokenstore and
// packrat keep theirs: files 0600, whatever the umask, and a directory that
// Open creates 0700. A directory that already exists keeps its mode: it
// may be shared (the agent server makes its data directory 0700 itself,
// agentserver.prepareDataDir), and changing the mode of a directory the
// ledger does not own is not the ledger's business.

// sidecars are the files SQLite keeps next to a database.
var sidecars = []string{"-wal", "-shm", "-journal"}

// secureFiles prepares path for the ledger before SQLite opens it: its
// directory exists (created 0700), the database exists with mode 0600 from
// its first byte (created here, not by SQLite, whose default is 0644 less
// the umask), and files left by an earlier process are made 0600.
func secureFiles(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating its directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	err = f.Chmod(0o600) // an existing file keeps its mode through OpenFile
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("making it 0600: %w", err)
	}
	return tightenSidecars(path)
}

// tightenSidecars makes path's -wal, -shm and -journal files 0600 where
// they exist.
func tightenSidecars(path string) error {
	for _, suffix := range sidecars {
		if err := os.Chmod(path+suffix, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("making %s 0600: %w", filepath.Base(path+suffix), err)
		}
	}
	return nil
}

func (l *Ledger) init(ctx context.Context) error {
	if _, err := l.db.ExecContext(ctx, ledgerSchema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if _, err := l.db.ExecContext(ctx, `UPDATE calls SET state = ? WHERE state = ?`, StateInterrupted, StateRunning); err != nil {
		return fmt.Errorf("mark calls of the previous process interrupted: %w", err)
	}
	var h sql.NullInt64
	err := l.db.QueryRowContext(ctx, `SELECT value FROM ledger_meta WHERE name = 'horizon_ms'`).Scan(&h)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read eviction horizon: %w", err)
	}
	l.horizon.Store(h.Int64)
	return l.evict(ctx)
}

// Incarnation identifies this process's use of the ledger.
func (l *Ledger) Incarnation() string { return l.incarnation }

// Retention is the configured time retention; MaxRecords the count bound.
func (l *Ledger) Retention() time.Duration { return l.opts.Retention }
func (l *Ledger) MaxRecords() int64        { return l.opts.MaxRecords }

// Horizon is the creation time of the newest record ever evicted for space:
// a timestamped key created at or before it and not in the ledger may have
// been evicted, so it is refused as expired.
func (l *Ledger) Horizon() time.Time { return time.UnixMilli(l.horizon.Load()) }

// Begin records key as running for tool and fingerprint, committed, and
// returns nil; or, when key is already recorded, returns its record and
// records nothing.
func (l *Ledger) Begin(ctx context.Context, key, tool, fingerprint string) (*Record, error) {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("idempotency ledger: begin: %w", err)
	}
	defer tx.Rollback()
	rec, err := scanRecord(tx.QueryRowContext(ctx, selectRecord, key))
	switch {
	case err == nil:
		return rec, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("idempotency ledger: look up key: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO calls (key, tool, fingerprint, state, incarnation, created_ms) VALUES (?, ?, ?, ?, ?, ?)`,
		key, tool, fingerprint, StateRunning, l.incarnation, l.opts.Now().UnixMilli()); err != nil {
		return nil, fmt.Errorf("idempotency ledger: record key: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("idempotency ledger: commit: %w", err)
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
	_, err := l.db.ExecContext(ctx, `UPDATE calls SET state = ?, result = ? WHERE key = ? AND incarnation = ?`,
		StateDone, []byte(result), key, l.incarnation)
	if err != nil {
		return fmt.Errorf("idempotency ledger: record the result: %w", err)
	}
	return nil
}

// Abandon forgets key, recorded by Begin, for a call that provably did not
// run its tool (the server refused it before the handler).
func (l *Ledger) Abandon(ctx context.Context, key string) error {
	_, err := l.db.ExecContext(ctx, `DELETE FROM calls WHERE key = ? AND incarnation = ? AND state = ?`, key, l.incarnation, StateRunning)
	if err != nil {
		return fmt.Errorf("idempotency ledger: forget key: %w", err)
	}
	return nil
}

// Get returns the record of key, or nil.
func (l *Ledger) Get(ctx context.Context, key string) (*Record, error) {
	rec, err := scanRecord(l.db.QueryRowContext(ctx, selectRecord, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency ledger: look up key: %w", err)
	}
	return rec, nil
}

// Count returns the number of records.
func (l *Ledger) Count(ctx context.Context) (int64, error) {
	var n int64
	err := l.db.QueryRowContext(ctx, `SELECT count(*) FROM calls`).Scan(&n)
	return n, err
}

// evict drops records older than the retention, then the oldest beyond
// MaxRecords, advancing the horizon past the latter.
func (l *Ledger) evict(ctx context.Context) error {
	cutoff := l.opts.Now().Add(-l.opts.Retention).UnixMilli()
	if _, err := l.db.ExecContext(ctx, `DELETE FROM calls WHERE created_ms < ? AND state != ?`, cutoff, StateRunning); err != nil {
		return fmt.Errorf("idempotency ledger: evict old records: %w", err)
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("idempotency ledger: evict: %w", err)
	}
	defer tx.Rollback()
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM calls`).Scan(&n); err != nil {
		return fmt.Errorf("idempotency ledger: evict: %w", err)
	}
	if n <= l.opts.MaxRecords {
		return nil
	}
	var newest int64
	if err := tx.QueryRowContext(ctx, `SELECT max(created_ms) FROM (SELECT created_ms FROM calls ORDER BY created_ms LIMIT ?)`, n-l.opts.MaxRecords).Scan(&newest); err != nil {
		return fmt.Errorf("idempotency ledger: evict: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM calls WHERE created_ms <= ? AND state != ?`, newest, StateRunning); err != nil {
		return fmt.Errorf("idempotency ledger: evict: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_meta (name, value) VALUES ('horizon_ms', ?) ON CONFLICT(name) DO UPDATE SET value = max(value, excluded.value)`, newest); err != nil {
		return fmt.Errorf("idempotency ledger: evict: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("idempotency ledger: evict: %w", err)
	}
	if newest > l.horizon.Load() {
		l.horizon.Store(newest)
	}
	return nil
}

// Close closes the database. It is idempotent.
func (l *Ledger) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.db.Close() })
	return l.closeErr
}

const selectRecord = `SELECT key, tool, fingerprint, state, result, incarnation, created_ms FROM calls WHERE key = ?`

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

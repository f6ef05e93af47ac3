package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver

	"github.com/switchboard-run/switchboard/internal/sqlitefile"
)

// sqliteStore is the ledger of one agent process: one SQLite file in its
// data directory, which must not be shared by two live processes.
type sqliteStore struct {
	db          *sql.DB
	incarnation string
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

const selectRecord = `SELECT key, tool, fingerprint, state, result, incarnation, created_ms FROM calls WHERE key = ?`

// Open opens (creating if needed) the ledger at path. Calls a previous
// process left running are marked interrupted. A directory Open creates is
// 0700, and the database and its -wal, -shm and -journal files are 0600,
// also when they existed with a looser mode (see sqlitefile.Secure).
func Open(path string, opts *Options) (*Ledger, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open idempotency ledger: path %q must not contain '?' or '#'", path)
	}
	if err := sqlitefile.Secure(path); err != nil {
		return nil, fmt.Errorf("open idempotency ledger %s: %w", path, err)
	}
	// synchronous=FULL: a record is durable before the call it records
	// runs, and a result before it is answered.
	dsn := fmt.Sprintf("%s?_busy_timeout=5000&_journal_mode=WAL&_synchronous=FULL&_txlock=immediate", path)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open idempotency ledger %s: %w", path, err)
	}
	st := &sqliteStore{db: db, incarnation: newIncarnation()}
	l := newLedger(st, opts, st.incarnation)
	if err := l.initSQLite(context.Background(), st); err != nil {
		db.Close()
		return nil, fmt.Errorf("open idempotency ledger %s: %w", path, err)
	}
	// SQLite gives the files it creates the database's mode, but whatever
	// created them (an older version, another tool) is not trusted with it.
	if err := sqlitefile.TightenSidecars(path); err != nil {
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

func (l *Ledger) initSQLite(ctx context.Context, s *sqliteStore) error {
	if _, err := s.db.ExecContext(ctx, ledgerSchema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE calls SET state = ? WHERE state = ?`, StateInterrupted, StateRunning); err != nil {
		return fmt.Errorf("mark calls of the previous process interrupted: %w", err)
	}
	var h sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT value FROM ledger_meta WHERE name = 'horizon_ms'`).Scan(&h)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read eviction horizon: %w", err)
	}
	l.horizon.Store(h.Int64)
	return l.evict(ctx)
}

func (s *sqliteStore) begin(ctx context.Context, r Record) (*Record, int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("idempotency ledger: begin: %w", err)
	}
	defer tx.Rollback()
	rec, err := scanRecord(tx.QueryRowContext(ctx, selectRecord, r.Key))
	switch {
	case err == nil:
		if rec.State == StateRunning && rec.Incarnation != s.incarnation {
			// Open marked every earlier process's running calls
			// interrupted; one process owns the file.
			rec.State = StateInterrupted
		}
		return rec, 0, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, 0, fmt.Errorf("idempotency ledger: look up key: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO calls (key, tool, fingerprint, state, incarnation, created_ms) VALUES (?, ?, ?, ?, ?, ?)`,
		r.Key, r.Tool, r.Fingerprint, StateRunning, r.Incarnation, r.Created.UnixMilli()); err != nil {
		return nil, 0, fmt.Errorf("idempotency ledger: record key: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, 0, fmt.Errorf("idempotency ledger: commit: %w", err)
	}
	return nil, 0, nil
}

func (s *sqliteStore) finish(ctx context.Context, key, incarnation string, result []byte) error {
	_, err := s.db.ExecContext(ctx, `UPDATE calls SET state = ?, result = ? WHERE key = ? AND incarnation = ?`,
		StateDone, result, key, incarnation)
	if err != nil {
		return fmt.Errorf("idempotency ledger: record the result: %w", err)
	}
	return nil
}

func (s *sqliteStore) abandon(ctx context.Context, key, incarnation string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM calls WHERE key = ? AND incarnation = ? AND state = ?`, key, incarnation, StateRunning)
	if err != nil {
		return fmt.Errorf("idempotency ledger: forget key: %w", err)
	}
	return nil
}

// reclaim: on one data directory, a running record of another
// incarnation is a previous process's (Open made this one the only one).
func (s *sqliteStore) reclaim(ctx context.Context, key, incarnation string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE calls SET state = ?, incarnation = ?, result = NULL WHERE key = ? AND (state = ? OR (state = ? AND incarnation != ?))`,
		StateRunning, incarnation, key, StateInterrupted, StateRunning, incarnation)
	if err != nil {
		return false, fmt.Errorf("idempotency ledger: take over an interrupted call: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("idempotency ledger: take over an interrupted call: %w", err)
	}
	return n == 1, nil
}

func (s *sqliteStore) get(ctx context.Context, key string) (*Record, error) {
	rec, err := scanRecord(s.db.QueryRowContext(ctx, selectRecord, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency ledger: look up key: %w", err)
	}
	return rec, nil
}

func (s *sqliteStore) count(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM calls`).Scan(&n)
	return n, err
}

func (s *sqliteStore) evict(ctx context.Context, cutoff, maxRecords int64) (int64, error) {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM calls WHERE created_ms < ? AND state != ?`, cutoff, StateRunning); err != nil {
		return 0, fmt.Errorf("idempotency ledger: evict old records: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("idempotency ledger: evict: %w", err)
	}
	defer tx.Rollback()
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM calls`).Scan(&n); err != nil {
		return 0, fmt.Errorf("idempotency ledger: evict: %w", err)
	}
	if n <= maxRecords {
		return 0, nil
	}
	var newest int64
	if err := tx.QueryRowContext(ctx, `SELECT max(created_ms) FROM (SELECT created_ms FROM calls ORDER BY created_ms LIMIT ?)`, n-maxRecords).Scan(&newest); err != nil {
		return 0, fmt.Errorf("idempotency ledger: evict: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM calls WHERE created_ms <= ? AND state != ?`, newest, StateRunning); err != nil {
		return 0, fmt.Errorf("idempotency ledger: evict: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_meta (name, value) VALUES ('horizon_ms', ?) ON CONFLICT(name) DO UPDATE SET value = max(value, excluded.value)`, newest); err != nil {
		return 0, fmt.Errorf("idempotency ledger: evict: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("idempotency ledger: evict: %w", err)
	}
	return newest, nil
}

func (s *sqliteStore) close() error { return s.db.Close() }

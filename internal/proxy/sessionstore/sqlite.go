package sessionstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver

	"github.com/switchboard-run/switchboard/internal/sqlitefile"
)

// File is the name of the SQLite store in a data directory.
const File = "continuity.db"

const sqliteSchema = `
CREATE TABLE IF NOT EXISTS sessions (
	scope        TEXT NOT NULL,
	id           TEXT NOT NULL,
	cred         TEXT NOT NULL,
	state        BLOB NOT NULL,
	last_used_ms INTEGER NOT NULL,
	PRIMARY KEY (scope, id)
);
CREATE INDEX IF NOT EXISTS sessions_last_used ON sessions(scope, last_used_ms);
`

type sqliteDB struct{ db *sql.DB }

// OpenSQLite opens (creating if needed) the store at path. Its directory
// is created 0700 if missing, and the database and SQLite's files beside
// it are 0600 whatever existed before: a record names a session id, which
// with the credential it is bound to is the client's session.
func OpenSQLite(path string) (DB, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open session store: path %q must not contain '?' or '#'", path)
	}
	if err := sqlitefile.Secure(path); err != nil {
		return nil, fmt.Errorf("open session store %s: %w", path, err)
	}
	// synchronous=NORMAL under WAL: a record is the setup of a session,
	// and losing the last one to a power cut costs that client a fresh
	// initialize, not a call run twice.
	dsn := fmt.Sprintf("%s?_busy_timeout=5000&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate", path)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open session store %s: %w", path, err)
	}
	if _, err := db.Exec(sqliteSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("open session store %s: create schema: %w", path, err)
	}
	if err := sqlitefile.TightenSidecars(path); err != nil {
		db.Close()
		return nil, fmt.Errorf("open session store %s: %w", path, err)
	}
	return &sqliteDB{db: db}, nil
}

func (d *sqliteDB) Scope(name string) Store { return &sqliteScope{db: d.db, scope: name} }
func (d *sqliteDB) Close() error            { return d.db.Close() }

type sqliteScope struct {
	db    *sql.DB
	scope string
}

func (s *sqliteScope) Put(ctx context.Context, rec Record, horizon time.Time) error {
	if len(rec.State) > MaxStateBytes {
		return fmt.Errorf("session %s: %d bytes: %w", rec.ID, len(rec.State), ErrTooLarge)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE scope = ? AND last_used_ms < ?`, s.scope, ms(horizon)); err != nil {
		return fmt.Errorf("session store: pruning: %w", err)
	}
	var others int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE scope = ? AND id <> ?`, s.scope, rec.ID).Scan(&others); err != nil {
		return fmt.Errorf("session store: counting: %w", err)
	}
	if others >= MaxSessions {
		return fmt.Errorf("session store: %d sessions: %w", others, ErrFull)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (scope, id, cred, state, last_used_ms) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (scope, id) DO UPDATE SET cred = excluded.cred, state = excluded.state, last_used_ms = max(sessions.last_used_ms, excluded.last_used_ms)`,
		s.scope, rec.ID, rec.Cred, rec.State, ms(rec.LastUsed)); err != nil {
		return fmt.Errorf("session store: keeping session %s: %w", rec.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	return nil
}

func (s *sqliteScope) Get(ctx context.Context, id string, horizon time.Time) (Record, error) {
	rec := Record{ID: id}
	var last int64
	err := s.db.QueryRowContext(ctx, `SELECT cred, state, last_used_ms FROM sessions WHERE scope = ? AND id = ? AND last_used_ms >= ?`,
		s.scope, id, ms(horizon)).Scan(&rec.Cred, &rec.State, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, fmt.Errorf("session store: reading session %s: %w", id, err)
	}
	rec.LastUsed = time.UnixMilli(last)
	return rec, nil
}

func (s *sqliteScope) Touch(ctx context.Context, id string, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE sessions SET last_used_ms = max(last_used_ms, ?) WHERE scope = ? AND id = ?`, ms(at), s.scope, id); err != nil {
		return fmt.Errorf("session store: touching session %s: %w", id, err)
	}
	return nil
}

func (s *sqliteScope) Delete(ctx context.Context, id string, idleBefore time.Time) error {
	q, args := `DELETE FROM sessions WHERE scope = ? AND id = ?`, []any{s.scope, id}
	if !idleBefore.IsZero() {
		q += ` AND last_used_ms < ?`
		args = append(args, ms(idleBefore))
	}
	if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("session store: forgetting session %s: %w", id, err)
	}
	return nil
}

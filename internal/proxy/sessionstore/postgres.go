package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-run/switchboard/internal/pgdb"
)

// component names the store's migrations in schema_version.
const component = "session_continuity"

// pgMigrations[i] moves the store's table from version i to i+1. Append;
// never edit one that has shipped.
var pgMigrations = []pgdb.Migration{
	`CREATE TABLE continuity_sessions (
		scope        TEXT NOT NULL,
		id           TEXT NOT NULL,
		cred         TEXT NOT NULL,
		state        BYTEA NOT NULL,
		last_used_ms BIGINT NOT NULL,
		PRIMARY KEY (scope, id)
	);
	CREATE INDEX continuity_sessions_last_used ON continuity_sessions (scope, last_used_ms);`,
}

// scopeLock serializes the cap's count and the insert of one scope between
// replicas (pg_advisory_xact_lock; "sbcont" in ASCII).
const scopeLock int64 = 0x73_6263_6f6e_74

type pgDB struct{ pool *pgxpool.Pool }

// OpenPostgres returns the store in pool's schema (pgdb.Open), its table
// migrated. The pool stays the caller's to close; Close does nothing.
func OpenPostgres(ctx context.Context, pool *pgxpool.Pool) (DB, error) {
	if err := pgdb.Migrate(ctx, pool, component, pgMigrations); err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	return &pgDB{pool: pool}, nil
}

func (d *pgDB) Scope(name string) Store { return &pgScope{pool: d.pool, scope: name} }
func (d *pgDB) Close() error            { return nil }

type pgScope struct {
	pool  *pgxpool.Pool
	scope string
}

func (s *pgScope) Put(ctx context.Context, rec Record, horizon time.Time) error {
	if len(rec.State) > MaxStateBytes {
		return fmt.Errorf("session %s: %d bytes: %w", rec.ID, len(rec.State), ErrTooLarge)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Decide and insert in one critical section across replicas, so
		// that two of them cannot together pass the cap.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, scopeLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM continuity_sessions WHERE scope = $1 AND last_used_ms < $2`, s.scope, ms(horizon)); err != nil {
			return fmt.Errorf("pruning: %w", err)
		}
		var others int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM continuity_sessions WHERE scope = $1 AND id <> $2`, s.scope, rec.ID).Scan(&others); err != nil {
			return fmt.Errorf("counting: %w", err)
		}
		if others >= MaxSessions {
			return fmt.Errorf("%d sessions: %w", others, ErrFull)
		}
		_, err := tx.Exec(ctx, `INSERT INTO continuity_sessions (scope, id, cred, state, last_used_ms) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (scope, id) DO UPDATE SET cred = excluded.cred, state = excluded.state,
				last_used_ms = GREATEST(continuity_sessions.last_used_ms, excluded.last_used_ms)`,
			s.scope, rec.ID, rec.Cred, rec.State, ms(rec.LastUsed))
		return err
	})
	if err != nil {
		return fmt.Errorf("session store: keeping session %s: %w", rec.ID, err)
	}
	return nil
}

func (s *pgScope) Get(ctx context.Context, id string, horizon time.Time) (Record, error) {
	rec := Record{ID: id}
	var last int64
	err := s.pool.QueryRow(ctx, `SELECT cred, state, last_used_ms FROM continuity_sessions WHERE scope = $1 AND id = $2 AND last_used_ms >= $3`,
		s.scope, id, ms(horizon)).Scan(&rec.Cred, &rec.State, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, fmt.Errorf("session store: reading session %s: %w", id, err)
	}
	rec.LastUsed = time.UnixMilli(last)
	return rec, nil
}

func (s *pgScope) Touch(ctx context.Context, id string, at time.Time) error {
	if _, err := s.pool.Exec(ctx, `UPDATE continuity_sessions SET last_used_ms = GREATEST(last_used_ms, $1) WHERE scope = $2 AND id = $3`, ms(at), s.scope, id); err != nil {
		return fmt.Errorf("session store: touching session %s: %w", id, err)
	}
	return nil
}

func (s *pgScope) Delete(ctx context.Context, id string, idleBefore time.Time) error {
	var err error
	if idleBefore.IsZero() {
		_, err = s.pool.Exec(ctx, `DELETE FROM continuity_sessions WHERE scope = $1 AND id = $2`, s.scope, id)
	} else {
		_, err = s.pool.Exec(ctx, `DELETE FROM continuity_sessions WHERE scope = $1 AND id = $2 AND last_used_ms < $3`, s.scope, id, ms(idleBefore))
	}
	if err != nil {
		return fmt.Errorf("session store: forgetting session %s: %w", id, err)
	}
	return nil
}

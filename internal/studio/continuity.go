package studio

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-run/switchboard/internal/pgdb"
	"github.com/switchboard-run/switchboard/internal/proxy/sessionstore"
)

// The studio's session continuity outlives the studio: what each agent's
// Continuity keeps of a client's session (internal/proxy,
// continuity_store.go) is also written to <Dir>/.switchboard/studio/
// continuity.db (0600), or to PostgreSQL (schema switchboard_studio) when
// the studio has a database. A client of a restarted studio then goes on
// as across an agent's restart: the new studio's middleware finds its
// session id there, and its agents' new processes get the replayed
// initialize. Each agent's sessions are a scope of their own,
// "studio/<agent>" (agent names cannot hold a '/', so no scope of an
// agent's own continuity can be the same).

// studioSchema is the PostgreSQL schema of the studio's own tables.
const studioSchema = "switchboard_studio"

// sessionDB is the studio's store and, on PostgreSQL, its pool.
type sessionDB struct {
	db   sessionstore.DB
	pool *pgxpool.Pool // nil on SQLite
}

// openSessions opens the studio's session store for o.
func openSessions(ctx context.Context, o Options) (*sessionDB, error) {
	if o.DatabaseURL == "" {
		db, err := sessionstore.OpenSQLite(filepath.Join(o.Dir, ".switchboard", "studio", sessionstore.File))
		if err != nil {
			return nil, err
		}
		return &sessionDB{db: db}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pool, err := pgdb.Open(ctx, o.DatabaseURL, pgdb.Options{Schema: studioSchema, MaxConns: 4})
	if err != nil {
		return nil, fmt.Errorf("session continuity: %w", err)
	}
	db, err := sessionstore.OpenPostgres(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &sessionDB{db: db, pool: pool}, nil
}

// scope is agent name's store.
func (d *sessionDB) scope(name string) sessionstore.Store { return d.db.Scope("studio/" + name) }

// Close closes the store; idempotent enough for Start's error paths and
// Close (a second call closes nothing more).
func (d *sessionDB) Close() error {
	if d == nil || d.db == nil {
		return nil
	}
	err := d.db.Close()
	if d.pool != nil {
		d.pool.Close()
	}
	d.db, d.pool = nil, nil
	return err
}

package packrat

import (
	"context"
	"crypto/sha256"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/pgdb"
)

// On PostgreSQL (agent serve --database) the archive is shared by every
// replica of the agent: the same tables as in packrat.db (pgMigrations),
// the same queries through database/sql (pgx's stdlib adapter), and three
// differences that sharing makes:
//
//   - ids come from one identity sequence, so two replicas never hand out
//     the same id, and a deleted note's id is never reused (as
//     AUTOINCREMENT promises on SQLite);
//   - two replicas may look a caller's idempotency_key up at once and both
//     find it free: the loser's insert fails on the UNIQUE index, its
//     transaction is rolled back, and put retries (dialect.retryable);
//   - the guard of each replica looks a keyed store_note up in the store
//     and runs it when absent; so that two replicas given one key at once
//     do not both run it, the store is a ledger.KeyLocker: the guard holds
//     a session advisory lock on the key around lookup and run, and the
//     second replica then finds the first one's record (a replay).
//
// idempotency_key is COLLATE "C": the range of recorded calls' keys
// (callKeyPrefix to callKeyEnd) is a byte range, which a linguistic
// collation would not respect for control characters.

// pgComponent names packrat's migrations in schema_version.
const pgComponent = "packrat"

// pgMigrations is migrations (schema.go) for PostgreSQL, version for
// version. Append; never edit one that has shipped.
var pgMigrations = []pgdb.Migration{
	`CREATE TABLE notes (
		id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		title           TEXT NOT NULL DEFAULT '',
		text            TEXT NOT NULL,
		tags            TEXT NOT NULL DEFAULT '[]',
		folded          TEXT NOT NULL,
		idempotency_key TEXT COLLATE "C" UNIQUE,
		created_at      TEXT NOT NULL
	)`,
	`ALTER TABLE notes ADD COLUMN call_fingerprint TEXT;
	ALTER TABLE notes ADD COLUMN call_ms BIGINT;
	CREATE TABLE call_records (
		key         TEXT COLLATE "C" PRIMARY KEY,
		tool        TEXT NOT NULL,
		fingerprint TEXT NOT NULL,
		note_id     BIGINT NOT NULL,
		result      BYTEA NOT NULL,
		created_ms  BIGINT NOT NULL
	)`,
}

type pgStore struct {
	pool *pgxpool.Pool // behind store.db
	// locks holds the connections of LockKey, each for one call's run. A
	// pool of their own: a call holding its key's lock needs a connection
	// of pool to store its note, and if locks came from pool too, enough
	// concurrent keyed calls would hold every connection and wait for one.
	locks *pgxpool.Pool
}

// Pool sizes: lockConns bounds the keyed store_note calls one replica runs
// at once (more wait, at most the guard's wait, then get still running).
const (
	storeConns = 8
	lockConns  = 32
)

// openPGStore opens the archive in the PostgreSQL database at url, its
// tables in schema, bringing them up to date.
func openPGStore(ctx context.Context, url, schema string) (*store, error) {
	pool, err := pgdb.Open(ctx, url, pgdb.Options{Schema: schema, MaxConns: storeConns})
	if err != nil {
		return nil, fmt.Errorf("open packrat store: %w", err)
	}
	if err := pgdb.Migrate(ctx, pool, pgComponent, pgMigrations); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open packrat store: %w", err)
	}
	// The lock connections wait on purpose (for another replica's run of
	// the key), under the guard's deadline: no statement timeout.
	locks, err := pgdb.Open(ctx, url, pgdb.Options{Schema: schema, MaxConns: lockConns, StatementTimeout: -1})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open packrat store: %w", err)
	}
	st := &store{db: stdlib.OpenDBFromPool(pool, stdlib.OptionResetSession(checkIdle)), now: time.Now, dialect: pgDialect, pg: &pgStore{pool: pool, locks: locks}}
	if err := st.prepareLookup(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("open packrat store: %w", err)
	}
	return st, nil
}

// LockKey implements ledger.KeyLocker on PostgreSQL: a session advisory
// lock on key, on a connection held until unlock. On SQLite there is one
// process and the guard's own flight suffices: it returns at once.
func (s *store) LockKey(ctx context.Context, key string) (func(), error) {
	if s.pg == nil {
		return func() {}, nil
	}
	lock := keyLock(key)
	var conn *pgxpool.Conn
	// A session lock dies with its connection: a lock statement that
	// failed on a broken connection holds nothing, and is tried again
	// while the database restarts.
	err := pgdb.Retry(ctx, pgdb.ReadRetryable, func(ctx context.Context) error {
		c, err := s.pg.locks.Acquire(ctx)
		if err != nil {
			return err
		}
		if _, err := c.Exec(ctx, `SELECT pg_advisory_lock($1)`, lock); err != nil {
			c.Release()
			return err
		}
		conn = c
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("packrat: waiting for the call with this idempotency key on another replica: %w", ctx.Err())
		}
		return nil, fmt.Errorf("packrat: locking idempotency key: %w", err)
	}
	return func() {
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, lock); err != nil {
			// The lock must not outlive the call: end the session.
			conn.Conn().Close(context.Background())
		}
		conn.Release()
	}, nil
}

var _ ledger.KeyLocker = (*store)(nil)

// keyLock is the advisory lock key of a call's idempotency key.
func keyLock(key string) int64 {
	sum := sha256.Sum256([]byte("switchboard packrat call\x00" + key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// checkIdle is the database/sql connections' reset: one the server ended
// while idle (a restart) is discarded before a statement is sent on it.
func checkIdle(_ context.Context, c *pgx.Conn) error {
	if pgdb.CheckIdle(c) != nil {
		return driver.ErrBadConn
	}
	return nil
}

package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-run/switchboard/internal/pgdb"
)

// The ledger on PostgreSQL is shared by every replica of one agent (its
// tables live in the agent's schema, pgdb.SchemaFor). What the single
// SQLite file gets from "one process owns it" is made explicit:
//
//   - A claim is INSERT … ON CONFLICT (key) DO NOTHING: of any number of
//     replicas claiming one key at once, exactly one inserts; the others
//     read its record.
//   - Each process has an owner id (its incarnation), and every connection
//     of its pool holds pg_advisory_lock_shared on a key derived from it,
//     taken as the connection opens (AfterConnect) and held for the
//     connection's life. A claim is inserted through one of those
//     connections, so its owner's lock is held when it is made; the lock is
//     free only once every connection of the owner is gone (the process
//     died, or lost the database).
//   - A running record of another owner is checked with
//     pg_try_advisory_xact_lock: taken, the owner is gone, and the record is
//     turned into interrupted in that same transaction (answered
//     interrupted, never run again, as SQLite treats a dead process's
//     records); not taken, the owner lives: still running.
//   - finish updates only a record still running under its owner, so a
//     process that lost the database and came back cannot overwrite an
//     interrupted verdict another replica made meanwhile.
//   - The eviction horizon lives in ledger_meta, one for all replicas;
//     every claim reads it in the same statement.
//   - While the database restarts, a statement that provably did not run
//     (pgdb.NotRun: no connection, nothing sent) is tried again for at
//     most pgdb.RestartWait; a read whatever broke it. A write whose
//     connection broke after it was sent is not: its error stands, and
//     the guard answers as for any failed ledger write.

// ledgerComponent names the ledger's migrations in schema_version.
const ledgerComponent = "idempotency_ledger"

// pgMigrations[i] moves the ledger's tables from version i to i+1.
// Append; never edit one that has shipped.
var pgMigrations = []pgdb.Migration{
	`CREATE TABLE calls (
		key         TEXT PRIMARY KEY,
		tool        TEXT NOT NULL,
		fingerprint TEXT NOT NULL,
		state       TEXT NOT NULL,
		result      BYTEA,
		incarnation TEXT NOT NULL,
		created_ms  BIGINT NOT NULL
	);
	CREATE INDEX calls_created ON calls (created_ms);
	CREATE INDEX calls_running ON calls (incarnation) WHERE state = 'running';
	CREATE TABLE ledger_meta (name TEXT PRIMARY KEY, value BIGINT NOT NULL);`,
}

// maxClaimAttempts bounds Begin's loop: a key whose record disappears
// between the claim and the read (abandoned by its owner, or evicted) is
// claimed again, at most this many times in all.
const maxClaimAttempts = 3

// evictLock serializes eviction between replicas (pg_advisory_xact_lock;
// "sbevict" in ASCII).
const evictLock int64 = 0x73_6265_7669_6374

// ErrKeyUnsettled: a key's record kept changing under Begin.
var ErrKeyUnsettled = errors.New("idempotency ledger: the key's record kept changing")

type pgStore struct {
	pool        *pgxpool.Pool
	incarnation string
}

// PostgresOptions configure OpenPostgres.
type PostgresOptions struct {
	Options
	// Schema the ledger's tables live in: pgdb.SchemaFor(the agent's name),
	// shared by its replicas. Required.
	Schema string
}

// OpenPostgres opens the ledger shared by every replica of an agent in the
// PostgreSQL database at url: it applies the ledger's migrations (once,
// whichever replica is first), opens a pool whose connections hold this
// process's owner lock, and marks interrupted the running calls of owners
// that are gone.
func OpenPostgres(ctx context.Context, url string, opts *PostgresOptions) (*Ledger, error) {
	var o PostgresOptions
	if opts != nil {
		o = *opts
	}
	inc := newIncarnation()
	lock := ownerLock(inc)
	pool, err := pgdb.Open(ctx, url, pgdb.Options{Schema: o.Schema, AfterConnect: func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SELECT pg_advisory_lock_shared($1)`, lock)
		return err
	}})
	if err != nil {
		return nil, fmt.Errorf("open idempotency ledger: %w", err)
	}
	if err := pgdb.Migrate(ctx, pool, ledgerComponent, pgMigrations); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open idempotency ledger: %w", err)
	}
	st := &pgStore{pool: pool, incarnation: inc}
	l := newLedger(st, &o.Options, inc)
	var h int64
	if err := pool.QueryRow(ctx, `SELECT COALESCE((SELECT value FROM ledger_meta WHERE name = 'horizon_ms'), 0)`).Scan(&h); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open idempotency ledger: read eviction horizon: %w", err)
	}
	l.horizon.Store(h)
	if err := l.evict(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open idempotency ledger: %w", err)
	}
	return l, nil
}

// ownerLock is the advisory lock key of the owner inc.
func ownerLock(inc string) int64 {
	sum := sha256.Sum256([]byte("switchboard idempotency owner\x00" + inc))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

const pgSelectRecord = `SELECT key, tool, fingerprint, state, result, incarnation, created_ms FROM calls WHERE key = $1`

func (s *pgStore) begin(ctx context.Context, r Record) (*Record, int64, error) {
	for range maxClaimAttempts {
		var (
			inserted bool
			horizon  int64
		)
		err := pgdb.Retry(ctx, nil, func(ctx context.Context) error {
			return s.pool.QueryRow(ctx, `WITH claim AS (
				INSERT INTO calls (key, tool, fingerprint, state, incarnation, created_ms) VALUES ($1, $2, $3, $4, $5, $6)
				ON CONFLICT (key) DO NOTHING RETURNING 1)
			SELECT EXISTS (SELECT 1 FROM claim), COALESCE((SELECT value FROM ledger_meta WHERE name = 'horizon_ms'), 0)`,
				r.Key, r.Tool, r.Fingerprint, string(StateRunning), r.Incarnation, r.Created.UnixMilli()).Scan(&inserted, &horizon)
		})
		if err != nil {
			return nil, 0, fmt.Errorf("idempotency ledger: record key: %w: %w", pgdb.ErrUnavailable, err)
		}
		if inserted {
			return nil, horizon, nil
		}
		rec, err := s.get(ctx, r.Key)
		if err != nil {
			return nil, 0, err
		}
		if rec == nil {
			continue // abandoned or evicted since: claim it again
		}
		if rec.State == StateRunning && rec.Incarnation != s.incarnation {
			if rec, err = s.settle(ctx, rec); err != nil {
				return nil, 0, err
			}
			if rec == nil {
				continue
			}
		}
		return rec, horizon, nil
	}
	return nil, 0, fmt.Errorf("%w: %q, after %d attempts", ErrKeyUnsettled, r.Key, maxClaimAttempts)
}

// settle decides a record running under another owner: interrupted if
// that owner's lock is free (marked so, durably, in the transaction that
// holds the lock), running if it is held. It returns the record as it then
// is, or nil if it is gone.
func (s *pgStore) settle(ctx context.Context, rec *Record) (*Record, error) {
	var gone bool
	err := pgdb.Retry(ctx, nil, func(ctx context.Context) error { return s.settleOnce(ctx, rec, &gone) })
	if err != nil {
		return nil, fmt.Errorf("idempotency ledger: checking the owner of a running call: %w: %w", pgdb.ErrUnavailable, err)
	}
	if !gone {
		return rec, nil
	}
	// Its owner may have finished it just before the lock was free.
	return s.get(ctx, rec.Key)
}

// settleOnce is settle's transaction; *gone says whether the owner was.
func (s *pgStore) settleOnce(ctx context.Context, rec *Record, gone *bool) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, ownerLock(rec.Incarnation)).Scan(gone); err != nil {
			return err
		}
		if !*gone {
			return nil
		}
		_, err := tx.Exec(ctx, `UPDATE calls SET state = $1 WHERE key = $2 AND incarnation = $3 AND state = $4`,
			string(StateInterrupted), rec.Key, rec.Incarnation, string(StateRunning))
		return err
	})
}

func (s *pgStore) finish(ctx context.Context, key, incarnation string, result []byte) error {
	err := pgdb.Retry(ctx, nil, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `UPDATE calls SET state = $1, result = $2 WHERE key = $3 AND incarnation = $4 AND state = $5`,
			string(StateDone), result, key, incarnation, string(StateRunning))
		return err
	})
	if err != nil {
		return fmt.Errorf("idempotency ledger: record the result: %w: %w", pgdb.ErrUnavailable, err)
	}
	return nil
}

func (s *pgStore) abandon(ctx context.Context, key, incarnation string) error {
	err := pgdb.Retry(ctx, nil, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `DELETE FROM calls WHERE key = $1 AND incarnation = $2 AND state = $3`, key, incarnation, string(StateRunning))
		return err
	})
	if err != nil {
		return fmt.Errorf("idempotency ledger: forget key: %w: %w", pgdb.ErrUnavailable, err)
	}
	return nil
}

// reclaim takes only a record begin already marked interrupted: a
// running record of another incarnation may be a live replica's.
func (s *pgStore) reclaim(ctx context.Context, key, incarnation string) (bool, error) {
	var tag pgconn.CommandTag
	err := pgdb.Retry(ctx, nil, func(ctx context.Context) error {
		var err error
		tag, err = s.pool.Exec(ctx, `UPDATE calls SET state = $1, incarnation = $2, result = NULL WHERE key = $3 AND state = $4`,
			string(StateRunning), incarnation, key, string(StateInterrupted))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("idempotency ledger: take over an interrupted call: %w: %w", pgdb.ErrUnavailable, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (s *pgStore) get(ctx context.Context, key string) (*Record, error) {
	var rec *Record
	// A read: run again, while the database restarts, whatever broke it.
	err := pgdb.Retry(ctx, pgdb.ReadRetryable, func(ctx context.Context) error {
		var err error
		rec, err = scanRecord(s.pool.QueryRow(ctx, pgSelectRecord, key))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency ledger: look up key: %w: %w", pgdb.ErrUnavailable, err)
	}
	return rec, nil
}

func (s *pgStore) count(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM calls`).Scan(&n)
	return n, err
}

// evict runs in one transaction under evictLock: first the running
// records of owners that are gone become interrupted (so that they age out
// like any other), then the SQLite ledger's two steps.
func (s *pgStore) evict(ctx context.Context, cutoff, maxRecords int64) (int64, error) {
	var horizon int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, evictLock); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT DISTINCT incarnation FROM calls WHERE state = 'running' AND incarnation <> $1`, s.incarnation)
		if err != nil {
			return err
		}
		owners, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, o := range owners {
			if _, err := tx.Exec(ctx, `UPDATE calls SET state = 'interrupted' WHERE incarnation = $1 AND state = 'running' AND pg_try_advisory_xact_lock($2)`,
				o, ownerLock(o)); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM calls WHERE created_ms < $1 AND state <> 'running'`, cutoff); err != nil {
			return err
		}
		var n int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM calls`).Scan(&n); err != nil {
			return err
		}
		if n > maxRecords {
			var newest int64
			if err := tx.QueryRow(ctx, `SELECT max(created_ms) FROM (SELECT created_ms FROM calls ORDER BY created_ms LIMIT $1) t`, n-maxRecords).Scan(&newest); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM calls WHERE created_ms <= $1 AND state <> 'running'`, newest); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO ledger_meta (name, value) VALUES ('horizon_ms', $1)
				ON CONFLICT (name) DO UPDATE SET value = GREATEST(ledger_meta.value, excluded.value)`, newest); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, `SELECT COALESCE((SELECT value FROM ledger_meta WHERE name = 'horizon_ms'), 0)`).Scan(&horizon)
	})
	if err != nil {
		return 0, fmt.Errorf("idempotency ledger: evict: %w", err)
	}
	return horizon, nil
}

func (s *pgStore) close() error {
	s.pool.Close()
	return nil
}

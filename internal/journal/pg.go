package journal

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-run/switchboard/internal/pgdb"
)

// The journal on PostgreSQL is shared by every replica of one agent (its
// tables live in the agent's schema, pgdb.SchemaFor, beside the
// idempotency ledger's). What the SQLite file gets from "one process owns
// it" is made explicit, as the ledger does (ledger/postgres.go):
//
//   - Each process has an owner id, and every connection of its pool holds
//     pg_advisory_lock_shared on a key derived from it (owner_lock), taken
//     as the connection opens and held for its life. A run's row names its
//     owner; the lock is free only once every connection of the owner is
//     gone (the process died, or lost the database).
//   - A run running under another owner is interrupted only when
//     pg_try_advisory_xact_lock on its owner_lock is taken: the owner is
//     gone. Its state is set in that same statement. A live owner's run is
//     running, for every replica: not resumed, not evicted.
//   - A resume claims the row in one UPDATE (interrupted, failed, or
//     running under a gone owner), so of two replicas resuming one run at
//     once exactly one gets it; the other gets ErrRunning.
//   - Every write of a run checks that it is still this process's (owner):
//     a process that lost the database, was taken for gone and came back
//     cannot add entries to a run another replica resumed meanwhile.
//   - Run ids are random 63-bit numbers (no round trip to number them).

// journalComponent names the journal's migrations in schema_version.
const journalComponent = "run_journal"

// pgMigrations[i] moves the journal's tables from version i to i+1.
// Append; never edit one that has shipped.
var pgMigrations = []pgdb.Migration{
	`CREATE TABLE journal_runs (
		id         BIGINT PRIMARY KEY,
		run_id     TEXT NOT NULL,
		idem_key   TEXT UNIQUE,
		parent_key TEXT NOT NULL,
		credential TEXT NOT NULL,
		task       TEXT NOT NULL,
		settings   BYTEA NOT NULL,
		sum        TEXT NOT NULL,
		state      TEXT NOT NULL,
		owner      TEXT NOT NULL,
		owner_lock BIGINT NOT NULL,
		attempts   INTEGER NOT NULL,
		result     BYTEA,
		error      TEXT NOT NULL DEFAULT '',
		bytes      BIGINT NOT NULL,
		created_ms BIGINT NOT NULL,
		updated_ms BIGINT NOT NULL
	);
	CREATE INDEX journal_runs_run_id ON journal_runs (run_id);
	CREATE INDEX journal_runs_running ON journal_runs (owner) WHERE state = 'running';
	CREATE TABLE journal_entries (
		run         BIGINT NOT NULL,
		seq         INTEGER NOT NULL,
		kind        TEXT NOT NULL,
		step        INTEGER NOT NULL,
		call_id     TEXT NOT NULL,
		key         TEXT NOT NULL,
		fingerprint TEXT NOT NULL,
		payload     BYTEA NOT NULL,
		sum         TEXT NOT NULL,
		PRIMARY KEY (run, seq)
	);
	CREATE TABLE journal_meta (name TEXT PRIMARY KEY, value BIGINT NOT NULL);`,
}

// pgEvictLock serializes eviction for space between replicas
// (pg_advisory_xact_lock; "sbjevict" in ASCII).
const pgEvictLock int64 = 0x7362_6a65_7669_6374

// PostgresOptions configure OpenPostgres.
type PostgresOptions struct {
	Options
	// Schema the journal's tables live in: pgdb.SchemaFor(the agent's
	// name), shared by its replicas. Required.
	Schema string
}

type pgStore struct {
	pool      *pgxpool.Pool
	desc      string
	owner     string
	ownerLock int64
}

// OpenPostgres opens the journal shared by every replica of an agent in
// the PostgreSQL database at url: it applies the journal's migrations
// (once, whichever replica is first, under pgdb's migration lock), opens a
// pool whose connections hold this process's owner lock, and marks
// interrupted the running runs of owners that are gone.
func OpenPostgres(ctx context.Context, url string, opts *PostgresOptions) (*Journal, error) {
	var po PostgresOptions
	if opts != nil {
		po = *opts
	}
	o := po.Options.defaults()
	if po.Schema == "" {
		return nil, errors.New("open run journal: PostgresOptions.Schema is required (pgdb.SchemaFor the agent)")
	}
	owner := rand63()
	st := &pgStore{owner: owner, ownerLock: ownerLockOf(owner)}
	pool, err := pgdb.Open(ctx, url, pgdb.Options{Schema: po.Schema, AfterConnect: func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SELECT pg_advisory_lock_shared($1)`, st.ownerLock)
		return err
	}})
	if err != nil {
		return nil, fmt.Errorf("open run journal: %w", err)
	}
	st.pool = pool
	st.desc = pgdb.Describe(pool.Config().ConnConfig) + " schema " + po.Schema
	if err := pgdb.Migrate(ctx, pool, journalComponent, pgMigrations); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open run journal %s: %w", st.desc, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO journal_meta (name, value) VALUES ('created_ms', $1) ON CONFLICT (name) DO NOTHING`, o.Now().UnixMilli()); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open run journal %s: %w: %w", st.desc, pgdb.ErrUnavailable, err)
	}
	if err := st.settleAll(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open run journal %s: marking the runs of gone owners interrupted: %w", st.desc, err)
	}
	j, err := newJournal(st, o, true)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return j, nil
}

func rand63() string {
	n, err := randomID()
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return fmt.Sprintf("%016x", n)
}

// ownerLockOf is the advisory lock key of owner.
func ownerLockOf(owner string) int64 {
	sum := sha256.Sum256([]byte("switchboard run journal owner\x00" + owner))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// settleAll marks interrupted every run running under an owner that is
// gone.
func (s *pgStore) settleAll(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `UPDATE journal_runs SET state = 'interrupted'
		WHERE state = 'running' AND owner <> $1 AND pg_try_advisory_xact_lock(owner_lock)`, s.owner)
	return err
}

func (s *pgStore) where() string { return s.desc }

func (s *pgStore) newID() (int64, error) { return randomID() }

func (s *pgStore) created(ctx context.Context) (time.Time, error) {
	var ms int64
	err := s.pool.QueryRow(ctx, `SELECT value FROM journal_meta WHERE name = 'created_ms'`).Scan(&ms)
	return time.UnixMilli(ms), err
}

func (s *pgStore) commit(ctx context.Context, ops []op) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		var ids []int64 // the run each queued statement is for
		if err := applyOps(ops, func(o op, d runDelta) error {
			st := o.start
			var key any
			if st.Key != "" {
				key = st.Key
			}
			state, errMsg := any(string(StateRunning)), any("")
			if d.state != nil {
				state, errMsg = d.state, d.errMsg
			}
			b.Queue(`INSERT INTO journal_runs (id, run_id, idem_key, parent_key, credential, task, settings, sum, state, owner, owner_lock, attempts, result, error, bytes, created_ms, updated_ms)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1, $12, $13, $14, $15, $16)`,
				o.id, st.RunID, key, st.ParentKey, st.Credential, st.Task, []byte(st.Settings), o.sum, state, s.owner, s.ownerLock, d.result, errMsg, d.bytes, o.now, d.now)
			ids = append(ids, o.id)
			return nil
		}, func(o op) error {
			e := o.e
			b.Queue(`INSERT INTO journal_entries (run, seq, kind, step, call_id, key, fingerprint, payload, sum)
				SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 WHERE EXISTS (SELECT 1 FROM journal_runs WHERE id = $1 AND owner = $10)`,
				o.id, e.seq, e.kind, e.step, e.callID, e.key, e.fingerprint, e.payload, e.sum, s.owner)
			ids = append(ids, o.id)
			return nil
		}, func(d runDelta) error {
			b.Queue(`UPDATE journal_runs SET bytes = bytes + $1, updated_ms = $2,
				state = coalesce($3, state), result = coalesce($4, result), error = coalesce($5, error) WHERE id = $6 AND owner = $7`,
				d.bytes, d.now, d.state, d.result, d.errMsg, d.id, s.owner)
			ids = append(ids, d.id)
			return nil
		}); err != nil {
			return err
		}
		br := tx.SendBatch(ctx, b)
		for _, id := range ids {
			tag, err := br.Exec()
			if err != nil {
				br.Close()
				return err
			}
			if tag.RowsAffected() != 1 {
				br.Close()
				return &lostRunError{id: id}
			}
		}
		return br.Close()
	})
}

const pgSelectRun = `SELECT id, run_id, idem_key, parent_key, credential, task, settings, sum, state, attempts, result, error, bytes, created_ms, updated_ms, owner FROM journal_runs `

func (s *pgStore) get(ctx context.Context, q query) (storedInfo, error) {
	var row pgx.Row
	switch {
	case q.key != "":
		row = s.pool.QueryRow(ctx, pgSelectRun+`WHERE idem_key = $1`, q.key)
	case q.runID != "":
		row = s.pool.QueryRow(ctx, pgSelectRun+`WHERE run_id = $1 ORDER BY created_ms DESC, id DESC LIMIT 1`, q.runID)
	default:
		row = s.pool.QueryRow(ctx, pgSelectRun+`WHERE id = $1`, q.id)
	}
	si, err := scanPGInfo(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return si, fmt.Errorf("run journal %s: %v: %w", s.desc, q, ErrNotFound)
	}
	if err != nil {
		return si, fmt.Errorf("run journal %s: looking up %v: %w: %w", s.desc, q, pgdb.ErrUnavailable, err)
	}
	return si, nil
}

func scanPGInfo(row pgx.Row) (storedInfo, error) {
	var (
		si               storedInfo
		key              *string
		state            string
		result, settings []byte
		created, updated int64
	)
	err := row.Scan(&si.ID, &si.RunID, &key, &si.ParentKey, &si.Credential, &si.Task, &settings, &si.sum, &state, &si.Attempts, &result, &si.Error, &si.Bytes, &created, &updated, &si.owner)
	if key != nil {
		si.Key = *key
	}
	if len(result) == 0 {
		result = nil
	}
	si.Settings, si.State, si.Result = settings, State(state), result
	si.Created, si.Updated = time.UnixMilli(created), time.UnixMilli(updated)
	return si, err
}

func (s *pgStore) entries(ctx context.Context, id int64) ([]entryRow, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, kind, step, call_id, key, fingerprint, payload, sum FROM journal_entries WHERE run = $1 ORDER BY seq`, id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (entryRow, error) {
		var e entryRow
		err := r.Scan(&e.seq, &e.kind, &e.step, &e.callID, &e.key, &e.fingerprint, &e.payload, &e.sum)
		return e, err
	})
}

func (s *pgStore) claim(ctx context.Context, id int64, nowMs int64) (bool, error) {
	// Running under this owner: a run this process released without its
	// end (the Journal has checked that it is not claimed here).
	tag, err := s.pool.Exec(ctx, `UPDATE journal_runs SET state = 'running', owner = $2, owner_lock = $3, attempts = attempts + 1, updated_ms = $4
		WHERE id = $1 AND (state IN ('interrupted', 'failed') OR state = 'running' AND (owner = $2 OR pg_try_advisory_xact_lock(owner_lock)))`,
		id, s.owner, s.ownerLock, nowMs)
	if err != nil {
		return false, fmt.Errorf("%w: %w", pgdb.ErrUnavailable, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (s *pgStore) live(ctx context.Context, info storedInfo) (bool, error) {
	if info.State != StateRunning || info.owner == s.owner {
		return false, nil
	}
	tag, err := s.pool.Exec(ctx, `UPDATE journal_runs SET state = 'interrupted'
		WHERE id = $1 AND state = 'running' AND owner = $2 AND pg_try_advisory_xact_lock(owner_lock)`, info.ID, info.owner)
	if err != nil {
		return false, fmt.Errorf("run journal %s: checking the owner of run %s: %w: %w", s.desc, info.RunID, pgdb.ErrUnavailable, err)
	}
	if tag.RowsAffected() == 1 {
		return false, nil
	}
	// Not taken: its owner holds the lock, or the run ended (or was
	// claimed) meanwhile; read it again.
	now, err := s.get(ctx, query{id: info.ID})
	if err != nil {
		return false, err
	}
	return now.State == StateRunning && now.owner != s.owner, nil
}

func (s *pgStore) markBroken(ctx context.Context, id int64, why string, nowMs int64) error {
	_, err := s.pool.Exec(ctx, `UPDATE journal_runs SET state = 'broken', error = $2, updated_ms = $3 WHERE id = $1`, id, why, nowMs)
	return err
}

func (s *pgStore) totals(ctx context.Context) (int64, int64, error) {
	var runs, bytes int64
	err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(bytes), 0)::BIGINT FROM journal_runs`).Scan(&runs, &bytes)
	return runs, bytes, err
}

func (s *pgStore) evictOld(ctx context.Context, cutoffMs int64) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM journal_entries WHERE run IN (SELECT id FROM journal_runs WHERE updated_ms < $1 AND state <> 'running')`, cutoffMs); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM journal_runs WHERE updated_ms < $1 AND state <> 'running'`, cutoffMs)
		return err
	})
}

func (s *pgStore) evictEnded(ctx context.Context, maxRuns, maxBytes int64) (int64, int64, error) {
	var runs, bytes int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, pgEvictLock); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(bytes), 0)::BIGINT FROM journal_runs`).Scan(&runs, &bytes); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id, bytes FROM journal_runs WHERE state IN ('done', 'broken') ORDER BY updated_ms, id`)
		if err != nil {
			return err
		}
		var evict []int64
		for rows.Next() && (runs >= maxRuns || bytes >= maxBytes) {
			var id, b int64
			if err := rows.Scan(&id, &b); err != nil {
				rows.Close()
				return err
			}
			evict = append(evict, id)
			runs, bytes = runs-1, bytes-b
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(evict) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `DELETE FROM journal_entries WHERE run = ANY($1)`, evict); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM journal_runs WHERE id = ANY($1)`, evict)
		return err
	})
	return runs, bytes, err
}

func (s *pgStore) list(ctx context.Context, limit int) ([]storedInfo, error) {
	rows, err := s.pool.Query(ctx, pgSelectRun+`ORDER BY created_ms DESC, id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (storedInfo, error) { return scanPGInfo(r) })
}

func (s *pgStore) close() error {
	s.pool.Close()
	return nil
}

package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// sqliteStore is the journal of one agent process: one SQLite file in its
// data directory. The writer has a connection of its own (w, one
// connection, its statements prepared once); reads go through r, a pool,
// which WAL lets read while the writer writes.
type sqliteStore struct {
	path string
	w, r *sql.DB
	// appendLog and power are Options.AppendLog and PowerLossDurable.
	appendLog, power bool
	// lastID numbers the runs: one process owns the file, and ids in
	// order keep a batch's rows in the tables' last pages (a random id
	// would dirty a page of its own per run).
	lastID atomic.Int64

	insRun, insEntry, updRun *sql.Stmt // on w

	// segMu guards seg, the append-only log (segment.go); nil without
	// Options.AppendLog. Held across a fold, which readers that need it
	// wait for anyway; reads that need none only look at its maps.
	segMu sync.Mutex
	seg   *segment
	// dieForTest: close leaves the segment unfolded, as the death of the
	// process would.
	dieForTest bool
}

const sqliteSchema = `
CREATE TABLE IF NOT EXISTS runs (
	id         INTEGER PRIMARY KEY,
	run_id     TEXT NOT NULL,
	idem_key   TEXT UNIQUE,
	parent_key TEXT NOT NULL,
	credential TEXT NOT NULL,
	task       TEXT NOT NULL,
	settings   BLOB NOT NULL,
	sum        TEXT NOT NULL,
	state      TEXT NOT NULL,
	attempts   INTEGER NOT NULL,
	result     BLOB,
	error      TEXT NOT NULL DEFAULT '',
	bytes      INTEGER NOT NULL,
	created_ms INTEGER NOT NULL,
	updated_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_run_id ON runs(run_id);
DROP INDEX IF EXISTS runs_updated;
CREATE TABLE IF NOT EXISTS entries (
	run         INTEGER NOT NULL,
	seq         INTEGER NOT NULL,
	kind        TEXT NOT NULL,
	step        INTEGER NOT NULL,
	call_id     TEXT NOT NULL,
	key         TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	payload     BLOB NOT NULL,
	sum         TEXT NOT NULL,
	PRIMARY KEY (run, seq)
);
CREATE TABLE IF NOT EXISTS journal_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
`

// Open opens (creating if needed) the journal at path. Runs a previous
// process left running are marked interrupted. The file and its sidecars
// are 0600: a journal holds tasks, answers and what tools returned.
func Open(path string, opts *Options) (*Journal, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open run journal: path %q must not contain '?' or '#'", path)
	}
	o := opts.defaults()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open run journal %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		err = errors.Join(f.Chmod(0o600), f.Close())
	}
	if err != nil {
		return nil, fmt.Errorf("open run journal %s: %w", path, err)
	}
	// synchronous=NORMAL in WAL mode: a commit has written the WAL before
	// it returns, so it survives the process's death; FULL also fsyncs it.
	sync := "NORMAL"
	if o.PowerLossDurable {
		sync = "FULL"
	}
	dsn := path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync + ")&_txlock=immediate"
	st := &sqliteStore{path: path, appendLog: o.AppendLog, power: o.PowerLossDurable}
	if st.w, err = sql.Open("sqlite", dsn); err != nil {
		return nil, fmt.Errorf("open run journal %s: %w", path, err)
	}
	st.w.SetMaxOpenConns(1)
	st.w.SetConnMaxIdleTime(0)
	if st.r, err = sql.Open("sqlite", dsn); err != nil {
		st.w.Close()
		return nil, fmt.Errorf("open run journal %s: %w", path, err)
	}
	if err := st.init(o.Now().UnixMilli()); err != nil {
		st.close()
		return nil, fmt.Errorf("open run journal %s: %w", path, err)
	}
	for _, s := range []string{"-wal", "-shm"} {
		if err := os.Chmod(path+s, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			st.close()
			return nil, fmt.Errorf("open run journal %s: %w", path, err)
		}
	}
	j, err := newJournal(st, o, false)
	if err != nil {
		st.close()
		return nil, err
	}
	return j, nil
}

func (s *sqliteStore) init(nowMs int64) error {
	ctx := context.Background()
	if _, err := s.w.ExecContext(ctx, sqliteSchema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO journal_meta (name, value) VALUES ('created_ms', ?) ON CONFLICT (name) DO NOTHING`, nowMs); err != nil {
		return err
	}
	var err error
	if s.insRun, err = s.w.PrepareContext(ctx, `INSERT INTO runs (id, run_id, idem_key, parent_key, credential, task, settings, sum, state, result, error, attempts, bytes, created_ms, updated_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)`); err != nil {
		return err
	}
	if s.insEntry, err = s.w.PrepareContext(ctx, `INSERT INTO entries (run, seq, kind, step, call_id, key, fingerprint, payload, sum) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`); err != nil {
		return err
	}
	if s.updRun, err = s.w.PrepareContext(ctx, `UPDATE runs SET bytes = bytes + ?, updated_ms = ?,
		state = coalesce(?, state), result = coalesce(?, result), error = coalesce(?, error) WHERE id = ?`); err != nil {
		return err
	}
	// What a dead process appended and did not fold is in the tables
	// before anything is read from them (or marked interrupted).
	if err := s.recoverSegment(ctx); err != nil {
		return err
	}
	// One process owns the file: whatever is running is a dead process's.
	if _, err := s.w.ExecContext(ctx, `UPDATE runs SET state = ? WHERE state = ?`, StateInterrupted, StateRunning); err != nil {
		return fmt.Errorf("mark the previous process's runs interrupted: %w", err)
	}
	var last int64
	if err := s.w.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM runs`).Scan(&last); err != nil {
		return err
	}
	s.lastID.Store(last)
	return nil
}

// recoverSegment folds what the segment holds that no fold committed, and
// opens it for appending (Options.AppendLog), or removes it (a journal
// opened without AppendLog after one with: its records are folded all the
// same).
func (s *sqliteStore) recoverSegment(ctx context.Context) error {
	path := s.path + SegmentSuffix
	if !s.appendLog {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	seg, sc, err := openSegment(path, s.power)
	if err != nil {
		return err
	}
	var folded int64
	if err := s.w.QueryRowContext(ctx, `SELECT coalesce((SELECT value FROM journal_meta WHERE name = 'seg_folded'), 0)`).Scan(&folded); err != nil {
		seg.f.Close()
		return err
	}
	if sc.gen != 0 && sc.gen != uint64(folded) && (len(sc.ops) > 0 || len(sc.broken) > 0) {
		if err := s.commitTx(ctx, sc.ops, sc.gen, sc.broken); err != nil {
			seg.f.Close()
			return fmt.Errorf("folding the segment %s: %w", path, err)
		}
	}
	if !s.appendLog {
		return errors.Join(seg.f.Close(), os.Remove(path))
	}
	if err := seg.reset(max(sc.gen, uint64(folded)) + 1); err != nil {
		seg.f.Close()
		return err
	}
	s.seg = seg
	return nil
}

func (s *sqliteStore) where() string { return s.path }

func (s *sqliteStore) newID() (int64, error) { return s.lastID.Add(1), nil }

func (s *sqliteStore) created(ctx context.Context) (time.Time, error) {
	var ms int64
	err := s.r.QueryRowContext(ctx, `SELECT value FROM journal_meta WHERE name = 'created_ms'`).Scan(&ms)
	return time.UnixMilli(ms), err
}

func (s *sqliteStore) commit(ctx context.Context, ops []op) error {
	if s.seg == nil {
		return s.commitTx(ctx, ops, 0, nil)
	}
	s.segMu.Lock()
	defer s.segMu.Unlock()
	// A second run with a key already journaled is refused, as the
	// tables' UNIQUE index refuses it without the segment: found only at
	// the fold, it would fail every fold after.
	for _, o := range ops {
		if o.kind != opStart || o.start.Key == "" {
			continue
		}
		dup := s.seg.keys[o.start.Key]
		if !dup {
			var n int
			if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE idem_key = ?`, o.start.Key).Scan(&n); err != nil {
				return err
			}
			dup = n > 0
		}
		if dup {
			return fmt.Errorf("run #%d: a run with idempotency key %q is already journaled", o.id, o.start.Key)
		}
	}
	if err := s.seg.append(ops); err != nil {
		return err
	}
	if s.seg.due() {
		// The batch is durable in the segment: a failed fold is not its
		// failure. The ops stay pending, and the next read that needs
		// them reports it.
		_ = s.foldLocked(ctx)
	}
	return nil
}

// foldLocked writes the pending ops into the tables in one transaction and
// starts the segment's next generation. s.segMu is held.
func (s *sqliteStore) foldLocked(ctx context.Context) error {
	// Pending ops are folded even after an append failed (sg.err): they
	// were appended whole before it.
	sg := s.seg
	if len(sg.pending) == 0 {
		return nil
	}
	if err := s.commitTx(ctx, sg.pending, sg.gen, nil); err != nil {
		return fmt.Errorf("folding the segment %s: %w", sg.path, err)
	}
	gen := sg.gen
	if err := sg.reset(gen + 1); err != nil {
		// Folded, but still in a segment of a folded generation: what
		// was appended after would be skipped by the next Open as folded.
		// Nothing more is appended.
		sg.pending, sg.pendingBytes = nil, 0
		sg.runs, sg.keys, sg.runIDs = map[int64]bool{}, map[string]bool{}, map[string]bool{}
		sg.err = fmt.Errorf("run journal segment %s: folded, but it could not be emptied: %w", sg.path, err)
		return sg.err
	}
	return nil
}

// settle folds the pending ops before a read, when need says the read
// could see them (nil: always).
func (s *sqliteStore) settle(ctx context.Context, need func(*segment) bool) error {
	if s.seg == nil {
		return nil
	}
	s.segMu.Lock()
	defer s.segMu.Unlock()
	if len(s.seg.pending) == 0 || need != nil && !need(s.seg) {
		return nil
	}
	return s.foldLocked(ctx)
}

// commitTx writes ops in one transaction; with gen, it records that
// generation of the segment folded, and marks the runs broken broken.
func (s *sqliteStore) commitTx(ctx context.Context, ops []op, gen uint64, broken []int64) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	insRun, insEntry, updRun := tx.StmtContext(ctx, s.insRun), tx.StmtContext(ctx, s.insEntry), tx.StmtContext(ctx, s.updRun)
	if err := applyOps(ops, func(o op, d runDelta) error {
		var key any
		if o.start.Key != "" {
			key = o.start.Key
		}
		st := o.start
		state, errMsg := any(string(StateRunning)), any("")
		if d.state != nil {
			state, errMsg = d.state, d.errMsg
		}
		_, err := insRun.ExecContext(ctx, o.id, st.RunID, key, st.ParentKey, st.Credential, st.Task, []byte(st.Settings), o.sum, state, d.result, errMsg, d.bytes, o.now, d.now)
		return err
	}, func(o op) error {
		e := o.e
		_, err := insEntry.ExecContext(ctx, o.id, e.seq, e.kind, e.step, e.callID, e.key, e.fingerprint, e.payload, e.sum)
		return err
	}, func(d runDelta) error {
		_, err := updRun.ExecContext(ctx, d.bytes, d.now, d.state, d.result, d.errMsg, d.id)
		return err
	}); err != nil {
		return err
	}
	for _, id := range broken {
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET state = ?, error = ? WHERE id = ?`, StateBroken,
			"an entry of it in the journal's segment does not match its CRC (altered or damaged on disk)", id); err != nil {
			return err
		}
	}
	if gen != 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO journal_meta (name, value) VALUES ('seg_folded', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value`, int64(gen)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// A runDelta is what one batch changes of one run's row.
type runDelta struct {
	id, bytes, now int64
	state, errMsg  any // nil: unchanged
	result         any
	started        bool // the batch inserts the row: the delta goes in the insert
}

// applyOps writes ops through insRun and insEntry, in order, and then each
// run's row once through upd (its size, its time, its end if the batch
// holds one), except a row the batch inserts: insRun writes its delta with
// it. So a run of one step, whose start, step and end the writer commits
// together, is two inserts.
func applyOps(ops []op, insRun func(op, runDelta) error, insEntry func(op) error, upd func(runDelta) error) error {
	var order []int64
	deltas := map[int64]*runDelta{}
	for _, o := range ops {
		d := deltas[o.id]
		if d == nil {
			d = &runDelta{id: o.id}
			deltas[o.id] = d
			order = append(order, o.id)
		}
		d.bytes += o.bytes
		d.now = max(d.now, o.now)
		switch o.kind {
		case opStart:
			d.started = true
		case opEnd:
			d.state, d.errMsg = string(o.state), o.errMsg
			d.result = o.result
			if o.result == nil {
				d.result = []byte{}
			}
		}
	}
	for _, o := range ops {
		var err error
		switch o.kind {
		case opStart:
			err = insRun(o, *deltas[o.id])
		case opEntry:
			err = insEntry(o)
		}
		if err != nil {
			return err
		}
	}
	for _, id := range order {
		if d := deltas[id]; !d.started {
			if err := upd(*d); err != nil {
				return err
			}
		}
	}
	return nil
}

const sqliteSelectRun = `SELECT id, run_id, idem_key, parent_key, credential, task, settings, sum, state, attempts, result, error, bytes, created_ms, updated_ms FROM runs `

func (s *sqliteStore) get(ctx context.Context, q query) (storedInfo, error) {
	// A read sees the segment's pending ops of the run it names: folded
	// first, when the run has some.
	need := func(sg *segment) bool {
		switch {
		case q.key != "":
			return sg.keys[q.key]
		case q.runID != "":
			return sg.runIDs[q.runID]
		}
		return sg.runs[q.id]
	}
	if err := s.settle(ctx, need); err != nil {
		return storedInfo{}, fmt.Errorf("run journal %s: looking up %v: %w", s.path, q, err)
	}
	si, err := s.getTable(ctx, q)
	if err != nil || s.seg == nil {
		return si, err
	}
	// Found in the tables, with ops still pending (a run found by its key
	// or run id whose start was folded): read again once they are folded.
	s.segMu.Lock()
	pending := s.seg.runs[si.ID]
	s.segMu.Unlock()
	if !pending {
		return si, nil
	}
	if err := s.settle(ctx, nil); err != nil {
		return storedInfo{}, fmt.Errorf("run journal %s: looking up %v: %w", s.path, q, err)
	}
	return s.getTable(ctx, q)
}

func (s *sqliteStore) getTable(ctx context.Context, q query) (storedInfo, error) {
	var row *sql.Row
	switch {
	case q.key != "":
		row = s.r.QueryRowContext(ctx, sqliteSelectRun+`WHERE idem_key = ?`, q.key)
	case q.runID != "":
		row = s.r.QueryRowContext(ctx, sqliteSelectRun+`WHERE run_id = ? ORDER BY created_ms DESC, id DESC LIMIT 1`, q.runID)
	default:
		row = s.r.QueryRowContext(ctx, sqliteSelectRun+`WHERE id = ?`, q.id)
	}
	si, err := scanInfo(row)
	if errors.Is(err, sql.ErrNoRows) {
		return si, fmt.Errorf("run journal %s: %v: %w", s.path, q, ErrNotFound)
	}
	if err != nil {
		return si, fmt.Errorf("run journal %s: looking up %v: %w", s.path, q, err)
	}
	return si, nil
}

func scanInfo(row interface{ Scan(...any) error }) (storedInfo, error) {
	var (
		si               storedInfo
		key              sql.NullString
		state            string
		result           []byte
		created, updated int64
	)
	err := row.Scan(&si.ID, &si.RunID, &key, &si.ParentKey, &si.Credential, &si.Task, &si.Settings, &si.sum, &state, &si.Attempts, &result, &si.Error, &si.Bytes, &created, &updated)
	if len(result) == 0 {
		result = nil
	}
	si.Key, si.State, si.Result = key.String, State(state), result
	si.Created, si.Updated = time.UnixMilli(created), time.UnixMilli(updated)
	return si, err
}

func (s *sqliteStore) entries(ctx context.Context, id int64) ([]entryRow, error) {
	if err := s.settle(ctx, func(sg *segment) bool { return sg.runs[id] }); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT seq, kind, step, call_id, key, fingerprint, payload, sum FROM entries WHERE run = ? ORDER BY seq`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []entryRow
	for rows.Next() {
		var e entryRow
		if err := rows.Scan(&e.seq, &e.kind, &e.step, &e.callID, &e.key, &e.fingerprint, &e.payload, &e.sum); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (s *sqliteStore) claim(ctx context.Context, id int64, nowMs int64) (bool, error) {
	if err := s.settle(ctx, nil); err != nil {
		return false, err
	}
	// Running, too: a run this process released without its end (the
	// Journal has checked it is not claimed here).
	res, err := s.w.ExecContext(ctx, `UPDATE runs SET state = ?, attempts = attempts + 1, updated_ms = ? WHERE id = ? AND state IN (?, ?, ?)`,
		StateRunning, nowMs, id, StateInterrupted, StateFailed, StateRunning)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// live: one process owns a SQLite journal; a run it does not hold is
// nobody's.
func (s *sqliteStore) live(context.Context, storedInfo) (bool, error) { return false, nil }

func (s *sqliteStore) markBroken(ctx context.Context, id int64, why string, nowMs int64) error {
	if err := s.settle(ctx, nil); err != nil {
		return err
	}
	_, err := s.w.ExecContext(ctx, `UPDATE runs SET state = ?, error = ?, updated_ms = ? WHERE id = ?`, StateBroken, why, nowMs, id)
	return err
}

func (s *sqliteStore) totals(ctx context.Context) (int64, int64, error) {
	if err := s.settle(ctx, nil); err != nil {
		return 0, 0, err
	}
	var runs, bytes int64
	err := s.r.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(bytes), 0) FROM runs`).Scan(&runs, &bytes)
	return runs, bytes, err
}

func (s *sqliteStore) evictOld(ctx context.Context, cutoffMs int64) error {
	if err := s.settle(ctx, nil); err != nil {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM entries WHERE run IN (SELECT id FROM runs WHERE updated_ms < ? AND state != ?)`, cutoffMs, StateRunning); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE updated_ms < ? AND state != ?`, cutoffMs, StateRunning); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *sqliteStore) evictEnded(ctx context.Context, maxRuns, maxBytes int64) (int64, int64, error) {
	if err := s.settle(ctx, nil); err != nil {
		return 0, 0, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, err
	}
	defer tx.Rollback()
	var runs, bytes int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(bytes), 0) FROM runs`).Scan(&runs, &bytes); err != nil {
		return 0, 0, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, bytes FROM runs WHERE state IN (?, ?) ORDER BY updated_ms, id`, StateDone, StateBroken)
	if err != nil {
		return 0, 0, err
	}
	var evict []int64
	for rows.Next() && (runs >= maxRuns || bytes >= maxBytes) {
		var id, b int64
		if err := rows.Scan(&id, &b); err != nil {
			rows.Close()
			return 0, 0, err
		}
		evict = append(evict, id)
		runs, bytes = runs-1, bytes-b
	}
	rows.Close()
	for _, id := range evict {
		if _, err := tx.ExecContext(ctx, `DELETE FROM entries WHERE run = ?`, id); err != nil {
			return 0, 0, err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE id = ?`, id); err != nil {
			return 0, 0, err
		}
	}
	return runs, bytes, tx.Commit()
}

func (s *sqliteStore) list(ctx context.Context, limit int) ([]storedInfo, error) {
	if err := s.settle(ctx, nil); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, sqliteSelectRun+`ORDER BY created_ms DESC, id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storedInfo
	for rows.Next() {
		si, err := scanInfo(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, si)
	}
	return out, rows.Err()
}

func (s *sqliteStore) close() error {
	var errs []error
	if s.seg != nil {
		// What is pending goes into the tables: the next Open, and
		// another reader of the file, find it there.
		s.segMu.Lock()
		if !s.dieForTest {
			errs = append(errs, s.foldLocked(context.Background()))
		}
		errs = append(errs, s.seg.f.Close())
		s.segMu.Unlock()
	}
	for _, st := range []*sql.Stmt{s.insRun, s.insEntry, s.updRun} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, s.w.Close(), s.r.Close())
	return errors.Join(errs...)
}

package journal

import (
	"context"
	"strconv"
	"time"
)

// A store is where a Journal keeps its runs: one SQLite file in the agent's
// data directory (sqliteStore), or tables in the agent's schema of a
// PostgreSQL database shared by its replicas (pgStore). The Journal around
// it holds what is the same for both: the bounds, the claims of this
// process, the writer that batches entries into commits, the checks of
// what is read back.
type store interface {
	// where names the store in errors: a path, or user@host:port/db.
	where() string
	// newID numbers a new run.
	newID() (int64, error)
	// created is when the journal was first created (its meta row): a run
	// it holds no trace of, for a key made after this, was never journaled.
	created(ctx context.Context) (time.Time, error)
	// commit writes ops, in order, in one transaction. A run no longer
	// this process's (taken over by a replica that found its owner gone)
	// fails the commit with a *lostRunError naming it.
	commit(ctx context.Context, ops []op) error
	// get returns the run q names, or ErrNotFound.
	get(ctx context.Context, q query) (storedInfo, error)
	// entries returns the run's entries ordered by seq.
	entries(ctx context.Context, id int64) ([]entryRow, error)
	// claim takes run id for an attempt of this process: running again,
	// one more attempt, if it is interrupted or failed (or, shared, running
	// under an owner that is gone). It reports whether it did.
	claim(ctx context.Context, id int64, nowMs int64) (bool, error)
	// live reports whether run id, recorded running by another owner, has
	// an owner that is alive; one that is gone is marked interrupted.
	live(ctx context.Context, info storedInfo) (bool, error)
	markBroken(ctx context.Context, id int64, why string, nowMs int64) error
	// totals counts the runs and their bytes.
	totals(ctx context.Context) (runs, bytes int64, err error)
	// evictOld deletes the runs not running last touched before cutoff.
	evictOld(ctx context.Context, cutoffMs int64) error
	// evictEnded deletes ended runs (done, broken), oldest first, until
	// the totals are under both caps or none is left; it returns the
	// totals after.
	evictEnded(ctx context.Context, maxRuns, maxBytes int64) (runs, bytes int64, err error)
	// list returns the newest runs, at most limit.
	list(ctx context.Context, limit int) ([]storedInfo, error)
	// summaries returns the runs f selects, newest first (list.go).
	summaries(ctx context.Context, f ListFilter) ([]Summary, error)
	close() error
}

// A query names one run: by its journal id, by the idempotency key of
// the ask that started it, or (the newest) by its chain run id.
type query struct {
	id    int64
	key   string
	runID string
}

func (q query) String() string {
	switch {
	case q.key != "":
		return "key " + q.key
	case q.runID != "":
		return "run " + q.runID
	}
	return "run #" + itoa(q.id)
}

type opKind int

const (
	opStart opKind = iota // a new run's row
	opEntry               // one step or delegation
	opEnd                 // the run's end
)

// An op is one write of a run, queued for the writer.
type op struct {
	kind opKind
	run  *Run
	id   int64
	now  int64 // unix ms
	// bytes is what the op adds to the run's size.
	bytes int64

	// opStart
	start *Start
	sum   string

	// opEntry
	e entryRow

	// opEnd
	state  State
	result []byte
	errMsg string
}

// An entryRow is one entry as stored.
type entryRow struct {
	seq                      int
	kind                     string
	step                     int
	callID, key, fingerprint string
	payload                  []byte
	sum                      string
}

// storedInfo is a run's row: its Info and what the Journal checks.
type storedInfo struct {
	Info
	sum   string
	owner string
}

// lostRunError: the run's row is no longer this process's (another
// replica found its owner gone and took it over); its writes are refused.
type lostRunError struct{ id int64 }

func (e *lostRunError) Error() string {
	return "run #" + itoa(e.id) + " was taken over by another process (this one was thought gone)"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

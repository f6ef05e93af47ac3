package journal

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/pgtest"
	"github.com/switchboard-run/switchboard/runtime"
)

// A backend is one store of the journal, for the tests that run against
// each (eachBackend): every journal opened on one place is one process of
// an agent on the same storage. Closing a journal is its process's death
// as the next process sees it: on SQLite the next Open marks its running
// runs interrupted; on PostgreSQL its owner lock goes with its
// connections.
type backend struct {
	name string
	// place returns a fresh, empty storage: a file path, or a database URL.
	place func(t *testing.T) string
	open  func(t *testing.T, place string, opts *Options) *Journal
	// exec runs a statement on the storage behind the journal's back (to
	// tamper with it), with {runs} and {entries} naming its tables.
	exec func(t *testing.T, place, stmt string)
	// sql is the backend's spelling of the tampering statements.
	sql map[string]string
}

const testSchema = "switchboard_test"

var backends = []backend{
	{
		name:  "sqlite",
		place: func(t *testing.T) string { return filepath.Join(t.TempDir(), File) },
		open: func(t *testing.T, place string, opts *Options) *Journal {
			t.Helper()
			j, err := Open(place, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { j.Close() })
			return j
		},
		exec: func(t *testing.T, place, stmt string) {
			t.Helper()
			db, err := sql.Open("sqlite", place)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			stmt = strings.NewReplacer("{runs}", "runs", "{entries}", "entries").Replace(stmt)
			if _, err := db.Exec(stmt); err != nil {
				t.Fatal(err)
			}
		},
		sql: map[string]string{
			"alter":    `CAST(replace(CAST(payload AS TEXT), 'assistant', 'assistanX') AS BLOB)`,
			"truncate": `substr(payload, 1, 10)`,
		},
	},
	{
		name:  "sqlite-append",
		place: func(t *testing.T) string { return filepath.Join(t.TempDir(), File) },
		open: func(t *testing.T, place string, opts *Options) *Journal {
			t.Helper()
			o := Options{AppendLog: true}
			if opts != nil {
				o = *opts
				o.AppendLog = true
			}
			j, err := Open(place, &o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { j.Close() })
			return j
		},
		exec: func(t *testing.T, place, stmt string) {
			t.Helper()
			db, err := sql.Open("sqlite", place)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			stmt = strings.NewReplacer("{runs}", "runs", "{entries}", "entries").Replace(stmt)
			if _, err := db.Exec(stmt); err != nil {
				t.Fatal(err)
			}
		},
		sql: map[string]string{
			"alter":    `CAST(replace(CAST(payload AS TEXT), 'assistant', 'assistanX') AS BLOB)`,
			"truncate": `substr(payload, 1, 10)`,
		},
	},
	{
		name:  "postgres",
		place: func(t *testing.T) string { return pgtest.Shared(t).NewDatabase(t) },
		open: func(t *testing.T, place string, opts *Options) *Journal {
			t.Helper()
			po := &PostgresOptions{Schema: testSchema}
			if opts != nil {
				po.Options = *opts
			}
			j, err := OpenPostgres(context.Background(), place, po)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { j.Close() })
			return j
		},
		exec: func(t *testing.T, place, stmt string) {
			t.Helper()
			ctx := context.Background()
			c, err := pgx.Connect(ctx, place)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			stmt = strings.NewReplacer("{runs}", testSchema+".journal_runs", "{entries}", testSchema+".journal_entries").Replace(stmt)
			if _, err := c.Exec(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		},
		sql: map[string]string{
			"alter":    `convert_to(replace(convert_from(payload, 'UTF8'), 'assistant', 'assistanX'), 'UTF8')`,
			"truncate": `substring(payload from 1 for 10)`,
		},
	},
}

func backendNamed(t *testing.T, name string) backend {
	for _, b := range backends {
		if b.name == name {
			return b
		}
	}
	t.Fatalf("no backend %q", name)
	return backend{}
}

// eachBackend runs f as a subtest for every backend.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

func begin(t *testing.T, j *Journal, runID string) *Run {
	t.Helper()
	r, err := j.Begin(context.Background(), Start{RunID: runID, Key: "key-" + runID, ParentKey: "parent-" + runID, Task: "task of " + runID, Settings: json.RawMessage(`{"model":"m"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// record writes a step and its delegation, as a turn does: the step is
// synced before its call runs.
func record(t *testing.T, r *Run, step int) {
	t.Helper()
	ctx := context.Background()
	if err := r.RecordStep(ctx, runtime.JournalStep{Step: step, Fingerprint: "fp", Response: json.RawMessage(`{"choices":[{"message":{"role":"assistant"}}]}`)}); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.RecordDelegation(ctx, runtime.JournalDelegation{Step: step, CallID: "c", Key: "k", Outcome: "ok", Result: json.RawMessage(`{"call_id":"c"}`)}); err != nil {
		t.Fatal(err)
	}
}

// TestReopenResumesWhatWasRunning: a run running when its process went
// away is interrupted for the next process, found by its key and its run
// id, and resumed with everything it recorded, in order.
func TestReopenResumesWhatWasRunning(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		place := b.place(t)
		j := b.open(t, place, nil)
		r := begin(t, j, "run-a")
		record(t, r, 1)
		record(t, r, 2)
		j.Close()

		ctx := context.Background()
		j = b.open(t, place, nil)
		info, err := j.ByKey(ctx, "key-run-a")
		if err != nil {
			t.Fatal(err)
		}
		if info.State != StateInterrupted || info.RunID != "run-a" || info.Task != "task of run-a" {
			t.Fatalf("after a reopen: %+v, want run-a interrupted", info)
		}
		if byID, err := j.ByRunID(ctx, "run-a"); err != nil || byID.ID != info.ID {
			t.Fatalf("by run id: %+v, %v", byID, err)
		}
		again, err := j.Resume(ctx, info.ID)
		if err != nil {
			t.Fatal(err)
		}
		rp := again.Replay()
		if rp.Attempt != 2 || len(rp.Steps) != 2 || len(rp.Delegations) != 2 || rp.Steps[1].Step != 2 || rp.Delegations[1].Step != 2 {
			t.Fatalf("replay %+v, want attempt 2 with steps 1 and 2 and their delegations", rp)
		}
		// Resumed twice at once: the second is refused while the first runs.
		if _, err := j.Resume(ctx, info.ID); !errors.Is(err, ErrRunning) {
			t.Errorf("a second resume: %v, want ErrRunning", err)
		}
		record(t, again, 3) // goes on after the replayed entries
		if err := again.RecordEnd(ctx, runtime.JournalEnd{Result: json.RawMessage(`{"answer":"yes"}`)}); err != nil {
			t.Fatal(err)
		}
		again.Release()
		if _, err := j.Resume(ctx, info.ID); !errors.Is(err, ErrNotResumable) {
			t.Errorf("resuming a done run: %v, want ErrNotResumable", err)
		}
		if done, err := j.ByKey(ctx, "key-run-a"); err != nil || done.State != StateDone || string(done.Result) != `{"answer":"yes"}` || done.Attempts != 2 {
			t.Errorf("the run's end: %+v, %v; want done with its answer after 2 attempts", done, err)
		}
		if _, err := j.ByKey(ctx, "no-such-key"); !errors.Is(err, ErrNotFound) {
			t.Errorf("an unknown key: %v, want ErrNotFound", err)
		}
		if b.name == "sqlite" {
			if fi, err := os.Stat(place); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("journal file mode %v (%v), want 0600", fi.Mode().Perm(), err)
			}
		}
	})
}

// TestSyncIsDurable: what a run recorded and synced is in the store for
// another process at once; what it recorded without a sync is there once
// the journal closes (the writer commits it within commitDelay on its own;
// Close drains the queue).
func TestSyncIsDurable(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		place := b.place(t)
		ctx := context.Background()
		j := b.open(t, place, nil)
		r := begin(t, j, "run-s")
		if err := r.RecordStep(ctx, runtime.JournalStep{Step: 1, Fingerprint: "fp", Response: json.RawMessage(`{"choices":[]}`)}); err != nil {
			t.Fatal(err)
		}
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		// Another process's view of the store, the writer's queue aside.
		n := count(t, b, place)
		if n != 1 {
			t.Fatalf("after Sync the store holds %d entries of the run, want 1", n)
		}
		if err := r.RecordDelegation(ctx, runtime.JournalDelegation{Step: 1, CallID: "c", Key: "k", Outcome: "ok", Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if err := r.RecordEnd(ctx, runtime.JournalEnd{Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		r.Release()
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if n := count(t, b, place); n != 2 {
			t.Fatalf("after Close the store holds %d entries of the run, want 2", n)
		}
		j = b.open(t, place, nil)
		if info, err := j.ByRunID(ctx, "run-s"); err != nil || info.State != StateDone {
			t.Fatalf("after Close: %+v, %v; want the run done", info, err)
		}
		if _, err := r.j.Begin(ctx, Start{RunID: "late", ParentKey: "p"}); !errors.Is(err, ErrClosed) {
			t.Errorf("Begin on a closed journal: %v, want ErrClosed", err)
		}
	})
}

// count is how many entries the store holds, read behind the journal's
// back (by another connection, as another process would).
func count(t *testing.T, b backend, place string) int {
	t.Helper()
	ctx := context.Background()
	var n int
	switch b.name {
	case "sqlite", "sqlite-append":
		db, err := sql.Open("sqlite", place)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM entries`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		// And those in the segment no fold has written yet, which the
		// next Open folds.
		n += segmentEntries(t, db, place)
	default:
		c, err := pgx.Connect(ctx, place)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if err := c.QueryRow(ctx, `SELECT count(*) FROM `+testSchema+`.journal_entries`).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestCorruptEntryIsNotResumed: an entry altered, one missing, or one that
// does not parse: the resume fails with ErrCorrupt naming the run and the
// entry, the run is marked broken, and it is never resumed.
func TestCorruptEntryIsNotResumed(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		for _, c := range []struct {
			name, sql string
			want      string
		}{
			{"altered", `UPDATE {entries} SET payload = ` + b.sql["alter"] + ` WHERE seq = 3`, "does not match its sum"},
			{"missing", `DELETE FROM {entries} WHERE seq = 2`, "entry 2 is missing"},
			{"truncated", `UPDATE {entries} SET payload = ` + b.sql["truncate"] + ` WHERE seq = 1`, "does not match its sum"},
			{"task altered", `UPDATE {runs} SET task = 'another task'`, "task or settings"},
		} {
			t.Run(c.name, func(t *testing.T) {
				place := b.place(t)
				j := b.open(t, place, nil)
				r := begin(t, j, "run-c")
				record(t, r, 1)
				record(t, r, 2)
				j.Close()

				b.exec(t, place, c.sql)

				j = b.open(t, place, nil)
				info, err := j.ByRunID(context.Background(), "run-c")
				if err != nil {
					t.Fatal(err)
				}
				_, err = j.Resume(context.Background(), info.ID)
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "run-c") {
					t.Fatalf("resume: %v, want ErrCorrupt saying %q", err, c.want)
				}
				info, _ = j.ByRunID(context.Background(), "run-c")
				if info.State != StateBroken {
					t.Errorf("state %s, want broken", info.State)
				}
				if _, err := j.Resume(context.Background(), info.ID); !errors.Is(err, ErrNotResumable) {
					t.Errorf("resumed again: %v, want ErrNotResumable", err)
				}
			})
		}
	})
}

// TestFullJournalRefusesNewRuns: at its cap, the journal makes room by
// dropping ended runs, oldest first, and refuses a new run rather than
// drop one that may still be resumed.
func TestFullJournalRefusesNewRuns(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		j := b.open(t, b.place(t), &Options{MaxRuns: 2})
		done := begin(t, j, "done")
		if err := done.RecordEnd(ctx, runtime.JournalEnd{Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		done.Release()
		failed := begin(t, j, "failed")
		if err := failed.RecordEnd(ctx, runtime.JournalEnd{Result: json.RawMessage(`{}`), Err: "model down", Resumable: true}); err != nil {
			t.Fatal(err)
		}
		failed.Release()

		// The done run makes room; the failed one stays resumable.
		running := begin(t, j, "running")
		defer running.Release()
		if _, err := j.ByRunID(ctx, "done"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the done run is still there (%v); it should have made room", err)
		}
		_, err := j.Begin(ctx, Start{RunID: "one-too-many", ParentKey: "p", Task: "t"})
		if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "2 runs") {
			t.Fatalf("a third run: %v, want ErrFull naming the cap", err)
		}
		for _, id := range []string{"failed", "running"} {
			if _, err := j.ByRunID(ctx, id); err != nil {
				t.Errorf("run %s was dropped: %v", id, err)
			}
		}

		// The byte cap the same way.
		jb := b.open(t, b.place(t), &Options{MaxBytes: 200})
		r := begin(t, jb, "big")
		defer r.Release()
		record(t, r, 1)
		record(t, r, 2)
		if _, err := jb.Begin(ctx, Start{RunID: "next", ParentKey: "p", Task: "t"}); !errors.Is(err, ErrFull) {
			t.Errorf("past the byte cap: %v, want ErrFull", err)
		}
	})
}

// TestRetention: an ended or interrupted run is dropped once it is older
// than the retention; a running one never is.
func TestRetention(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var mu sync.Mutex
		now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		j := b.open(t, b.place(t), &Options{Retention: time.Hour, Now: clock})
		old := begin(t, j, "old")
		if err := old.RecordEnd(context.Background(), runtime.JournalEnd{Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		old.Release()
		live := begin(t, j, "live")
		defer live.Release()

		mu.Lock()
		now = now.Add(2 * time.Hour)
		mu.Unlock()
		fresh := begin(t, j, "fresh") // a new run evicts first
		defer fresh.Release()
		if _, err := j.ByRunID(context.Background(), "old"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a run past the retention is still there: %v", err)
		}
		if _, err := j.ByRunID(context.Background(), "live"); err != nil {
			t.Errorf("a running run was dropped: %v", err)
		}
	})
}

// TestCanResume: an interrupted ask goes on when the journal holds its run
// and nobody runs it, or when the journal holds no trace of it but was in
// place when its key was made (its first step was never journaled, so it
// acted on nothing). A key older than the journal, or without a time, may
// name a run the journal lost: not resumed.
func TestCanResume(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		before := idempotency.NewKey(time.Now().Add(-time.Hour))
		place := b.place(t)
		j := b.open(t, place, nil)
		after := idempotency.NewKey(time.Now().Add(time.Second))
		for _, c := range []struct {
			key  string
			want bool
		}{{after, true}, {before, false}, {"caller-chosen", false}} {
			if got, err := j.CanResume(ctx, c.key); err != nil || got != c.want {
				t.Errorf("CanResume(%s) with no run = %v, %v; want %v", c.key, got, err, c.want)
			}
		}
		r, err := j.Begin(ctx, Start{RunID: "r", Key: before, ParentKey: "p", Task: "t"})
		if err != nil {
			t.Fatal(err)
		}
		record(t, r, 1)
		if got, _ := j.CanResume(ctx, before); got {
			t.Error("CanResume of a run running in this process = true")
		}
		j.Close()
		j = b.open(t, place, nil)
		if got, err := j.CanResume(ctx, before); err != nil || !got {
			t.Errorf("CanResume of an interrupted run = %v, %v; want true", got, err)
		}
	})
}

// TestReplicasShareOneJournal: two journals on one database are two
// replicas. A run the first runs is running for the second: not
// resumable, its resume refused with ErrRunning. Once the first is gone
// (its connections, and so its owner lock, with it), the second finds the
// run interrupted and resumes it, with what the first journaled.
func TestReplicasShareOneJournal(t *testing.T) {
	b := backendNamed(t, "postgres")
	ctx := context.Background()
	place := b.place(t)
	ja, jb := b.open(t, place, nil), b.open(t, place, nil)
	r := begin(t, ja, "shared")
	record(t, r, 1)
	info, err := jb.ByKey(ctx, "key-shared")
	if err != nil {
		t.Fatal(err)
	}
	if can, err := jb.CanResume(ctx, "key-shared"); err != nil || can {
		t.Errorf("a live replica's run: CanResume = %v, %v; want false", can, err)
	}
	if _, err := jb.Resume(ctx, info.ID); !errors.Is(err, ErrRunning) {
		t.Fatalf("resuming a live replica's run: %v, want ErrRunning", err)
	}
	ja.Close() // the first replica dies

	if can, err := jb.CanResume(ctx, "key-shared"); err != nil || !can {
		t.Fatalf("a gone replica's run: CanResume = %v, %v; want true", can, err)
	}
	if got, _ := jb.ByKey(ctx, "key-shared"); got.State != StateInterrupted {
		t.Errorf("a gone replica's run is %s, want interrupted", got.State)
	}
	again, err := jb.Resume(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if rp := again.Replay(); rp.Attempt != 2 || len(rp.Steps) != 1 || len(rp.Delegations) != 1 {
		t.Errorf("replay %+v, want attempt 2 with step 1 and its delegation", rp)
	}
	// A third replica meanwhile: the run is the second one's.
	jc := b.open(t, place, nil)
	if _, err := jc.Resume(ctx, info.ID); !errors.Is(err, ErrRunning) {
		t.Errorf("a third replica resuming it: %v, want ErrRunning", err)
	}
}

// TestBadPath: a path the DSN would misread is refused, naming it.
func TestBadPath(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "a?b.db"), nil); err == nil || !strings.Contains(err.Error(), "a?b.db") {
		t.Errorf("Open: %v", err)
	}
	if _, err := OpenPostgres(context.Background(), "postgres://127.0.0.1/x", nil); err == nil || !strings.Contains(err.Error(), "Schema") {
		t.Errorf("OpenPostgres without a schema: %v", err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgMain{m}) }

// pgMain stops the shared PostgreSQL server after the tests, before goleak
// looks for goroutines.
type pgMain struct{ m *testing.M }

func (p pgMain) Run() int { return pgtest.Main(p.m) }

// TestWriteFailureStopsTheRun: a commit that fails (here the entries'
// table is gone behind the journal's back) fails the run's Sync with
// ErrWrite, and every later write of the run with it, so the turn stops
// before acting on what is not durable and nothing is written after the
// gap.
func TestWriteFailureStopsTheRun(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		place := b.place(t)
		j := b.open(t, place, nil)
		r := begin(t, j, "run-w")
		defer r.Release()
		record(t, r, 1)
		// Everything so far committed: record's delegation is queued, not
		// waited for, and its commit failing on the dropped table (the
		// writer's batch delay is 5 ms) would fail the RecordStep below.
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if b.name == "sqlite-append" {
			// Its commit is the segment's append: the segment's file
			// fails (closed behind the journal's back).
			st := j.st.(*sqliteStore)
			st.segMu.Lock()
			st.seg.f.Close()
			st.segMu.Unlock()
		} else {
			b.exec(t, place, `DROP TABLE {entries}`)
		}
		if err := r.RecordStep(ctx, runtime.JournalStep{Step: 2, Fingerprint: "fp", Response: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err) // queued: the failure is the commit's
		}
		err := r.Sync(ctx)
		if !errors.Is(err, ErrWrite) {
			t.Fatalf("Sync after a failed commit: %v, want ErrWrite", err)
		}
		if err := r.RecordDelegation(ctx, runtime.JournalDelegation{Step: 2, CallID: "c"}); !errors.Is(err, ErrWrite) {
			t.Errorf("a write after the failure: %v, want ErrWrite", err)
		}
		if err := r.RecordEnd(ctx, runtime.JournalEnd{}); !errors.Is(err, ErrWrite) {
			t.Errorf("the end after the failure: %v, want ErrWrite", err)
		}
	})
}

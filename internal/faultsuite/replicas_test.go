package faultsuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-run/switchboard/internal/pgdb"
	"github.com/switchboard-run/switchboard/internal/pgtest"
	"github.com/switchboard-run/switchboard/internal/pooltest"
	"github.com/switchboard-run/switchboard/pool"
)

// The replica rows: two packrat replicas (`agent serve --database`, one
// PostgreSQL), each on a host of its own (a network namespace, netns_test.go),
// behind deploy/'s haproxy or nginx, called through the pool with keyed
// store_note calls in one protocol era, while one fault hits: a replica's
// host partitioned for 3 s, PostgreSQL restarted, or a replica SIGKILLed.
// What each call ran is counted in the database itself (one note per
// execution, tagged with the call), so a call run on both replicas shows as
// two notes whatever either replica believes.

const (
	replicaCalls       = 120             // per row
	replicaConcurrency = 8               // calls in flight at once
	partitionFor       = 3 * time.Second // the partition row's fault
	// replicaRowCeiling bounds a row's burst: a generous ceiling, not a
	// timing claim. Each call has 60 s (storeNotesUnderFaults). 1 to 3
	// calls of 120 used to hang to that deadline, faults or not (rep-0
	// among them): on a loaded machine pgx leaves its background reader
	// parked on an idle connection, and the next Acquire's idle check
	// (pgdb.CheckIdle) waited behind it on the socket's read lock, for
	// ever on the lock pool behind packrat's LockKey (goroutine dumps of
	// the replica; fixed in internal/pgdb, TestCheckIdleBesideAParkedRead).
	// Not the only cause: after that fix, in 2 of 5 partition rows one
	// call sent after the partition (rep-109, rep-113 of 120) still hung
	// to its deadline, at load ~7; why is not yet known.
	// The ceiling stays the calls' deadline plus the rest of a burst, so
	// that only a call hung past its own deadline fails the row.
	replicaRowCeiling = 90 * time.Second
)

type replicaFault int

const (
	faultPartition   replicaFault = iota + 1 // one replica's host cut off for partitionFor
	faultPGRestart                           // PostgreSQL stopped and started again
	faultSIGKILL                             // one replica killed with SIGKILL
	faultDropAnswers                         // answers dropped after the tool ran (dropProxy)
)

// name is the fault's part of the subtest's name.
func (f replicaFault) name() string {
	return [...]string{"", "partition", "pg-restart", "sigkill", "drop-answers"}[f]
}

func (f replicaFault) String() string {
	switch f {
	case faultPartition:
		return fmt.Sprintf("one replica's host partitioned for %v (its link down: balancer and database unreachable)", partitionFor)
	case faultPGRestart:
		return "PostgreSQL restarted (fast shutdown, then start) mid-burst"
	case faultSIGKILL:
		return "one replica killed with SIGKILL mid-burst"
	case faultDropAnswers:
		return fmt.Sprintf("answers dropped after the tool ran (%d%% of calls' first answers, the connection reset)", dropPercent)
	}
	return "unknown fault"
}

// replicaRows are the rows; ci marks those the short profile runs too.
//
// Not a row: a partition behind nginx. nginx has no active health check
// (the open-source build) and max_fails=0 (deploy/nginx) never marks the
// partitioned replica down, so calls kept going to it; measured once: the
// burst took 64.9 s, bounded only by the calls' 60 s deadline, and 2 of
// 120 calls ended outcome_unknown (0 executed twice). docs/FAULTS.md says
// so; an operator who needs partitions survived puts haproxy (or nginx
// Plus's health_check) in front.
//
// The three-replica rows and the dropped answers are full-profile rows:
// each costs a namespace, a replica and a burst more, and CI's two rows
// already run the rig.
var replicaRows = []struct {
	fault    replicaFault
	balancer balancer
	era      string
	ci       bool
	replicas int // 0: 2
}{
	{faultPartition, balancers[0], pool.Protocol20260728, true, 0},
	{faultSIGKILL, balancers[1], pool.Protocol20260728, true, 0},
	{faultPGRestart, balancers[0], pool.Protocol20260728, false, 0},
	{faultPartition, balancers[0], pool.Protocol20251125, false, 0},
	{faultSIGKILL, balancers[0], pool.Protocol20251125, false, 0},
	{faultPGRestart, balancers[1], pool.Protocol20260728, false, 0},
	{faultDropAnswers, balancers[0], pool.Protocol20260728, false, 0},
	{faultDropAnswers, balancers[1], pool.Protocol20260728, false, 0},
	{faultPartition, balancers[0], pool.Protocol20260728, false, 3},
	{faultSIGKILL, balancers[0], pool.Protocol20260728, false, 3},
	{faultPGRestart, balancers[1], pool.Protocol20260728, false, 3},
	{faultDropAnswers, balancers[0], pool.Protocol20251125, false, 3},
}

// TestReplicaHosts runs the replica rows (see the top of this file).
func TestReplicaHosts(t *testing.T) {
	for _, r := range replicaRows {
		n := max(r.replicas, 2)
		fault := r.fault.name()
		if n != 2 {
			fault += fmt.Sprintf("-%dreplicas", n) // -run 'TestReplicaHosts/3replicas' picks them
		}
		name := fmt.Sprintf("%s/%s/%s", fault, r.balancer.name, r.era)
		t.Run(name, func(t *testing.T) {
			if !r.ci && !*full {
				t.Skip("full profile only (SWITCHBOARD_FAULTS=full)")
			}
			needNetns(t)
			row := replicaRow(t, r.fault, r.balancer, r.era, n)
			if row.Duplicates != 0 || row.Lost != 0 || row.Misreported != 0 {
				t.Errorf("row %q: %d executed twice, %d lost, %d misreported; all must be 0", row.Fault, row.Duplicates, row.Lost, row.Misreported)
			}
			if row.Answered()+row.Lost != row.Attempted || row.Attempted != replicaCalls {
				t.Errorf("row %q: %d answered + %d lost, %d attempted; want %d attempted, all answered", row.Fault, row.Answered(), row.Lost, row.Attempted, replicaCalls)
			}
			record(row)
		})
	}
}

func replicaRow(t *testing.T, fault replicaFault, b balancer, era string, n int) Row {
	// A server per row, not pgtest.Shared: the restart row stops its own,
	// and Shared's server would outlive the suite's goroutine check.
	srv := pgtest.Start(t)
	dbURL := srv.NewDatabase(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	reps := startNSReplicas(t, n, srv.Port(), func(hostPort string) string {
		v := *u
		v.Host = hostPort
		return v.String()
	})
	addrs := make([]string, n)
	for i, r := range reps {
		addrs[i] = r.addr
	}
	f := b.start(t, addrs)
	base, via := f.base, b.name
	var drops *dropProxy
	if fault == faultDropAnswers {
		drops = newDropProxy(t, f.base)
		base, via = drops.url, "dropping proxy → "+b.name
	}

	pl := pooltest.New(t, &pool.Options{IdleTimeout: -1})
	ps := &pool.Server{Name: "packrat", URL: base + "/mcp", ProtocolVersion: era}

	// The faults that take time run beside the burst, so that calls keep
	// arriving while they last.
	var (
		faults sync.WaitGroup
		did    string
	)
	inject := func() {
		switch fault {
		case faultPartition:
			faults.Go(func() { reps[0].host.partition(t, partitionFor) })
			did = "replica 1's link down for " + partitionFor.String() + ", then up"
		case faultPGRestart:
			faults.Go(func() { srv.Stop(); srv.Restart(t) })
			did = "PostgreSQL stopped (fast shutdown) and started again on the same data"
		case faultSIGKILL:
			if err := reps[0].proc.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if _, err := reps[0].proc.Wait(30 * time.Second); err != nil {
				t.Fatal(err)
			}
			did = "replica 1 killed with SIGKILL, not restarted"
		case faultDropAnswers:
			// The proxy drops throughout the burst.
		}
	}
	start := time.Now()
	results := storeNotesUnderFaults(t, pl, ps, "rep", replicaCalls, replicaConcurrency, 1, inject)
	faults.Wait()
	elapsed := time.Since(start)
	st := pl.Stats()

	if drops != nil {
		did = fmt.Sprintf("the proxy in front of %s passed on %d tools/call POSTs and reset the connection after the replica's whole answer on %d of them", b.name, drops.calls.Load(), drops.dropped.Load())
	}
	execs := notesPerTag(t, srv.URL(u.Path[1:]))
	ty := newIdemTally(fmt.Sprintf("%s (%d replicas on one PostgreSQL, each in its own network namespace; %d store_note calls, up to %d in flight; %s)", fault, n, replicaCalls, replicaConcurrency, era),
		fmt.Sprintf("pool → %s → replica hosts → PostgreSQL", via))
	unknown := 0
	for _, r := range results {
		ty.add(t, r.id, r.res, r.info, r.err, execs[r.id])
		var pe *pool.Error
		if errors.As(r.err, &pe) && pe.Kind == pool.KindOutcomeUnknown {
			unknown++
		}
	}
	if elapsed > replicaRowCeiling {
		t.Errorf("the burst took %v; ceiling %v", elapsed.Round(time.Millisecond), replicaRowCeiling)
	}
	// Written before the row is judged: it must say what happened, not
	// what the checks look for.
	row := ty.finish(t, st, fmt.Sprintf("%s, calls in flight; the burst took %.1f s; %s; pool: %d keyed resends, %d replays, %d reinitializations, %d retries",
		did, elapsed.Seconds(), plural(unknown, "call ended outcome_unknown", "calls ended outcome_unknown"), st.KeyedRetries, ty.replays, st.Reinitializations, st.Retries))
	t.Log(row.Did)
	return row
}

// notesPerTag counts, in the database at dbURL, the notes stored under each
// call's tag: how many times each call ran.
func notesPerTag(t *testing.T, dbURL string) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("counting the notes: %v", err)
	}
	defer conn.Close(context.Background())
	schema, err := pgdb.SchemaFor("packrat")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, "SELECT tags, count(*) FROM "+pgx.Identifier{schema, "notes"}.Sanitize()+" GROUP BY tags")
	if err != nil {
		t.Fatalf("counting the notes: %v", err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var (
			tags string
			n    int64
			tag  []string
		)
		if err := rows.Scan(&tags, &n); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(tags), &tag); err != nil || len(tag) != 1 {
			t.Fatalf("a note's tags %q: want one tag, the call's (%v)", tags, err)
		}
		out[tag[0]] += n
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("counting the notes: %v", err)
	}
	return out
}

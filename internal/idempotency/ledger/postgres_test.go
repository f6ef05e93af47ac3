package ledger_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/pgdb"
	"github.com/switchboard-run/switchboard/internal/pgtest"
	"github.com/switchboard-run/switchboard/internal/waittest"
)

// TestPostgresReplicasRace: four ledgers on one database, as four
// replicas (each its own pool and owner), get three racing claims for each
// of 300 keys. Every key runs exactly once; the other claims see it
// running (its owner is alive) or done, never interrupted.
func TestPostgresReplicasRace(t *testing.T) {
	const (
		replicas = 4
		keys     = 300
		sends    = 3
	)
	url := pgtest.Shared(t).NewDatabase(t)
	ls := make([]*ledger.Ledger, replicas)
	var g errgroup.Group
	for i := range ls {
		g.Go(func() error { // replicas start together: migrations apply once
			po := &ledger.PostgresOptions{Schema: testSchema}
			l, err := ledger.OpenPostgres(context.Background(), url, po)
			ls[i] = l
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		t.Cleanup(func() { l.Close() })
	}
	var (
		mu       sync.Mutex
		executed = map[string]int{}
		seen     = map[ledger.State]int{}
	)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// Each key's sends start together, on replicas picked at random, and
	// the winner finishes only once every send has claimed: the repeats
	// meet a live owner's running record.
	g = errgroup.Group{}
	g.SetLimit(6)
	for k := range keys {
		key := fmt.Sprintf("race-%d", k)
		g.Go(func() error {
			start := make(chan struct{})
			var claimed sync.WaitGroup
			claimed.Add(sends)
			var kg errgroup.Group
			for range sends {
				l := ls[rand.IntN(replicas)]
				kg.Go(func() error {
					<-start
					rec, err := l.Begin(ctx, key, "effect", "fp")
					claimed.Done()
					if err != nil {
						return err
					}
					mu.Lock()
					if rec == nil {
						executed[key]++
					} else {
						seen[rec.State]++
					}
					mu.Unlock()
					if rec != nil {
						return nil
					}
					claimed.Wait()
					return l.Finish(ctx, key, []byte(`{"content":[]}`))
				})
			}
			close(start)
			return kg.Wait()
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(executed) != keys {
		t.Fatalf("%d keys executed, want %d", len(executed), keys)
	}
	for k, n := range executed {
		if n != 1 {
			t.Fatalf("key %s executed %d times", k, n)
		}
	}
	if seen[ledger.StateRunning] != keys*(sends-1) {
		t.Fatalf("repeats saw %v, want %d running (the owner was alive and had not finished)", seen, keys*(sends-1))
	}
	t.Logf("%d keys, %d racing claims from %d replicas: %d executed, once each; the repeats saw %v", keys, keys*sends, replicas, len(executed), seen)
}

// TestPostgresLiveOwner: a key another live replica is running is still
// running for the others, then done once it finishes; never interrupted.
func TestPostgresLiveOwner(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := openPG(t, url, nil), openPG(t, url, nil)
	ctx := t.Context()
	key := idempotency.NewKey(time.Now())
	if rec, err := a.Begin(ctx, key, "t", "fp"); err != nil || rec != nil {
		t.Fatal(rec, err)
	}
	rec, err := b.Begin(ctx, key, "t", "fp")
	if err != nil || rec == nil || rec.State != ledger.StateRunning {
		t.Fatalf("while the owner runs it: %+v, %v", rec, err)
	}
	if err := a.Finish(ctx, key, []byte(`{"content":[]}`)); err != nil {
		t.Fatal(err)
	}
	rec, err = b.Begin(ctx, key, "t", "fp")
	if err != nil || rec == nil || rec.State != ledger.StateDone || string(rec.Result) != `{"content":[]}` {
		t.Fatalf("once finished: %+v, %v", rec, err)
	}
}

// The owner helper is this test binary run as a child process: it opens a
// ledger, claims a key, says so on stdout and waits to be killed.
const (
	ownerHelperEnv = "SB_LEDGER_TEST_OWNER_URL"
	ownerKeyEnv    = "SB_LEDGER_TEST_OWNER_KEY"
)

func ownerHelper() {
	ctx := context.Background()
	l, err := ledger.OpenPostgres(ctx, os.Getenv(ownerHelperEnv), &ledger.PostgresOptions{Schema: testSchema})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if rec, err := l.Begin(ctx, os.Getenv(ownerKeyEnv), "t", "fp"); err != nil || rec != nil {
		fmt.Fprintln(os.Stderr, "claim:", rec, err)
		os.Exit(2)
	}
	fmt.Println("claimed")
	io.Copy(io.Discard, os.Stdin) // until killed, or the test is gone
	os.Exit(0)
}

// TestPostgresOwnerKilled: a real process claims a key and is SIGKILLed
// while "running" it. Once its connections are gone, the other replicas
// answer the key interrupted, and keep answering so; nobody runs it.
func TestPostgresOwnerKilled(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	key := idempotency.NewKey(time.Now())
	other := openPG(t, url, nil) // a live replica, opened before the owner
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ownerHelperEnv+"="+url, ownerKeyEnv+"="+key)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "claimed\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("owner said %q, %v", line, err)
	}
	ctx := t.Context()
	rec, err := other.Begin(ctx, key, "t", "fp")
	if err != nil || rec == nil || rec.State != ledger.StateRunning {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("while the owner lives: %+v, %v", rec, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// PostgreSQL ends the dead owner's sessions as it notices their
	// sockets closed; until then the key is still running.
	var last *ledger.Record
	waittest.Until(t, 30*time.Second, "the killed owner's claim to be interrupted", func() bool {
		last, err = other.Begin(ctx, key, "t", "fp")
		if err != nil {
			t.Fatal(err)
		}
		if last == nil {
			t.Fatal("the killed owner's key was claimed again: it would run twice")
		}
		return last.State == ledger.StateInterrupted
	})
	// Final, for a replica that opens later too.
	late := openPG(t, url, nil)
	if rec, err := late.Begin(ctx, key, "t", "fp"); err != nil || rec == nil || rec.State != ledger.StateInterrupted {
		t.Fatalf("a later replica: %+v, %v", rec, err)
	}
}

// TestPostgresDatabaseLost: while the database is down, a claim fails with
// an error wrapping pgdb.ErrUnavailable (the guard answers it as a
// JSON-RPC error, nothing run); once it is back the pool reconnects, the
// records from before are there, and this process's own claim from before
// the outage is still its own (still running, not interrupted, not run
// again).
func TestPostgresDatabaseLost(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips the ledger across a PostgreSQL outage and restart; run it with go test -run '^TestPostgresDatabaseLost$' ./internal/idempotency/ledger")
	}
	srv := pgtest.Start(t)
	url := srv.NewDatabase(t)
	b := backend{name: "postgres", place: func(*testing.T) string { return url }, open: openPG}
	r := newRig(t, b, url, nil)
	ctx := t.Context()
	done, running := idempotency.NewKey(time.Now()), idempotency.NewKey(time.Now())
	if _, err := r.call("effect", "a", done); err != nil {
		t.Fatal(err)
	}
	if rec, err := r.ledger.Begin(ctx, running, "t", "fp"); err != nil || rec != nil {
		t.Fatal(rec, err)
	}

	srv.Stop()
	_, err := r.ledger.Begin(ctx, idempotency.NewKey(time.Now()), "t", "fp")
	if !errors.Is(err, pgdb.ErrUnavailable) {
		t.Fatalf("claim with the database down: %v, want ErrUnavailable", err)
	}
	_, err = r.call("effect", "b", idempotency.NewKey(time.Now()))
	if c := code(t, err); c != -32603 || r.runsOf("b") != 0 {
		t.Fatalf("call with the database down: code %d, runs %d; want -32603 (internal error), 0", c, r.runsOf("b"))
	}

	srv.Restart(t)
	waittest.Until(t, 30*time.Second, "the ledger to reconnect", func() bool {
		_, err := r.call("effect", "c", idempotency.NewKey(time.Now()))
		return err == nil
	})
	if r.runsOf("c") != 1 {
		t.Fatalf("c ran %d times", r.runsOf("c"))
	}
	if res, err := r.call("effect", "a", done); err != nil || res.Meta[idempotency.ReplayMetaKey] != true || r.runsOf("a") != 1 {
		t.Fatalf("the call from before the outage: %v, %v, runs %d", res, err, r.runsOf("a"))
	}
	if rec, err := r.ledger.Begin(ctx, running, "t", "fp"); err != nil || rec == nil || rec.State != ledger.StateRunning {
		t.Fatalf("own claim from before the outage: %+v, %v", rec, err)
	}
}

// TestPostgresHorizonShared: one replica's eviction for space moves the
// horizon every replica refuses old keys by.
func TestPostgresHorizonShared(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	a := openPG(t, url, &ledger.Options{MaxRecords: 10})
	b := openPG(t, url, nil)
	ctx := t.Context()
	now := time.Now()
	for i := range 256 {
		k := idempotency.NewKey(now.Add(time.Duration(i) * time.Millisecond))
		if rec, err := a.Begin(ctx, k, "t", "fp"); err != nil || rec != nil {
			t.Fatal(rec, err)
		}
		if err := a.Finish(ctx, k, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if a.Horizon().Before(now) {
		t.Fatalf("no eviction horizon after MaxRecords was exceeded: %v", a.Horizon())
	}
	if b.Horizon().Equal(a.Horizon()) {
		t.Fatal("b knew the horizon before it asked")
	}
	if _, err := b.Begin(ctx, idempotency.NewKey(time.Now()), "t", "fp"); err != nil {
		t.Fatal(err)
	}
	if !b.Horizon().Equal(a.Horizon()) {
		t.Fatalf("horizons differ: a %v, b %v", a.Horizon(), b.Horizon())
	}
}

// TestPostgresOpenErrors: a bad scheme, an unreachable server and a
// database that does not exist fail at open, naming what was wrong and
// never the password.
func TestPostgresOpenErrors(t *testing.T) {
	srv := pgtest.Shared(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx := t.Context()
	for _, c := range []struct {
		name, url string
		is        error
		names     []string
	}{
		{"scheme", "mysql://u:hunter2@127.0.0.1/db", pgdb.ErrScheme, []string{`"mysql"`}},
		{"unreachable", fmt.Sprintf("postgres://u:hunter2@127.0.0.1:%d/faraway?connect_timeout=5", closedPort), pgdb.ErrUnavailable,
			[]string{fmt.Sprintf("127.0.0.1:%d", closedPort), "faraway"}},
		{"no such database", strings.Replace(srv.URL("nosuchdb"), "postgres@", "postgres:hunter2@", 1), pgdb.ErrUnavailable,
			[]string{fmt.Sprintf("127.0.0.1:%d", srv.Port()), "nosuchdb"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ledger.OpenPostgres(ctx, c.url, &ledger.PostgresOptions{Schema: testSchema})
			if !errors.Is(err, c.is) {
				t.Fatalf("error %v does not wrap %v", err, c.is)
			}
			for _, n := range c.names {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("error %q does not name %s", err, n)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// TestPostgresMigrationVersion: the schema version is recorded once, and
// a database from a newer Switchboard is refused.
func TestPostgresMigrationVersion(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	openPG(t, url, nil)
	openPG(t, url, nil)
	ctx := t.Context()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v int
	if err := c.QueryRow(ctx, `SELECT version FROM `+testSchema+`.schema_version WHERE component = 'idempotency_ledger'`).Scan(&v); err != nil || v != 1 {
		t.Fatalf("version %d, %v", v, err)
	}
	if _, err := c.Exec(ctx, `UPDATE `+testSchema+`.schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	_, err = ledger.OpenPostgres(ctx, url, &ledger.PostgresOptions{Schema: testSchema})
	if !errors.Is(err, pgdb.ErrNewer) {
		t.Fatalf("open on a newer schema: %v", err)
	}
}

// TestPostgresGuardAcrossReplicas: two guards (two replicas) on one
// database. A key running on one is, for the other, still running after
// its wait (nothing runs there), and once the first finished, a replay.
func TestPostgresGuardAcrossReplicas(t *testing.T) {
	b := backends[1]
	url := b.place(t)
	first, second := newRig(t, b, url, nil), newRig(t, b, url, nil)
	key := idempotency.NewKey(time.Now())
	done := make(chan error, 1)
	go func() {
		_, err := first.call("slow", "s", key)
		done <- err
	}()
	<-first.enter
	_, err := second.call("slow", "s", key)
	if c := code(t, err); c != idempotency.CodeStillRunning || second.runsOf("s") != 0 {
		t.Fatalf("while the other replica runs it: code %d, runs %d", c, second.runsOf("s"))
	}
	close(first.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	res, err := second.call("slow", "s", key)
	if err != nil || res.Meta[idempotency.ReplayMetaKey] != true || second.runsOf("s") != 0 || first.runsOf("s") != 1 {
		t.Fatalf("after: %v %v, runs %d here, %d there", res, err, second.runsOf("s"), first.runsOf("s"))
	}
}

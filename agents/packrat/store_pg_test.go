package packrat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"

	"github.com/switchboard-run/switchboard/agents/internal/tooltest"
	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/pgtest"
	"github.com/switchboard-run/switchboard/internal/waittest"
)

// testSchema is the schema the PostgreSQL stores of a test share, as the
// replicas of one agent do.
const testSchema = "switchboard_packrat_test"

// eachStore runs f against a store on SQLite and one on PostgreSQL, each
// fresh; open opens another store on the same storage.
func eachStore(t *testing.T, f func(t *testing.T, open func(*testing.T) *store)) {
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		f(t, func(t *testing.T) *store { return openTestStore(t, dir) })
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.Shared(t).NewDatabase(t)
		f(t, func(t *testing.T) *store { return openTestPGStore(t, url) })
	})
}

func openTestPGStore(t *testing.T, url string) *store {
	t.Helper()
	st, err := openPGStore(context.Background(), url, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestPGReplicasShareOneArchive: two stores on one database, as two
// replicas, each with its own pool. Stores racing on both get ids from one
// sequence (none given twice); one caller's key sent to both at once
// stores one note; each sees the other's notes.
func TestPGReplicasShareOneArchive(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	var a, b *store
	var g errgroup.Group // replicas start together: migrations apply once
	g.Go(func() (err error) { a, err = openPGStore(context.Background(), url, testSchema); return })
	g.Go(func() (err error) { b, err = openPGStore(context.Background(), url, testSchema); return })
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	const perReplica = 100
	var (
		mu  sync.Mutex
		ids = map[int64]string{}
	)
	g = errgroup.Group{}
	g.SetLimit(8)
	for i := range perReplica {
		for name, st := range map[string]*store{"a": a, "b": b} {
			g.Go(func() error {
				note, _, err := st.put(ctx, newNote{Text: fmt.Sprintf("%s %d", name, i)})
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				if other, dup := ids[note.ID]; dup {
					return fmt.Errorf("id %d given to %q and to %q", note.ID, other, note.Text)
				}
				ids[note.ID] = note.Text
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2*perReplica {
		t.Fatalf("%d ids for %d stores", len(ids), 2*perReplica)
	}

	// One caller's key, sent to both replicas at once, 8 times each.
	start := make(chan struct{})
	var stored sync.Map
	g = errgroup.Group{}
	for i := range 16 {
		st := []*store{a, b}[i%2]
		g.Go(func() error {
			<-start
			note, s, err := st.put(ctx, newNote{Text: "once", IdempotencyKey: "shared-key"})
			if s {
				stored.Store(i, note.ID)
			}
			return err
		})
	}
	close(start)
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	n := 0
	stored.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("%d puts with one key stored a note, want 1", n)
	}
	notes, _, err := b.find(ctx, query{Terms: []string{"once"}})
	if err != nil || len(notes) != 1 {
		t.Fatalf("notes with the key: %d, %v", len(notes), err)
	}
	if _, err := a.get(ctx, notes[0].ID); err != nil {
		t.Fatalf("the other replica cannot read it: %v", err)
	}
}

// TestPGKeyLock: a call's key locked on one replica holds the other's
// LockKey until unlock (a deadline ends the wait with ctx's error).
func TestPGKeyLock(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := openTestPGStore(t, url), openTestPGStore(t, url)
	unlock, err := a.LockKey(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = b.LockKey(ctx, "k")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		unlock()
		t.Fatalf("second lock while the first is held: %v", err)
	}
	unlock()
	unlock2, err := b.LockKey(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	unlock2()
	var _ ledger.KeyLocker = a
}

// TestPGDatabaseLost: with packrat's database down, store_note fails with a
// JSON-RPC internal error (not a tool answer), and once it is back the
// pool reconnects and stores work again.
func TestPGDatabaseLost(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips packrat's store across a PostgreSQL outage and restart; run it with go test -run '^TestPGDatabaseLost$' ./agents/packrat")
	}
	srv := pgtest.Start(t)
	url := srv.NewDatabase(t)
	server := mcp.NewServer(&mcp.Implementation{Name: "packrat", Version: "test"}, nil)
	closer, err := RegisterWith(server, &Options{DatabaseURL: url, Schema: testSchema})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	cs, end := tooltest.Connect(t, server)
	defer end()
	store := func() (*mcp.CallToolResult, error) {
		return cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": "x"}})
	}
	if _, err := store(); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	res, err := store()
	var w *jsonrpc.Error
	if !errors.As(err, &w) || w.Code != jsonrpc.CodeInternalError {
		t.Fatalf("store with the database down: %v, %v; want a JSON-RPC internal error", res, err)
	}
	srv.Restart(t)
	waittest.Until(t, 30*time.Second, "packrat to reconnect", func() bool {
		res, err := store()
		return err == nil && !res.IsError
	})
}

// TestPGManyKeyedAtOnce: more keyed stores at once than the store's pool
// has connections, each holding its key's lock while it stores, as the
// guard runs them: none waits for a connection another one holds.
func TestPGManyKeyedAtOnce(t *testing.T) {
	st := openTestPGStore(t, pgtest.Shared(t).NewDatabase(t))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var g errgroup.Group
	for i := range 3 * storeConns {
		g.Go(func() error {
			key := fmt.Sprintf("k%d", i)
			unlock, err := st.LockKey(ctx, key)
			if err != nil {
				return err
			}
			defer unlock()
			call := ledger.WithCall(ctx, ledger.Call{Key: key, Tool: "store_note", Fingerprint: "fp"})
			_, _, err = st.putRecorded(call, newNote{Text: key}, render)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestUncommittedRetry: putWaiting runs a transaction again only when it
// provably committed nothing: a connection refused, or one broken before
// the commit; never after a failed commit, whose outcome is unknown.
func TestUncommittedRetry(t *testing.T) {
	broken := fmt.Errorf("store note: %w", io.ErrUnexpectedEOF)
	for _, c := range []struct {
		err  error
		want bool
	}{
		{broken, true},
		{fmt.Errorf("store note: %w: %w", errCommit, io.ErrUnexpectedEOF), false},
		{fmt.Errorf("store note: %w", context.DeadlineExceeded), false},
		{errKeyConflict, false},
	} {
		if got := uncommitted(c.err); got != c.want {
			t.Errorf("uncommitted(%v) = %v; want %v", c.err, got, c.want)
		}
	}
}

package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/pgdb"
	"github.com/switchboard-run/switchboard/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// backends opens each store of the package on a fresh database.
func backends(t *testing.T) map[string]DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sub", File)
	sq, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	for _, f := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(f); err == nil && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", filepath.Base(f), fi.Mode().Perm())
		}
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the directory OpenSQLite created: %v, want 0700", err)
	}
	url := pgtest.Shared(t).NewDatabase(t)
	pool, err := pgdb.Open(t.Context(), url, pgdb.Options{Schema: "switchboard_t"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	pg, err := OpenPostgres(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]DB{"sqlite": sq, "postgres": pg}
}

// TestStore: a record is read back as written, by its scope only; an idle
// one is neither read nor counted, and the next Put deletes it; the cap
// and the size bound refuse with their errors; a conditional Delete spares
// a record used since.
func TestStore(t *testing.T) {
	for name, db := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			a, b := db.Scope("a"), db.Scope("b")
			now := time.UnixMilli(time.Now().UnixMilli())
			rec := Record{ID: "s1", Cred: "digest", State: []byte(`{"initialize":{}}`), LastUsed: now}
			if err := a.Put(ctx, rec, now.Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			got, err := a.Get(ctx, "s1", now.Add(-time.Hour))
			if err != nil || got.Cred != "digest" || string(got.State) != string(rec.State) || !got.LastUsed.Equal(now) {
				t.Fatalf("Get: %+v, %v; want %+v", got, err, rec)
			}
			if _, err := b.Get(ctx, "s1", time.Time{}); !errors.Is(err, ErrNotFound) {
				t.Errorf("another scope read the record: %v", err)
			}
			if _, err := a.Get(ctx, "s1", now.Add(time.Millisecond)); !errors.Is(err, ErrNotFound) {
				t.Errorf("an idle record was read: %v", err)
			}
			if err := a.Touch(ctx, "s1", now.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if err := a.Delete(ctx, "s1", now.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Get(ctx, "s1", now); err != nil {
				t.Errorf("a conditional Delete removed a record used since: %v", err)
			}
			if err := a.Delete(ctx, "s1", time.Time{}); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Get(ctx, "s1", time.Time{}); !errors.Is(err, ErrNotFound) {
				t.Errorf("after Delete: %v", err)
			}
			big := Record{ID: "big", State: make([]byte, MaxStateBytes+1), LastUsed: now}
			if err := a.Put(ctx, big, time.Time{}); !errors.Is(err, ErrTooLarge) {
				t.Errorf("a state past MaxStateBytes: %v, want ErrTooLarge", err)
			}

			// The cap: MaxSessions in b, the first of them idle.
			for i := range MaxSessions {
				at := now
				if i == 0 {
					at = now.Add(-2 * time.Hour)
				}
				if err := b.Put(ctx, Record{ID: fmt.Sprint("c", i), State: []byte(`{}`), LastUsed: at}, time.Time{}); err != nil {
					t.Fatalf("put %d: %v", i, err)
				}
			}
			over := Record{ID: "over", State: []byte(`{}`), LastUsed: now}
			if err := b.Put(ctx, over, time.Time{}); !errors.Is(err, ErrFull) {
				t.Errorf("past the cap: %v, want ErrFull", err)
			}
			if err := b.Put(ctx, Record{ID: "c5", State: []byte(`{"x":1}`), LastUsed: now}, time.Time{}); err != nil {
				t.Errorf("replacing a kept record at the cap: %v", err)
			}
			if err := b.Put(ctx, over, now.Add(-time.Hour)); err != nil {
				t.Errorf("with an idle record to prune: %v", err)
			}
			if _, err := b.Get(ctx, "c0", time.Time{}); !errors.Is(err, ErrNotFound) {
				t.Errorf("the idle record was not pruned: %v", err)
			}
		})
	}
}

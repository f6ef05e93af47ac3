package ledger_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/pgtest"
)

// A backend is one storage of the ledger, for the contract tests that run
// against each (eachBackend): every ledger opened on one place is one
// process of an agent on the same storage.
type backend struct {
	name string
	// place returns a fresh, empty storage: a file path, or a database URL.
	place func(t *testing.T) string
	// open opens a ledger on place, closed when t ends.
	open func(t *testing.T, place string, opts *ledger.Options) *ledger.Ledger
	// crash makes l's process gone for the others, as a crash does. On
	// SQLite the next Open does that by itself; on PostgreSQL the owner
	// lock is released when l's connections are.
	crash func(l *ledger.Ledger)
}

// testSchema is the schema the PostgreSQL ledgers of the tests share, as
// the replicas of one agent do.
const testSchema = "switchboard_test"

var backends = []backend{
	{
		name:  "sqlite",
		place: func(t *testing.T) string { return filepath.Join(t.TempDir(), "l.db") },
		open: func(t *testing.T, place string, opts *ledger.Options) *ledger.Ledger {
			t.Helper()
			l, err := ledger.Open(place, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		},
		crash: func(*ledger.Ledger) {},
	},
	{
		name:  "postgres",
		place: func(t *testing.T) string { return pgtest.Shared(t).NewDatabase(t) },
		open:  openPG,
		crash: func(l *ledger.Ledger) { l.Close() },
	},
}

func openPG(t *testing.T, url string, opts *ledger.Options) *ledger.Ledger {
	t.Helper()
	po := &ledger.PostgresOptions{Schema: testSchema}
	if opts != nil {
		po.Options = *opts
	}
	l, err := ledger.OpenPostgres(context.Background(), url, po)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// eachBackend runs f as a subtest for every backend.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

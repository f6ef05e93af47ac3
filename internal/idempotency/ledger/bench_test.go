package ledger_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/pgtest"
)

// BenchmarkKeyedCall is what the ledger adds to one keyed call of a
// recorded tool: the claim (Begin, committed before the tool runs) and the
// result (Finish, committed before the answer), on each storage:
//
//   - sqlite: the agent's file, WAL, synchronous=FULL (as in production);
//   - postgres: a local PostgreSQL 15 over loopback TCP with its durable
//     defaults (fsync, synchronous_commit on), as a shared database would
//     run; the tests' server turns those off, this one does not.
//
// Run the variants interleaved, each round in its own process:
//
//	go run ./internal/benchratio/rounds -n 7 -pkg ./internal/idempotency/ledger -bench KeyedCall \
//		-variants sqlite,postgres -benchtime 400x | go run ./internal/benchratio -baseline sqlite
func BenchmarkKeyedCall(b *testing.B) {
	ctx := context.Background()
	run := func(b *testing.B, l *ledger.Ledger) {
		result := []byte(`{"content":[{"type":"text","text":"done"}]}`)
		b.ResetTimer()
		for range b.N {
			key := idempotency.NewKey(time.Now())
			if rec, err := l.Begin(ctx, key, "effect", "fp"); err != nil || rec != nil {
				b.Fatal(rec, err)
			}
			if err := l.Finish(ctx, key, result); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("sqlite", func(b *testing.B) {
		l, err := ledger.Open(filepath.Join(b.TempDir(), "l.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		run(b, l)
	})
	b.Run("postgres", func(b *testing.B) {
		srv := pgtest.StartWith(b, &pgtest.Options{Durable: true})
		l, err := ledger.OpenPostgres(ctx, srv.NewDatabase(b), &ledger.PostgresOptions{Schema: testSchema})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		run(b, l)
	})
}

package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-run/switchboard/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestShared: two tests' databases on the one shared server are apart.
func TestShared(t *testing.T) {
	s := pgtest.Shared(t)
	if pgtest.Shared(t) != s {
		t.Fatal("Shared started a second server")
	}
	a, b := s.NewDatabase(t), s.NewDatabase(t)
	if a == b {
		t.Fatalf("one database twice: %s", a)
	}
	c, err := pgx.Connect(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	c.Close(context.Background())
}

// TestStartStopRestart: the server answers, stops, and answers again on
// the same port with the same data.
func TestStartStopRestart(t *testing.T) {
	s := pgtest.Start(t)
	url := s.NewDatabase(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if err := c.Ping(ctx); err == nil {
		t.Fatal("a connection survived the server's stop")
	}
	c.Close(ctx)
	s.Restart(t)
	c, err = pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v int
	if err := c.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v); err != nil || v != 42 {
		t.Fatalf("after restart: %d, %v", v, err)
	}
}

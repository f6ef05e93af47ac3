package pgdb_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/pgdb"
	"github.com/switchboard-run/switchboard/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestCheckURL(t *testing.T) {
	for _, c := range []struct {
		url  string
		ok   bool
		name string // what the error names
	}{
		{"postgres://u@h/db", true, ""},
		{"postgresql://u:p@h:5433/db?sslmode=require", true, ""},
		{"mysql://u:secret@h/db", false, `"mysql"`},
		{"h/db", false, "no scheme"},
		{"://", false, "cannot be parsed"},
	} {
		err := pgdb.CheckURL(c.url)
		if c.ok != (err == nil) {
			t.Errorf("CheckURL(%q) = %v", c.url, err)
			continue
		}
		if err != nil && (!errors.Is(err, pgdb.ErrScheme) || !strings.Contains(err.Error(), c.name) || strings.Contains(err.Error(), "secret")) {
			t.Errorf("CheckURL(%q) = %v; want ErrScheme naming %s, never the password", c.url, err, c.name)
		}
	}
}

// TestSchemaOfAnyAgentName: an agent name that is not a bare SQL
// identifier still gets its schema, and the connections' search_path
// finds it; migrations apply once.
func TestSchemaOfAnyAgentName(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	schema, err := pgdb.SchemaFor("Note-Taker")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pool, err := pgdb.Open(ctx, url, pgdb.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	migrations := []pgdb.Migration{`CREATE TABLE t (v int)`, `INSERT INTO t VALUES (1)`}
	for range 2 {
		if err := pgdb.Migrate(ctx, pool, "test", migrations); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows %d, %v; want the migrations applied once", n, err)
	}
	if _, err := pgdb.SchemaFor(strings.Repeat("x", 60)); err == nil {
		t.Fatal("a schema name longer than PostgreSQL's 63 bytes")
	}
}

package upcmd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/pgdb"
	"github.com/switchboard-run/switchboard/internal/pgtest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
)

// TestUpDatabase: `up --database` reaches every agent it supervises: a note
// stored through the studio is in the PostgreSQL database, in packrat's
// schema, and abacus's ledger is in its own schema.
func TestUpDatabase(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.NewDatabase(t)
	dir := projecttest.New(t, "abacus", "packrat")
	// The flag, not the environment: the studio passes it on to agents.
	p := proctest.StartProcess(t, dir, nil, 60*time.Second, upReady, switchboardBin, "up", "--dir", dir, "--listen", "127.0.0.1:0", "--database", url)
	base := p.Ready

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/api/agents/packrat/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": "in postgres"}})
	if err != nil || res.IsError {
		t.Fatalf("store_note: %v %+v", err, res)
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var text string
	if err := c.QueryRow(ctx, `SELECT text FROM switchboard_packrat.notes`).Scan(&text); err != nil || text != "in postgres" {
		t.Fatalf("the note in PostgreSQL: %q, %v", text, err)
	}
	for _, agent := range []string{"abacus", "packrat"} {
		schema, _ := pgdb.SchemaFor(agent)
		var v int
		if err := c.QueryRow(ctx, `SELECT version FROM `+schema+`.schema_version WHERE component = 'idempotency_ledger'`).Scan(&v); err != nil || v != 1 {
			t.Fatalf("%s's ledger in PostgreSQL: version %d, %v", agent, v, err)
		}
	}
}

// TestUpDatabaseErrors: a bad scheme is a usage error (2) naming it; an
// unreachable database fails the start (1) naming host and database,
// never the password.
func TestUpDatabaseErrors(t *testing.T) {
	run := func(args ...string) (int, string) {
		var stdout, stderr strings.Builder
		code := Main(t.Context(), append([]string{"--dir", t.TempDir()}, args...), strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	if code, out := run("--database", "mysql://u:hunter2@127.0.0.1/x"); code != 2 || !strings.Contains(out, `"mysql"`) || strings.Contains(out, "hunter2") {
		t.Errorf("bad scheme: exit %d %q", code, out)
	}
	srv := pgtest.Start(t)
	srv.Stop() // its port, with nothing listening
	code, out := run("--database", "postgres://u:hunter2@"+strings.TrimPrefix(strings.TrimSuffix(srv.URL("faraway"), "?sslmode=disable"), "postgres://postgres@"))
	if code != 1 || !strings.Contains(out, "127.0.0.1:") || !strings.Contains(out, "/faraway") || strings.Contains(out, "hunter2") {
		t.Errorf("unreachable database: exit %d %q", code, out)
	}
}

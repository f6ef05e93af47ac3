package studio

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/internal/pgtest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/proxy/sessionstore"
)

// TestSessionSurvivesStudioRestart: a go-sdk client with no recovery of
// its own keeps its session across a restart of the studio itself (and so
// of every agent under it): the new studio, on the same address and
// project, finds the session in <Dir>/.switchboard/studio/continuity.db,
// vouches for its id, and re-establishes it at abacus's new process. The
// same session id, every call answered; another credential still gets the
// 404; the file is 0600 and holds no credential and no _meta.
func TestSessionSurvivesStudioRestart(t *testing.T) { studioRestartRun(t, "") }

// TestSessionSurvivesStudioRestartOnPostgres is the same with the studio's
// state in PostgreSQL (Options.DatabaseURL, `up --database`).
func TestSessionSurvivesStudioRestartOnPostgres(t *testing.T) {
	studioRestartRun(t, pgtest.Start(t).NewDatabase(t))
}

func studioRestartRun(t *testing.T, database string) {
	dir := projecttest.New(t, "abacus")
	first := startStudio(t, dir, &Options{DatabaseURL: database})
	addr := strings.TrimPrefix(first.URL(), "http://")
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	const secret = "Bearer alice-secret-token"
	cl := mcp.NewClient(&mcp.Implementation{Name: "studio-restart-test", Version: "0"}, nil)
	cs, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: first.AgentURL("abacus"), HTTPClient: &http.Client{Transport: headerRT{tr, secret}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	id := cs.ID()
	calc := func(expr, want string) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "calculate", Arguments: map[string]any{"expression": expr}})
		if err != nil {
			t.Fatalf("calculate %s on session %s: %v", expr, id, err)
		}
		if res.IsError || !strings.Contains(toolText(res), want) {
			t.Fatalf("calculate %s: %s", expr, toolText(res))
		}
	}
	calc("1+1", "2")
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()

	if database == "" {
		db := filepath.Join(dir, ".switchboard", "studio", sessionstore.File)
		fi, err := os.Stat(db)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", db, fi.Mode().Perm())
		}
		for _, f := range []string{db, db + "-wal"} {
			b, _ := os.ReadFile(f)
			for _, leak := range []string{"alice-secret-token", "Bearer", "_meta"} {
				if bytes.Contains(b, []byte(leak)) {
					t.Errorf("%s holds %q", filepath.Base(f), leak)
				}
			}
		}
	}

	if database != "" {
		c, err := pgx.Connect(t.Context(), database)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		var rows string
		err = c.QueryRow(t.Context(), `SELECT count(*), coalesce(string_agg(scope || ' ' || cred || ' ' || convert_from(state, 'UTF8'), ' '), '') FROM switchboard_studio.continuity_sessions`).Scan(&n, &rows)
		c.Close(t.Context())
		if err != nil || n != 1 || !strings.Contains(rows, "studio/abacus") {
			t.Fatalf("the studio's sessions in PostgreSQL: %d rows %q, %v; want abacus's one", n, rows, err)
		}
		for _, leak := range []string{"alice-secret-token", "Bearer", "_meta"} {
			if strings.Contains(rows, leak) {
				t.Errorf("continuity_sessions holds %q", leak)
			}
		}
	}

	second := startStudio(t, dir, &Options{Listen: addr, DatabaseURL: database})
	for _, expr := range []string{"6*7", "2+3"} {
		calc(expr, map[string]string{"6*7": "42", "2+3": "5"}[expr])
	}
	if cs.ID() != id {
		t.Fatalf("the session id changed from %s to %s", id, cs.ID())
	}
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatalf("tools/list after the studio's restart: %v", err)
	}
	m := second.agents["abacus"]
	if got := m.continuity.Restored(); got != 1 {
		t.Errorf("the new studio restored %d sessions, want 1", got)
	}
	if _, renewals := m.continuity.Kept(); renewals != 1 {
		t.Errorf("the new studio re-established %d upstream sessions, want 1", renewals)
	}

	bob := &mcphttptest.Client{URL: second.AgentURL("abacus"), HTTP: hc, Header: map[string]string{"Authorization": "Bearer bob"}}
	r, err := bob.Call(t.Context(), id, 9, "tools/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusNotFound {
		t.Errorf("alice's session presented by bob after the studio's restart: %v, want 404", r)
	}
}

// headerRT sets Authorization on every request.
type headerRT struct {
	base http.RoundTripper
	auth string
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", h.auth)
	return h.base.RoundTrip(r)
}

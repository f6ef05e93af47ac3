package agentcmd_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/pgdb"
	"github.com/switchboard-run/switchboard/internal/pgtest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/testbin"
)

var (
	switchboardBin string
	moduleRoot     string
)

func TestMain(m *testing.M) { testbin.Main{Bin: &switchboardBin, Root: &moduleRoot}.Run(m) }

const readyTimeout = 30 * time.Second

// replica starts a real `switchboard agent serve` of packrat on database
// url, with a data directory of its own, and connects a client session.
func replica(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	p := proctest.StartProcess(t, t.TempDir(), nil, readyTimeout, "switchboard agent ", switchboardBin,
		"agent", "serve", "--agent", filepath.Join(moduleRoot, "agents", "packrat"), "--data-dir", t.TempDir(), "--database", url)
	_, endpoint, ok := strings.Cut(p.Ready, " listening on ")
	if !ok {
		t.Fatalf("ready line %q", p.Ready)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v\n%s", endpoint, err, p.Stderr())
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type stored struct {
	ID     int64 `json:"id"`
	Stored bool  `json:"stored"`
}

func storeNote(t *testing.T, cs *mcp.ClientSession, text, key string) (stored, bool, error) {
	p := &mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": text}}
	if key != "" {
		p.Meta = mcp.Meta{idempotency.MetaKey: key}
	}
	res, err := cs.CallTool(t.Context(), p)
	if err != nil {
		return stored{}, false, err
	}
	if res.IsError {
		return stored{}, false, fmt.Errorf("tool error: %v", res.Content)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return stored{}, false, err
	}
	var out stored
	if err := json.Unmarshal(raw, &out); err != nil {
		return stored{}, false, err
	}
	return out, res.Meta[idempotency.ReplayMetaKey] == true, nil
}

// TestReplicasShareOneDatabase: two real packrat processes on one
// PostgreSQL. The same keyed store_note sent to both at once, and then
// again to each, stores one note (every other answer a replay of it); notes
// stored on both at once get ids unique across the replicas; each replica
// lists the other's notes.
func TestReplicasShareOneDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips two packrat replicas on one PostgreSQL database; run it with go test -run '^TestReplicasShareOneDatabase$' ./internal/agentcmd")
	}
	srv := pgtest.Start(t)
	url := srv.NewDatabase(t)
	var a, b *mcp.ClientSession
	var start sync.WaitGroup // both replicas start at once: migrations apply once
	start.Go(func() { a = replica(t, url) })
	start.Go(func() { b = replica(t, url) })
	start.Wait()
	if a == nil || b == nil {
		t.FailNow()
	}

	const keyed = 20
	replays := 0
	for i := range keyed {
		key := idempotency.NewKey(time.Now())
		text := fmt.Sprintf("keyed %d", i)
		var (
			g        errgroup.Group
			outs     [2]stored
			replayed [2]bool
		)
		for j, cs := range []*mcp.ClientSession{a, b} {
			g.Go(func() (err error) { outs[j], replayed[j], err = storeNote(t, cs, text, key); return })
		}
		if err := g.Wait(); err != nil {
			t.Fatalf("keyed store %d: %v", i, err)
		}
		if outs[0].ID != outs[1].ID || replayed[0] == replayed[1] {
			t.Fatalf("keyed store %d sent to both: %+v replayed %v; want one note, one replay", i, outs, replayed)
		}
		for j, cs := range []*mcp.ClientSession{a, b} { // and again, to each
			out, rep, err := storeNote(t, cs, text, key)
			if err != nil || !rep || out.ID != outs[0].ID {
				t.Fatalf("keyed store %d resent to replica %d: %+v, replay %v, %v", i, j, out, rep, err)
			}
		}
		replays++
	}

	const plain = 30
	var (
		mu  sync.Mutex
		ids = map[int64]bool{}
		g   errgroup.Group
	)
	g.SetLimit(6)
	for i := range plain {
		for _, cs := range []*mcp.ClientSession{a, b} {
			g.Go(func() error {
				out, _, err := storeNote(t, cs, fmt.Sprintf("plain %d", i), "")
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				if ids[out.ID] {
					return fmt.Errorf("id %d given twice", out.ID)
				}
				ids[out.ID] = true
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	for j, cs := range []*mcp.ClientSession{a, b} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_notes", Arguments: map[string]any{"limit": 100}})
		if err != nil || res.IsError {
			t.Fatalf("list_notes on replica %d: %v %v", j, err, res)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var out struct {
			Count int `json:"count"`
		}
		json.Unmarshal(raw, &out)
		if out.Count != keyed+2*plain {
			t.Fatalf("replica %d lists %d notes, want %d (one per keyed call, one per plain call)", j, out.Count, keyed+2*plain)
		}
	}
	t.Logf("%d keyed calls sent to both replicas and resent to each: %d notes, %d replays; %d plain stores: %d unique ids", keyed, keyed, keyed+2*replays, 2*plain, len(ids))
}

// TestDatabaseFlagErrors: a bad scheme is a usage error naming it; an
// unreachable database fails at start naming host and database, never the
// password.
func TestDatabaseFlagErrors(t *testing.T) {
	run := func(env []string, args ...string) (int, string) {
		cmd := exec.Command(switchboardBin, append([]string{"agent", "serve", "--agent", filepath.Join(moduleRoot, "agents", "packrat"), "--data-dir", t.TempDir()}, args...)...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(cmd.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run(nil, "--database", "mysql://u:hunter2@127.0.0.1/notes"); code != 2 || !strings.Contains(out, `"mysql"`) || strings.Contains(out, "hunter2") {
		t.Errorf("bad scheme: exit %d %q, want 2 naming the scheme, not the password", code, out)
	}
	if code, out := run([]string{pgdb.EnvURL + "=sqlite:///x.db"}); code != 2 || !strings.Contains(out, `"sqlite"`) {
		t.Errorf("bad scheme in $%s: exit %d %q, want 2 naming it", pgdb.EnvURL, code, out)
	}
	// A port nothing listens on: the pgtest server's, once stopped.
	srv := pgtest.Start(t)
	srv.Stop()
	where := fmt.Sprintf("127.0.0.1:%d/faraway", srv.Port())
	code, out := run(nil, "--database", fmt.Sprintf("postgres://u:hunter2@127.0.0.1:%d/faraway?connect_timeout=5", srv.Port()))
	if code != 1 || !strings.Contains(out, where) || strings.Contains(out, "hunter2") {
		t.Errorf("unreachable database: exit %d %q, want 1 naming %s, not the password", code, out, where)
	}
}

// TestServeTokenEnv: `agent serve --token-env VAR` requires the bearer token
// VAR holds on its MCP endpoint and /metrics (401 without it, served with
// it), not on its probes; VAR unset is a usage error naming it.
func TestServeTokenEnv(t *testing.T) {
	const token = "s3cret-token-for-the-test"
	p := proctest.StartProcess(t, t.TempDir(), []string{"PACKRAT_TOKEN=" + token}, readyTimeout, "switchboard agent ", switchboardBin,
		"agent", "serve", "--agent", filepath.Join(moduleRoot, "agents", "abacus"), "--data-dir", t.TempDir(), "--token-env", "PACKRAT_TOKEN")
	_, endpoint, ok := strings.Cut(p.Ready, " listening on ")
	if !ok {
		t.Fatalf("ready line %q", p.Ready)
	}
	base := strings.TrimSuffix(endpoint, "/mcp")
	status := func(path, auth string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("/metrics", ""); got != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d, want 401", got)
	}
	if got := status("/metrics", "Bearer "+token); got != http.StatusOK {
		t.Errorf("/metrics with the token: %d, want 200", got)
	}
	if got := status("/readyz", ""); got != http.StatusOK {
		t.Errorf("/readyz without the token: %d, want 200 (probes carry none)", got)
	}
	connect := func(hdr string) error {
		hc := &http.Client{Transport: headerTransport{hdr}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).
			Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
		if err == nil {
			cs.Close()
		}
		return err
	}
	if err := connect(""); err == nil {
		t.Errorf("MCP without the token: connected, want 401")
	}
	if err := connect("Bearer " + token); err != nil {
		t.Errorf("MCP with the token: %v", err)
	}
	if strings.Contains(p.Stderr(), token) {
		t.Errorf("the token is in the agent's log:\n%s", p.Stderr())
	}

	cmd := exec.Command(switchboardBin, "agent", "serve", "--agent", filepath.Join(moduleRoot, "agents", "abacus"), "--token-env", "NO_SUCH_TOKEN_VAR")
	out, err := cmd.CombinedOutput()
	var xe *exec.ExitError
	if !errors.As(err, &xe) || xe.ExitCode() != 2 || !strings.Contains(string(out), "NO_SUCH_TOKEN_VAR is not set") {
		t.Errorf("--token-env naming an unset variable: %v\n%s\nwant exit 2 naming it", err, out)
	}
}

// headerTransport sets Authorization on every request when non-empty.
type headerTransport struct{ auth string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.auth != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", h.auth)
	}
	return http.DefaultTransport.RoundTrip(r)
}

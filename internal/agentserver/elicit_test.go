package agentserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// TestElicitNeedsOneCaller: an elicitation from a server the agent called
// is forwarded only when the asks in flight are all one caller's; with
// none, or with several callers', it is refused (ErrNobodyToAsk) rather
// than put to someone who may not have asked. The forward itself is
// tested end to end (internal/askcmd TestE2EElicitationReachesThePerson).
func TestElicitNeedsOneCaller(t *testing.T) {
	a := newAsker(&agentdef.Definition{Name: "oracle", Elicit: true}, nil, slog.New(slog.DiscardHandler))
	req := &mcp.ElicitRequest{Params: &mcp.ElicitParams{Message: "Delete 3 notes?"}}
	if _, err := a.elicit(context.Background(), req); !errors.Is(err, ErrNobodyToAsk) {
		t.Fatalf("no ask in flight: %v, want ErrNobodyToAsk", err)
	}
	// Two callers' sessions: distinct pointers are all elicit compares.
	one, two := &mcp.ServerSession{}, &mcp.ServerSession{}
	a.callers = map[*askCall]struct{}{
		{ctx: context.Background(), session: one}: {},
		{ctx: context.Background(), session: two}: {},
	}
	if _, err := a.elicit(context.Background(), req); !errors.Is(err, ErrNobodyToAsk) {
		t.Fatalf("two callers' asks in flight: %v, want ErrNobodyToAsk", err)
	}
}

// TestElicitByCallerEra: the oracle (builtin model, "elicit": true) is asked
// to delete notes at packrat, both served here over real HTTP. A caller of
// the session era is asked, and its "yes" deletes them; a caller of the
// sessionless era cannot be asked during its call (go-sdk v1.8.0 refuses a
// server-to-client request on a 2026-07-28 request), so the oracle
// declines for it at once: the ask answers, its caller's handler is never
// called, and packrat deletes nothing.
func TestElicitByCallerEra(t *testing.T) {
	_, packrat := newTestServer(t, &agentdef.Definition{Name: "packrat", Tools: []string{"packrat"}})
	dir := filepath.Join(t.TempDir(), "oracle")
	if err := os.MkdirAll(filepath.Join(dir, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `{"mcpServers": {"packrat": {"url": "` + packrat.URL + `"}}}`
	if err := os.WriteFile(filepath.Join(dir, "tools", "mcp.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.json"), []byte(`{"name": "oracle", "description": "coordinator", "model": {"name": "builtin"}, "max_depth": 4, "elicit": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	def, err := agentdef.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, oracle := newTestServer(t, def)
	direct := connect(t, packrat.URL, nil)
	count := func() int {
		t.Helper()
		res, err := direct.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_notes", Arguments: map[string]any{"tag": "old", "limit": 100}})
		if err != nil {
			t.Fatal(err)
		}
		m, _ := res.StructuredContent.(map[string]any)
		n, _ := m["count"].(float64)
		return int(n)
	}
	for i := range 3 {
		if _, err := direct.CallTool(t.Context(), &mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": fmt.Sprint("old ", i), "tags": []string{"old"}}}); err != nil {
			t.Fatal(err)
		}
	}

	var asked atomic.Int32
	opts := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	}}
	ask := func(version string) *mcp.CallToolResult {
		t.Helper()
		cs := connectEra(t, oracle.URL, opts, version)
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "delete_notes tag=old"}})
		if err != nil {
			t.Fatalf("ask at %s: %v", version, err)
		}
		return res
	}

	res := ask("")
	if asked.Load() != 0 || count() != 3 || strings.Contains(mcptest.Text(res), "outcome_unknown") || !strings.Contains(mcptest.Text(res), "delete") {
		t.Fatalf("sessionless caller: asked %d times, %d notes left, answer %q; want a decline: never asked, 3 left, no unknown outcome",
			asked.Load(), count(), mcptest.Text(res))
	}
	res = ask(pool.Protocol20251125)
	if asked.Load() != 1 || count() != 0 {
		t.Fatalf("session caller: asked %d times, %d notes left, answer %q; want asked once and the notes gone", asked.Load(), count(), mcptest.Text(res))
	}
}

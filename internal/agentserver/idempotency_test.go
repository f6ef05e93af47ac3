package agentserver

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

func keyed(name string, args map[string]any, key string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{idempotency.MetaKey: key}}
}

func scrape(t *testing.T, s *Server) string {
	t.Helper()
	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// TestIdempotencyDeclared: agent serve advertises idempotency; packrat's
// store_note is transactional (its record is in packrat.db, not in the
// ledger), abacus's tools are pure (recomputed, no record), and the
// guard's counts are in the agent's metrics.
func TestIdempotencyDeclared(t *testing.T) {
	s, ts := newTestServer(t, &agentdef.Definition{Name: "kappa", Tools: []string{"packrat", "abacus"}})
	cs := connect(t, ts.URL, nil)
	capab, ok := cs.InitializeResult().Capabilities.Experimental[idempotency.CapabilityName].(map[string]any)
	if !ok || capab["version"] != float64(1) {
		t.Fatalf("capability %#v", cs.InitializeResult().Capabilities.Experimental)
	}

	key := idempotency.NewKey(time.Now())
	store := keyed("store_note", map[string]any{"text": "once", "tags": []string{"k"}}, key)
	first, err := cs.CallTool(t.Context(), store)
	if err != nil || first.IsError {
		t.Fatal(err, first)
	}
	again, err := cs.CallTool(t.Context(), store)
	if err != nil || again.Meta[idempotency.ReplayMetaKey] != true || mcptest.Text(again) != mcptest.Text(first) {
		t.Fatalf("repeat: %v, meta %v, %q vs %q", err, again.Meta, mcptest.Text(again), mcptest.Text(first))
	}
	a, _ := json.Marshal(first.StructuredContent)
	b, _ := json.Marshal(again.StructuredContent)
	if string(a) != string(b) {
		t.Fatalf("replayed structured content %s, first %s", b, a)
	}
	list, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_notes", Arguments: map[string]any{"tag": "k"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(mcptest.Text(list), "1 note ") {
		t.Fatalf("archive after a repeated store: %q", mcptest.Text(list))
	}
	n, err := s.idem.ledger.Count(t.Context())
	if err != nil || n != 0 {
		t.Fatalf("ledger has %d records (%v); store_note's record belongs in packrat.db", n, err)
	}

	calc := keyed("calculate", map[string]any{"expression": "6*7"}, idempotency.NewKey(time.Now()))
	for range 2 {
		res, err := cs.CallTool(t.Context(), calc)
		if err != nil || res.Meta[idempotency.ReplayMetaKey] != nil {
			t.Fatalf("calculate: %v %v", err, res)
		}
	}
	if st := s.IdempotencyStats(); st.Recorded != 1 || st.Replays != 1 {
		t.Fatalf("guard stats %+v", st)
	}
	m := scrape(t, s)
	for _, want := range []string{
		MetricIdempotency + `{outcome="replay",process="kappa"} 1`,
		MetricIdempotency + `{outcome="recorded",process="kappa"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestAskRecorded: a repeated keyed ask returns the recorded answer; the
// model turn runs once.
func TestAskRecorded(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tools", "mcp.json"), []byte(`{"mcpServers": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, ts := newTestServer(t, &agentdef.Definition{Name: "lambda", Dir: dir, Model: agentdef.Model{Name: "builtin"}})
	cs := connect(t, ts.URL, nil)
	ask := keyed("ask", map[string]any{"task": "hello"}, idempotency.NewKey(time.Now()))
	first, err := cs.CallTool(t.Context(), ask)
	if err != nil {
		t.Fatal(err)
	}
	again, err := cs.CallTool(t.Context(), ask)
	if err != nil || again.Meta[idempotency.ReplayMetaKey] != true || mcptest.Text(again) != mcptest.Text(first) {
		t.Fatalf("repeat: %v %v", err, again)
	}
	// The turn ran once: one ask counted, whatever its outcome.
	lines := strings.Split(grepLines(scrape(t, s), MetricAsks+`{`), "\n")
	if len(lines) != 1 || !strings.HasSuffix(lines[0], "} 1") {
		t.Fatalf("asks counted: %q", lines)
	}
	_, err = cs.CallTool(t.Context(), keyed("ask", map[string]any{"task": "another task"}, ask.Meta[idempotency.MetaKey].(string)))
	if code, ok := ledger.ErrCode(err); !ok || code != idempotency.CodeConflict {
		t.Fatalf("another task with the same key: %v", err)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

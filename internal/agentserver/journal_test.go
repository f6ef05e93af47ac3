package agentserver

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/journal"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// TestJournalFullRefusesAsk: with its journal at its cap (one run, failed
// because the model endpoint is down, so it may still be resumed), the
// ask tool refuses a new task with an error that says why and that nothing
// ran, and keeps the failed run: a resume of it is still tried (and fails
// again the same way, the endpoint being down), not refused as unknown.
func TestJournalFullRefusesAsk(t *testing.T) {
	zero := 0
	def := &agentdef.Definition{Name: "lambda", Instructions: "You are lambda.",
		Model: agentdef.Model{BaseURL: mcptest.DeadURL(t) + "/v1", Name: "m", MaxRetries: &zero}}
	s, err := New(def, &Options{DataDir: t.TempDir(), Journal: &journal.Options{MaxRuns: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.CloseSessions()
		ts.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	cs := connect(t, ts.URL, nil)
	ask := func(args map[string]any) (*mcp.CallToolResult, string) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res, mcptest.Text(res)
	}

	res, text := ask(map[string]any{"task": "first"})
	if !res.IsError || !strings.Contains(text, "model request failed") {
		t.Fatalf("first ask: %q, want the model's failure", text)
	}
	var first struct {
		RunID string `json:"run_id"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &first); err != nil || first.RunID == "" {
		t.Fatalf("first ask's result names no run: %s", b)
	}

	res, text = ask(map[string]any{"task": "second"})
	if !res.IsError || !strings.Contains(text, "run journal full") || !strings.Contains(text, "the new run was not started") || !strings.Contains(text, "1 runs") {
		t.Fatalf("second ask: %q, want the journal's refusal", text)
	}

	res, text = ask(map[string]any{"task": "", "resume": first.RunID})
	if !res.IsError || !strings.Contains(text, "model request failed") {
		t.Fatalf("resume of the failed run: %q, want it tried again (and the model's failure)", text)
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"task": "", "resume": "no-such-run"}, `no run "no-such-run" in its journal`},
		{map[string]any{"task": "both", "resume": first.RunID}, "give a task or a run to resume, not both"},
	} {
		if res, text := ask(c.args); !res.IsError || !strings.Contains(text, c.want) {
			t.Errorf("ask %v: %q, want %q", c.args, text, c.want)
		}
	}
}

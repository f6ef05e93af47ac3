package agentcmd_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/agentserver"
	"github.com/switchboard-run/switchboard/internal/journal"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// TestJournalLogAppend: a real agent started with
// SWITCHBOARD_JOURNAL_LOG=append (what the studio passes on to its
// agents) journals an ask through the segment file, and GET /runs sees
// the run at once (a read folds what it could see). Stopped and started
// again with the default, tables, on the same data directory, it still
// lists the run and has removed the segment: the opt-in can be undone.
func TestJournalLogAppend(t *testing.T) {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`))
	}))
	t.Cleanup(model.Close)
	agentDir := filepath.Join(t.TempDir(), "lambda")
	writeFile(t, filepath.Join(agentDir, "agent.json"), `{"name": "lambda", "description": "Lambda.", "instructions": "You are lambda.",
		"model": {"name": "m", "base_url": "`+model.URL+`/v1", "max_retries": 0}, "tools": ["abacus"], "max_steps": 2}`)
	dataDir := t.TempDir()
	segment := filepath.Join(dataDir, journal.File) + journal.SegmentSuffix

	start := func(env []string) (*proctest.Process, string) {
		t.Helper()
		p := proctest.StartProcess(t, t.TempDir(), env, readyTimeout, "switchboard agent ", switchboardBin,
			"agent", "serve", "--agent", agentDir, "--data-dir", dataDir)
		_, endpoint, _ := strings.Cut(p.Ready, " listening on ")
		return p, endpoint
	}
	runs := func(p *proctest.Process, endpoint string) studioapi.JournalRuns {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, strings.TrimSuffix(endpoint, "/mcp")+"/runs", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var list studioapi.JournalRuns
		if err := json.NewDecoder(resp.Body).Decode(&list); resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("GET /runs: %d (%v)\n%s", resp.StatusCode, err, p.Stderr())
		}
		return list
	}
	stop := func(p *proctest.Process) {
		t.Helper()
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code, err := p.Wait(time.Minute); code != 0 || err != nil {
			t.Fatalf("exit %d (%v) after SIGTERM\n%s", code, err, p.Stderr())
		}
	}

	p, endpoint := start([]string{agentserver.EnvJournalLog + "=" + agentserver.JournalLogAppend})
	if _, err := os.Stat(segment); err != nil {
		t.Fatalf("the agent started with %s=append has no segment: %v", agentserver.EnvJournalLog, err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v\n%s", endpoint, err, p.Stderr())
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "say done"}})
	cs.Close()
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Answer string `json:"answer"`
		RunID  string `json:"run_id"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil || res.IsError || out.Answer != "done" || out.RunID == "" {
		t.Fatalf("ask answered %s (error %v), want the answer and its run\n%s", raw, res.IsError, p.Stderr())
	}
	if list := runs(p, endpoint); len(list.Runs) != 1 || list.Runs[0].ID != out.RunID || list.Runs[0].State != studioapi.JournalDone || list.Runs[0].Steps != 1 {
		t.Fatalf("GET /runs on the append path listed %+v, want run %s, done in 1 step", list, out.RunID)
	}
	stop(p)

	p, endpoint = start(nil)
	if list := runs(p, endpoint); len(list.Runs) != 1 || list.Runs[0].ID != out.RunID || list.Runs[0].State != studioapi.JournalDone {
		t.Fatalf("GET /runs after a restart on the tables path listed %+v, want run %s, done", list, out.RunID)
	}
	if _, err := os.Stat(segment); !os.IsNotExist(err) {
		t.Errorf("the segment after a restart on the tables path: %v, want it removed", err)
	}
	stop(p)
}

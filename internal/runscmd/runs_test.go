package runscmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studio"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/testbin"
	"github.com/switchboard-run/switchboard/internal/waittest"
	"github.com/switchboard-run/switchboard/pool"
)

var (
	switchboardBin string
	moduleRoot     string
)

func TestMain(m *testing.M) { testbin.Main{Bin: &switchboardBin, Root: &moduleRoot}.Run(m) }

// studioWithLambda runs a real studio with agent lambda (abacus's tools,
// its model at a test endpoint that is down until up is set) and abacus.
func studioWithLambda(t *testing.T) (*studio.Studio, *atomic.Bool) {
	t.Helper()
	var up atomic.Bool
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down for the test", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"4"}}]}`))
	}))
	t.Cleanup(model.Close)
	dir := projecttest.New(t, "abacus")
	def, err := os.ReadFile(filepath.Join(moduleRoot, "agents", "abacus", "agent.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	json.Unmarshal(def, &d)
	d["name"] = "lambda"
	d["model"] = map[string]any{"name": "m", "base_url": model.URL + "/v1", "max_retries": 0}
	b, _ := json.Marshal(d)
	os.MkdirAll(filepath.Join(dir, "agents", "lambda"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "agents", "lambda", "agent.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := studio.Start(t.Context(), &studio.Options{Dir: dir, Listen: "127.0.0.1:0", Executable: switchboardBin, AgentOutput: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := st.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return st, &up
}

func ask(t *testing.T, st *studio.Studio, task string) string {
	t.Helper()
	p := pool.New(nil)
	defer p.Close()
	res, err := p.CallTool(t.Context(), &pool.Server{Name: "lambda", URL: st.AgentURL("lambda")}, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": task}})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		RunID string `json:"run_id"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	return out.RunID
}

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), args, nil, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// lines decodes --json output: runs, and agents whose journal could not be
// read.
func lines(t *testing.T, out string) (runs []studioapi.JournalRun, failed []agentError) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var probe map[string]any
		if err := json.Unmarshal(sc.Bytes(), &probe); err != nil {
			t.Fatalf("--json line %q: %v", sc.Text(), err)
		}
		if _, ok := probe["error"]; ok {
			var f agentError
			json.Unmarshal(sc.Bytes(), &f)
			failed = append(failed, f)
			continue
		}
		var r studioapi.JournalRun
		json.Unmarshal(sc.Bytes(), &r)
		runs = append(runs, r)
	}
	return runs, failed
}

// TestRunsCommand: `switchboard runs` against a real studio lists the
// run that failed (the model down) as resumable with its task and why,
// and the run that answered, newest first, as JSON lines and as a table
// that says how to resume; filters narrow it; an agent stopped is named as
// unreadable (exit 1) while the others are still listed; bad flags are
// usage errors.
func TestRunsCommand(t *testing.T) {
	st, up := studioWithLambda(t)
	failedRun := ask(t, st, "add two and two")
	up.Store(true)
	doneRun := ask(t, st, "add two and two again")
	if failedRun == "" || doneRun == "" {
		t.Fatal("an ask named no run")
	}

	code, out, errs := run(t, "--studio", st.URL(), "--json")
	runs, failed := lines(t, out)
	if code != 0 || len(failed) != 0 || len(runs) != 2 {
		t.Fatalf("runs --json: exit %d, %d runs, %v; stderr %s\n%s", code, len(runs), failed, errs, out)
	}
	if runs[0].ID != doneRun || runs[0].State != studioapi.JournalDone || runs[1].ID != failedRun || !runs[1].Resumable || runs[1].Agent != "lambda" ||
		runs[1].Task != "add two and two" || !strings.Contains(runs[1].Why, "model request failed") || !runs[1].Keyed {
		t.Errorf("runs --json listed %+v", runs)
	}

	code, out, _ = run(t, "--studio", st.URL())
	for _, want := range []string{"AGENT", "RUN", "STATE", failedRun, doneRun, "failed", "done", "add two and two", "1 may be resumed: switchboard ask --agent lambda --resume " + failedRun} {
		if !strings.Contains(out, want) {
			t.Errorf("runs printed no %q:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Errorf("runs exited %d", code)
	}

	if code, out, _ := run(t, "--studio", st.URL(), "--json", "--state", "failed", "--agent", "lambda"); code != 0 {
		t.Errorf("runs --state failed: exit %d", code)
	} else if runs, _ := lines(t, out); len(runs) != 1 || runs[0].ID != failedRun {
		t.Errorf("runs --state failed listed %+v", runs)
	}
	for _, bad := range [][]string{{"--all", "--state", "done"}, {"--state", "lost"}, {"--limit", "0"}, {"--agent", "nobody"}} {
		if code, _, errs := run(t, append([]string{"--studio", st.URL()}, bad...)...); code != 2 || !strings.Contains(errs, strings.TrimPrefix(bad[0], "--")) {
			t.Errorf("runs %v: exit %d, %q; want a usage error naming it", bad, code, errs)
		}
	}

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, st.URL()+"/api/agents/abacus/stop", strings.NewReader(`{"reason":"test"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waittest.Until(t, 30*time.Second, "abacus stopped", func() bool {
		for _, a := range st.Agents() {
			if a.Name == "abacus" {
				return a.State == studioapi.StateStopped
			}
		}
		return false
	})
	code, out, errs = run(t, "--studio", st.URL(), "--json")
	runs, failed = lines(t, out)
	if code != 1 || len(runs) != 2 || len(failed) != 1 || failed[0].Agent != "abacus" || !strings.Contains(errs, "agent abacus") {
		t.Errorf("with abacus stopped: exit %d, %d runs, %+v, stderr %q; want 1, lambda's runs and abacus named", code, len(runs), failed, errs)
	}
}

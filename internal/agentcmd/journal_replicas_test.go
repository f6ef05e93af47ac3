package agentcmd_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/pgtest"
	"github.com/switchboard-run/switchboard/internal/proctest"
)

// TestJournalReplicaResumesAfterSIGKILL: two real replicas of a
// coordinator, each with a data directory of its own, share one
// PostgreSQL database (their idempotency ledger and their run journal).
// A keyed ask reaches the first; its model's step 1 stores a note through
// a real packrat process, and the first replica is SIGKILLed while step
// 2's model request is in flight. The same keyed ask, sent to the second
// replica, resumes the run from the shared journal: step 1 is replayed,
// not asked again; the note is stored once; only step 2 is asked again;
// the caller gets the answer, marked resumed.
func TestJournalReplicaResumesAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips a replica resuming a SIGKILLed replica's run from the shared PostgreSQL journal; run it with go test -run '^TestJournalReplicaResumesAfterSIGKILL$' ./internal/agentcmd")
	}
	url := pgtest.Start(t).NewDatabase(t)

	packrat := proctest.StartProcess(t, t.TempDir(), nil, readyTimeout, "switchboard agent ", switchboardBin,
		"agent", "serve", "--agent", filepath.Join(moduleRoot, "agents", "packrat"), "--data-dir", t.TempDir(), "--database", url)
	_, packratURL, _ := strings.Cut(packrat.Ready, " listening on ")

	// The model: step 1 stores a note; step 2's first request is held
	// until the replica that sent it is killed; asked again, it answers.
	var (
		mu     sync.Mutex
		served int
		last   []openai.ChatCompletionMessage // of the request that was answered last
	)
	arrived := make(chan struct{})
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req openai.ChatCompletionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		served++
		n := served
		mu.Unlock()
		reply := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant}
		finish := openai.FinishReasonStop
		switch n {
		case 1:
			reply.ToolCalls = []openai.ToolCall{{ID: "call_1", Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: "packrat__store_note", Arguments: `{"text":"buy milk"}`}}}
			finish = openai.FinishReasonToolCalls
		case 2:
			close(arrived)
			<-r.Context().Done() // the replica dies with this request open
			return
		case 3:
			mu.Lock()
			last = req.Messages
			mu.Unlock()
			reply.Content = "Stored: buy milk."
		default:
			t.Errorf("model request %d: beyond the script", n)
			http.Error(w, "beyond the script", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(openai.ChatCompletionResponse{ID: "chatcmpl-r", Object: "chat.completion", Model: req.Model,
			Choices: []openai.ChatCompletionChoice{{Message: reply, FinishReason: finish}}})
	}))
	t.Cleanup(model.Close)

	agentDir := filepath.Join(t.TempDir(), "coord")
	writeFile(t, filepath.Join(agentDir, "agent.json"), `{"name": "coord", "description": "Coordinator.", "instructions": "You are coord.",
		"model": {"name": "scripted", "base_url": "`+model.URL+`/v1", "max_retries": 0}, "tools": [], "max_steps": 5}`)
	writeFile(t, filepath.Join(agentDir, "tools", "mcp.json"), `{"mcpServers": {"packrat": {"url": "`+packratURL+`"}}}`)

	start := func() (*proctest.Process, *mcp.ClientSession) {
		p := proctest.StartProcess(t, t.TempDir(), nil, readyTimeout, "switchboard agent ", switchboardBin,
			"agent", "serve", "--agent", agentDir, "--data-dir", t.TempDir(), "--database", url)
		_, endpoint, _ := strings.Cut(p.Ready, " listening on ")
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).
			Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
		if err != nil {
			t.Fatalf("connect to %s: %v\n%s", endpoint, err, p.Stderr())
		}
		t.Cleanup(func() { cs.Close() })
		return p, cs
	}
	first, firstCS := start()
	_, secondCS := start()

	key := idempotency.NewKey(time.Now())
	ask := &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "remember to buy milk"}, Meta: mcp.Meta{idempotency.MetaKey: key}}
	failed := make(chan error, 1)
	go func() {
		_, err := firstCS.CallTool(t.Context(), ask)
		failed <- err
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatalf("step 2 was never asked; the first replica says:\n%s", first.Stderr())
	}
	if err := first.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Wait(time.Minute); err != nil {
		t.Fatal(err)
	}
	<-failed // the first caller lost its answer with the replica

	res, err := secondCS.CallTool(t.Context(), ask)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out struct {
		Answer        string `json:"answer"`
		Resumed       bool   `json:"resumed"`
		ReplayedSteps int    `json:"replayed_steps"`
		Steps         int    `json:"steps"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	if res.IsError || out.Answer != "Stored: buy milk." || !out.Resumed || out.ReplayedSteps != 1 {
		t.Fatalf("the second replica answered %s (error %v), want the answer, resumed, step 1 replayed", raw, res.IsError)
	}
	mu.Lock()
	n, msgs := served, last
	mu.Unlock()
	if n != 3 {
		t.Errorf("the model was asked %d times, want 3 (step 1 once, step 2 twice)", n)
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].ToolCallID != "call_1" || !strings.Contains(msgs[len(msgs)-1].Content, "Stored note") {
		t.Errorf("the resumed step 2 reads %+v, want the stored note's result", msgs)
	}

	// packrat, asked directly: the note is there once.
	pcs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: packratURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pcs.Close()
	lr, err := pcs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_notes", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = json.Marshal(lr.StructuredContent)
	var notes struct {
		Notes []struct {
			Text string `json:"text"`
		} `json:"notes"`
	}
	if err := json.Unmarshal(raw, &notes); err != nil {
		t.Fatal(err)
	}
	if len(notes.Notes) != 1 || notes.Notes[0].Text != "buy milk" {
		t.Errorf("packrat holds %s, want the note once", raw)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

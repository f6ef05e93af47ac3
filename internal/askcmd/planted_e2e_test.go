package askcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/studio"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// recordingModel is an OpenAI-compatible endpoint that keeps every request
// body it is sent. It asks for every tool named in calls the first time a
// turn offers them all, and answers "done" to every other request.
type recordingModel struct {
	URL   string
	calls []string // model tool names

	mu     sync.Mutex
	bodies []string
}

func newRecordingModel(t *testing.T, calls ...string) *recordingModel {
	m := &recordingModel{calls: calls}
	ts := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(ts.Close)
	m.URL = ts.URL + "/v1"
	return m
}

func (m *recordingModel) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.bodies = append(m.bodies, string(body))
	m.mu.Unlock()
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	offered := map[string]bool{}
	for _, tool := range req.Tools {
		if tool.Function != nil {
			offered[tool.Function.Name] = true
		}
	}
	answered := false
	for _, msg := range req.Messages {
		answered = answered || msg.Role == openai.ChatMessageRoleTool
	}
	reply := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: "done"}
	finish := openai.FinishReasonStop
	if !answered {
		for i, name := range m.calls {
			if offered[name] {
				reply.ToolCalls = append(reply.ToolCalls, call(fmt.Sprintf("call_%d", i), name, `{}`))
			}
		}
		if len(reply.ToolCalls) > 0 {
			reply.Content, finish = "", openai.FinishReasonToolCalls
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(openai.ChatCompletionResponse{
		ID: "chatcmpl-planted", Object: "chat.completion", Model: req.Model,
		Choices: []openai.ChatCompletionChoice{{Message: reply, FinishReason: finish}},
	})
}

func (m *recordingModel) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.bodies...)
}

// echoServer is a real go-sdk MCP server whose tools fail with what it was
// sent: "echo" reports a tool error quoting the request's headers; on a
// call of "crash" the connection is dropped, and the pool's error quotes
// the URL it posted to.
func echoServer(t *testing.T) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	echo := func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var quoted string
		if req.Extra != nil {
			quoted = fmt.Sprint(req.Extra.Header)
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "refused for headers " + quoted}}}, nil
	}
	empty := &mcp.Tool{InputSchema: map[string]any{"type": "object"}}
	for _, name := range []string{"echo", "crash"} {
		tool := *empty
		tool.Name, tool.Description = name, "fails with what it was sent"
		srv.AddTool(&tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := echo(ctx, req)
			res.Content = append(res.Content, &mcp.TextContent{Text: "(" + name + ")"})
			return res, err
		})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte(`"crash"`)) {
			// The connection dropped mid-call: the pool's error quotes
			// the request's URL, path and query.
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestE2ESecretsPlantedEverywhere: distinct secrets, each from an
// environment variable through ${VAR}, in every field of the oracle's
// tools/mcp.json (an unreachable HTTP server's URL path, credential-named
// and plainly named query values, Authorization and custom headers; a
// reachable server's path, query and headers, whose tools fail quoting
// what they were sent, as a tool error and as an HTTP 500; a stdio server's
// args and env, which fails writing them to stderr). A real `switchboard
// ask` through a real studio runs the oracle's turn against a model
// endpoint that records every request and calls every tool offered. No
// secret is in ask's stdout or stderr (text and --json), any request the
// model endpoint got (system prompt, tool messages), the studio's /api/*
// and console pages, or the studio's and agents' logs.
func TestE2ESecretsPlantedEverywhere(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	secrets := map[string]string{
		"DEAD_PATH":     "planted-dead-path-101",
		"DEAD_KEY":      "planted-dead-key-102",
		"DEAD_MODE":     "planted-dead-mode-103",
		"DEAD_BEARER":   "planted-dead-bearer-104",
		"DEAD_HEADER":   "planted-dead-header-105",
		"ECHO_PATH":     "planted-echo-path-201",
		"ECHO_TOKEN":    "planted-echo-token-202",
		"ECHO_BEARER":   "planted-echo-bearer-203",
		"ECHO_HEADER":   "planted-echo-header-204",
		"STDIO_ARG":     "planted-stdio-arg-301",
		"STDIO_FLAG":    "planted-stdio-flag-302",
		"STDIO_ENV":     "planted-stdio-env-303",
		"STDIO_ENV_TWO": "planted-stdio-env-two-304",
	}
	var env []string
	for k, v := range secrets {
		t.Setenv(k, v)
		env = append(env, k+"="+v)
	}
	dead := mcptest.DeadURL(t)
	echo := echoServer(t)
	model := newRecordingModel(t, delegation.ToolName("echo", "echo"), delegation.ToolName("echo", "crash"))

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "agents", "oracle", agentdef.DefinitionFile),
		`{"name": "oracle", "description": "test agent oracle", "instructions": "You are oracle, a test agent.", "max_depth": 4, "allow_stdio": true}`)
	writeFile(t, filepath.Join(dir, "agents", "oracle", agentdef.MCPFile), `{"mcpServers": {
		"dead": {"url": "`+dead+`/${DEAD_PATH}/mcp?api_key=${DEAD_KEY}&mode=${DEAD_MODE}",
			"headers": {"Authorization": "Bearer ${DEAD_BEARER}", "X-Custom": "${DEAD_HEADER}"}},
		"echo": {"url": "`+echo+`/${ECHO_PATH}/mcp?token=${ECHO_TOKEN}",
			"headers": {"Authorization": "Bearer ${ECHO_BEARER}", "X-Custom": "${ECHO_HEADER}"}},
		"stdio": {"command": "/bin/sh", "args": ["-c", "echo \"cannot start with $0 $1 $SERVICE_TOKEN $SECOND\" >&2; exit 3", "${STDIO_ARG}", "--flag=${STDIO_FLAG}"],
			"env": {"SERVICE_TOKEN": "${STDIO_ENV}", "SECOND": "${STDIO_ENV_TWO}"}}
	}}`)

	logs := &proctest.SyncBuffer{}
	st, err := studio.Start(ctx, &studio.Options{
		Dir: dir, Listen: "127.0.0.1:0", Executable: needBinary(t),
		Env:         append(env, "OPENAI_BASE_URL="+model.URL, "OPENAI_MODEL=scripted"),
		AgentOutput: logs,
		Logger:      slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		MinBackoff:  10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("closing the studio: %v", err)
		}
	})
	if err := st.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	check := func(channel, text string) {
		t.Helper()
		for name, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds the secret $%s (%q):\n%s", channel, name, s, text)
			}
		}
	}

	for _, args := range [][]string{{"call every tool"}, {"--json", "call every tool"}} {
		ask := startAskEnv(t, ctx, dir, cleanEnv(env...), append([]string{"--studio", st.URL(), "--agent", "oracle"}, args...)...)
		code := ask.wait(t)
		name := "ask " + strings.Join(args, " ")
		if !strings.Contains(ask.stdout.String()+ask.stderr.String(), "done") {
			t.Errorf("%s (exit %d) did not answer:\nstdout:\n%s\nstderr:\n%s", name, code, ask.stdout, ask.stderr)
		}
		check(name+": stdout", ask.stdout.String())
		check(name+": stderr", ask.stderr.String())
	}

	reqs := model.requests()
	toolMessages := 0
	for i, body := range reqs {
		check(fmt.Sprintf("model request %d", i+1), body)
		toolMessages += strings.Count(body, `"role":"tool"`)
	}
	// Both turns delegated to both failing tools, and the model read both
	// failures (the error path and the tool-error path were taken).
	if toolMessages < 4 {
		t.Errorf("the model read %d tool messages, want at least 4:\n%s", toolMessages, strings.Join(reqs, "\n"))
	}
	if all := strings.Join(reqs, "\n"); !strings.Contains(all, "dead") || !strings.Contains(all, "stdio") || !strings.Contains(all, "[REDACTED]") {
		t.Errorf("the system prompt does not list the unavailable servers with [REDACTED] for their secrets:\n%s", all)
	}

	pages := []string{"/", "/runs", "/agents/oracle", "/api/agents", "/api/overview", "/api/delegations", "/api/runs", "/api/auth", "/metrics"}
	var runs struct {
		Runs []struct {
			ID string `json:"id"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(get(t, st.URL()+"/api/runs")), &runs); err != nil {
		t.Fatal(err)
	}
	for _, r := range runs.Runs {
		pages = append(pages, "/api/runs/"+r.ID, "/runs/"+r.ID)
	}
	if len(runs.Runs) == 0 {
		t.Error("the studio lists no run")
	}
	for _, p := range pages {
		check("GET "+p, get(t, st.URL()+p))
	}
	check("the studio's and agents' logs", logs.String())
}

// get returns the body of a GET of url, which must answer 200.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}

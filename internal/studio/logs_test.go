package studio

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
)

// keyEchoingModel is an OpenAI-compatible chat endpoint that demands the
// API key, and, like real providers, echoes a rejected key in its error.
// A task containing "reject" is answered 401 with the key in the message;
// any other task gets a call to abacus__calculate, then an answer.
type keyEchoingModel struct {
	key string

	mu     sync.Mutex
	authed int // requests that carried the key
}

func (m *keyEchoingModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatCompletionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) < 2 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer "+m.key {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"no API key","type":"invalid_request_error"}}`)
		return
	}
	m.mu.Lock()
	m.authed++
	m.mu.Unlock()
	task := req.Messages[1].Content
	last := req.Messages[len(req.Messages)-1]
	msg := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant}
	finish := openai.FinishReasonStop
	switch {
	case strings.Contains(task, "reject"):
		w.WriteHeader(http.StatusUnauthorized)
		b, _ := json.Marshal(map[string]any{"error": map[string]any{
			"message": "Incorrect API key provided: " + m.key + ". You can find your API key at https://example.invalid/keys.",
			"type":    "invalid_request_error", "code": "invalid_api_key",
		}})
		w.Write(b)
		return
	case last.Role == openai.ChatMessageRoleTool:
		msg.Content = "abacus says " + last.Content
	default:
		finish = openai.FinishReasonToolCalls
		msg.ToolCalls = []openai.ToolCall{{ID: "call_1", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "abacus__calculate", Arguments: `{"expression":"17 * 3"}`}}}
	}
	json.NewEncoder(w).Encode(openai.ChatCompletionResponse{
		ID: "chatcmpl-1", Object: "chat.completion", Created: time.Now().Unix(), Model: req.Model,
		Choices: []openai.ChatCompletionChoice{{Index: 0, Message: msg, FinishReason: finish}},
	})
}

// TestLogsCarryNoSecrets runs `switchboard up` and `switchboard client`
// with --log-format json, a bearer token for the studio and an API key for
// a model that echoes the key back in an error, makes a delegation and a
// failing ask (and one more with `switchboard ask`), and checks every line
// the studio, its agents and the client wrote on stderr: none contains the
// token or the key, each is JSON, and the coordinator's lines about a run
// name it.
func TestLogsCarryNoSecrets(t *testing.T) {
	const (
		token = "sbtok-5a1f3c9e-marker-do-not-log"
		key   = "sk-test-7d2b8e41-marker-do-not-log"
	)
	model := &keyEchoingModel{key: key}
	ms := httptest.NewServer(model)
	t.Cleanup(ms.Close)

	dir := projecttest.New(t, "oracle", "abacus")
	// The coordinator reaches its siblings through the studio, which now
	// wants the token: the mcp.json people write for that.
	siblings := `{"mcpServers": {"abacus": {"url": "${SWITCHBOARD_STUDIO_URL:-http://127.0.0.1:54321}/api/agents/abacus/mcp", "headers": {"Authorization": "Bearer ${SWITCHBOARD_TOKEN}"}}}}`
	if err := os.WriteFile(filepath.Join(dir, "agents", "oracle", "tools", "mcp.json"), []byte(siblings), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"SWITCHBOARD_TOKEN=" + token,
		"OPENAI_API_KEY=" + key,
		"OPENAI_BASE_URL=" + ms.URL + "/v1",
		"OPENAI_MODEL=scripted",
	}
	up := proctest.StartProcess(t, dir, env, 60*time.Second, upReady, switchboardBin,
		"up", "--dir", dir, "--listen", "127.0.0.1:0", "--log-format", "json")
	base := strings.TrimSpace(up.Ready)

	config := filepath.Join(t.TempDir(), "mcp.json")
	cfg := fmt.Sprintf(`{"mcpServers": {"oracle": {"url": %q, "headers": {"Authorization": "Bearer ${SWITCHBOARD_TOKEN}"}}}}`, base+"/api/agents/oracle/mcp")
	if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	client := exec.CommandContext(t.Context(), switchboardBin, "client", "--config", config, "--log-format", "json")
	client.Env = append(os.Environ(), env...)
	client.Stdin = strings.NewReader(`{"id":1,"server":"oracle","method":"tools/call","params":{"name":"ask","arguments":{"task":"calculate 17 * 3"}}}
{"id":2,"server":"oracle","method":"tools/call","params":{"name":"ask","arguments":{"task":"reject this one"}}}
`)
	var clientErr syncBuf
	client.Stderr = &clientErr
	out, err := client.Output()
	if err != nil {
		t.Fatalf("switchboard client: %v\nstdout:\n%s\nstderr:\n%s", err, out, clientErr.String())
	}
	if !strings.Contains(string(out), "abacus says") || !strings.Contains(string(out), "Incorrect API key") {
		t.Fatalf("client answers:\n%s\nwant the delegation's answer and the model's rejection", out)
	}
	model.mu.Lock()
	authed := model.authed
	model.mu.Unlock()
	if authed < 3 {
		t.Fatalf("the model saw the key on %d requests, want 3: the test did not exercise it", authed)
	}

	// `switchboard ask` sends the token too; its stderr shows the
	// delegations as they happen (not log lines, so not JSON), and must not
	// show a secret either.
	ask := exec.CommandContext(t.Context(), switchboardBin, "ask", "--studio", base, "calculate 17 * 3")
	ask.Env = append(os.Environ(), env...)
	var askErr syncBuf
	ask.Stderr = &askErr
	if out, err := ask.Output(); err != nil || !strings.Contains(string(out), "abacus says") {
		t.Fatalf("switchboard ask with the token: %v\nstdout:\n%s\nstderr:\n%s", err, out, askErr.String())
	}
	for _, secret := range []string{token, key} {
		if strings.Contains(askErr.String(), secret) {
			t.Errorf("switchboard ask wrote a secret on stderr:\n%s", askErr.String())
		}
	}

	status := exec.CommandContext(t.Context(), switchboardBin, "status", "--studio", base)
	status.Env = append(os.Environ(), env...)
	if out, err := status.CombinedOutput(); err != nil || !strings.Contains(string(out), "oracle → abacus.calculate") {
		t.Fatalf("switchboard status with the token: %v\n%s", err, out)
	}

	if err := up.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := up.Wait(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("studio exit %d, %v\n%s", code, err, up.Stderr())
	}

	var runLines, redacted int
	check := func(who, all string) {
		for _, line := range strings.Split(all, "\n") {
			if line == "" {
				continue
			}
			for _, secret := range []string{token, key} {
				if strings.Contains(line, secret) {
					t.Errorf("%s logged a secret:\n%s", who, line)
				}
			}
			// The studio relays its agents' lines as "<name> | <line>".
			payload := line
			if name, rest, ok := strings.Cut(line, " | "); ok && !strings.HasPrefix(name, "{") {
				payload = rest
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(payload), &rec); err != nil {
				t.Errorf("%s wrote a line that is not JSON with --log-format json:\n%s", who, line)
				continue
			}
			if rec["agent"] == "oracle" && (rec["msg"] == "delegating" || rec["msg"] == "answered" || rec["msg"] == "ask failed") {
				if run, _ := rec["run"].(string); run == "" {
					t.Errorf("a line about a run does not name it:\n%s", line)
				}
				runLines++
			}
			if strings.Contains(line, "[REDACTED]") {
				redacted++
			}
		}
	}
	check("switchboard up", up.Stderr())
	check("switchboard client", clientErr.String())
	if runLines < 3 {
		t.Errorf("%d lines of the coordinator name a run, want at least 3 (delegating, answered, ask failed)", runLines)
	}
	if redacted == 0 {
		t.Errorf("no line was redacted: the rejected key should have reached a log line, redacted\n%s", up.Stderr())
	}
	if t.Failed() {
		t.Logf("studio stderr:\n%s", up.Stderr())
	}
}

// upReady is the prefix of `switchboard up`'s ready line (upcmd.ReadyFormat,
// which this package's tests cannot import: upcmd imports the studio).
const upReady = "switchboard studio listening on "

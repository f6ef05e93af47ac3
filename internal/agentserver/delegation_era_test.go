package agentserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// taskModel is an OpenAI-compatible endpoint driven by the task: to a
// conversation ending in the user's task "TOOL ARGS" it answers with one
// call of TOOL with ARGS; to one ending in the tool's result, "done". It
// records, by tool, the tools the first request offered and the result
// the second carried.
type taskModel struct {
	URL string

	mu      sync.Mutex
	offered map[string][]string // tool -> the names offered with its task
	results map[string]string   // tool -> its tool message
}

func newTaskModel(t *testing.T) *taskModel {
	m := &taskModel{offered: map[string][]string{}, results: map[string]string{}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Role, Content string }
			Tools    []struct{ Function struct{ Name string } }
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &req); err != nil || len(req.Messages) < 2 {
			t.Errorf("model: %v %.200s", err, b)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		task := req.Messages[1].Content // after the system message
		tool, args, _ := strings.Cut(task, " ")
		last := req.Messages[len(req.Messages)-1]
		w.Header().Set("Content-Type", "application/json")
		m.mu.Lock()
		defer m.mu.Unlock()
		if last.Role == "user" {
			for _, tl := range req.Tools {
				m.offered[tool] = append(m.offered[tool], tl.Function.Name)
			}
			a, _ := json.Marshal(args)
			fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":%q,"arguments":%s}}]},"finish_reason":"tool_calls"}]}`, tool, a)
			return
		}
		m.results[tool] = last.Content
		io.WriteString(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(ts.Close)
	m.URL = ts.URL + "/v1"
	return m
}

// check fails t unless the task for tool was offered it and its tool
// message is want.
func (m *taskModel) check(t *testing.T, tool, want string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Contains(m.offered[tool], tool) {
		t.Fatalf("the model was offered %q, want %s among them", m.offered[tool], tool)
	}
	if got := m.results[tool]; got != want {
		t.Fatalf("the delegation's tool message %q, want %q", got, want)
	}
}

// delegationTargets are the servers of the session era an agent's
// tools/mcp.json names in these tests: one of our agents pinned to
// 2025-11-25 (issue 23), and a plain go-sdk v1.8.0 server, pinned or not
// (issue 24). Each one's task is "TOOL ARGS" (see taskModel); an echo's id
// is what the server counts.
type delegationTarget struct {
	server, pin, tool, args, want string
}

func delegationTargets(packratURL, plainURL, id string) (map[string]any, []delegationTarget) {
	targets := []delegationTarget{
		{"packrat", pool.Protocol20251125, "packrat__list_notes", `{}`, "No notes in the archive."},
		{"plainpinned", pool.Protocol20251125, "plainpinned__echo", fmt.Sprintf(`{"id":"%s-pinned","text":"from %[1]s"}`, id), "from " + id},
		{"plain", "", "plain__echo", fmt.Sprintf(`{"id":"%s-unpinned","text":"from %[1]s"}`, id), "from " + id},
	}
	servers := map[string]any{}
	for _, tg := range targets {
		entry := map[string]any{"url": plainURL}
		if tg.server == "packrat" {
			entry["url"] = packratURL
		}
		if tg.pin != "" {
			entry["protocolVersion"] = tg.pin
		}
		servers[tg.server] = entry
	}
	return map[string]any{"mcpServers": servers}, targets
}

// TestDelegationWhateverTheAskEra: an agent whose tools/mcp.json names
// servers of the session era delegates to each of them in a real turn,
// whichever era its own ask came in. Asked in the 2026-07-28 era, every
// such delegation failed: with -32602 "missing _meta protocolVersion" to
// our pinned agent (issue 23), with -32022 "protocol version 2026-07-28 not
// supported" to a plain go-sdk server (issue 24). The pool's handshake took
// the MCP-Protocol-Version of the ask's own request from the context go-sdk
// served it with (see pool/dialcontext.go).
func TestDelegationWhateverTheAskEra(t *testing.T) {
	_, packrat := newTestServer(t, &agentdef.Definition{Name: "packrat", Tools: []string{"packrat"}})
	plain := mcptest.NewServer(t, false)
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			model := newTaskModel(t)
			file, targets := delegationTargets(packrat.URL, plain.URL(), "in-"+era.name)
			b, _ := json.Marshal(file)
			cfg, err := mcpconfig.Parse("tools/mcp.json", b, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, alpha := newTestServer(t, &agentdef.Definition{Name: "alpha", Model: agentdef.Model{BaseURL: model.URL, Name: "m"}, MCP: cfg})
			p := pool.New(&pool.Options{Transport: alpha.Client().Transport})
			t.Cleanup(func() { p.Close() })
			for _, tg := range targets {
				res, err := p.CallTool(t.Context(), &pool.Server{Name: "alpha", URL: alpha.URL, ProtocolVersion: era.pin}, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": tg.tool + " " + tg.args}})
				if err != nil || res.IsError {
					t.Fatalf("ask for %s: %v %q", tg.tool, err, mcptest.Text(res))
				}
				model.check(t, tg.tool, tg.want)
			}
			if got := p.Stats().Protocols; got[era.want] != 1 {
				t.Fatalf("ask asked in %v, want %s", got, era.want)
			}
			for _, id := range []string{"in-" + era.name + "-pinned", "in-" + era.name + "-unpinned"} {
				if n := plain.Executions(id); n != 1 {
					t.Fatalf("echo %s ran %d times, want 1", id, n)
				}
			}
		})
	}
}

// TestServeDelegatesToSessionEraServers: the same through a real `agent
// serve` process, asked as our pools ask our agents by default (unpinned:
// the 2026-07-28 era) and pinned to 2025-11-25, delegating to a plain
// go-sdk server and to a pinned agent.
func TestServeDelegatesToSessionEraServers(t *testing.T) {
	_, packrat := newTestServer(t, &agentdef.Definition{Name: "packrat", Tools: []string{"packrat"}})
	plain := mcptest.NewServer(t, false)
	model := newTaskModel(t)
	dir := filepath.Join(t.TempDir(), "alpha")
	file, targets := delegationTargets(packrat.URL, plain.URL(), "serve")
	mcpJSON, _ := json.Marshal(file)
	agentJSON, _ := json.Marshal(map[string]any{"name": "alpha", "description": "delegates", "model": map[string]any{"base_url": model.URL, "name": "m"}})
	if err := os.MkdirAll(filepath.Join(dir, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"agent.json": agentJSON, "tools/mcp.json": mcpJSON} {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, url := startServe(t, t.TempDir(), "--agent", dir)

	p := pool.New(nil)
	t.Cleanup(func() { p.Close() })
	for i, pin := range []string{"", pool.Protocol20251125} {
		for _, tg := range targets {
			if i > 0 && tg.server != "packrat" {
				continue // an echo's id runs once
			}
			res, err := p.CallTool(t.Context(), &pool.Server{Name: "alpha", URL: url, ProtocolVersion: pin}, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": tg.tool + " " + tg.args}})
			if err != nil || res.IsError {
				t.Fatalf("ask (pin %q) for %s: %v %q", pin, tg.tool, err, mcptest.Text(res))
			}
			model.check(t, tg.tool, tg.want)
		}
	}
	if got := p.Stats().Protocols; got[pool.Protocol20260728] != 1 || got[pool.Protocol20251125] != 1 {
		t.Fatalf("asks by version %v, want one session in each era", got)
	}
	for _, id := range []string{"serve-pinned", "serve-unpinned"} {
		if n := plain.Executions(id); n != 1 {
			t.Fatalf("echo %s ran %d times, want 1", id, n)
		}
	}
}

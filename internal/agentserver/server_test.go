package agentserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// newTestServer serves def in-process, with one extra tool, whoami, that
// returns the delegation chain its handler sees.
func newTestServer(t *testing.T, def *agentdef.Definition) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(def, &Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "whoami"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		c, ok := ChainFrom(ctx)
		if !ok {
			return toolError("no chain"), nil, nil
		}
		b, _ := json.Marshal(c)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
	})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.CloseSessions()
		ts.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, ts
}

func connect(t *testing.T, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestDelegationChain(t *testing.T) {
	def := &agentdef.Definition{Name: "alpha", MaxDepth: 3}
	_, ts := newTestServer(t, def)
	cs := connect(t, ts.URL, nil)

	call := func(meta map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}, Meta: meta})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	t.Run("no chain starts a run", func(t *testing.T) {
		var got delegation.Chain
		for i := range 2 {
			res := call(nil)
			var c delegation.Chain
			if res.IsError || json.Unmarshal([]byte(mcptest.Text(res)), &c) != nil {
				t.Fatalf("whoami: %s", mcptest.Text(res))
			}
			if c.RunID == "" || c.Depth != 1 || len(c.Agents) != 1 || c.Agents[0] != "alpha" {
				t.Fatalf("chain %+v, want a fresh run with [alpha]", c)
			}
			if i == 1 && c.RunID == got.RunID {
				t.Fatalf("two calls without a chain share run id %s", c.RunID)
			}
			got = c
		}
	})
	t.Run("a chain is entered", func(t *testing.T) {
		in := delegation.Chain{RunID: "run-1", Agents: []string{"oracle"}, Depth: 1}
		res := call(in.Meta())
		want := `{"run_id":"run-1","agents":["oracle","alpha"],"depth":2}`
		if res.IsError || mcptest.Text(res) != want {
			t.Fatalf("whoami: %s, want %s", mcptest.Text(res), want)
		}
	})
	for _, tc := range []struct {
		name  string
		meta  map[string]any
		wants []string
	}{
		{"cycle", delegation.Chain{RunID: "r", Agents: []string{"oracle", "alpha", "beta"}, Depth: 3}.Meta(),
			[]string{"alpha", "oracle → alpha → beta → alpha", "cycle", "run r"}},
		{"too deep", delegation.Chain{RunID: "r", Agents: []string{"a", "b", "c"}, Depth: 3}.Meta(),
			[]string{"too deep", "a → b → c → alpha", "limit 3"}},
		{"malformed", map[string]any{delegation.MetaKey: map[string]any{"run_id": "r", "agents": []string{"a"}, "depth": 5}},
			[]string{"alpha refused", "cannot be read", `"depth":5`, "does not match"}},
		{"not an object", map[string]any{delegation.MetaKey: "oracle"},
			[]string{"alpha refused", "cannot be read", `"oracle"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(tc.meta)
			if !res.IsError {
				t.Fatalf("whoami with a %s chain ran: %s", tc.name, mcptest.Text(res))
			}
			for _, w := range tc.wants {
				if !strings.Contains(mcptest.Text(res), w) {
					t.Errorf("refusal %q does not mention %q", mcptest.Text(res), w)
				}
			}
		})
	}
}

func TestAskWithoutModel(t *testing.T) {
	// A base URL without a model name is an incomplete model setting.
	def := &agentdef.Definition{Name: "beta", Model: agentdef.Model{BaseURL: "http://127.0.0.1:1/v1"}}
	_, ts := newTestServer(t, def)
	cs := connect(t, ts.URL, nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "add 2 and 2"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(mcptest.Text(res), "agent beta: no model configured") {
		t.Fatalf("ask: isError=%v %q, want the tool error \"agent beta: no model configured\"", res.IsError, mcptest.Text(res))
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "  "}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(mcptest.Text(res), "empty") {
		t.Fatalf("ask with an empty task: %q", mcptest.Text(res))
	}
}

func TestAskReportsProgress(t *testing.T) {
	def := &agentdef.Definition{Name: "gamma", Model: agentdef.Model{BaseURL: "http://127.0.0.1:1/v1"}}
	_, ts := newTestServer(t, def)
	got := make(chan string, 16)
	cs := connect(t, ts.URL, &mcp.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case got <- req.Params.Message:
			default:
			}
		},
	})
	params := &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "x"}}
	params.SetProgressToken("tok-1")
	if _, err := cs.CallTool(t.Context(), params); err != nil {
		t.Fatal(err)
	}
	// go-sdk hands notifications to the handler on its own goroutine, so
	// the first may be handled just after CallTool returns.
	select {
	case msg := <-got:
		if !strings.Contains(msg, "agent gamma: working on the task") {
			t.Fatalf("first progress message %q, want the agent's start note", msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no progress notification")
	}
}

func TestUnknownToolset(t *testing.T) {
	_, err := New(&agentdef.Definition{Name: "delta", Dir: "agents/delta", Tools: []string{"abacus", "nope"}}, &Options{DataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `unknown toolset "nope"`) || !strings.Contains(err.Error(), "abacus") {
		t.Fatalf("New with an unknown toolset: %v, want an error naming it and the known ones", err)
	}
}

func TestHandlerRejectsForeignOrigin(t *testing.T) {
	_, ts := newTestServer(t, &agentdef.Definition{Name: "eps"})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL, strings.NewReader(`{}`))
	req.Header.Set("Origin", "https://evil.example")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: %d, want 403", resp.StatusCode)
	}
}

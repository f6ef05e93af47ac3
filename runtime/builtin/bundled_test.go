package builtin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"

	"github.com/switchboard-run/switchboard/agents/abacus"
	"github.com/switchboard-run/switchboard/agents/packrat"
	"github.com/switchboard-run/switchboard/internal/mcptest"
)

// bundledAgents are the real abacus and packrat toolsets, each on an
// in-memory MCP session, offered to the model the way the turn loop offers
// them: <agent>__<tool>, with the schemas the agents declare. A tool error
// comes back as the runtime renders every failed delegation, "Error: ...".
type bundledAgents struct {
	t        *testing.T
	tools    []openai.Tool
	sessions map[string]*mcp.ClientSession
}

func newBundledAgents(t *testing.T) *bundledAgents {
	t.Helper()
	b := &bundledAgents{t: t, sessions: map[string]*mcp.ClientSession{}}
	as := mcp.NewServer(&mcp.Implementation{Name: "abacus", Version: "test"}, nil)
	if err := abacus.Register(as); err != nil {
		t.Fatal(err)
	}
	ps := mcp.NewServer(&mcp.Implementation{Name: "packrat", Version: "test"}, nil)
	closer, err := packrat.Register(ps, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b.connect("abacus", as)
	b.connect("packrat", ps)
	// Registered after connect, so it runs first: the sessions close, then
	// the database.
	t.Cleanup(func() {
		if err := closer.Close(); err != nil {
			t.Errorf("close packrat: %v", err)
		}
	})
	return b
}

func (b *bundledAgents) connect(agent string, s *mcp.Server) {
	t := b.t
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "builtin-test", Version: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	b.sessions[agent] = cs
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		params, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		b.tools = append(b.tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: agent + "__" + tool.Name, Description: tool.Description, Parameters: json.RawMessage(params)}})
	}
}

// run is a toolFunc: it calls the named tool of the real agent.
func (b *bundledAgents) run(name, args string) string {
	agent, tool, ok := strings.Cut(name, "__")
	cs := b.sessions[agent]
	if !ok || cs == nil {
		return "Error: no tool " + name
	}
	var in map[string]any
	if err := json.Unmarshal([]byte(args), &in); err != nil {
		return "Error: arguments are not a JSON object: " + err.Error()
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: in})
	if err != nil {
		return "Error: " + err.Error()
	}
	if res.IsError {
		return "Error: " + mcptest.Text(res)
	}
	return mcptest.Text(res)
}

// notes is what packrat holds, newest first, read through its own
// list_notes.
func (b *bundledAgents) notes() []string {
	b.t.Helper()
	res, err := b.sessions["packrat"].CallTool(context.Background(), &mcp.CallToolParams{Name: "list_notes", Arguments: map[string]any{"limit": 100}})
	if err != nil || res.IsError {
		b.t.Fatalf("list_notes: %v %v", err, res)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		b.t.Fatal(err)
	}
	var out struct {
		Notes []struct {
			Text string `json:"text"`
		} `json:"notes"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		b.t.Fatal(err)
	}
	var texts []string
	for _, n := range out.Notes {
		texts = append(texts, n.Text)
	}
	return texts
}

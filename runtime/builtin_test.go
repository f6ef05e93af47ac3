package runtime_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/agents/abacus"
	"github.com/switchboard-run/switchboard/agents/packrat"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// serve puts s on loopback HTTP for the test.
func serve(t *testing.T, name string, s *mcp.Server) *mcpconfig.Server {
	t.Helper()
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return &mcpconfig.Server{Name: name, Type: mcpconfig.TypeHTTP, URL: ts.URL}
}

// TestBuiltinModelAnswersTheREADMEExample runs the bundled oracle, driven by
// the builtin model through the real go-openai path, against the real
// packrat and abacus toolsets.
func TestBuiltinModelAnswersTheREADMEExample(t *testing.T) {
	def, err := agentdef.Load("../agents/oracle")
	if err != nil {
		t.Fatal(err)
	}
	ps := mcp.NewServer(&mcp.Implementation{Name: "packrat"}, nil)
	closer, err := packrat.Register(ps, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	as := mcp.NewServer(&mcp.Implementation{Name: "abacus"}, nil)
	if err := abacus.Register(as); err != nil {
		t.Fatal(err)
	}
	def.MCP = &mcpconfig.Config{Path: def.MCP.Path, Servers: []*mcpconfig.Server{serve(t, "packrat", ps), serve(t, "abacus", as)}}

	a := newAgent(t, def, nil)
	if name, where := a.Model(); name != runtime.BuiltinModel || where != "builtin" {
		t.Fatalf("model %s at %s, want the builtin model", name, where)
	}
	res, err := a.Run(t.Context(), "remember that the launch moved to Friday, then tell me what you know about the launch", chain)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("answer after %d steps: %s", res.Steps, res.Answer)
	if !strings.Contains(res.Answer, "Friday") {
		t.Errorf("answer %q does not mention Friday", res.Answer)
	}
	var tools []string
	for _, d := range res.Delegations {
		if d.Outcome != delegation.OutcomeOK {
			t.Errorf("delegation %+v failed", d)
		}
		tools = append(tools, d.Agent+"."+d.Tool)
	}
	if len(tools) < 2 || tools[0] != "packrat.store_note" {
		t.Errorf("delegations %v, want packrat.store_note first and then a lookup", tools)
	}
}

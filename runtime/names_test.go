package runtime_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime"
)

// sibling is a real go-sdk server on loopback offering the named tools,
// each answering "<tool> ran" and counting its calls in ran.
func sibling(t *testing.T, name string, ran *atomic.Int64, tools ...string) *mcpconfig.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "test"}, nil)
	for _, tool := range tools {
		s.AddTool(&mcp.Tool{Name: tool, Description: "The " + tool + " tool.", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				ran.Add(1)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tool + " ran"}}}, nil
			})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return &mcpconfig.Server{Name: name, Type: mcpconfig.TypeHTTP, URL: ts.URL}
}

// TestToolNameRepair: a name that is one offered tool's other spelling is
// routed to it, recorded in Result.NameRepairs, and corrected in the
// history the model sees next.
func TestToolNameRepair(t *testing.T) {
	for _, name := range []string{"abacus.calculate", "abacus/calculate", "abacus_calculate", "functions.abacus__calculate", "functions.abacus.calculate", "calculate", "Abacus__Calculate"} {
		t.Run(name, func(t *testing.T) {
			var ran atomic.Int64
			abacus := sibling(t, "abacus", &ran, "calculate")
			packrat := sibling(t, "packrat", &ran, "store_note", "find_notes")
			e := newEndpoint(t,
				reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c1", name, `{"expression":"0.17*2340"}`)}}),
				answer("397.8"),
			)
			a := newAgent(t, oracle(e.URL, packrat, abacus), nil)
			res, err := a.Run(t.Context(), "17% of 2340", chain)
			if err != nil {
				t.Fatal(err)
			}
			if ran.Load() != 1 || len(res.Delegations) != 1 || res.Delegations[0].Agent != "abacus" || res.Delegations[0].Tool != "calculate" {
				t.Fatalf("ran %d, delegations %+v; want abacus.calculate once", ran.Load(), res.Delegations)
			}
			want := []runtime.NameRepair{{Step: 1, CallID: "c1", From: name, To: "abacus__calculate"}}
			if len(res.NameRepairs) != 1 || res.NameRepairs[0] != want[0] {
				t.Errorf("repairs %+v, want %+v", res.NameRepairs, want)
			}
			if res.Status != runtime.StatusAnswered {
				t.Errorf("status %q reason %q", res.Status, res.Reason)
			}
			var req openai.ChatCompletionRequest
			json.Unmarshal([]byte(e.Bodies()[1]), &req)
			if got := req.Messages[2].ToolCalls[0].Function.Name; got != "abacus__calculate" {
				t.Errorf("history names the call %q, want the offered name", got)
			}
		})
	}
}

// TestToolNameNotGuessed: a name that spells no tool, or several, is not
// routed; the tool message lists the closest offered names, or the
// several it could mean.
func TestToolNameNotGuessed(t *testing.T) {
	for _, tc := range []struct{ name, content string }{
		{"calc", `Error: there is no tool named "calc". The closest offered tools are abacus__calculate, web__search, docs__search. Call a tool by its exact offered name.`},
		{"search", `Error: there is no tool named "search"; it could mean any of web__search, docs__search. Call one of them by its exact name.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran atomic.Int64
			e := newEndpoint(t,
				reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c1", tc.name, `{}`)}}),
				answer("I could not."),
			)
			a := newAgent(t, oracle(e.URL, sibling(t, "abacus", &ran, "calculate"), sibling(t, "web", &ran, "search"), sibling(t, "docs", &ran, "search")), nil)
			res, err := a.Run(t.Context(), "do it", chain)
			if err != nil {
				t.Fatal(err)
			}
			var req openai.ChatCompletionRequest
			json.Unmarshal([]byte(e.Bodies()[1]), &req)
			if got := req.Messages[3].Content; got != tc.content {
				t.Errorf("tool message\n %q\nwant\n %q", got, tc.content)
			}
			if ran.Load() != 0 || len(res.NameRepairs) != 0 || res.Status != runtime.StatusDelegationFailed ||
				!strings.Contains(res.Reason, `"`+tc.name+`": `+string(delegation.OutcomeUnknownTool)) {
				t.Errorf("ran %d, repairs %+v, status %q reason %q", ran.Load(), res.NameRepairs, res.Status, res.Reason)
			}
		})
	}
}

package delegation_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/pool"
)

// A sibling's MCP tools become model tools named <agent>__<tool>, and the
// model's tool calls run through the pool, concurrently; a call that fails
// is a result written for the model, never an error.
func Example() {
	// A sibling agent: any MCP server over Streamable HTTP.
	type addArgs struct{ A, B int }
	sibling := mcp.NewServer(&mcp.Implementation{Name: "abacus"}, nil)
	mcp.AddTool(sibling, &mcp.Tool{Name: "add", Description: "Add two integers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return sibling }, nil))
	defer ts.Close()

	p := pool.New(nil)
	defer p.Close()
	ctx := context.Background()
	tools := delegation.Discover(ctx, p, nil, &delegation.DiscoverOptions{
		Servers: []*pool.Server{{Name: "abacus", URL: ts.URL}},
	})
	for _, t := range tools.Targets() {
		fmt.Printf("offered %s: %s\n", t.Name, t.Tool.Description)
	}

	// The delegating agent enters the chain first; the chain travels in
	// each call's _meta, so that a sibling refuses a cycle.
	chain, err := delegation.Chain{RunID: "run-1"}.Enter("oracle", 0)
	if err != nil {
		panic(err)
	}
	exec := &delegation.Executor{Caller: p, Tools: tools, Chain: chain}
	for _, r := range exec.Run(ctx, []delegation.Call{
		{ID: "call_1", Name: "abacus__add", Arguments: `{"A": 2, "B": 3}`},
		{ID: "call_2", Name: "abacus__divide", Arguments: `{"A": 6, "B": 3}`},
	}) {
		fmt.Printf("%s: %s: %s\n", r.CallID, r.Outcome, r.Content)
	}
	// Output:
	// offered abacus__add: Add two integers.
	// call_1: ok: 5
	// call_2: unknown_tool: Error: there is no tool named "abacus__divide". Use one of the tools offered.
}

// Each agent enters the chain before it delegates; entering an agent that
// is already on it is a cycle, and going past the depth limit is refused.
func ExampleChain_Enter() {
	c, _ := delegation.Chain{RunID: "run-1"}.Enter("oracle", 0)
	c, _ = c.Enter("packrat", 0)
	_, err := c.Enter("oracle", 0)
	fmt.Println(errors.Is(err, delegation.ErrCycle), err)
	_, err = c.Enter("abacus", 2)
	fmt.Println(errors.Is(err, delegation.ErrDepth), err)
	// Output:
	// true delegation cycle: agent "oracle" is already on the chain oracle → packrat → oracle (run run-1)
	// true delegation too deep: entering agent "abacus" would make depth 3, past the limit 2 (chain oracle → packrat → abacus, run run-1)
}

// ToolName is the name a model sees for a sibling's tool: providers accept
// only ^[a-zA-Z0-9_-]{1,64}$, while MCP tool names may hold dots and
// slashes.
func ExampleToolName() {
	fmt.Println(delegation.ToolName("packrat", "store_note"))
	fmt.Println(delegation.ToolName("git", "repo/log.v2"))
	// Output:
	// packrat__store_note
	// git__repo_log_v2
}

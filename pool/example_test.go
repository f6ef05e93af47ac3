package pool_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/pool"
)

type greetIn struct {
	Name string `json:"name"`
}

func Example() {
	// An MCP server over Streamable HTTP.
	server := mcp.NewServer(&mcp.Implementation{Name: "greeter"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "greet"}, func(ctx context.Context, req *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello, " + in.Name}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer ts.Close()

	p := pool.New(nil)
	defer p.Close()
	greeter := &pool.Server{Name: "greeter", URL: ts.URL}

	res, err := p.CallTool(context.Background(), greeter, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ada"}})
	if err != nil {
		var pe *pool.Error
		if errors.As(err, &pe) && pe.Kind == pool.KindOutcomeUnknown {
			fmt.Println("the tool may have run; do not repeat it blindly")
		}
		return
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	fmt.Println("sessions open:", p.Stats().Open)
	// Output:
	// hello, Ada
	// sessions open: 1
}

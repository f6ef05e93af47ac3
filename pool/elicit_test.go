package pool_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/pool"
)

// TestElicit: a server's elicitation/create during a call reaches
// Options.Elicit, with the schema's defaults filled in (SEP-1034); without
// Elicit the pool does not offer elicitation and the server's request is
// declined before it is sent.
func TestElicit(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "asks", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "delete_notes"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
			Message: "Delete 3 notes?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
				"confirm": map[string]any{"type": "boolean", "default": false},
				"reason":  map[string]any{"type": "string", "default": "tidy"},
			}},
		})
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "declined: " + err.Error()}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action + " " + res.Content["reason"].(string)}}}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()
	server := &pool.Server{Name: "asks", URL: hs.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var asked string
	p := pool.New(&pool.Options{Elicit: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = req.Params.Message
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	}})
	res, err := p.CallTool(ctx, server, &mcp.CallToolParams{Name: "delete_notes"})
	p.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "accept tidy" || asked != "Delete 3 notes?" {
		t.Fatalf("with Elicit: result %q, asked %q; want the default reason filled in", got, asked)
	}

	p = pool.New(nil)
	defer p.Close()
	res, err = p.CallTool(ctx, server, &mcp.CallToolParams{Name: "delete_notes"})
	if err != nil || !res.IsError {
		t.Fatalf("without Elicit: %v, %+v; want the tool's own error (the elicitation declined)", err, res)
	}
}

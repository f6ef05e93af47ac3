package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestProxyStreamsProgress proves that the proxy does not buffer SSE: the
// tool sends a progress notification and then waits until the client has
// received it before sending the next one or returning. If the proxy held
// the stream back until the response ended, the call would never finish.
func TestProxyStreamsProgress(t *testing.T) {
	const steps = 3
	ack := make(chan float64)
	s := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		for i := 1; i <= steps; i++ {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: steps, Message: fmt.Sprintf("step %d", i),
			})
			if err != nil {
				return nil, nil, err
			}
			select {
			case got := <-ack:
				if got != float64(i) {
					return nil, nil, fmt.Errorf("client acknowledged progress %v, want %d", got, i)
				}
			case <-ctx.Done():
				return nil, nil, fmt.Errorf("progress %d never reached the client: %w", i, ctx.Err())
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	u, err := url.Parse(upstream.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	transport := NewTransport()
	proxy := httptest.NewServer(New(u, &Options{Transport: transport}))
	defer func() {
		proxy.Close()
		upstream.Close()
		transport.CloseIdleConnections()
		for ss := range s.Sessions() {
			ss.Close()
		}
	}()

	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case ack <- req.Params.Progress:
			case <-ctx.Done():
			}
		},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: proxy.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("call through the proxy: %v (a buffering proxy holds the progress back until the deadline)", err)
	}
	if res.IsError || toolText(res) != "done" {
		t.Fatalf("result: %s", toolText(res))
	}
}

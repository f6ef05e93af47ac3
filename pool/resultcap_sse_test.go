package pool_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/pool"
)

// TestResultCapCountsEventsNotTheStream: the cap bounds each SSE event,
// not the stream: a long-running tool's progress notifications before its
// result, together far past the cap, do not make its small result "too
// large"; a result past the cap on the same kind of stream still is.
func TestResultCapCountsEventsNotTheStream(t *testing.T) {
	const limit = 64 << 10
	const notes, noteBytes = 200, 1 << 10 // 200 KiB of progress, three times the cap
	s := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := req.Params.GetProgressToken()
		for i := range notes {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: notes, Message: strings.Repeat("p", noteBytes)}); err != nil {
				return nil, err
			}
		}
		n := 10
		if strings.Contains(string(req.Params.Arguments), "big") {
			n = 2 * limit
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", n)}}}, nil
	})
	t.Cleanup(func() {
		for ss := range s.Sessions() {
			ss.Close()
		}
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)

	p := pool.New(&pool.Options{Transport: &http.Transport{}})
	t.Cleanup(func() { p.Close() })
	srv := &pool.Server{Name: "slow", URL: ts.URL, MaxResultBytes: limit}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var progressed atomic.Int64
	pctx := pool.WithProgress(ctx, func(*mcp.ProgressNotificationParams) { progressed.Add(1) })
	call := func(arg string) (*mcp.CallToolResult, error) {
		return p.CallTool(pctx, srv, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"size": arg}})
	}
	res, err := call("small")
	if err != nil {
		t.Fatalf("a small result after %d bytes of progress (cap %d): %v", notes*noteBytes, limit, err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != strings.Repeat("x", 10) {
		t.Fatalf("result %q", got)
	}
	if progressed.Load() == 0 {
		t.Fatal("no progress notification reached the caller: the test did not test what it says")
	}
	if _, err := call("big"); !errors.Is(err, pool.ErrResultTooLarge) {
		t.Fatalf("a result past the cap after progress: %v, want ErrResultTooLarge", err)
	}
}

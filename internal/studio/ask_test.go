package studio

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/internal/projecttest"
)

// TestAskDelegatesThroughStudio: the coordinator's ask, called through the
// proxy, delegates to a sibling through the studio (SWITCHBOARD_STUDIO_URL
// in its tools/mcp.json) with the builtin model, and its delegation events
// reach the caller as progress notifications through two proxies.
func TestAskDelegatesThroughStudio(t *testing.T) {
	dir := projecttest.New(t, "oracle", "abacus")
	s := startStudio(t, dir, nil)

	progress := make(chan string, 64)
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- req.Params.Message:
			default:
			}
		},
	})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.AgentURL("oracle")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "calculate 17 * 3"}}
	params.SetProgressToken("ask-1")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || !strings.Contains(toolText(res), "51") {
		t.Fatalf("ask: isError=%v %q, want 51", res.IsError, toolText(res))
	}
	// go-sdk hands notifications to the handler on its own goroutine, so
	// the last may be handled just after CallTool returns.
	var seen []string
	want := []string{"agent oracle: working on the task", `"agent":"abacus"`, `"tool":"calculate"`, `"phase":"finish"`}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for joined := ""; !containsAll(joined, want); joined = strings.Join(seen, "\n") {
		select {
		case m := <-progress:
			seen = append(seen, m)
		case <-deadline.C:
			t.Fatalf("progress messages:\n%s\nwant the start note and abacus's calculate delegation, started and finished", joined)
		}
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/internal/mcptest"
)

// addProgressTool adds a tool that sends one progress notification for its
// own token and returns.
func addProgressTool(t *testing.T, ts *testServer) {
	mcp.AddTool(ts.MCPServer(), &mcp.Tool{Name: "progress"}, func(ctx context.Context, req *mcp.CallToolRequest, in mcptest.ToolIn) (*mcp.CallToolResult, any, error) {
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1}); err != nil {
			t.Errorf("NotifyProgress: %v", err)
		}
		return &mcp.CallToolResult{}, nil, nil
	})
}

// Every finished call's progress route is deleted after its linger, however
// many calls there were (the old trim stopped the timers that would have
// deleted them, keeping ~1,000 of 1,100 for ever).
func TestProgressRoutesAreDeleted(t *testing.T) {
	ts := newTestServer(t, false)
	addProgressTool(t, ts)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	const calls, workers = 1100, 8
	var got atomic.Int64
	ctx := WithProgress(context.Background(), func(*mcp.ProgressNotificationParams) { got.Add(1) })
	work := make(chan int, calls)
	for i := range calls {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range work {
				if _, err := p.CallTool(ctx, srv, &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"id": fmt.Sprint(i)}}); err != nil {
					t.Errorf("call %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	eventually(t, "every progress notification", func() bool { return got.Load() == calls })
	eventually(t, "every progress route to be deleted", func() bool { return p.progress.len() == 0 })
}

// A progress notification for a call's token that arrives on another
// session (another identity's) is not the call's progress.
func TestProgressIsRoutedBySession(t *testing.T) {
	ts := newTestServer(t, false)
	tokens := make(chan any, 1)
	release := make(chan struct{})
	mcp.AddTool(ts.MCPServer(), &mcp.Tool{Name: "spy"}, func(ctx context.Context, req *mcp.CallToolRequest, in mcptest.ToolIn) (*mcp.CallToolResult, any, error) {
		tokens <- req.Params.GetProgressToken()
		<-release
		return &mcp.CallToolResult{}, nil, nil
	})
	p := newTestPool(t, &Options{Notifications: true})
	victim := server(ts, "a")
	victim.Identity = "victim"
	other := server(ts, "a")
	other.Identity = "other"
	mustCall(t, p, other, "echo", "other-session")

	var mu sync.Mutex
	var got []string
	ctx := WithProgress(context.Background(), func(pn *mcp.ProgressNotificationParams) {
		mu.Lock()
		got = append(got, pn.Message)
		mu.Unlock()
	})
	done := make(chan error, 1)
	go func() {
		_, err := p.CallTool(ctx, victim, &mcp.CallToolParams{Name: "spy", Arguments: map[string]any{"id": "v"}})
		done <- err
	}()
	tok := <-tokens

	// Find the sessions: the victim's is the one whose call is running.
	var victimSS, otherSS *mcp.ServerSession
	for ss := range ts.MCPServer().Sessions() {
		if otherSS == nil {
			otherSS = ss
		} else {
			victimSS = ss
		}
	}
	if victimSS == nil {
		t.Fatal("want two server sessions")
	}
	// Which is which does not matter for the injection: send the token on
	// both, each followed by a ping, which the client answers only after
	// handling what came before it on that stream.
	for _, ss := range []*mcp.ServerSession{victimSS, otherSS} {
		msg := "via " + ss.ID()
		if err := ss.NotifyProgress(context.Background(), &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: msg}); err != nil {
			t.Fatal(err)
		}
		if err := ss.Ping(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("the call got progress %q; want exactly the one sent on its own session", got)
	}
}

// A 404 to the second page of tools/list is evidence about that page: the
// list is retried on a new session, not reported outcome_unknown.
func TestPagedList404OnSecondPageIsRetried(t *testing.T) {
	ts := mcptest.Start(t, nil)
	// Enough tools for go-sdk's server to page the list (its page size is
	// 1000).
	for i := range 1001 {
		mcp.AddTool(ts.MCPServer(), &mcp.Tool{Name: fmt.Sprintf("t%04d", i)}, func(ctx context.Context, req *mcp.CallToolRequest, in mcptest.ToolIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
	}
	p := newTestPool(t, &Options{ToolsTTL: -1})
	srv := server(ts, "paged")
	if tools, err := p.ListTools(context.Background(), srv); err != nil || len(tools) != 1004 {
		t.Fatalf("ListTools = %d tools, %v", len(tools), err)
	}
	var once sync.Once
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.Method != "tools/list" {
			return false
		}
		handled := false
		if r.Header.Get("Mcp-Session-Id") != "" && isSecondPage(r) {
			once.Do(func() {
				http.Error(w, "session not found", http.StatusNotFound)
				handled = true
			})
		}
		return handled
	})
	tools, err := p.ListTools(context.Background(), srv)
	if err != nil || len(tools) != 1004 {
		t.Fatalf("ListTools with a 404 on page 2 = %d tools, %v", len(tools), err)
	}
	if st := p.Stats(); st.Retries != 1 || st.Reinitializations != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

// Per-key state stays bounded when keys are invalidated and never dialed
// again, with the idle sweep off.
func TestKeyStatesAreBounded(t *testing.T) {
	old := maxKeyStates
	maxKeyStates = 8
	t.Cleanup(func() { maxKeyStates = old })
	ts := newTestServer(t, false)
	p := newTestPool(t, &Options{IdleTimeout: -1})
	const keys = 40
	for i := range keys {
		srv := server(ts, "k")
		srv.Identity = fmt.Sprint("user-", i)
		mustCall(t, p, srv, "echo", fmt.Sprint(i))
		p.mu.Lock()
		e := p.entries[srv.key()]
		p.mu.Unlock()
		p.invalidate(e, reasonExpired) // as a 404 would
	}
	eventually(t, "every session closed", func() bool { return p.Stats().Open == 0 })
	p.mu.Lock()
	n := len(p.keys)
	p.mu.Unlock()
	if n > maxKeyStates {
		t.Fatalf("%d key states kept for %d keys without a session, want at most %d", n, keys, maxKeyStates)
	}
}

// isSecondPage reports whether r is a tools/list with a cursor, leaving
// its body for the server.
func isSecondPage(r *http.Request) bool {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Params struct {
			Cursor string `json:"cursor"`
		} `json:"params"`
	}
	return json.Unmarshal(body, &msg) == nil && msg.Params.Cursor != ""
}

package pool

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/internal/mcptest"
)

// A call in flight keeps its session while a sibling call finds the session
// expired: the sibling recovers on a new session, the in-flight call gets its
// own result, and the old session is closed only after that call released it.
var siblingDone atomic.Bool

func TestInFlightCallKeepsItsSessionWhenSiblingInvalidates(t *testing.T) {
	siblingDone.Store(false)
	t.Cleanup(func() { siblingDone.Store(false) })
	var mu sync.Mutex
	var inUseAtClose []int
	old := testHookClose
	testHookClose = func(inUse int) { mu.Lock(); inUseAtClose = append(inUseAtClose, inUse); mu.Unlock() }
	t.Cleanup(func() { testHookClose = old })

	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "warm")

	// The sibling's request is refused as an expired session by a proxy
	// answering 404 with a JSON-RPC body: go-sdk keeps the session, so the
	// in-flight call goes on.
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.CallID == "sibling" && r.Header.Get("Mcp-Session-Id") != "" && !siblingDone.Load() {
			siblingDone.Store(true)
			mcptest.Answer404WithRPCBody(w, rpc.ID)
			return true
		}
		return false
	})

	inflight := make(chan error, 1)
	var res *mcp.CallToolResult
	go func() {
		var err error
		res, err = call(context.Background(), p, srv, "block", "inflight")
		inflight <- err
	}()
	ts.WaitEntered("inflight")

	mustCall(t, p, srv, "echo", "sibling")
	st := p.Stats()
	if st.Retries != 1 || st.Reinitializations != 1 || st.Closes != 0 || st.Open != 2 || st.InUse != 1 {
		t.Fatalf("after the sibling's recovery the old session must still be open for the in-flight call: %+v", st)
	}

	ts.Open("inflight")
	if err := <-inflight; err != nil {
		t.Fatalf("in-flight call: %v", err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "opened inflight" {
		t.Fatalf("in-flight call result %q", got)
	}
	eventually(t, "the old session to close", func() bool { return p.Stats().Closes == 1 })
	mu.Lock()
	defer mu.Unlock()
	for _, n := range inUseAtClose {
		if n != 0 {
			t.Fatalf("a session was closed with %d calls in flight", n)
		}
	}
	if ts.Executions("inflight") != 1 || ts.Executions("sibling") != 1 {
		t.Fatalf("executions: inflight %d sibling %d", ts.Executions("inflight"), ts.Executions("sibling"))
	}
}

// The harder variant: the sibling's 404 is plain, go-sdk fails the whole
// session and retires the in-flight call with the sibling's error. The pool
// must not call that a session expiry of the in-flight call (its own POST was
// answered 200 and its tool is running): it reports outcome unknown and does
// not replay it.
func TestInFlightCallRetiredBySiblingsExpiryIsOutcomeUnknown(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "warm")
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.CallID == "sibling" && r.Header.Get("Mcp-Session-Id") != "" && !siblingDone.Load() {
			siblingDone.Store(true)
			http.Error(w, "session not found", http.StatusNotFound)
			return true
		}
		return false
	})
	siblingDone.Store(false)
	t.Cleanup(func() { siblingDone.Store(false) })

	inflight := make(chan error, 1)
	go func() {
		_, err := call(context.Background(), p, srv, "block", "inflight")
		inflight <- err
	}()
	ts.WaitEntered("inflight")
	mustCall(t, p, srv, "echo", "sibling")

	// go-sdk's server sends a tool's response headers with its first event,
	// so the in-flight POST is answered (200) only when the tool returns; by
	// then go-sdk has failed the session and retires the call with the
	// sibling's ErrSessionMissing.
	ts.Open("inflight")
	err := <-inflight
	pe := asPoolError(t, err)
	if pe.Kind != KindOutcomeUnknown || pe.Retried || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("in-flight call: want outcome unknown without retry, got %v", err)
	}
	if n := ts.Executions("inflight"); n != 1 {
		t.Fatalf("in-flight tool executions = %d, want 1", n)
	}
}

// A close that takes long (the server holds DELETE) does not block other
// callers of the pool. (That a close overrunning CloseTimeout is aborted is
// TestCloseTimeoutAbortsAStuckClose.)
func TestSlowCloseDoesNotBlockCallers(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, &Options{CloseTimeout: time.Minute})
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "warm")

	deleteArrived := make(chan struct{})
	releaseDelete := make(chan struct{})
	var once sync.Once
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if r.Method == http.MethodDelete {
			once.Do(func() { close(deleteArrived) })
			<-releaseDelete
			return false
		}
		if rpc.CallID == "expire" {
			mcptest.Answer404WithRPCBody(w, rpc.ID) // invalidates the session; go-sdk keeps it, so Close sends DELETE
			return true
		}
		return false
	})
	_, err := call(context.Background(), p, srv, "echo", "expire")
	if pe := asPoolError(t, err); pe.Kind != KindSessionExpired {
		t.Fatalf("want session expired, got %v", err)
	}
	select {
	case <-deleteArrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the invalidated session was never closed")
	}

	// The close is now stuck in DELETE. Everyone else goes on: each call
	// has mustCall's 20 s deadline, and the DELETE is held until released
	// below, so a call that waited for the close fails.
	start := time.Now()
	for i := range 20 {
		mustCall(t, p, srv, "echo", "during-close-"+string(rune('a'+i)))
		if st := p.Stats(); st.Closes != 0 {
			// A close is counted when it has finished: if it had, the
			// calls did not run beside a stuck close and prove nothing.
			t.Fatalf("call %d: %d closes finished while the DELETE was held; want the close still stuck", i, st.Closes)
		}
	}
	t.Logf("20 calls and Stats while a close was stuck in DELETE: %v", time.Since(start))
	close(releaseDelete)
	eventually(t, "the slow close to finish", func() bool { return p.Stats().Closes >= 1 })
}

func TestCloseTimeoutAbortsAStuckClose(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, &Options{CloseTimeout: 50 * time.Millisecond})
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "warm")
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if r.Method == http.MethodDelete {
			select {
			case <-hold:
			case <-r.Context().Done():
			}
			return true
		}
		return false
	})
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return although CloseTimeout should abort the stuck DELETE")
	}
	if st := p.Stats(); st.ClosesByReason[reasonClosed] != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestListPathRecoversAndKeepsErrorType(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, &Options{ToolsTTL: -1})
	srv := server(ts, "a")
	tools, err := p.ListTools(context.Background(), srv)
	if err != nil || len(tools) != 3 {
		t.Fatalf("ListTools = %d tools, %v", len(tools), err)
	}
	ts.Restart()
	tools, err = p.ListTools(context.Background(), srv)
	if err != nil || len(tools) != 3 {
		t.Fatalf("ListTools after restart = %d tools, %v", len(tools), err)
	}
	if st := p.Stats(); st.Reinitializations != 1 || st.Retries != 1 {
		t.Fatalf("stats: %+v", st)
	}

	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.Method == "tools/list" && r.Header.Get("Mcp-Session-Id") != "" {
			http.Error(w, "session not found", http.StatusNotFound)
			return true
		}
		return false
	})
	_, err = p.ListTools(context.Background(), srv)
	pe := asPoolError(t, err)
	if pe.Kind != KindSessionExpired || pe.Method != "tools/list" || !pe.Retried || !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("want a typed session-expired error from the list path, got %+v", pe)
	}
}

func TestToolListCache(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, &Options{ToolsTTL: time.Hour, Notifications: true})
	srv := server(ts, "a")
	for range 3 {
		if _, err := p.ListTools(context.Background(), srv); err != nil {
			t.Fatal(err)
		}
	}
	lists := 0
	for _, r := range ts.Recorded() {
		if r.RPC == "tools/list" {
			lists++
		}
	}
	if lists != 1 {
		t.Fatalf("tools/list sent %d times, want 1 (cached)", lists)
	}
	// A new tool: the server notifies, the cache is dropped.
	mcpSrv := ts.MCPServer()
	mcp.AddTool(mcpSrv, &mcp.Tool{Name: "added"}, func(ctx context.Context, req *mcp.CallToolRequest, in mcptest.ToolIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	eventually(t, "the list_changed notification to drop the cache", func() bool {
		tools, err := p.ListTools(context.Background(), srv)
		return err == nil && len(tools) == 4
	})
}

// A server that dies while a call runs: the call is not replayed, and says
// its outcome is unknown.
func TestServerDiesDuringCall(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "warm")
	errc := make(chan error, 1)
	go func() {
		_, err := call(context.Background(), p, srv, "block", "dying")
		errc <- err
	}()
	ts.WaitEntered("dying")
	ts.Restart()
	err := <-errc
	pe := asPoolError(t, err)
	if pe.Kind != KindOutcomeUnknown || pe.Retried {
		t.Fatalf("want outcome unknown, not retried; got %v", err)
	}
	if n := ts.Executions("dying"); n != 1 {
		t.Fatalf("executions = %d, want 1", n)
	}
	if st := p.Stats(); st.Retries != 0 {
		t.Fatalf("a call that may have run was retried: %+v", st)
	}
	// The next call recovers.
	mustCall(t, p, srv, "echo", "next")
}

func TestExpiry404WithJSONRPCBodyRecovers(t *testing.T) {
	for _, id := range []string{"request id", "null id"} {
		t.Run(id, func(t *testing.T) {
			ts := newTestServer(t, false)
			p := newTestPool(t, nil)
			srv := server(ts, "a")
			mustCall(t, p, srv, "echo", "warm")
			var once sync.Once
			ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
				handled := false
				if rpc.CallID == "x" {
					once.Do(func() {
						if id == "null id" {
							rpc.ID = nil
						}
						mcptest.Answer404WithRPCBody(w, rpc.ID)
						handled = true
					})
				}
				return handled
			})
			mustCall(t, p, srv, "echo", "x")
			if n := ts.Executions("x"); n != 1 {
				t.Fatalf("executions = %d", n)
			}
			if st := p.Stats(); st.Retries != 1 || st.Reinitializations != 1 {
				t.Fatalf("stats: %+v", st)
			}
		})
	}
}

func TestRPCErrorKeepsCodeAndMessage(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	_, err := call(context.Background(), p, server(ts, "a"), "fail", "f")
	pe := asPoolError(t, err)
	if pe.Kind != KindRPC || pe.Code != -32042 || pe.Message != "the archive is read-only" || pe.Retried {
		t.Fatalf("got %+v", pe)
	}
	var w *jsonrpc.Error
	if !errors.As(err, &w) || w.Code != -32042 {
		t.Fatalf("the server's *jsonrpc.Error is not in the chain: %v", err)
	}
}

// After DELETE and after every re-initialization, initialize never carries
// an Mcp-Session-Id.
func TestInitializeNeverCarriesSessionID(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, &Options{IdleTimeout: 10 * time.Millisecond})
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "1")
	eventually(t, "idle close (DELETE)", func() bool { return p.Stats().ClosesByReason[reasonIdle] == 1 })
	mustCall(t, p, srv, "echo", "2") // after DELETE
	ts.Restart()
	mustCall(t, p, srv, "echo", "3") // after re-initialize

	inits, deletes := 0, 0
	for _, r := range ts.Recorded() {
		switch {
		case r.RPC == "initialize":
			inits++
			if r.SessionID != "" {
				t.Errorf("initialize carried Mcp-Session-Id %q", r.SessionID)
			}
		case r.Method == http.MethodDelete:
			deletes++
		}
	}
	if inits != 3 || deletes < 1 {
		t.Fatalf("initialize requests %d (want 3), DELETEs %d", inits, deletes)
	}
}

// go-sdk falls back from server/discover to initialize on the same
// connection, and a session id set on the discover answer would leak into
// that initialize. The pool refuses to send it and dials afresh.
func TestDiscoverSessionIDDoesNotLeakIntoInitialize(t *testing.T) {
	ts := newTestServer(t, false)
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.Method == "server/discover" {
			w.Header().Set("Mcp-Session-Id", "leaked-from-discover")
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(rpc.ID) + `,"result":{"supportedVersions":["2025-11-25"],"capabilities":{}}}`))
			return true
		}
		return false
	})
	p := newTestPool(t, nil)
	srv := &Server{Name: "a", URL: ts.URL()} // era unknown: discover first
	mustCall(t, p, srv, "echo", "1")
	for _, r := range ts.Recorded() {
		if r.RPC == "initialize" && r.SessionID != "" {
			t.Fatalf("initialize carried Mcp-Session-Id %q", r.SessionID)
		}
	}
	if n := ts.Executions("1"); n != 1 {
		t.Fatalf("executions = %d", n)
	}
}

// The standalone GET stream ends and its reconnect is answered 404: go-sdk
// fails the session; the pool replaces it before (or as) the next call uses
// it, and that call succeeds.
func TestStandaloneGET404ReplacesSession(t *testing.T) {
	ts := newTestServer(t, false)
	var mu sync.Mutex
	gets := 0
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if r.Method != http.MethodGet {
			return false
		}
		mu.Lock()
		gets++
		n := gets
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK) // and end the stream at once
			return true
		}
		if n == 2 {
			http.Error(w, "session not found", http.StatusNotFound)
			return true
		}
		return false
	})
	p := newTestPool(t, &Options{Notifications: true})
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "1")
	eventually(t, "the session to die on the GET stream's 404", func() bool {
		return p.Stats().InvalidationsByReason[reasonDied] == 1
	})
	mustCall(t, p, srv, "echo", "2")
	if st := p.Stats(); st.Reinitializations != 1 || st.Retries != 0 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestStatelessAndNewEraThroughOnePool(t *testing.T) {
	stateful := newTestServer(t, false)
	stateless := newTestServer(t, true)
	p := newTestPool(t, nil)
	servers := []*Server{
		{Name: "stateful-2025", URL: stateful.URL(), ProtocolVersion: Protocol20251125},
		{Name: "stateless-discovered", URL: stateless.URL()},
		{Name: "stateless-2026", URL: stateless.URL(), ProtocolVersion: Protocol20260728},
		{Name: "stateless-2025", URL: stateless.URL(), ProtocolVersion: Protocol20251125},
	}
	for _, s := range servers {
		res := mustCall(t, p, s, "echo", s.Name)
		if got := res.Content[0].(*mcp.TextContent).Text; got != "hello "+s.Name {
			t.Fatalf("%s: %q", s.Name, got)
		}
		if _, err := p.ListTools(context.Background(), s); err != nil {
			t.Fatalf("%s: ListTools: %v", s.Name, err)
		}
	}
	// A stateless server restarted between calls just works, without any
	// session to re-initialize.
	stateless.Restart()
	mustCall(t, p, servers[1], "echo", "after-restart")
	p.mu.Lock()
	era := p.keys[servers[1].key()].era
	p.mu.Unlock()
	if era != Protocol20260728 {
		t.Fatalf("discovered era = %q, want %s", era, Protocol20260728)
	}
}

func TestIdleEvictionSparesCallsInFlight(t *testing.T) {
	sweeps := make(chan struct{}, 1000)
	old := testHookCleanerSwept
	testHookCleanerSwept = func() {
		select {
		case sweeps <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { testHookCleanerSwept = old })

	ts := newTestServer(t, false)
	p := newTestPool(t, &Options{IdleTimeout: 5 * time.Millisecond})
	srv := server(ts, "a")
	errc := make(chan error, 1)
	go func() {
		_, err := call(context.Background(), p, srv, "block", "long")
		errc <- err
	}()
	ts.WaitEntered("long")
	for range 10 { // ten sweeps while the call is in flight
		<-sweeps
	}
	if st := p.Stats(); st.Closes != 0 || st.InUse != 1 {
		t.Fatalf("idle sweep touched a session with a call in flight: %+v", st)
	}
	ts.Open("long")
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	eventually(t, "idle close after the call", func() bool { return p.Stats().ClosesByReason[reasonIdle] == 1 })
}

func TestCloseWaitsForBackgroundCloses(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, &Options{CloseTimeout: time.Minute})
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "1")
	arrived, release := make(chan struct{}), make(chan struct{})
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if r.Method == http.MethodDelete {
			close(arrived)
			<-release
		}
		return false
	})
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	<-arrived
	select {
	case <-closed:
		t.Fatal("Close returned while a session's DELETE was still in flight")
	default:
	}
	close(release)
	<-closed
	if _, err := call(context.Background(), p, srv, "echo", "2"); !errors.Is(err, ErrClosed) || !errors.Is(err, ErrTransport) {
		t.Fatalf("call on a closed pool: %v", err)
	}
	p.Close() // idempotent
}

func TestCancellationReachesServerAndIsNotRetried(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := call(ctx, p, srv, "block", "c")
		errc <- err
	}()
	ts.WaitEntered("c")
	cancel()
	err := <-errc
	if pe := asPoolError(t, err); pe.Kind != KindOutcomeUnknown || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	eventually(t, "the server to see the cancellation", func() bool { return ts.WasCancelled("c") })
}

func TestMaxConcurrentPerKey(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, &Options{MaxConcurrentPerKey: 1})
	srv := server(ts, "a")
	errc := make(chan error, 1)
	go func() {
		_, err := call(context.Background(), p, srv, "block", "holder")
		errc <- err
	}()
	ts.WaitEntered("holder")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := call(ctx, p, srv, "echo", "waiter")
	if pe := asPoolError(t, err); pe.Kind != KindTransport || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter past its deadline: %v", err)
	}
	if ts.Executions("waiter") != 0 || p.Stats().WaitCount != 1 {
		t.Fatalf("waiter ran or was not counted: %+v", p.Stats())
	}
	ts.Open("holder")
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mustCall(t, p, srv, "echo", "after")
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sems) != 0 {
		t.Fatalf("%d per-key semaphores kept with nobody using them", len(p.sems))
	}
}

func TestProgressReachesCaller(t *testing.T) {
	ts := newTestServer(t, false)
	mcpSrv := ts.MCPServer()
	mcp.AddTool(mcpSrv, &mcp.Tool{Name: "progress"}, func(ctx context.Context, req *mcp.CallToolRequest, in mcptest.ToolIn) (*mcp.CallToolResult, any, error) {
		for i := range 3 {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i + 1), Message: "step"})
			if err != nil {
				t.Errorf("NotifyProgress: %v", err)
			}
		}
		return &mcp.CallToolResult{}, nil, nil
	})
	p := newTestPool(t, nil)
	var mu sync.Mutex
	var got []float64
	ctx := WithProgress(context.Background(), func(pn *mcp.ProgressNotificationParams) {
		mu.Lock()
		got = append(got, pn.Progress)
		mu.Unlock()
	})
	params := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"id": "p"}}
	if _, err := p.CallTool(ctx, server(ts, "a"), params); err != nil {
		t.Fatal(err)
	}
	if params.Meta != nil {
		t.Fatal("CallTool modified the caller's params")
	}
	eventually(t, "three progress notifications", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 })
}

func TestIdentitiesNeverShareASession(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	a := &Server{Name: "s", URL: ts.URL(), ProtocolVersion: Protocol20251125, Headers: map[string]string{"Authorization": "Bearer alice"}}
	b := &Server{Name: "s", URL: ts.URL(), ProtocolVersion: Protocol20251125, Headers: map[string]string{"Authorization": "Bearer bob"}}
	var mu sync.Mutex
	seen := map[string]string{} // call id -> Authorization
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.CallID != "" {
			mu.Lock()
			seen[rpc.CallID] = r.Header.Get("Authorization")
			mu.Unlock()
		}
		return false
	})
	mustCall(t, p, a, "echo", "1")
	mustCall(t, p, b, "echo", "2")
	mustCall(t, p, a, "echo", "3")
	if st := p.Stats(); st.Dials != 2 || st.Open != 2 {
		t.Fatalf("stats: %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["1"] != "Bearer alice" || seen["2"] != "Bearer bob" || seen["3"] != "Bearer alice" {
		t.Fatalf("the server saw credentials %v", seen)
	}
}

// A call cancelled just before the pool closes: go-sdk sends its
// notifications/cancelled from a goroutine of its own, and the session must
// not be closed (DELETE) before that notice is delivered. The server holds
// the notice; the DELETE must not overtake it.
func TestCloseDeliversCancelNoticesFirst(t *testing.T) {
	waiting := make(chan int, 1)
	old := testHookAwaitNotices
	testHookAwaitNotices = func(n int) { waiting <- n }
	t.Cleanup(func() { testHookAwaitNotices = old })

	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	noticeArrived, release, deleteArrived := make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		switch {
		case rpc.Method == "notifications/cancelled":
			close(noticeArrived)
			<-release
		case r.Method == http.MethodDelete:
			deleteArrived <- struct{}{}
		}
		return false
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := call(ctx, p, srv, "block", "c")
		errc <- err
	}()
	ts.WaitEntered("c")
	cancel()
	<-errc
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()

	<-noticeArrived
	select {
	case n := <-waiting:
		if n != 1 {
			t.Fatalf("close waits for %d notices, want 1", n)
		}
	case <-deleteArrived:
		close(release)
		t.Fatal("the session's DELETE overtook the cancel notice of a call on it")
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("Close neither waited for the cancel notice nor closed the session")
	}
	close(release)
	<-closed
	eventually(t, "the tool to see its cancellation", func() bool { return ts.WasCancelled("c") })
}

// A server that is down: the call fails fast with a transport error that
// names this request's own cause (nothing was sent), and the same pool
// works again when the server is back.
func TestServerDownThenBack(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "1")
	ts.Stop()
	_, err := call(context.Background(), p, srv, "echo", "down")
	pe := asPoolError(t, err)
	if pe.Kind != KindTransport || !strings.Contains(err.Error(), "the request was not sent") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("call while down: %v", err)
	}
	ts.Restart()
	mustCall(t, p, srv, "echo", "back")
	if ts.Executions("down") != 0 || ts.Executions("back") != 1 {
		t.Fatalf("executions: down %d, back %d", ts.Executions("down"), ts.Executions("back"))
	}
}

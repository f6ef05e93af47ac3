package pool

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcptest"
)

// delegatingServer is a real go-sdk server whose tool "delegate" lists the
// tools of target and calls its echo through p, from the tool's own
// context, as an agent's ask does; it answers what it got or the error.
// stateless selects the 2026-07-28 era for its callers (go-sdk serves it
// only statelessly). args makes the echo's arguments from delegate's id
// (nil: mcptest's echo).
func delegatingServer(t *testing.T, p *Pool, target *Server, stateless bool, args func(id string) map[string]any) string {
	if args == nil {
		args = func(id string) map[string]any { return map[string]any{"id": id, "text": "hello " + id} }
	}
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "delegator", Version: "1"}, nil)
	type in struct {
		ID string `json:"id"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "delegate"}, func(ctx context.Context, _ *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
		if _, err := p.ListTools(ctx, target); err != nil {
			return nil, nil, fmt.Errorf("tools/list: %w", err)
		}
		res, err := p.CallTool(ctx, target, &mcp.CallToolParams{Name: "echo", Arguments: args(in.ID)})
		if err != nil {
			return nil, nil, fmt.Errorf("tools/call: %w", err)
		}
		return res, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestDialFromAServersHandler: a pool used inside the handler of a go-sdk
// server's tool (an agent delegating) dials in the era it chose, whatever
// era the request it serves came in. go-sdk's handler keeps the incoming
// request's protocol version in the context, and go-sdk's client read it
// for the MCP-Protocol-Version header of its initialize: a delegation
// asked in the 2026-07-28 era sent "2026-07-28" on a session-era
// initialize, which a go-sdk v1.8.0 stateful server refused (-32022), to a
// pinned server and to an unpinned one after its server/discover fell
// back alike. Each case runs from a fresh pool, then again after the
// target forgot its sessions (the re-dial uses the era learned for the key).
func TestDialFromAServersHandler(t *testing.T) {
	for _, outer := range []struct {
		name      string
		stateless bool
		version   string // what the caller of "delegate" negotiates
	}{
		{"asked-2026-07-28", true, Protocol20260728},
		{"asked-2025-11-25", false, Protocol20251125},
	} {
		for _, pin := range []string{"", Protocol20251125} {
			t.Run(outer.name+"/pin="+pin, func(t *testing.T) {
				target := newTestServer(t, false) // plain go-sdk v1.8.0, stateful
				p := newTestPool(t, nil)
				srv := &Server{Name: "plain", URL: target.URL(), ProtocolVersion: pin}
				outerSrv := &Server{Name: "delegator", URL: delegatingServer(t, p, srv, outer.stateless, nil)}
				caller := newTestPool(t, nil) // closed before the server (cleanups run last first)

				for i, step := range []string{"fresh", "after-restart"} {
					if i > 0 {
						target.Restart()
					}
					id := outer.name + pin + step
					res, err := caller.CallTool(t.Context(), outerSrv, &mcp.CallToolParams{Name: "delegate", Arguments: map[string]any{"id": id}})
					if err != nil {
						t.Fatalf("%s: calling delegate: %v", step, err)
					}
					if res.IsError || mcptest.Text(res) != "hello "+id {
						t.Fatalf("%s: the delegation failed: %q", step, mcptest.Text(res))
					}
					if n := target.Executions(id); n != 1 {
						t.Fatalf("%s: echo ran %d times, want 1", step, n)
					}
				}
				if got := caller.Stats().Protocols; got[outer.version] != 1 {
					t.Fatalf("the caller's sessions by version %v, want one of %s", got, outer.version)
				}
				if got := p.Stats().Protocols; got[Protocol20251125] != 1 || len(got) != 1 {
					t.Fatalf("the delegating pool's sessions by version %v, want one of %s", got, Protocol20251125)
				}
			})
		}
	}
}

// TestDialFromAServersHandlerToEverything: the same delegation, asked in
// the 2026-07-28 era, to the TypeScript SDK's server-everything, unpinned
// (its server/discover answer sends go-sdk to the fallback initialize) and
// pinned. server-everything reads no MCP-Protocol-Version on an initialize,
// so it took the leaked header too: this is the third-party check that the
// fix costs nothing there; the regression is TestDialFromAServersHandler.
func TestDialFromAServersHandlerToEverything(t *testing.T) {
	ev := startEverything(t)
	for _, pin := range []string{"", Protocol20251125} {
		t.Run("pin="+pin, func(t *testing.T) {
			p := newTestPool(t, nil)
			srv := &Server{Name: "everything", URL: ev.url(), ProtocolVersion: pin}
			outer := &Server{Name: "delegator", URL: delegatingServer(t, p, srv, true, func(id string) map[string]any { return map[string]any{"message": id} })}
			caller := newTestPool(t, nil)
			res, err := caller.CallTool(t.Context(), outer, &mcp.CallToolParams{Name: "delegate", Arguments: map[string]any{"id": "ts-" + pin}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || !strings.Contains(mcptest.Text(res), "ts-"+pin) {
				t.Fatalf("the delegation failed: %q", mcptest.Text(res))
			}
			if got := p.Stats().Protocols; got[Protocol20251125] != 1 || len(got) != 1 {
				t.Fatalf("the delegating pool's sessions by version %v, want one of %s", got, Protocol20251125)
			}
		})
	}
}

// TestEraRefusedAfterItWasLearned: the pool learned 2026-07-28 from a
// server, and the server behind the URL is replaced by one of the session
// era only (a go-sdk v1.8.0 stateful handler: a rollback, a replica of an
// older release). Its answer to the next sessionless request is -32022:
// it cannot process a request of a version it does not implement, so
// nothing ran. The pool drops the session, dials again (server/discover,
// then the fallback initialize) and sends the request once more.
func TestEraRefusedAfterItWasLearned(t *testing.T) {
	var runs sync.Map // call id -> *atomic.Int64
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in mcptest.ToolIn) (*mcp.CallToolResult, any, error) {
		n, _ := runs.LoadOrStore(in.ID, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	ran := func(id string) int64 {
		n, _ := runs.LoadOrStore(id, new(atomic.Int64))
		return n.(*atomic.Int64).Load()
	}
	var sessionless, sessions http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}),
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	var cur atomic.Pointer[http.Handler]
	cur.Store(&sessionless)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*cur.Load()).ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)

	for _, path := range []string{"tools/list", "tools/call"} {
		t.Run(path, func(t *testing.T) {
			cur.Store(&sessionless)
			p := newTestPool(t, nil)
			srv := &Server{Name: "rolled-back", URL: ts.URL}
			mustCall(t, p, srv, "echo", "before-"+path)
			if got := p.Stats().Protocols; got[Protocol20260728] != 1 {
				t.Fatalf("sessions by version %v, want one of %s", got, Protocol20260728)
			}
			cur.Store(&sessions)
			var err error
			if path == "tools/list" {
				_, err = p.ListTools(t.Context(), srv)
			} else {
				_, err = call(t.Context(), p, srv, "echo", "after-"+path)
			}
			if err != nil {
				t.Fatalf("%s after the rollback: %v", path, err)
			}
			if path == "tools/call" && ran("after-"+path) != 1 {
				t.Fatalf("echo ran %d times, want 1", ran("after-"+path))
			}
			if got := p.Stats().Protocols; got[Protocol20251125] != 1 || len(got) != 1 {
				t.Fatalf("sessions by version %v, want one of %s", got, Protocol20251125)
			}
			p.Close()
		})
	}
}

// TestCallerParamsAreNotWritten: go-sdk writes the 2026-07-28 era's
// per-request _meta (protocol version, client info, capabilities) into the
// params it sends. The pool hands it a copy per request, so the caller's
// params are as it made them (it may send them again, elsewhere, or from
// several goroutines), and a retry never carries the version of the
// session it left.
func TestCallerParamsAreNotWritten(t *testing.T) {
	ts := newTestServer(t, true)
	p := newTestPool(t, nil)
	srv := &Server{Name: "sessionless", URL: ts.URL()}
	bare := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"id": "bare"}}
	withMeta := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"id": "meta"}, Meta: mcp.Meta{"run.switchboard/chain": "x"}}
	for _, params := range []*mcp.CallToolParams{bare, withMeta} {
		if _, err := p.CallTool(t.Context(), srv, params); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.Stats().Protocols; got[Protocol20260728] != 1 {
		t.Fatalf("sessions by version %v, want one of %s", got, Protocol20260728)
	}
	if bare.Meta != nil {
		t.Errorf("params without _meta came back with %v", bare.Meta)
	}
	if len(withMeta.Meta) != 1 || withMeta.Meta["run.switchboard/chain"] != "x" {
		t.Errorf("params' _meta came back as %v, want only the caller's", withMeta.Meta)
	}
	for _, rp := range []*mcp.ReadResourceParams{{URI: "test://none"}} {
		p.ReadResource(t.Context(), srv, rp) // the server has no resources: an error, and the params as they were
		if rp.Meta != nil {
			t.Errorf("resources/read params came back with %v", rp.Meta)
		}
	}
}

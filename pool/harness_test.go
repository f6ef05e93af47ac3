package pool

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/waittest"
)

type testServer = mcptest.Server

// testTransports are the HTTP transports of the current test's pools; a
// restart of a test server closes their idle connections (see
// mcptest.Server.Restart). Tests in this package do not run in parallel.
var testTransports struct {
	sync.Mutex
	list []*http.Transport
}

func newTestServer(t *testing.T, stateless bool) *testServer {
	ts := mcptest.NewServer(t, stateless)
	ts.OnStop(func() {
		testTransports.Lock()
		defer testTransports.Unlock()
		for _, tr := range testTransports.list {
			tr.CloseIdleConnections()
		}
	})
	return ts
}

func server(ts *testServer, name string) *Server {
	return &Server{Name: name, URL: ts.URL(), ProtocolVersion: Protocol20251125}
}

// newTestPool returns a pool with its own HTTP transport, closed (with the
// transport's idle connections) at the end of the test.
func newTestPool(t *testing.T, opts *Options) *Pool {
	t.Helper()
	tr := &http.Transport{}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.Transport = tr
	p := New(&o)
	testTransports.Lock()
	testTransports.list = append(testTransports.list, tr)
	testTransports.Unlock()
	t.Cleanup(func() {
		p.Close()
		tr.CloseIdleConnections()
		testTransports.Lock()
		testTransports.list = slices.DeleteFunc(testTransports.list, func(x *http.Transport) bool { return x == tr })
		testTransports.Unlock()
	})
	return p
}

func call(ctx context.Context, p *Pool, srv *Server, tool, id string) (*mcp.CallToolResult, error) {
	return p.CallTool(ctx, srv, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"id": id, "text": "hello " + id}})
}

func mustCall(t *testing.T, p *Pool, srv *Server, tool, id string) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := call(ctx, p, srv, tool, id)
	if err != nil {
		t.Fatalf("call %s %s: %v", tool, id, err)
	}
	if res.IsError {
		t.Fatalf("call %s %s: tool error %v", tool, id, res.Content)
	}
	return res
}

func asPoolError(t *testing.T, err error) *Error {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *pool.Error", err, err)
	}
	return pe
}

// eventually is waittest.Until with the deadline of this package's tests.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waittest.Until(t, 10*time.Second, what, cond)
}

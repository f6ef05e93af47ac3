package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testServer is a real go-sdk MCP server on a loopback port. It counts tool
// executions per call id, records every HTTP request it receives, can be
// restarted on the same address (forgetting every session, as a redeployed
// server does), and lets a test answer chosen requests itself.
type testServer struct {
	t         *testing.T
	addr      string
	stateless bool

	execs sync.Map // call id -> *atomic.Int64

	mu        sync.Mutex // protects the fields below
	srv       *http.Server
	mcpSrv    *mcp.Server
	kill      context.CancelFunc // ends the running tools of this server generation, as a process exit does
	ln        net.Listener
	requests  []recorded
	intercept func(w http.ResponseWriter, r *http.Request, rpc rpcInfo) bool
	gates     map[string]chan struct{} // call id -> closed to let a "block" tool return
	entered   map[string]chan struct{} // call id -> closed when a "block" tool starts
	cancelled map[string]bool          // call id -> the tool saw its context cancelled
}

type recorded struct {
	Method    string // HTTP method
	SessionID string
	RPC       string // JSON-RPC method, for POSTs
}

type rpcInfo struct {
	Method string
	ID     json.RawMessage
	Tool   string // params.name for tools/call
	CallID string // params.arguments.id for tools/call
}

type toolIn struct {
	ID   string `json:"id" jsonschema:"call id, counted by the server"`
	Text string `json:"text,omitempty"`
}

func newTestServer(t *testing.T, stateless bool) *testServer {
	t.Helper()
	s := &testServer{t: t, stateless: stateless, gates: map[string]chan struct{}{}, entered: map[string]chan struct{}{}, cancelled: map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	t.Cleanup(s.stop)
	return s
}

func (s *testServer) URL() string { return "http://" + s.addr + "/mcp" }

func (s *testServer) server(name string) *Server {
	return &Server{Name: name, URL: s.URL(), ProtocolVersion: Protocol20251125}
}

func (s *testServer) mcpServer(life context.Context) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "echo text back"}, func(ctx context.Context, req *mcp.CallToolRequest, in toolIn) (*mcp.CallToolResult, any, error) {
		s.count(in.ID)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "block", Description: "wait for the test to open the gate"}, func(ctx context.Context, req *mcp.CallToolRequest, in toolIn) (*mcp.CallToolResult, any, error) {
		s.count(in.ID)
		gate, entered := s.gate(in.ID)
		close(entered)
		select {
		case <-gate:
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "opened " + in.ID}}}, nil, nil
		case <-ctx.Done():
			s.mu.Lock()
			s.cancelled[in.ID] = true
			s.mu.Unlock()
			return nil, nil, ctx.Err()
		case <-life.Done():
			return nil, nil, life.Err()
		}
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "return a JSON-RPC error"}, func(ctx context.Context, req *mcp.CallToolRequest, in toolIn) (*mcp.CallToolResult, any, error) {
		s.count(in.ID)
		return nil, nil, &jsonrpc.Error{Code: -32042, Message: "the archive is read-only"}
	})
	return srv
}

func (s *testServer) gate(id string) (gate, entered chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gates[id] == nil {
		s.gates[id] = make(chan struct{})
	}
	if s.entered[id] == nil {
		s.entered[id] = make(chan struct{})
	}
	return s.gates[id], s.entered[id]
}

// waitEntered blocks until the "block" tool with call id has started.
func (s *testServer) waitEntered(id string) {
	s.t.Helper()
	_, entered := s.gate(id)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		s.t.Fatalf("tool call %s never started", id)
	}
}

func (s *testServer) open(id string) {
	g, _ := s.gate(id)
	close(g)
}

func (s *testServer) count(id string) {
	v, _ := s.execs.LoadOrStore(id, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (s *testServer) executions(id string) int64 {
	v, ok := s.execs.Load(id)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func (s *testServer) wasCancelled(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled[id]
}

func (s *testServer) setIntercept(f func(w http.ResponseWriter, r *http.Request, rpc rpcInfo) bool) {
	s.mu.Lock()
	s.intercept = f
	s.mu.Unlock()
}

func (s *testServer) recorded() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.requests...)
}

func (s *testServer) serve(ln net.Listener) {
	life, kill := context.WithCancel(context.Background())
	mcpSrv := s.mcpServer(life)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpSrv }, &mcp.StreamableHTTPOptions{Stateless: s.stateless})
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var info rpcInfo
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string          `json:"method"`
				ID     json.RawMessage `json:"id"`
				Params struct {
					Name      string `json:"name"`
					Arguments struct {
						ID string `json:"id"`
					} `json:"arguments"`
				} `json:"params"`
			}
			json.Unmarshal(body, &msg)
			info = rpcInfo{Method: msg.Method, ID: msg.ID, Tool: msg.Params.Name, CallID: msg.Params.Arguments.ID}
		}
		s.mu.Lock()
		s.requests = append(s.requests, recorded{Method: r.Method, SessionID: r.Header.Get("Mcp-Session-Id"), RPC: info.Method})
		intercept := s.intercept
		s.mu.Unlock()
		if intercept != nil && intercept(w, r, info) {
			return
		}
		h.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: wrapped}
	s.mu.Lock()
	s.srv, s.ln, s.mcpSrv, s.kill = srv, ln, mcpSrv, kill
	s.mu.Unlock()
	go srv.Serve(ln)
}

// restart stops the server, dropping every connection and session, and
// starts a new one on the same address.
func (s *testServer) restart() {
	s.t.Helper()
	s.stop()
	var ln net.Listener
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err = net.Listen("tcp", s.addr)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // the port is being released by the kernel
	}
	if err != nil {
		s.t.Fatalf("listen again on %s: %v", s.addr, err)
	}
	s.serve(ln)
}

// stop closes the server and every connection to it.
func (s *testServer) stop() {
	s.mu.Lock()
	srv, mcpSrv, kill := s.srv, s.mcpSrv, s.kill
	s.srv, s.mcpSrv, s.kill = nil, nil, nil
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
	if kill != nil {
		kill()
	}
	if mcpSrv != nil {
		// A process that exits takes its sessions with it.
		for ss := range mcpSrv.Sessions() {
			ss.Close()
		}
	}
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
	o.HTTPClient = &http.Client{Transport: tr}
	p := New(&o)
	t.Cleanup(func() {
		p.Close()
		tr.CloseIdleConnections()
	})
	return p
}

func call(ctx context.Context, p *Pool, srv *Server, tool, id string) (*mcp.CallToolResult, error) {
	return p.CallTool(ctx, srv, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"id": id, "text": "hello " + id}})
}

func mustCall(t *testing.T, p *Pool, srv *Server, tool, id string) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
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

// eventually polls cond until it holds or a deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// answer404 writes a 404 the way some servers and proxies do: a JSON-RPC
// error body carrying the request's id.
func answer404WithRPCBody(w http.ResponseWriter, id json.RawMessage) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":"Session has been terminated"}}`, id)
}

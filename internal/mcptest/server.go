// Package mcptest provides a real go-sdk MCP server on a loopback port for
// tests: it counts tool executions per call id, records every HTTP request,
// restarts on the same address (forgetting its sessions, as a redeployed
// server does), and lets a test answer chosen requests itself.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server is a real go-sdk MCP server on a loopback port. It counts tool
// executions per call id, records every HTTP request it receives, can be
// restarted on the same address (forgetting every session, as a redeployed
// server does), and lets a test answer chosen requests itself.
type Server struct {
	t    testing.TB
	addr string
	opts Options

	execs       sync.Map     // call id -> *atomic.Int64
	inFlight    atomic.Int64 // tool executions running now
	maxInFlight atomic.Int64 // the most that ever ran at once

	mu        sync.Mutex // protects the fields below
	srv       *http.Server
	mcpSrv    *mcp.Server
	handler   http.Handler       // go-sdk's handler of this generation; see Forward
	onStop    []func()           // see Restart
	kill      context.CancelFunc // ends the running tools of this server generation, as a process exit does
	ln        net.Listener
	requests  []Recorded
	intercept func(w http.ResponseWriter, r *http.Request, rpc RPCInfo) bool
	gates     map[string]chan struct{} // call id -> closed to let a "block" tool return
	entered   map[string]chan struct{} // call id -> closed when a "block" tool starts
	cancelled map[string]bool          // call id -> the tool saw its context cancelled
}

// Recorded is one HTTP request the server received.
type Recorded struct {
	Method    string // HTTP method
	SessionID string
	RPC       string // JSON-RPC method, for POSTs
}

// RPCInfo describes a POSTed JSON-RPC message.
type RPCInfo struct {
	Method string
	ID     json.RawMessage
	Tool   string // params.name for tools/call
	CallID string // params.arguments.id for tools/call
}

// ToolIn is the input of the server's tools.
type ToolIn struct {
	ID   string `json:"id" jsonschema:"call id, counted by the server"`
	Text string `json:"text,omitempty"`
}

// Options configure Start. The zero value is a stateful server whose
// sessions never expire.
type Options struct {
	// Stateless selects go-sdk's Stateless mode.
	Stateless bool
	// SessionTimeout closes sessions idle this long, as a server's idle
	// timeout does (go-sdk StreamableHTTPOptions.SessionTimeout).
	SessionTimeout time.Duration
	// NoRecord leaves Recorded empty, for load tests that measure memory.
	NoRecord bool
	// Middleware, when set, is added as receiving middleware to the go-sdk
	// server of every generation (an idempotency guard, say).
	Middleware mcp.Middleware
}

// NewServer starts a server; stateless selects go-sdk's Stateless mode.
func NewServer(t testing.TB, stateless bool) *Server {
	t.Helper()
	return Start(t, &Options{Stateless: stateless})
}

// Start starts a server configured by opts (nil: the defaults).
func Start(t testing.TB, opts *Options) *Server {
	t.Helper()
	s := &Server{t: t, gates: map[string]chan struct{}{}, entered: map[string]chan struct{}{}, cancelled: map[string]bool{}}
	if opts != nil {
		s.opts = *opts
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's MCP endpoint.
func (s *Server) URL() string { return "http://" + s.addr + "/mcp" }

func (s *Server) mcpServer(life context.Context) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	if s.opts.Middleware != nil {
		srv.AddReceivingMiddleware(s.opts.Middleware)
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "echo text back"}, func(ctx context.Context, req *mcp.CallToolRequest, in ToolIn) (*mcp.CallToolResult, any, error) {
		s.count(in.ID)
		defer s.done()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "block", Description: "wait for the test to open the gate"}, func(ctx context.Context, req *mcp.CallToolRequest, in ToolIn) (*mcp.CallToolResult, any, error) {
		s.count(in.ID)
		defer s.done()
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
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "return a JSON-RPC error"}, func(ctx context.Context, req *mcp.CallToolRequest, in ToolIn) (*mcp.CallToolResult, any, error) {
		s.count(in.ID)
		defer s.done()
		return nil, nil, &jsonrpc.Error{Code: -32042, Message: "the archive is read-only"}
	})
	return srv
}

func (s *Server) gate(id string) (gate, entered chan struct{}) {
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
func (s *Server) WaitEntered(id string) {
	s.t.Helper()
	_, entered := s.gate(id)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		s.t.Fatalf("tool call %s never started", id)
	}
}

func (s *Server) Open(id string) {
	g, _ := s.gate(id)
	close(g)
}

func (s *Server) count(id string) {
	v, _ := s.execs.LoadOrStore(id, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	n := s.inFlight.Add(1)
	for m := s.maxInFlight.Load(); n > m && !s.maxInFlight.CompareAndSwap(m, n); m = s.maxInFlight.Load() {
	}
}

// done ends a tool execution started by count.
func (s *Server) done() { s.inFlight.Add(-1) }

// MaxInFlight is the most tool executions that ever ran at once.
func (s *Server) MaxInFlight() int64 { return s.maxInFlight.Load() }

func (s *Server) Executions(id string) int64 {
	v, ok := s.execs.Load(id)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func (s *Server) WasCancelled(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled[id]
}

func (s *Server) SetIntercept(f func(w http.ResponseWriter, r *http.Request, rpc RPCInfo) bool) {
	s.mu.Lock()
	s.intercept = f
	s.mu.Unlock()
}

func (s *Server) Recorded() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.requests...)
}

func (s *Server) serve(ln net.Listener) {
	life, kill := context.WithCancel(context.Background())
	mcpSrv := s.mcpServer(life)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpSrv }, &mcp.StreamableHTTPOptions{
		Stateless:      s.opts.Stateless,
		SessionTimeout: s.opts.SessionTimeout,
	})
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var info RPCInfo
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
			info = RPCInfo{Method: msg.Method, ID: msg.ID, Tool: msg.Params.Name, CallID: msg.Params.Arguments.ID}
		}
		s.mu.Lock()
		if !s.opts.NoRecord {
			s.requests = append(s.requests, Recorded{Method: r.Method, SessionID: r.Header.Get("Mcp-Session-Id"), RPC: info.Method})
		}
		intercept := s.intercept
		s.mu.Unlock()
		if intercept != nil && intercept(w, r, info) {
			return
		}
		h.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: wrapped}
	s.mu.Lock()
	s.srv, s.ln, s.mcpSrv, s.kill, s.handler = srv, ln, mcpSrv, kill, h
	s.mu.Unlock()
	go srv.Serve(ln)
}

// restart stops the server, dropping every connection and session, and
// starts a new one on the same address.
//
// A real restart takes far longer than a client needs to notice that its
// keep-alive connections were closed; this one is instant. A request the
// client sends in that instant goes out on a dead connection, fails with EOF,
// and is rightly reported as outcome unknown (it looks exactly like a server
// dying mid-request). Stop, and so Restart, therefore runs the hooks given to
// OnStop, with which a test closes its clients' idle connections, as time
// would have.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
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

// OnStop adds f to the functions Stop runs once the server is gone,
// typically an http.Transport's CloseIdleConnections.
func (s *Server) OnStop(f func()) {
	s.mu.Lock()
	s.onStop = append(s.onStop, f)
	s.mu.Unlock()
}

// Stop closes the server and every connection to it, ends its running
// tools and sessions as a process exit does, and runs the OnStop hooks.
func (s *Server) Stop() {
	s.mu.Lock()
	srv, mcpSrv, kill := s.srv, s.mcpSrv, s.kill
	s.srv, s.mcpSrv, s.kill, s.handler = nil, nil, nil, nil
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
	s.mu.Lock()
	hooks := s.onStop
	s.mu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// Answer404WithRPCBody writes a 404 the way some servers and proxies do: a JSON-RPC
// error body carrying the request's id.
func Answer404WithRPCBody(w http.ResponseWriter, id json.RawMessage) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":"Session has been terminated"}}`, id)
}

// MCPServer returns the go-sdk server of the current generation, for adding
// tools.
func (s *Server) MCPServer() *mcp.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mcpSrv
}

// Sessions is the number of live sessions of the current generation (0
// while the server is stopped).
func (s *Server) Sessions() int {
	s.mu.Lock()
	mcpSrv := s.mcpSrv
	s.mu.Unlock()
	if mcpSrv == nil {
		return 0
	}
	n := 0
	for range mcpSrv.Sessions() {
		n++
	}
	return n
}

// Forward serves r with the go-sdk handler of the current generation, for an
// intercept that passes a request on and then does something to the answer
// (see ResetMidResponse). It answers 503 while the server is stopped.
func (s *Server) Forward(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.handler
	s.mu.Unlock()
	if h == nil {
		http.Error(w, "server stopped", http.StatusServiceUnavailable)
		return
	}
	h.ServeHTTP(w, r)
}

// ResetMidResponse forwards r (so the request runs to completion on the
// server), then sends the client the status, the headers and the first half
// of the answer's body and resets the connection (RST, not FIN): the answer
// to a request that ran is lost in the middle.
func (s *Server) ResetMidResponse(w http.ResponseWriter, r *http.Request) {
	rec := &bufferedResponse{header: http.Header{}}
	s.Forward(rec, r)
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	w.WriteHeader(rec.status)
	w.Write(rec.body.Bytes()[:rec.body.Len()/2])
	rc := http.NewResponseController(w)
	rc.Flush()
	conn, _, err := rc.Hijack()
	if err != nil {
		s.t.Errorf("mcptest: hijacking the connection to reset it: %v", err)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0) // close sends RST
	}
	conn.Close()
}

// bufferedResponse is an http.ResponseWriter that keeps the whole answer.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
func (b *bufferedResponse) Flush() {}

// Text is the text content of a tool result, one line per text part: what
// a test compares, whichever server answered.
func Text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

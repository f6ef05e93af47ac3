package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) != "" {
		serveStdio()
		return
	}
	if os.Getenv(httpServerEnv) != "" {
		serveHTTP()
		return
	}
	goleak.VerifyTestMain(m)
}

// stdioServerEnv makes the test binary a stdio MCP server, so the pool's
// stdio path runs against a real child process.
const stdioServerEnv = "SWITCHBOARD_POOL_TEST_STDIO_SERVER"

// httpServerEnv makes the test binary a Streamable HTTP MCP server on a
// loopback port, which it prints on stdout ("LISTENING host:port"), until
// its stdin closes: a server in its own process, so that what a test
// measures in its own process is the client's cost alone.
const httpServerEnv = "SWITCHBOARD_POOL_TEST_HTTP_SERVER"

func serveHTTP() {
	s := mcp.NewServer(&mcp.Implementation{Name: "http-test"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in mcptest.ToolIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("LISTENING %s\n", ln.Addr())
	go http.Serve(ln, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

func serveStdio() {
	if os.Getenv(stdioServerEnv) == "fail-start" {
		fmt.Fprintln(os.Stderr, "cannot open /etc/server.conf: permission denied")
		os.Exit(2)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "stdio-test"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in mcptest.ToolIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text + " pid " + fmt.Sprint(os.Getpid())}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "env"}, func(ctx context.Context, req *mcp.CallToolRequest, in mcptest.ToolIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "cwd"}, func(ctx context.Context, req *mcp.CallToolRequest, in mcptest.ToolIn) (*mcp.CallToolResult, any, error) {
		wd, err := os.Getwd()
		if err == nil {
			wd, err = filepath.EvalSymlinks(wd)
		}
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: wd}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "stderr"}, func(ctx context.Context, req *mcp.CallToolRequest, in mcptest.ToolIn) (*mcp.CallToolResult, any, error) {
		fmt.Fprintf(os.Stderr, "%s\n%s\n", in.Text, strings.Repeat("y", 5000))
		return &mcp.CallToolResult{}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "huge"}, func(ctx context.Context, req *mcp.CallToolRequest, in mcptest.ToolIn) (*mcp.CallToolResult, any, error) {
		// One line of stdout of over 2 MiB (stdio_cap_test.go).
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("z", hugeStdioResult)}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "exit"}, func(ctx context.Context, req *mcp.CallToolRequest, in mcptest.ToolIn) (*mcp.CallToolResult, any, error) {
		fmt.Fprintln(os.Stderr, "fatal: disk full")
		os.Exit(3)
		return nil, nil, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func TestStdioServer(t *testing.T) {
	p := newTestPool(t, nil)
	srv := &Server{Name: "stdio", Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{stdioServerEnv: "1"}}
	first := mustCall(t, p, srv, "echo", "1").Content[0].(*mcp.TextContent).Text
	second := mustCall(t, p, srv, "echo", "2").Content[0].(*mcp.TextContent).Text
	if !strings.HasPrefix(first, "hello 1 pid ") || strings.TrimPrefix(first, "hello 1 ") != strings.TrimPrefix(second, "hello 2 ") {
		t.Fatalf("want two calls on one child process, got %q and %q", first, second)
	}
	tools, err := p.ListTools(context.Background(), srv)
	if err != nil || len(tools) == 0 || !slices.ContainsFunc(tools, func(t *mcp.Tool) bool { return t.Name == "echo" }) {
		t.Fatalf("ListTools: %v %v", tools, err)
	}
	if st := p.Stats(); st.Dials != 1 || st.Open != 1 {
		t.Fatalf("stats: %+v", st)
	}
	p.Close()
	if st := p.Stats(); st.Open != 0 || st.Closes != 1 {
		t.Fatalf("stats after Close: %+v", st)
	}
}

func TestCallAndStats(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	res := mustCall(t, p, srv, "echo", "1")
	if got := res.Content[0].(*mcp.TextContent).Text; got != "hello 1" {
		t.Fatalf("echo = %q", got)
	}
	mustCall(t, p, srv, "echo", "2")
	st := p.Stats()
	if st.Dials != 1 || st.Open != 1 || st.Idle != 1 || st.InUse != 0 || st.Reinitializations != 0 || st.Retries != 0 {
		t.Fatalf("stats after two calls on one session: %+v", st)
	}
}

func TestRestartBetweenCalls(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "before")
	ts.Restart()
	var info CallInfo
	if _, err := call(WithCallInfo(context.Background(), &info), p, srv, "echo", "after"); err != nil {
		t.Fatal(err)
	}
	if !info.Retried || info.Attempts != 2 {
		t.Fatalf("CallInfo after a recovered call: %+v", info)
	}

	for _, id := range []string{"before", "after"} {
		if n := ts.Executions(id); n != 1 {
			t.Errorf("executions of %s = %d, want 1", id, n)
		}
	}
	st := p.Stats()
	if st.Reinitializations != 1 || st.Retries != 1 || st.Dials != 2 || st.InvalidationsByReason[reasonExpired] != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestConcurrentCallersOnForgottenSession(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "warm")
	ts.Restart()

	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := call(ctx, p, srv, "echo", fmt.Sprint(i))
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("call failed: %v", err)
		}
	}
	for i := range n {
		if got := ts.Executions(fmt.Sprint(i)); got != 1 {
			t.Errorf("executions of call %d = %d, want exactly 1", i, got)
		}
	}
	st := p.Stats()
	if st.Reinitializations != 1 || st.Dials != 2 {
		t.Fatalf("want exactly one re-initialization shared by %d callers; stats: %+v", n, st)
	}
	t.Logf("64 callers on a forgotten session: %d retries, %d re-initialization", st.Retries, st.Reinitializations)
}

func TestSecond404AfterRecoverySurfaces(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "warm")
	// From now on the server forgets every session as soon as it is made.
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if r.Header.Get("Mcp-Session-Id") != "" && rpc.Method == "tools/call" {
			http.Error(w, "session not found", http.StatusNotFound)
			return true
		}
		return false
	})
	_, err := call(context.Background(), p, srv, "echo", "x")
	pe := asPoolError(t, err)
	if pe.Kind != KindSessionExpired || !pe.Retried || !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("want a session-expired error after one retry, got %+v", pe)
	}
	if n := ts.Executions("x"); n != 0 {
		t.Fatalf("executions = %d, want 0", n)
	}
	if st := p.Stats(); st.Retries != 1 || st.Dials != 2 {
		t.Fatalf("want exactly one retry and one re-dial (no loop); stats: %+v", st)
	}
}

func TestFailedReinitializeSurfaces(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "warm")
	ts.Restart()
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.Method == "initialize" {
			http.Error(w, "upstream is being redeployed", http.StatusForbidden)
			return true
		}
		return false
	})
	_, err := call(context.Background(), p, srv, "echo", "x")
	pe := asPoolError(t, err)
	if pe.Kind != KindSessionExpired || !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("want session expired with the failed re-initialization as cause, got %v", err)
	}
	if want := "re-initializing the session failed"; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("error %q does not carry the cause", err)
	}
	if st := p.Stats(); st.Dials != 2 || st.DialFailures != 1 || st.Retries != 1 || st.Reinitializations != 0 {
		t.Fatalf("stats: %+v", st)
	}
	// Once the server accepts sessions again, the pool recovers by itself.
	ts.SetIntercept(nil)
	mustCall(t, p, srv, "echo", "later")
	if st := p.Stats(); st.Reinitializations != 1 {
		t.Fatalf("stats after recovery: %+v", st)
	}
}

// TestLongServerMessageIsBounded: a server's JSON-RPC error that quotes a
// 3 MB argument (as a validation error may) is kept, and quoted, as its
// first 2 KiB with a note of what was left out, not whole.
func TestLongServerMessageIsBounded(t *testing.T) {
	ts := mcptest.Start(t, nil)
	huge := strings.Repeat("x", 3<<20) // under the server's 4 MiB body limit
	mcp.AddTool(ts.MCPServer(), &mcp.Tool{Name: "picky"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "text is too long: " + in.Text}
	})
	p := New(nil)
	defer p.Close()
	_, err := p.CallTool(t.Context(), &Server{Name: "s", URL: ts.URL()}, &mcp.CallToolParams{Name: "picky", Arguments: map[string]any{"text": huge}})
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != KindRPC || pe.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("err %.300v, want the server's invalid-params error", err)
	}
	if len(pe.Message) > maxMessage+64 || !strings.HasPrefix(pe.Message, "text is too long: xxx") || !strings.Contains(pe.Message, "more bytes left out") {
		t.Fatalf("Message is %d bytes: %.200q", len(pe.Message), pe.Message)
	}
	if n := len(err.Error()); n > 2*maxMessage+512 {
		t.Fatalf("the error's text is %d bytes for a %d-byte argument", n, len(huge))
	}
}

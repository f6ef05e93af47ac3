package peers

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/pool"
)

// protocol is the era every client is pinned to: go-sdk v1.8.0's stateful
// server does not serve 2026-07-28, and mcp-go's client, left unpinned,
// tries server/discover first and fails against it.
const protocol = "2025-11-25"

// BenchmarkPeers calls the echo tool of one go-sdk server in a child
// process from four clients, at 1, 16 and 64 concurrent callers sharing
// one session (one client); the Go clients report their CPU per call
// (cpu-us/op, see parallel):
//
//   - pooled: pool.Pool.CallTool;
//   - raw-session: one go-sdk ClientSession held open (the baseline);
//   - mcp-go: github.com/mark3labs/mcp-go v1.2.1's streamable HTTP client;
//   - ts-sdk: @modelcontextprotocol/sdk 1.32.2's client in node, timed in
//     node (tsclient.mjs) and reported here as ns/op; its B/op and
//     allocs/op are the Go driver's, not node's.
//
// The server being another process, B/op and allocs/op of the Go variants
// are the client's alone.
func BenchmarkPeers(b *testing.B) {
	url := startServerProcess(b)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	ctx := context.Background()
	args := map[string]any{"id": "bench", "text": "x"}
	cases := []int{1, 16, 64}

	for _, conc := range cases {
		b.Run(fmt.Sprintf("pooled/c%d", conc), func(b *testing.B) {
			p := pool.New(&pool.Options{Transport: tr})
			defer p.Close()
			srv := &pool.Server{Name: "peer", URL: url, ProtocolVersion: protocol}
			call := func() error {
				_, err := p.CallTool(ctx, srv, &mcp.CallToolParams{Name: "echo", Arguments: args})
				return err
			}
			if err := call(); err != nil {
				b.Fatal(err)
			}
			parallel(b, conc, call)
		})
	}
	for _, conc := range cases {
		b.Run(fmt.Sprintf("raw-session/c%d", conc), func(b *testing.B) {
			c := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil)
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true},
				&mcp.ClientSessionOptions{ProtocolVersion: protocol})
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			parallel(b, conc, func() error {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
				return err
			})
		})
	}
	for _, conc := range cases {
		b.Run(fmt.Sprintf("mcp-go/c%d", conc), func(b *testing.B) {
			t, err := mcpgotransport.NewStreamableHTTP(url, mcpgotransport.WithHTTPBasicClient(hc))
			if err != nil {
				b.Fatal(err)
			}
			c := mcpgoclient.NewClient(t, mcpgoclient.WithProtocolVersion(protocol))
			defer c.Close()
			if err := c.Start(ctx); err != nil {
				b.Fatal(err)
			}
			init := mcpgo.InitializeRequest{}
			init.Params.ProtocolVersion = protocol
			init.Params.ClientInfo = mcpgo.Implementation{Name: "bench-mcp-go", Version: "1"}
			if _, err := c.Initialize(ctx, init); err != nil {
				b.Fatal(err)
			}
			req := mcpgo.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = "echo", args
			parallel(b, conc, func() error {
				res, err := c.CallTool(ctx, req)
				if err == nil && res.IsError {
					err = fmt.Errorf("tool error: %v", res.Content)
				}
				return err
			})
		})
	}
	for _, conc := range cases {
		var ts *tsClient
		b.Run(fmt.Sprintf("ts-sdk/c%d", conc), func(b *testing.B) {
			if ts == nil {
				ts = startTSClient(b, url)
			}
			b.ReportAllocs()
			b.ResetTimer()
			ns, err := ts.run(b.N, conc)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(ns)/float64(b.N), "ns/op")
		})
		if ts != nil {
			ts.close()
		}
	}
}

// parallel runs b.N calls of fn spread over conc goroutines, and reports
// cpu-us/op: this process's CPU time (user and system, getrusage) per
// call, which is the client's alone, the server being another process.
// Unlike ns/op it does not move with what else the machine is doing.
func parallel(b *testing.B, conc int, fn func() error) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	t0 := cpuTime()
	var wg sync.WaitGroup
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	for range min(conc, b.N) {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := fn(); err != nil {
					mu.Lock()
					first = firstOf(first, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	used := cpuTime() - t0
	if first != nil {
		b.Fatal(first)
	}
	b.ReportMetric(float64(used.Microseconds())/float64(b.N), "cpu-us/op")
}

// cpuTime is this process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func firstOf(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// tsClient is node running tsclient.mjs: one session, driven over stdin.
type tsClient struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// startTSClient starts node with the TypeScript SDK from this directory's
// node_modules (npm ci), skipping the benchmark when either is missing.
func startTSClient(b testing.TB, url string) *tsClient {
	b.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		b.Skip("node is not installed")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		b.Skip("the TypeScript SDK is not installed: run npm ci in bench/peers")
	}
	cmd := exec.Command(node, "tsclient.mjs", url)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return &tsClient{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
}

// run has node make n calls from conc workers and returns the time node
// measured for them.
func (t *tsClient) run(n, conc int) (int64, error) {
	if _, err := fmt.Fprintf(t.stdin, "%d %d\n", n, conc); err != nil {
		return 0, fmt.Errorf("writing to the ts client: %w", err)
	}
	if !t.out.Scan() {
		return 0, fmt.Errorf("the ts client ended without an answer: %w", firstOf(t.out.Err(), io.ErrUnexpectedEOF))
	}
	var res struct {
		N      int    `json:"n"`
		NS     int64  `json:"ns"`
		Errors int    `json:"errors"`
		First  string `json:"first"`
	}
	if err := json.Unmarshal(t.out.Bytes(), &res); err != nil {
		return 0, fmt.Errorf("the ts client's answer %q: %w", t.out.Bytes(), err)
	}
	if res.N != n || res.Errors > 0 {
		return 0, fmt.Errorf("ts client: %d of %d calls failed; the first: %s", res.Errors, res.N, res.First)
	}
	return res.NS, nil
}

func (t *tsClient) close() {
	t.stdin.Close()
	for t.out.Scan() { // drain, so that Wait does not race the reader
	}
	t.cmd.Wait()
}

// serverEnv makes this test binary the server process (TestServerProcess).
const serverEnv = "SWITCHBOARD_PEERS_SERVER"

const serverMarker = "PEERS-SERVER "

// startServerProcess runs this test binary again as a go-sdk server and
// returns its URL; the server ends when the benchmark does.
func startServerProcess(b testing.TB) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestServerProcess$", "-test.count", "1")
	cmd.Env = append(os.Environ(), serverEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	found := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), serverMarker); ok {
				found <- rest
			}
		}
	}()
	b.Cleanup(func() {
		stdin.Close()
		<-drained
		cmd.Wait()
	})
	select {
	case url := <-found:
		return url
	case <-drained:
		b.Fatal("the server process exited before announcing its URL")
	case <-time.After(30 * time.Second):
		b.Fatal("the server process did not announce its URL within 30 s")
	}
	return ""
}

// TestServerProcess is not a test: it is BenchmarkPeers's server process,
// mcptest's go-sdk server, run when serverEnv is set, until stdin closes.
func TestServerProcess(t *testing.T) {
	if os.Getenv(serverEnv) == "" {
		t.Skip("the server process of BenchmarkPeers; runs only as its child")
	}
	ts := mcptest.Start(t, &mcptest.Options{NoRecord: true})
	fmt.Printf("%s%s\n", serverMarker, ts.URL())
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// TestTSClientRoundTrip checks the harness itself: node's client makes
// concurrent calls on one session and the answer comes back. It fails
// rather than skips when node or the SDK is missing, since then the
// benchmark would measure nothing.
func TestTSClientRoundTrip(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Fatal("the TypeScript SDK is not installed: run npm ci in bench/peers")
	}
	ts := startTSClient(t, startServerProcess(t))
	defer ts.close()
	if ns, err := ts.run(20, 4); err != nil || ns <= 0 {
		t.Fatalf("20 calls from 4 workers: %d ns, %v", ns, err)
	}
}

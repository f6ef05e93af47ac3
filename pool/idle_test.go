package pool

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcptest"
)

// startServerProcess runs the test binary as a Streamable HTTP server in a
// process of its own and returns its endpoint.
func startServerProcess(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), httpServerEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // the server exits when its stdin closes
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "LISTENING ")
	if err != nil || !ok {
		t.Fatalf("server process: %q, %v", line, err)
	}
	return "http://" + addr + "/mcp"
}

// idleCost opens n sessions (one per identity) and returns the client heap
// and goroutines each one holds while idle.
func idleCost(t *testing.T, url string, n int, notifications bool) (heapPerSession float64, goroutinesPerSession float64) {
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	p := New(&Options{Transport: tr, IdleTimeout: -1, Notifications: notifications})
	defer p.Close()
	open := func(id string) {
		srv := &Server{Name: "idle", URL: url, ProtocolVersion: Protocol20251125, Identity: id}
		mustCall(t, p, srv, "echo", id)
	}
	open("warm") // package-level state allocated once, not per session
	measure := func() (uint64, int) {
		tr.CloseIdleConnections() // shared by every session, not held by one
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, runtime.NumGoroutine()
	}
	heap0, g0 := measure()
	for i := range n {
		open(fmt.Sprint("user-", i))
	}
	heap1, g1 := measure()
	if st := p.Stats(); st.Open != n+1 {
		t.Fatalf("stats %+v, want %d open sessions", st, n+1)
	}
	return float64(int64(heap1)-int64(heap0)) / float64(n), float64(g1-g0) / float64(n)
}

// TestIdleSessionsAreCheap: an idle pooled session holds little heap in the
// client and no goroutine of the pool's (the server is in another process,
// so what is measured here is the client's alone). go-sdk v1.8.0 keeps one
// goroutine per ClientSession (its jsonrpc2 connection's reader), which no
// option removes. With the standalone GET stream (Options.Notifications)
// each one held a stream, a connection and five goroutines. The target is
// 10 KB; the ceiling checked is generous.
func TestIdleSessionsAreCheap(t *testing.T) {
	url := startServerProcess(t)
	const n = 300
	heap, gs := idleCost(t, url, n, false)
	t.Logf("idle session, no stream: %.0f B client heap, %.2f goroutines", heap, gs)
	if gs > 1.05 {
		t.Errorf("%.2f goroutines per idle session, want only go-sdk's reader", gs)
	}
	if heap > 16<<10 {
		t.Errorf("%.0f B of client heap per idle session, want at most 16 KB (target 10 KB)", heap)
	}
	heapN, gsN := idleCost(t, url, 50, true)
	t.Logf("idle session with Notifications: %.0f B client heap, %.2f goroutines", heapN, gsN)
}

// TestClosingManySessionsSendsEveryDelete: Close of 2,000 sessions sends
// every DELETE, with bounded concurrency, and the server ends with none.
func TestClosingManySessionsSendsEveryDelete(t *testing.T) {
	ts := mcptest.Start(t, &mcptest.Options{NoRecord: true})
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	p := New(&Options{Transport: tr, IdleTimeout: -1})
	n := 2000
	switch {
	case testing.Short():
		n = 200
	case raceEnabled:
		n = 500
	}
	start := time.Now()
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				srv := server(ts, "many")
				srv.Identity = fmt.Sprint("user-", i)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if _, err := call(ctx, p, srv, "echo", srv.Identity); err != nil {
					t.Errorf("call: %v", err)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if got := ts.Sessions(); got != n {
		t.Fatalf("server holds %d sessions, want %d", got, n)
	}
	dialed := time.Now()
	closeWithin(t, p, 60*time.Second)
	t.Logf("%d sessions: dialed in %v, closed in %v", n, dialed.Sub(start).Round(time.Millisecond), time.Since(dialed).Round(time.Millisecond))
	if got := ts.Sessions(); got != 0 {
		t.Fatalf("server holds %d sessions after Close; every DELETE must be sent", got)
	}
	if st := p.Stats(); st.ClosesByReason[reasonClosed] != int64(n) {
		t.Fatalf("stats: %+v", st)
	}
}

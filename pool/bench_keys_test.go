package pool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/pool"
)

// keyCounts are the pool sizes BenchmarkKeys and BenchmarkIdleSweep
// compare: one key (every caller shares a session), and one session per
// end user for a thousand and ten thousand users.
var keyCounts = []int{1, 1000, 10000}

// BenchmarkKeys: the cost of a call when the pool holds n sessions (one per
// Identity) and calls go round-robin over all of them, 16 at a time, against
// one go-sdk server in a child process (so that the heap and goroutines
// measured here are the client's alone). Variant kN; compare with k1.
//
// Besides ns/op it reports, for 1,000 and 10,000 keys, measured once when
// the n sessions have been dialed and are idle: heap-B/session and goroutines/session of this
// process, and server-heap-B/session of the server process (after a GC in
// each). The n sessions are dialed once per process and kept across the
// runs b.N calibration makes.
func BenchmarkKeys(b *testing.B) {
	child := startBenchServerProcess(b)
	hc := benchClient(b, nil)
	for _, n := range keyCounts {
		var env *keysEnv
		b.Run(fmt.Sprintf("k%d/c16", n), func(b *testing.B) {
			if env == nil {
				env = dialKeys(b, child, hc, n)
			}
			var next atomic.Int64
			parallel(b, 16, func() error {
				srv := env.servers[int(next.Add(1)-1)%n]
				_, err := env.p.CallTool(context.Background(), srv, echo())
				return err
			})
			if n > 1 { // one session's share is the pool's and transport's fixed cost, not a per-session one
				b.ReportMetric(env.heapPerSession, "heap-B/session")
				b.ReportMetric(env.goroutinesPerSession, "goroutines/session")
				b.ReportMetric(env.serverHeapPerSession, "server-heap-B/session")
			}
		})
		if env != nil {
			env.p.Close()
		}
	}
}

type keysEnv struct {
	p       *pool.Pool
	servers []*pool.Server

	heapPerSession, goroutinesPerSession, serverHeapPerSession float64
}

// dialKeys makes a pool with one idle session for each of n identities and
// measures what they cost. The pool never sweeps (IdleTimeout < 0), so the
// sessions stay for the calls.
func dialKeys(b *testing.B, child *benchServerProcess, hc *http.Client, n int) *keysEnv {
	b.Helper()
	servers := identities(child.url, n)
	heap0, g0 := clientHeap()
	s0 := child.stats(b)
	p := pool.New(&pool.Options{HTTPClient: hc, IdleTimeout: -1})
	if err := spread(n, 32, func(i int) error {
		_, err := p.CallTool(context.Background(), servers[i], echo())
		return err
	}); err != nil {
		p.Close()
		b.Fatalf("dialing %d keys: %v", n, err)
	}
	if st := p.Stats(); st.Open != n {
		p.Close()
		b.Fatalf("%d keys dialed, %d sessions open; stats %+v", n, st.Open, st)
	}
	heap1, g1 := clientHeap()
	s1 := child.stats(b)
	return &keysEnv{
		p: p, servers: servers,
		heapPerSession:       float64(int64(heap1)-int64(heap0)) / float64(n),
		goroutinesPerSession: float64(g1-g0) / float64(n),
		serverHeapPerSession: float64(int64(s1.Heap)-int64(s0.Heap)) / float64(n),
	}
}

// BenchmarkIdleSweep: what is left after the idle sweep has closed n
// sessions. One op: dial n keys (one call each) on a pool whose idle timeout
// is 200 ms, and wait until the sweep has closed every session. Then, with
// the pool still open and the HTTP transport's idle connections closed (the
// transport's pool is bounded, not per key):
//
//   - heap-after-sweep-B/key: this process's heap over what it was before
//     the pool existed, per key (the per-key bookkeeping that outlives the
//     sessions);
//   - goroutines-after-sweep: goroutines over the count before;
//   - server-sessions-left: sessions the server still holds, that is, the
//     closes whose DELETE never reached it.
func BenchmarkIdleSweep(b *testing.B) {
	child := startBenchServerProcess(b)
	tr := &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 1024}
	b.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	for _, n := range keyCounts {
		b.Run(fmt.Sprintf("k%d/sweep", n), func(b *testing.B) {
			var heap, goroutines, left float64
			for range b.N {
				servers := identities(child.url, n)
				tr.CloseIdleConnections()
				heap0, g0 := clientHeap()
				s0 := child.stats(b)
				p := pool.New(&pool.Options{HTTPClient: hc, IdleTimeout: 200 * time.Millisecond})
				err := spread(n, 32, func(i int) error {
					_, err := p.CallTool(context.Background(), servers[i], echo())
					return err
				})
				if err == nil {
					err = pollUntil(2*time.Minute, func() bool { st := p.Stats(); return st.Open == 0 && st.Closes >= int64(n) })
				}
				if err != nil {
					p.Close()
					b.Fatalf("%d keys: %v; stats %+v", n, err, p.Stats())
				}
				tr.CloseIdleConnections()
				heap1, g1 := clientHeap()
				s1 := child.stats(b)
				heap += float64(int64(heap1)-int64(heap0)) / float64(n)
				goroutines += float64(g1 - g0)
				left += float64(s1.Sessions - s0.Sessions)
				p.Close()
			}
			b.ReportMetric(heap/float64(b.N), "heap-after-sweep-B/key")
			b.ReportMetric(goroutines/float64(b.N), "goroutines-after-sweep")
			b.ReportMetric(left/float64(b.N), "server-sessions-left")
		})
	}
}

// identities is n Servers for one endpoint, one per end user.
func identities(url string, n int) []*pool.Server {
	s := make([]*pool.Server, n)
	for i := range s {
		s[i] = benchServer(url)
		s[i].Identity = fmt.Sprintf("user-%d", i)
	}
	return s
}

// clientHeap is this process's live heap and goroutine count after a GC.
func clientHeap() (heap uint64, goroutines int) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, runtime.NumGoroutine()
}

// benchServerEnv makes this test binary, run by startBenchServerProcess,
// an MCP server in a process of its own (TestBenchServerProcess).
const benchServerEnv = "SWITCHBOARD_POOL_BENCH_SERVER"

// benchServerMarker starts the line on which the child announces its URLs.
const benchServerMarker = "BENCH-SERVER "

type benchServerProcess struct {
	url, statsURL string
}

type serverStats struct {
	Heap       uint64 `json:"heap"`
	Goroutines int    `json:"goroutines"`
	Sessions   int    `json:"sessions"`
}

// stats asks the child for its heap after a GC, goroutines and sessions.
func (c *benchServerProcess) stats(b *testing.B) serverStats {
	b.Helper()
	resp, err := http.Get(c.statsURL)
	if err != nil {
		b.Fatalf("server stats: %v", err)
	}
	defer resp.Body.Close()
	var s serverStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		b.Fatalf("server stats: %v", err)
	}
	return s
}

// startBenchServerProcess runs this test binary again as a server and
// returns its URLs; it ends when the benchmark does (its stdin closes).
func startBenchServerProcess(b *testing.B) *benchServerProcess {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestBenchServerProcess$", "-test.count", "1")
	cmd.Env = append(os.Environ(), benchServerEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	ready := &markerWriter{found: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = ready, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	select {
	case line := <-ready.found:
		url, stats, _ := strings.Cut(line, " ")
		return &benchServerProcess{url: url, statsURL: stats}
	case <-time.After(30 * time.Second):
		b.Fatal("the server process did not announce its URL within 30 s")
		return nil
	}
}

// markerWriter passes on the first line that starts with benchServerMarker.
type markerWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	found chan string
	done  bool
}

func (w *markerWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line) // not a whole line yet
			return len(p), nil
		}
		if rest, ok := strings.CutPrefix(line, benchServerMarker); ok {
			w.found <- strings.TrimSpace(rest)
			w.done = true
			return len(p), nil
		}
	}
}

// TestBenchServerProcess is not a test: it is the server process of
// BenchmarkKeys and BenchmarkIdleSweep, run when benchServerEnv is set. It
// serves mcptest's server and a stats endpoint until its stdin closes.
func TestBenchServerProcess(t *testing.T) {
	if os.Getenv(benchServerEnv) == "" {
		t.Skip("the server process of BenchmarkKeys; runs only as a child of the benchmark")
	}
	ts := mcptest.Start(t, &mcptest.Options{NoRecord: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		json.NewEncoder(w).Encode(serverStats{Heap: m.HeapAlloc, Goroutines: runtime.NumGoroutine(), Sessions: ts.Sessions()})
	}))
	fmt.Printf("%s%s http://%s/stats\n", benchServerMarker, ts.URL(), ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	// The parent is gone or done: exit without the leak check, which
	// would wait for the sessions of a server that is simply stopping.
	os.Exit(0)
}

package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/pooltest"
	"github.com/switchboard-run/switchboard/internal/waittest"
	"github.com/switchboard-run/switchboard/pool"
)

// TestLimits checks the limits that must hold under load, in-process
// against real loopback servers, and records one line each for the table.
func TestLimits(t *testing.T) {
	p := currentProfile()
	t.Run("pool-cap", func(t *testing.T) { recordLimit(poolCap(t, p)) })
	t.Run("memory-ceiling", func(t *testing.T) { recordLimit(memoryCeiling(t, p)) })
}

// newPool returns a pool on a transport of its own that keeps 64 idle
// connections per host, closed at test cleanup.
func newPool(t *testing.T, opts pool.Options) (*pool.Pool, *http.Transport) {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections) // after the pool's Close: cleanups run last first
	opts.Transport = tr
	return pooltest.New(t, &opts), tr
}

func echo(ctx context.Context, pl *pool.Pool, srv *pool.Server, tool, id string) error {
	_, err := pl.CallTool(ctx, srv, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"id": id, "text": id}})
	return err
}

// poolCap: with MaxConcurrentPerKey, callers beyond the cap wait in the
// pool; one whose deadline passes gets a transport error (nothing was
// sent) at its deadline, and under load the server never sees more than
// the cap at once.
func poolCap(t *testing.T, p profile) Limit {
	ts := mcptest.Start(t, nil)
	pl, _ := newPool(t, pool.Options{MaxConcurrentPerKey: p.poolCap})
	srv := &pool.Server{Name: "s", URL: ts.URL(), ProtocolVersion: pool.Protocol20251125}

	holders := make(chan error, p.poolCap)
	for i := range p.poolCap {
		go func() { holders <- echo(context.Background(), pl, srv, "block", fmt.Sprintf("hold%d", i)) }()
	}
	for i := range p.poolCap {
		ts.WaitEntered(fmt.Sprintf("hold%d", i))
	}

	const deadline = 150 * time.Millisecond
	waiters := p.poolCapCalls / 2
	var wg sync.WaitGroup
	var slowest atomic.Int64
	for i := range waiters {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			err := echo(ctx, pl, srv, "echo", fmt.Sprintf("wait%d", i))
			took := time.Since(start)
			for s := slowest.Load(); int64(took) > s && !slowest.CompareAndSwap(s, int64(took)); s = slowest.Load() {
			}
			var pe *pool.Error
			if !errors.As(err, &pe) || pe.Kind != pool.KindTransport || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("waiter past its deadline: %v, want a transport error with the deadline", err)
			}
		})
	}
	wg.Wait()
	for i := range waiters {
		if n := ts.Executions(fmt.Sprintf("wait%d", i)); n != 0 {
			t.Errorf("waiter %d ran %d times", i, n)
		}
	}
	// Generous: it shows the deadline ended the wait, not how fast a loaded
	// machine is (a wait that ignored it would hold wg.Wait above for ever).
	if d := time.Duration(slowest.Load()); d > deadline+30*time.Second {
		t.Errorf("the slowest waiter took %v with a %v deadline", d, deadline)
	}
	for i := range p.poolCap {
		ts.Open(fmt.Sprintf("hold%d", i))
	}
	for range p.poolCap {
		if err := <-holders; err != nil {
			t.Fatal(err)
		}
	}

	errc := make(chan error, p.poolCapCalls)
	for i := range p.poolCapCalls {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			errc <- echo(ctx, pl, srv, "echo", fmt.Sprintf("load%d", i))
		}()
	}
	for range p.poolCapCalls {
		if err := <-errc; err != nil {
			t.Errorf("a patient caller: %v", err)
		}
	}
	st := pl.Stats()
	if m := ts.MaxInFlight(); m > int64(p.poolCap) {
		t.Errorf("the server ran %d calls at once, cap %d", m, p.poolCap)
	}
	return Limit{
		Check: fmt.Sprintf("pool: MaxConcurrentPerKey %d, %d callers with a %v deadline behind %d held calls, then %d concurrent calls", p.poolCap, waiters, deadline, p.poolCap, p.poolCapCalls),
		Result: fmt.Sprintf("every waiter got a transport error (nothing sent) at its deadline, slowest %v, and none ran; all %d concurrent calls succeeded; the server never ran more than %d at once; %d waits counted",
			time.Duration(slowest.Load()).Round(time.Millisecond), p.poolCapCalls, ts.MaxInFlight(), st.WaitCount),
	}
}

// memoryCeiling: the pool holds memoryKeys distinct keys (one session each,
// distinct Identity against three stateless servers), all idle at once;
// the idle sweep then closes every one of them, and the heap and the
// goroutine count return to within a small margin of where they started.
func memoryCeiling(t *testing.T, p profile) Limit {
	const (
		// Long enough that a loaded machine dials every key (under -race,
		// beside other tests) before the first ones go idle.
		idle = 5 * time.Second
		// Bytes the heap may keep, all told. Measured residue at 1,000
		// keys: 1.02 MB at a82297b, 1.06 MB after the issue 24 and 27
		// merges (2026-12-02), which failed a 1 MiB margin with nothing
		// leaking per key: a session kept per key would leave its
		// 14 KiB, 14 MB in all, far past this.
		margin     = 2 << 20
		goroutines = 10 // the goroutines it may keep
	)
	var servers []*mcptest.Server
	for range 3 {
		servers = append(servers, mcptest.Start(t, &mcptest.Options{Stateless: true, NoRecord: true}))
	}
	pl, tr := newPool(t, pool.Options{IdleTimeout: idle, ToolsTTL: time.Hour})
	keys := make([]*pool.Server, p.memoryKeys)
	for i := range keys {
		keys[i] = &pool.Server{Name: "s", URL: servers[i%len(servers)].URL(), ProtocolVersion: pool.Protocol20251125, Identity: fmt.Sprintf("caller-%d", i)}
	}
	list := func(srv *pool.Server) {
		if _, err := pl.ListTools(context.Background(), srv); err != nil {
			t.Error(err)
		}
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// The runtime keeps the descriptors of ended goroutines for reuse, in
	// the heap; start from a heap that already holds as many as the peak
	// will need, so that they do not count as the pool's.
	warm := make(chan struct{})
	var parked sync.WaitGroup
	for range 3 * len(keys) {
		parked.Go(func() { <-warm })
	}
	close(warm)
	parked.Wait()
	g0, h0 := runtime.NumGoroutine(), heap()

	// Dial every key. Until the last is up, a toucher keeps those already
	// up from going idle (a cached tools/list is a use), so that all of
	// them are idle together at the end.
	start := time.Now()
	var created atomic.Int64
	stop := make(chan struct{})
	touched := make(chan struct{})
	go func() {
		defer close(touched)
		tick := time.NewTicker(idle / 5)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, srv := range keys[:created.Load()] {
				list(srv)
			}
		}
	}()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, srv := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			list(srv)
		})
		if i >= 16 {
			created.Store(int64(i - 16)) // all before the 16 in flight are up
		}
	}
	wg.Wait()
	close(stop)
	<-touched
	// Touch every key until all sessions are open at once: on a loaded
	// machine the toucher can fall more than IdleTimeout behind, and the
	// sweep then closes some before the last is up. Touching a live key
	// is a cached tools/list (no I/O), so a pass re-dials only those, and
	// the passes converge.
	for deadline := time.Now().Add(time.Minute); ; {
		for _, srv := range keys {
			list(srv)
		}
		if pl.Stats().Open == len(keys) || time.Now().After(deadline) {
			break
		}
	}
	dialing := time.Since(start)
	peak := pl.Stats()
	peakOpen := peak.Open
	gPeak, hPeak := runtime.NumGoroutine(), heap()
	if peakOpen != len(keys) {
		t.Fatalf("%d sessions open at the peak, want %d", peakOpen, len(keys))
	}

	// The sweep.
	waittest.Until(t, time.Minute, "the idle sweep to close every session", func() bool {
		st := pl.Stats()
		// Setup on a loaded machine may have swept (and re-dialed) a few
		// keys already; the sweep closes each of the peak's sessions.
		return st.Open == 0 && st.ClosesByReason["idle"]-peak.ClosesByReason["idle"] == int64(len(keys))
	})
	tr.CloseIdleConnections()
	waittest.Until(t, 30*time.Second, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= g0+goroutines })
	h1 := heap()
	residue := int64(h1) - int64(h0)
	if residue > margin {
		t.Errorf("after the sweep the heap is %d bytes above where it started (%.1f%% of the peak's growth); margin %d", residue, 100*float64(residue)/float64(hPeak-h0), margin)
	}
	t.Logf("%d keys dialed in %v; heap %d → %d (peak) → %d; goroutines %d → %d → %d", len(keys), dialing, h0, hPeak, h1, g0, gPeak, runtime.NumGoroutine())
	return Limit{
		Check: fmt.Sprintf("pool: %d distinct keys idle at once (distinct Identity, 3 stateless loopback servers), then the idle sweep (IdleTimeout %v)", len(keys), idle),
		Result: fmt.Sprintf("peak: %d sessions open, heap +%.1f MiB (%.1f KiB per key), %d goroutines more; after the sweep closed all %d: heap %+.2f MiB from the start (margin %.0f MiB), goroutines %+d",
			peakOpen, mib(hPeak-h0), float64(hPeak-h0)/1024/float64(len(keys)), gPeak-g0, len(keys), float64(residue)/(1<<20), mib(margin), runtime.NumGoroutine()-g0),
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

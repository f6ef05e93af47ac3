package pool_test

// The pool's benchmarks, on its exported API only. Each is a testing.B
// function whose variants are the second element of its sub-benchmark
// names (Benchmark<Group>/<variant>/<case>), so that the rounds driver can
// run them interleaved and benchratio compare them with a baseline of the
// same round; docs/BENCHMARKS.md has the commands and the figures.
//
//   - BenchmarkCallTool (here): pooled vs a raw held go-sdk session vs
//     connect-per-call, at 1 and 64 callers;
//   - BenchmarkRequestsPerCall (here): HTTP requests per call;
//   - BenchmarkDelayedProxy (bench_latency_test.go): the same behind a
//     loopback reverse proxy that delays each direction by 5 ms;
//   - BenchmarkForgottenSession, BenchmarkSlowClose
//     (bench_recovery_test.go): 64 callers on a session the server forgot;
//     other callers while one session's DELETE takes 2 s;
//   - BenchmarkKeys, BenchmarkIdleSweep (bench_keys_test.go): 1, 1,000 and
//     10,000 keys against a server in a child process.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/pool"
)

// BenchmarkCallTool compares, against one loopback go-sdk server:
//
//   - pooled: Pool.CallTool;
//   - raw-session: one go-sdk ClientSession held open (the floor: no pool);
//   - connect-per-call: connect, initialize, call, DELETE for every call
//     (what a client without a pool does).
//
// at 1 and 64 concurrent callers. Ratios against raw-session, measured in the
// same round: see docs/BENCHMARKS.md.
func BenchmarkCallTool(b *testing.B) {
	ts := mcptest.NewServer(b, false)
	hc := benchClient(b, nil)
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("pooled/c%d", conc), func(b *testing.B) {
			p := newBenchPool(b, hc, nil)
			srv := benchServer(ts.URL())
			if _, err := p.CallTool(context.Background(), srv, echo()); err != nil {
				b.Fatal(err)
			}
			parallel(b, conc, func() error {
				_, err := p.CallTool(context.Background(), srv, echo())
				return err
			})
		})
		b.Run(fmt.Sprintf("raw-session/c%d", conc), func(b *testing.B) {
			cs, err := connectRaw(context.Background(), ts.URL(), hc, true)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			parallel(b, conc, func() error {
				_, err := cs.CallTool(context.Background(), echo())
				return err
			})
		})
		b.Run(fmt.Sprintf("connect-per-call/c%d", conc), func(b *testing.B) {
			parallel(b, conc, func() error { return connectPerCall(context.Background(), ts.URL(), hc, true) })
		})
	}
}

// BenchmarkRequestsPerCall counts the HTTP requests a call costs (req/op,
// every request the client's transport carries during the timed loop,
// divided by the calls): the pool's steady state against connect-per-call
// with go-sdk's standalone GET stream off (initialize, initialized, call,
// DELETE) and on (its default, one GET more).
func BenchmarkRequestsPerCall(b *testing.B) {
	ts := mcptest.Start(b, &mcptest.Options{NoRecord: true})
	var n atomic.Int64
	hc := benchClient(b, &n)
	count := func(b *testing.B, fn func() error) {
		n.Store(0)
		parallel(b, 1, fn)
		b.ReportMetric(float64(n.Load())/float64(b.N), "req/op")
	}
	b.Run("pooled/c1", func(b *testing.B) {
		p := newBenchPool(b, hc, nil)
		srv := benchServer(ts.URL())
		if _, err := p.CallTool(context.Background(), srv, echo()); err != nil {
			b.Fatal(err)
		}
		count(b, func() error {
			_, err := p.CallTool(context.Background(), srv, echo())
			return err
		})
	})
	b.Run("connect-per-call/c1", func(b *testing.B) {
		count(b, func() error { return connectPerCall(context.Background(), ts.URL(), hc, true) })
	})
	b.Run("connect-per-call-get/c1", func(b *testing.B) {
		count(b, func() error { return connectPerCall(context.Background(), ts.URL(), hc, false) })
	})
}

// echo is the call every benchmark makes: the server's echo tool, a few
// bytes each way, so that what is measured is the client and the protocol.
func echo() *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"id": "bench", "text": "x"}}
}

func benchServer(url string) *pool.Server {
	return &pool.Server{Name: "bench", URL: url, ProtocolVersion: pool.Protocol20251125}
}

// benchClient is an HTTP client whose transport keeps enough idle
// connections for 64 callers (http.DefaultTransport keeps 2 per host, and
// would measure connection churn instead of the client), closed at the end
// of the benchmark. A non-nil count counts every request it carries.
func benchClient(b *testing.B, count *atomic.Int64) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 1024}
	b.Cleanup(tr.CloseIdleConnections)
	if count == nil {
		return &http.Client{Transport: tr}
	}
	return &http.Client{Transport: countingTransport{tr, count}}
}

type countingTransport struct {
	base http.RoundTripper
	n    *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// newBenchPool is a Pool on hc, closed at the end of the benchmark. opts may
// be nil; its HTTPClient is replaced by hc.
func newBenchPool(b *testing.B, hc *http.Client, opts *pool.Options) *pool.Pool {
	o := pool.Options{}
	if opts != nil {
		o = *opts
	}
	o.HTTPClient = hc
	p := pool.New(&o)
	b.Cleanup(func() { p.Close() })
	return p
}

// connectRaw opens a go-sdk session the way a client without the pool does.
func connectRaw(ctx context.Context, url string, hc *http.Client, noGET bool) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: noGET},
		&mcp.ClientSessionOptions{ProtocolVersion: pool.Protocol20251125})
}

// connectPerCall connects, initializes, calls and closes (DELETE).
func connectPerCall(ctx context.Context, url string, hc *http.Client, noGET bool) error {
	cs, err := connectRaw(ctx, url, hc, noGET)
	if err != nil {
		return err
	}
	_, err = cs.CallTool(ctx, echo())
	if cerr := cs.Close(); err == nil {
		err = cerr
	}
	return err
}

// parallel runs b.N calls of fn spread over conc goroutines.
func parallel(b *testing.B, conc int, fn func() error) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	err := spread(b.N, conc, func(int) error { return fn() })
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
}

// spread runs fn(0..n-1) over conc goroutines and returns the first error.
func spread(n, conc int, fn func(i int) error) error {
	var wg sync.WaitGroup
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	for range min(conc, n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

// timed runs fn and returns how long it took.
func timed(fn func() error) (time.Duration, error) {
	start := time.Now()
	err := fn()
	return time.Since(start), err
}

// quantile of d (sorted in place), by the nearest rank.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(q*float64(len(d))+0.5) - 1
	return d[max(0, min(i, len(d)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

package pool

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/internal/mcptest"
)

// BenchmarkCallTool compares, against one loopback go-sdk server:
//
//   - pooled: Pool.CallTool;
//   - raw-session: one go-sdk ClientSession held open (the floor: no pool);
//   - connect-per-call: connect, initialize, call, DELETE for every call
//     (what a client without a pool does).
//
// at 1 and 64 concurrent callers. Ratios against raw-session, measured in the
// same run: see docs/BENCHMARKS.md.
func BenchmarkCallTool(b *testing.B) {
	ts := mcptest.NewServer(b, false)
	tr := &http.Transport{MaxIdleConnsPerHost: 128}
	b.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	params := func() *mcp.CallToolParams {
		return &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"id": "bench", "text": "x"}}
	}
	connect := func(ctx context.Context) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil)
		return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL(), HTTPClient: hc, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: Protocol20251125})
	}

	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("pooled/c%d", conc), func(b *testing.B) {
			p := New(&Options{HTTPClient: hc})
			defer p.Close()
			srv := &Server{Name: "bench", URL: ts.URL(), ProtocolVersion: Protocol20251125}
			if _, err := p.CallTool(context.Background(), srv, params()); err != nil {
				b.Fatal(err)
			}
			parallel(b, conc, func() error {
				_, err := p.CallTool(context.Background(), srv, params())
				return err
			})
		})
		b.Run(fmt.Sprintf("raw-session/c%d", conc), func(b *testing.B) {
			cs, err := connect(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			parallel(b, conc, func() error {
				_, err := cs.CallTool(context.Background(), params())
				return err
			})
		})
		b.Run(fmt.Sprintf("connect-per-call/c%d", conc), func(b *testing.B) {
			parallel(b, conc, func() error {
				cs, err := connect(context.Background())
				if err != nil {
					return err
				}
				_, err = cs.CallTool(context.Background(), params())
				cs.Close()
				return err
			})
		})
	}
}

// parallel runs b.N calls of fn spread over conc goroutines.
func parallel(b *testing.B, conc int, fn func() error) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	for range conc {
		wg.Go(func() {
			for range work {
				if err := fn(); err != nil {
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
	b.StopTimer()
	if first != nil {
		b.Fatal(first)
	}
}

package faultsuite

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/pgtest"
	"github.com/switchboard-run/switchboard/internal/pooltest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/pool"
)

// BenchmarkReplicas: keyed store_note calls, 4 per CPU in flight, to one
// packrat replica or spread over two, every replica on the same
// PostgreSQL database. The variants are sub-benchmarks, for
// internal/benchratio/rounds to interleave:
//
//	go run ./internal/benchratio/rounds -n 7 -benchtime 0.5s -pkg ./internal/faultsuite -bench Replicas -variants one,two | go run ./internal/benchratio -baseline one
//
// The pool spreads the calls itself (call i to replica i mod n), so the
// figure is the replicas' and the database's, not a balancer's. The
// binary is the suite's, built with -race like every test binary here:
// compare the variants with each other, not with other tables.
func BenchmarkReplicas(b *testing.B) {
	for _, v := range []struct {
		name string
		n    int
	}{{"one", 1}, {"two", 2}} {
		b.Run(v.name, func(b *testing.B) {
			srv := pgtest.Start(b)
			url := srv.NewDatabase(b)
			servers := make([]*pool.Server, v.n)
			for i := range servers {
				p := proctest.StartProcess(b, b.TempDir(), nil, 60*time.Second, "switchboard agent ", switchboardBin,
					"agent", "serve", "--agent", filepath.Join(moduleRoot, "agents", "packrat"),
					"--listen", "127.0.0.1:0", "--data-dir", b.TempDir(), "--database", url)
				_, endpoint, ok := strings.Cut(p.Ready, " listening on ")
				if !ok {
					b.Fatalf("replica %d: ready line %q names no endpoint", i, p.Ready)
				}
				servers[i] = &pool.Server{Name: fmt.Sprintf("packrat%d", i), URL: strings.TrimSpace(endpoint), ProtocolVersion: pool.Protocol20260728}
			}
			pl := pooltest.New(b, &pool.Options{IdleTimeout: -1})
			var seq atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := seq.Add(1)
					res, err := pl.CallTool(b.Context(), servers[int(i)%len(servers)],
						&mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": fmt.Sprintf("bench %d", i)}})
					if err != nil || res.IsError {
						b.Errorf("store_note %d: %v %+v", i, err, res)
						return
					}
				}
			})
		})
	}
}

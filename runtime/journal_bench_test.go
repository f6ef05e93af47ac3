package runtime_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/agents/abacus"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/journal"
	"github.com/switchboard-run/switchboard/internal/pgtest"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// BenchmarkJournal is what the run journal's writes cost a builtin-model
// turn: "journaled" begins a run in a real journal (SQLite, WAL,
// synchronous=NORMAL, the default, in the benchmark's temporary directory)
// and runs the turn with it, as the agent server does for every ask,
// against "bare", the same turn without; "power-loss-durable" is
// "journaled" with journal.Options.PowerLossDurable (synchronous=FULL, an
// fsync per commit); "append-log" and "append-log-power" are those two with
// journal.Options.AppendLog (a batch is one append to the segment file,
// folded into the tables later); "postgres" is the PostgreSQL journal on a
// server of the benchmark's own (pgtest, durable: each commit flushed),
// skipped where PostgreSQL is not installed. Cases as BenchmarkTurn's: "abacus" (two steps, one
// delegation to the real abacus toolset over loopback MCP: the turn waits
// for one commit, of the run's start and step 1, before the delegation;
// the delegation, step 2 and the end ride in the writer's next commit) and
// "no-tools" (one step: no wait; start, step and end are one commit of the
// writer's). "bytes/step" is the journal's payload bytes per model step
// (Info.Bytes over the steps). "cpu-µs/op" is the process's CPU time (user
// and system, every goroutine: the turn's, the builtin model's, the
// journal writer's) per turn: on a machine shared with other work, time
// per turn is what the others leave over, CPU per turn is what the turn
// costs. Interleaved, with ratios:
//
//	go run ./internal/benchratio/rounds -n 7 -benchtime 0.5s -pkg ./runtime -bench Journal -variants journaled,power-loss-durable,append-log,append-log-power,postgres,bare |
//		go run ./internal/benchratio -baseline bare
func BenchmarkJournal(b *testing.B) {
	as := mcp.NewServer(&mcp.Implementation{Name: "abacus"}, nil)
	if err := abacus.Register(as); err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return as }, nil))
	b.Cleanup(ts.Close)
	cases := []struct {
		name, task string
		servers    []*mcpconfig.Server
	}{
		{"abacus", "what is 6 times 7?", []*mcpconfig.Server{{Name: "abacus", Type: mcpconfig.TypeHTTP, URL: ts.URL}}},
		{"no-tools", "hello", nil},
	}
	for _, variant := range []string{"journaled", "power-loss-durable", "append-log", "append-log-power", "postgres", "bare"} {
		for _, c := range cases {
			b.Run(variant+"/"+c.name, func(b *testing.B) {
				p := pool.New(nil)
				b.Cleanup(func() { p.Close() })
				def := &agentdef.Definition{Name: "oracle", Model: agentdef.Model{Name: runtime.BuiltinModel},
					MCP: &mcpconfig.Config{Path: "agents/oracle/tools/mcp.json", Servers: c.servers}}
				a, err := runtime.New(def, p, &runtime.Options{Getenv: func(string) string { return "" }})
				if err != nil {
					b.Fatal(err)
				}
				var j *journal.Journal
				switch variant {
				case "bare":
				case "postgres":
					// A server of its own, with PostgreSQL's durability
					// defaults (a commit is flushed), on loopback; the
					// variant is skipped where PostgreSQL is not installed.
					url := pgtest.StartWith(b, &pgtest.Options{Durable: true}).NewDatabase(b)
					j, err = journal.OpenPostgres(b.Context(), url, &journal.PostgresOptions{Schema: "oracle"})
				default:
					j, err = journal.Open(filepath.Join(b.TempDir(), journal.File), &journal.Options{
						PowerLossDurable: variant == "power-loss-durable" || variant == "append-log-power",
						AppendLog:        variant == "append-log" || variant == "append-log-power",
					})
				}
				if err != nil {
					b.Fatal(err)
				}
				if j != nil {
					b.Cleanup(func() { j.Close() })
				}
				b.ReportAllocs()
				cpu0 := cpuTime()
				n := 0
				var steps int
				var last *journal.Run
				for b.Loop() {
					n++
					ctx := b.Context()
					if j == nil {
						if _, err := a.Run(ctx, c.task, chain); err != nil {
							b.Fatal(err)
						}
						continue
					}
					runChain := delegation.Chain{RunID: fmt.Sprintf("run-%d", n), Agents: chain.Agents, Depth: chain.Depth}
					run, err := j.Begin(ctx, journal.Start{RunID: runChain.RunID, ParentKey: "parent", Task: c.task})
					if err != nil {
						b.Fatal(err)
					}
					res, err := a.Run(runtime.WithJournal(delegation.WithParentKey(ctx, "parent"), run), c.task, runChain)
					run.Release()
					if err != nil {
						b.Fatal(err)
					}
					steps, last = res.Steps, run
				}
				if last != nil {
					b.StopTimer()
					info, err := j.ByRunID(b.Context(), last.Info().RunID)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(info.Bytes)/float64(steps), "bytes/step")
				}
				// After ByRunID, which waits for the writer's last commit:
				// the writer's CPU is part of the turns'.
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(n), "cpu-µs/op")
			})
		}
	}
}

// cpuTime is this process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package pool_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/pool"
)

// BenchmarkForgottenSession: 64 callers on a session the server has
// forgotten (it restarted). One op is one round: 64 concurrent calls on the
// live session, a restart, then 64 concurrent calls that all find the
// session gone. Reported:
//
//   - reinits/op: re-initializations per round (the pool promises 1: one
//     shared by all 64);
//   - one-reinit-share: the share of rounds that had exactly one;
//   - retries/op: calls sent again on the new session;
//   - extra-p50-ms, extra-max-ms: the recovered calls' median and slowest
//     latency minus the median latency of the 64 calls before the restart,
//     medians over the rounds.
//
// Every call must succeed, and run exactly once on the server.
func BenchmarkForgottenSession(b *testing.B) {
	b.Run("pooled/c64", func(b *testing.B) {
		const conc = 64
		ts := mcptest.NewServer(b, false)
		tr := &http.Transport{MaxIdleConnsPerHost: 256}
		b.Cleanup(tr.CloseIdleConnections)
		// A real restart takes longer than the client needs to see its
		// idle connections closed; mcptest's is instant (see its Restart).
		ts.OnStop(tr.CloseIdleConnections)
		p := newBenchPool(b, &http.Client{Transport: tr}, nil)
		srv := benchServer(ts.URL())
		wave := func(round int, phase string) ([]time.Duration, error) {
			lat := make([]time.Duration, conc)
			start := make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan error, conc)
			for i := range conc {
				wg.Go(func() {
					<-start
					id := fmt.Sprintf("%d-%s-%d", round, phase, i)
					d, err := timed(func() error {
						_, err := p.CallTool(context.Background(), srv, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"id": id}})
						return err
					})
					lat[i] = d
					if err == nil && ts.Executions(id) != 1 {
						err = fmt.Errorf("call %s ran %d times on the server, want 1", id, ts.Executions(id))
					}
					if err != nil {
						errs <- err
					}
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			return lat, errors.Join(collect(errs)...)
		}
		if _, err := p.CallTool(context.Background(), srv, echo()); err != nil {
			b.Fatal(err)
		}
		var p50s, maxes []time.Duration
		var oneReinit int
		before := p.Stats()
		b.ResetTimer()
		for round := range b.N {
			steady, err := wave(round, "steady")
			if err != nil {
				b.Fatal(err)
			}
			r0 := p.Stats().Reinitializations
			ts.Restart()
			recovered, err := wave(round, "recovered")
			if err != nil {
				b.Fatal(err)
			}
			if p.Stats().Reinitializations-r0 == 1 {
				oneReinit++
			}
			base := quantile(steady, 0.5)
			p50s = append(p50s, quantile(recovered, 0.5)-base)
			maxes = append(maxes, quantile(recovered, 1)-base)
		}
		b.StopTimer()
		after := p.Stats()
		b.ReportMetric(float64(after.Reinitializations-before.Reinitializations)/float64(b.N), "reinits/op")
		b.ReportMetric(float64(oneReinit)/float64(b.N), "one-reinit-share")
		b.ReportMetric(float64(after.Retries-before.Retries)/float64(b.N), "retries/op")
		b.ReportMetric(ms(quantile(p50s, 0.5)), "extra-p50-ms")
		b.ReportMetric(ms(quantile(maxes, 0.5)), "extra-max-ms")
	})
}

func collect(errs <-chan error) []error {
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return all
}

// slowCloseDelay is how long the server takes to answer the DELETE of the
// session being closed.
const slowCloseDelay = 2 * time.Second

// BenchmarkSlowClose: 16 callers keep calling on one key while the pool
// closes another key's idle session, whose DELETE the server takes 2 s to
// answer. One op is one round: 1 s of calls to measure the callers'
// p99 undisturbed, then a call on the second key, whose session the idle
// sweep closes; the p99 of the calls started while its DELETE was pending
// is compared with the undisturbed one (p99-x; 1 means the close delayed
// nobody). The round fails if the DELETE never came or the close was not
// counted as an idle close.
func BenchmarkSlowClose(b *testing.B) {
	b.Run("pooled/c16", func(b *testing.B) {
		const conc = 16
		ts := mcptest.Start(b, &mcptest.Options{NoRecord: true})
		deleting := make(chan struct{}, 1) // a DELETE of the slow key's session arrived
		deleted := make(chan struct{}, 1)  // and was answered
		stop := make(chan struct{})
		b.Cleanup(func() { close(stop) })
		ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, _ mcptest.RPCInfo) bool {
			if r.Method != http.MethodDelete || r.Header.Get("X-Bench-Slow") == "" {
				return false
			}
			deleting <- struct{}{}
			select {
			case <-time.After(slowCloseDelay):
			case <-stop:
			}
			ts.Forward(w, r)
			deleted <- struct{}{}
			return true
		})
		hc := benchClient(b, nil)
		// The sweep runs every IdleTimeout/2; the busy key is never idle
		// that long, the slow one is after its one call.
		p := newBenchPool(b, hc, &pool.Options{IdleTimeout: 100 * time.Millisecond})
		busy := benchServer(ts.URL())
		slow := benchServer(ts.URL())
		slow.Headers = map[string]string{"X-Bench-Slow": "1"}
		if _, err := p.CallTool(context.Background(), busy, echo()); err != nil {
			b.Fatal(err)
		}

		var ratios, p99s, bases []float64
		b.ResetTimer()
		for range b.N {
			closes := p.Stats().ClosesByReason["idle"]
			type sample struct {
				start time.Time
				d     time.Duration
			}
			var mu sync.Mutex
			var samples []sample
			var failed atomic.Pointer[error]
			quit := make(chan struct{})
			var wg sync.WaitGroup
			for range conc {
				wg.Go(func() {
					for {
						select {
						case <-quit:
							return
						default:
						}
						t0 := time.Now()
						_, err := p.CallTool(context.Background(), busy, echo())
						if err != nil {
							failed.CompareAndSwap(nil, &err)
							return
						}
						mu.Lock()
						samples = append(samples, sample{t0, time.Since(t0)})
						mu.Unlock()
					}
				})
			}
			undisturbed := time.Now()
			if err := wait(context.Background(), time.Second); err != nil {
				b.Fatal(err)
			}
			before := time.Now()
			if _, err := p.CallTool(context.Background(), slow, echo()); err != nil {
				b.Fatal(err)
			}
			var from, to time.Time
			select {
			case <-deleting:
				from = time.Now()
			case <-time.After(10 * time.Second):
				b.Fatal("the idle session's DELETE never came")
			}
			select {
			case <-deleted:
				to = time.Now()
			case <-time.After(10 * time.Second):
				b.Fatal("the slow DELETE was never answered")
			}
			close(quit)
			wg.Wait()
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
			var base, during []time.Duration
			for _, s := range samples {
				switch {
				case s.start.After(undisturbed) && s.start.Add(s.d).Before(before):
					base = append(base, s.d)
				case s.start.After(from) && s.start.Before(to):
					during = append(during, s.d)
				}
			}
			if len(base) < 10 || len(during) < 10 {
				b.Fatalf("too few calls to take a p99 from: %d undisturbed, %d during the close", len(base), len(during))
			}
			bp, dp := ms(quantile(base, 0.99)), ms(quantile(during, 0.99))
			bases, p99s, ratios = append(bases, bp), append(p99s, dp), append(ratios, dp/bp)
			// The close is counted when its DELETE has been answered.
			if err := pollUntil(5*time.Second, func() bool { return p.Stats().ClosesByReason["idle"] > closes }); err != nil {
				b.Fatalf("the slow key's session was not counted as an idle close: %v; stats %+v", err, p.Stats())
			}
		}
		b.StopTimer()
		b.ReportMetric(medianOf(bases), "base-p99-ms")
		b.ReportMetric(medianOf(p99s), "close-p99-ms")
		b.ReportMetric(medianOf(ratios), "p99-x")
	})
}

// pollUntil checks cond every millisecond until it holds or d has passed.
func pollUntil(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", d)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func medianOf(v []float64) float64 {
	d := make([]time.Duration, len(v))
	for i, x := range v {
		d[i] = time.Duration(x * 1e6)
	}
	return ms(quantile(d, 0.5))
}

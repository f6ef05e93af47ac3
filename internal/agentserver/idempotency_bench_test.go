package agentserver

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/agentdef"
	"github.com/switchboard-run/switchboard/internal/idempotency"
)

// BenchmarkIdempotency measures what the record costs, per tool, over real
// HTTP on loopback against a real agent server: "plain" sends no key (the
// guard steps aside), "keyed" a fresh key per call (store_note commits its
// record with the note, in the same transaction; calculate, read-only, is
// recomputed and keeps no record). Every iteration makes one call of each
// variant, in alternating order, timed separately, so the two share every
// disturbance of a noisy machine; the benchmark reports their ratio
// (keyed/plain) besides each one's time per call. docs/IDEMPOTENCY.md has
// the command that takes the median and spread of several runs.
func BenchmarkIdempotency(b *testing.B) {
	s, err := New(&agentdef.Definition{Name: "bench", Tools: []string{"packrat", "abacus"}}, &Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer func() {
		s.CloseSessions()
		ts.Close()
		s.Close()
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	cases := []struct {
		name string
		args func(i int) map[string]any
	}{
		{"store_note", func(i int) map[string]any {
			return map[string]any{"text": fmt.Sprintf("note %d", i), "tags": []string{"bench"}}
		}},
		{"calculate", func(int) map[string]any { return map[string]any{"expression": "(1+2)*3^2"} }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var spent [2][]time.Duration // plain, keyed: every call's time
			i := 0
			call := func(keyed bool) {
				p := &mcp.CallToolParams{Name: c.name, Arguments: c.args(i)}
				if keyed {
					p.Meta = mcp.Meta{idempotency.MetaKey: idempotency.NewKey(time.Now())}
				}
				start := time.Now()
				res, err := cs.CallTool(b.Context(), p)
				d := time.Since(start)
				if err != nil || res.IsError {
					b.Fatal(err, res)
				}
				if keyed {
					spent[1] = append(spent[1], d)
				} else {
					spent[0] = append(spent[0], d)
				}
				i++
			}
			for b.Loop() {
				first := i%4 == 0 // i advances by 2 per iteration
				call(!first)
				call(first)
			}
			// Medians, not means: one call stalled by another process on a
			// shared machine would otherwise decide the ratio.
			// The ratio is the median of each pair's ratio: the two calls of
			// a pair run back to back, under the same load.
			plain, keyed := medianOf(spent[0]), medianOf(spent[1])
			ratios := make([]float64, len(spent[0]))
			for j := range ratios {
				ratios[j] = float64(spent[1][j]) / float64(spent[0][j])
			}
			slices.Sort(ratios)
			b.ReportMetric(float64(plain.Nanoseconds()), "plain-ns/call")
			b.ReportMetric(float64(keyed.Nanoseconds()), "keyed-ns/call")
			b.ReportMetric(ratios[len(ratios)/2], "keyed/plain")
		})
	}
}

func medianOf(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

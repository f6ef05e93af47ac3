package agentserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// BenchmarkIdempotency measures what the record costs, per tool, over real
// HTTP on loopback against a real agent server: "plain" sends no key (the
// guard steps aside), "keyed" a fresh key per call (store_note commits its
// record with the note, in the same row; calculate, read-only, is
// recomputed and keeps no record). Every iteration makes one call of each
// variant, in alternating order, timed separately, so the two share every
// disturbance of a noisy machine; the benchmark reports the median of the
// pairs' ratios (keyed/plain) besides each variant's median time.
//
// The case bare_sdk is the control: a go-sdk server with no Switchboard
// code at all, called with and without the same _meta field, so what the
// key costs merely by being on the wire is visible beside what the guard
// and the record cost.
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
	cs := benchSession(b, ts.URL)
	defer cs.Close()

	bare := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "0"}, nil)
	mcp.AddTool(bare, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	bts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return bare }, nil))
	defer bts.Close()
	bcs := benchSession(b, bts.URL)
	defer bcs.Close() // before the server's Close, which waits for it

	b.Run("store_note", func(b *testing.B) {
		benchPairs(b, cs, "store_note", func(i int) map[string]any {
			return map[string]any{"text": fmt.Sprintf("note %d", i), "tags": []string{"bench"}}
		})
	})
	b.Run("calculate", func(b *testing.B) {
		benchPairs(b, cs, "calculate", func(int) map[string]any { return map[string]any{"expression": "(1+2)*3^2"} })
	})
	b.Run("bare_sdk", func(b *testing.B) {
		benchPairs(b, bcs, "echo", func(int) map[string]any { return map[string]any{} })
	})
}

func benchSession(b *testing.B, url string) *mcp.ClientSession {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

// benchPairs calls tool once without and once with a key per iteration.
func benchPairs(b *testing.B, cs *mcp.ClientSession, tool string, args func(i int) map[string]any) {
	var spent [2][]time.Duration // plain, keyed: every call's time
	i := 0
	call := func(keyed bool) time.Duration {
		p := &mcp.CallToolParams{Name: tool, Arguments: args(i)}
		if keyed {
			p.Meta = mcp.Meta{idempotency.MetaKey: idempotency.NewKey(time.Now())}
		}
		start := time.Now()
		res, err := cs.CallTool(b.Context(), p)
		d := time.Since(start)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
		i++
		return d
	}
	var ratios []float64
	for b.Loop() {
		var plain, keyed time.Duration
		if len(ratios)%2 == 0 {
			plain, keyed = call(false), call(true)
		} else {
			keyed, plain = call(true), call(false)
		}
		spent[0], spent[1] = append(spent[0], plain), append(spent[1], keyed)
		ratios = append(ratios, float64(keyed)/float64(plain))
	}
	// Medians, not means: one call stalled by another process on a shared
	// machine would otherwise decide the figure.
	slices.Sort(ratios)
	b.ReportMetric(float64(medianOf(spent[0]).Nanoseconds()), "plain-ns/call")
	b.ReportMetric(float64(medianOf(spent[1]).Nanoseconds()), "keyed-ns/call")
	b.ReportMetric(ratios[len(ratios)/2], "keyed/plain")
}

func medianOf(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

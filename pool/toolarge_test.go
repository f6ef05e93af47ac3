package pool_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/pool"
)

// A request the server refuses for its size (413, and 431, 414 alike) is
// refused whole before it runs: the pool returns it as KindRefused with
// ErrTooLarge and the server's words, sends it exactly once (not on a new
// session, not again with its idempotency key), and keeps the session: the
// next call goes out on it. Before, the refusal failed go-sdk's connection
// (a body that is not a JSON-RPC error) or was resent as a transport
// failure to a keyed server: one 8 MB call uploaded about 32 MB.
func TestTooLargeIsRefusedOnceAndKeepsTheSession(t *testing.T) {
	const big = 1 << 20
	answers := []struct {
		name   string
		status int
		answer func(w http.ResponseWriter)
		said   string // what the error must quote of the server's answer
	}{
		{"413 text", http.StatusRequestEntityTooLarge, func(w http.ResponseWriter) {
			http.Error(w, "request body too large (limit 1 MiB)", http.StatusRequestEntityTooLarge)
		}, "request body too large (limit 1 MiB)"},
		{"413 JSON-RPC null id", http.StatusRequestEntityTooLarge, func(w http.ResponseWriter) {
			// internal/mcphttp's refusal.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"request body exceeds the limit of 4194304 bytes"}}`)
		}, "request body exceeds the limit of 4194304 bytes"},
		{"431", http.StatusRequestHeaderFieldsTooLarge, func(w http.ResponseWriter) {
			http.Error(w, "headers too large", http.StatusRequestHeaderFieldsTooLarge)
		}, "headers too large"},
	}
	servers := []struct {
		name  string
		start func(t *testing.T) *mcptest.Server
	}{
		{"plain", func(t *testing.T) *mcptest.Server { return mcptest.NewServer(t, false) }},
		{"keyed", func(t *testing.T) *mcptest.Server { ts, _, _ := guarded(t); return ts }},
	}
	for _, sv := range servers {
		for _, a := range answers {
			t.Run(sv.name+"/"+a.name, func(t *testing.T) {
				ts := sv.start(t)
				var sends, bytes atomic.Int64
				ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
					if rpc.CallID != "big" {
						return false
					}
					sends.Add(1)
					bytes.Add(r.ContentLength)
					a.answer(w)
					return true
				})
				p := pool.New(&pool.Options{Transport: &http.Transport{}})
				t.Cleanup(func() { p.Close() })
				srv := &pool.Server{Name: "a", URL: ts.URL(), ProtocolVersion: pool.Protocol20251125}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if _, err := p.CallTool(ctx, srv, echoCall("before")); err != nil {
					t.Fatal(err)
				}

				_, err := p.CallTool(ctx, srv, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"id": "big", "text": strings.Repeat("x", big)}})
				if n := sends.Load(); n != 1 {
					t.Errorf("the refused call was sent %d times (%d bytes), want once", n, bytes.Load())
				}
				var pe *pool.Error
				if !errors.As(err, &pe) || pe.Kind != pool.KindRefused || !errors.Is(err, pool.ErrTooLarge) || !errors.Is(err, pool.ErrRefused) {
					t.Fatalf("want a refused error with ErrTooLarge, got %v", err)
				}
				if pe.Retried || pe.Status != a.status || !strings.Contains(err.Error(), a.said) {
					t.Fatalf("want HTTP %d with the server's words %q, not retried; got %+v (%v)", a.status, a.said, pe, err)
				}
				if n := ts.Executions("big"); n != 0 {
					t.Fatalf("the refused call ran %d times", n)
				}

				// The session is as good as before: the next call goes out on
				// it, with no dial, no re-initialization, no invalidation.
				if _, err := p.CallTool(ctx, srv, echoCall("after")); err != nil {
					t.Fatalf("the call after the refusal: %v", err)
				}
				st := p.Stats()
				if st.Dials != 1 || st.Reinitializations != 0 || st.Invalidations != 0 || st.Retries != 0 || st.KeyedRetries != 0 {
					t.Fatalf("a refusal cost the session or was resent: %+v", st)
				}
				t.Logf("%s: %d send(s), %d bytes uploaded for the refused call", a.name, sends.Load(), bytes.Load())
			})
		}
	}
}

// An initialize refused for its size (headers too large: a configured
// header past the server's limit) fails the dial as refused, once.
func TestTooLargeHandshakeIsRefused(t *testing.T) {
	ts := mcptest.NewServer(t, false)
	var sends atomic.Int64
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.Method != "initialize" {
			return false
		}
		sends.Add(1)
		http.Error(w, "431 Request Header Fields Too Large", http.StatusRequestHeaderFieldsTooLarge)
		return true
	})
	p := pool.New(&pool.Options{Transport: &http.Transport{}})
	t.Cleanup(func() { p.Close() })
	srv := &pool.Server{Name: "a", URL: ts.URL(), ProtocolVersion: pool.Protocol20251125, Headers: map[string]string{"X-Big": strings.Repeat("h", 1<<10)}}
	_, err := p.CallTool(context.Background(), srv, echoCall("x"))
	var pe *pool.Error
	if !errors.As(err, &pe) || pe.Kind != pool.KindRefused || !errors.Is(err, pool.ErrTooLarge) || pe.Method != "tools/call" || pe.Status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("want the dial refused as too large, got %v (%+v)", err, pe)
	}
	if n := sends.Load(); n != 1 {
		t.Fatalf("initialize sent %d times, want once", n)
	}
}

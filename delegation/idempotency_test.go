package delegation_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/pooltest"
	"github.com/switchboard-run/switchboard/pool"
)

// TestDelegationKeysDerived: under a keyed call, each delegation carries a
// key derived from it and the model's tool call id, so the same turn run
// again is answered from the sibling's record (rendered "replayed" for the
// model) and a different tool call runs.
func TestDelegationKeysDerived(t *testing.T) {
	l, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g := ledger.NewGuard(l, nil)
	ts := mcptest.Start(t, &mcptest.Options{Middleware: g.Middleware})
	srv := &pool.Server{Name: "packrat", URL: ts.URL()}
	p := pooltest.New(t, nil)
	tb := delegation.NewToolbox([]delegation.ServerTools{{Server: srv, Tools: mustList(t, p, srv)}})
	e := &delegation.Executor{Caller: p, Tools: tb, Chain: delegation.Chain{RunID: "run-1", Agents: []string{"oracle"}, Depth: 1}}
	// The agent server's guard and a program of its own put the key in the
	// context the same way.
	// A program's own key need not be in the protocol's format.
	for _, way := range []struct {
		name string
		with func(context.Context, string) context.Context
		key  string
	}{
		{"guard", idempotency.WithKey, idempotency.NewKey(time.Now())},
		{"WithParentKey", delegation.WithParentKey, idempotency.NewKey(time.Now())},
		{"WithParentKey-own-key", delegation.WithParentKey, "job-42"},
	} {
		t.Run(way.name, func(t *testing.T) {
			ctx := way.with(t.Context(), way.key)
			id := "x-" + way.name
			args := `{"id":"` + id + `","text":"hello"}`
			first := e.Run(ctx, []delegation.Call{{ID: "call_1", Name: "packrat__echo", Arguments: args}})
			again := e.Run(ctx, []delegation.Call{{ID: "call_1", Name: "packrat__echo", Arguments: args}})
			other := e.Run(ctx, []delegation.Call{{ID: "call_2", Name: "packrat__echo", Arguments: args}})
			if first[0].IsError || first[0].Event.Replayed || strings.Contains(first[0].Content, "replayed") {
				t.Fatalf("first: %+v", first[0])
			}
			if again[0].IsError || !again[0].Event.Replayed || !strings.HasPrefix(again[0].Content, "hello") || !strings.Contains(again[0].Content, "replayed") {
				t.Fatalf("again: %+v", again[0])
			}
			if other[0].Event.Replayed {
				t.Fatalf("another tool call id was replayed: %+v", other[0])
			}
			if n := ts.Executions(id); n != 2 {
				t.Fatalf("echo ran %d times, want 2 (call_1 once, call_2 once)", n)
			}
		})
	}
}

// TestInterruptedRendered: a sibling's interrupted answer reaches the model
// as its own outcome, saying the call may have taken effect and was not
// run again.
func TestInterruptedRendered(t *testing.T) {
	srv := sibling(t, "packrat", func(s *mcp.Server) {
		addRaw(s, "store", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: idempotency.CodeInterrupted, Message: "interrupted by a restart"}
		})
	})
	p := pooltest.New(t, nil)
	tb := delegation.NewToolbox([]delegation.ServerTools{{Server: srv, Tools: mustList(t, p, srv)}})
	e := &delegation.Executor{Caller: p, Tools: tb}
	r := e.Run(t.Context(), []delegation.Call{{ID: "1", Name: "packrat__store", Arguments: `{}`}})[0]
	if !r.IsError || r.Outcome != delegation.OutcomeInterrupted || !errors.Is(r.Err, pool.ErrInterrupted) ||
		!strings.Contains(r.Content, "may or may not have taken effect") || !strings.Contains(r.Content, "-32073") {
		t.Fatalf("result %+v", r)
	}
}

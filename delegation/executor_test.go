package delegation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/pooltest"
	"github.com/switchboard-run/switchboard/pool"
)

// testDeadline bounds a wait that must succeed; reaching it is a failure,
// never the expected path, so it does not make a test timing-dependent.
const testDeadline = 20 * time.Second

func executor(t *testing.T, c delegation.Caller, servers ...*pool.Server) *delegation.Executor {
	t.Helper()
	tb := delegation.Discover(t.Context(), c, nil, &delegation.DiscoverOptions{Servers: servers})
	for _, u := range tb.Unavailable() {
		t.Fatalf("discovery: %v", u)
	}
	return &delegation.Executor{Caller: c, Tools: tb, Chain: delegation.Chain{RunID: "run-1", Agents: []string{"oracle"}, Depth: 1}}
}

// TestConcurrentCalls proves that two tool calls of one response run at the
// same time: each tool waits inside its handler until both have arrived, so
// run one at a time they could never finish.
func TestConcurrentCalls(t *testing.T) {
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	barrier := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		arrived.Done()
		select {
		case <-both:
			return text("passed " + req.Params.Name), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(testDeadline):
			return nil, errors.New("the other call never arrived: calls ran one at a time")
		}
	}
	a := sibling(t, "alpha", func(s *mcp.Server) { addRaw(s, "wait", barrier) })
	b := sibling(t, "beta", func(s *mcp.Server) { addRaw(s, "wait", barrier) })
	e := executor(t, pooltest.New(t, nil), a, b)

	var mu sync.Mutex
	var events []delegation.Event
	e.OnEvent = func(ev delegation.Event) { mu.Lock(); events = append(events, ev); mu.Unlock() }
	res := e.Run(t.Context(), []delegation.Call{
		{ID: "call_b", Name: "beta__wait", Arguments: "{}"},
		{ID: "call_a", Name: "alpha__wait", Arguments: ""},
	})
	for i, want := range []struct{ id, agent, content string }{
		{"call_b", "beta", "passed wait"},
		{"call_a", "alpha", "passed wait"},
	} {
		r := res[i]
		if r.CallID != want.id || r.Agent != want.agent || r.Content != want.content || r.IsError || r.Outcome != delegation.OutcomeOK {
			t.Errorf("result %d = %+v, want call %s on %s with %q", i, r, want.id, want.agent, want.content)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var starts, finishes int
	for _, ev := range events {
		switch ev.Phase {
		case delegation.PhaseStart:
			starts++
		case delegation.PhaseFinish:
			finishes++
			if ev.Outcome != delegation.OutcomeOK || ev.RunID != "run-1" || ev.Tool != "wait" {
				t.Errorf("finish event %+v", ev)
			}
		}
	}
	if starts != 2 || finishes != 2 {
		t.Errorf("got %d start and %d finish events, want 2 and 2: %+v", starts, finishes, events)
	}
}

// TestChainInMeta checks that the sibling sees the delegating chain in the
// _meta of its tools/call.
func TestChainInMeta(t *testing.T) {
	seen := make(chan map[string]any, 1)
	srv := sibling(t, "packrat", func(s *mcp.Server) {
		addRaw(s, "store_note", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			seen <- req.Params.Meta
			return text("stored"), nil
		})
	})
	e := executor(t, pooltest.New(t, nil), srv)
	e.Chain = delegation.Chain{RunID: "run-42", Agents: []string{"user", "oracle"}, Depth: 2}
	res := e.Run(t.Context(), []delegation.Call{{ID: "c1", Name: "packrat__store_note", Arguments: `{"text":"launch moved to Friday"}`}})
	if res[0].IsError {
		t.Fatalf("call failed: %s", res[0].Content)
	}
	chain, ok, err := delegation.FromMeta(<-seen)
	if err != nil || !ok {
		t.Fatalf("FromMeta: ok=%v err=%v", ok, err)
	}
	if chain.RunID != "run-42" || !slices.Equal(chain.Agents, []string{"user", "oracle"}) || chain.Depth != 2 {
		t.Errorf("sibling saw chain %+v", chain)
	}
}

// TestFailuresBecomeToolResults covers each way a delegation can fail with
// real servers and the real pool: every one is a result the model can read,
// naming the agent, the tool, the JSON-RPC code and message, and what the
// pool did.
func TestFailuresBecomeToolResults(t *testing.T) {
	var dropped atomic.Int32
	s := mcp.NewServer(&mcp.Implementation{Name: "packrat", Version: "test"}, nil)
	addRaw(s, "tool_error", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r := text("disk full")
		r.IsError = true
		return r, nil
	})
	addRaw(s, "rpc_error", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32042, Message: "quota exceeded for notes"}
	})
	addRaw(s, "lost_answer", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		dropped.Add(1) // never reached: the proxy drops the request after reading it
		return text("unreachable"), nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	ts := httptest.NewServer(dropping(h, "lost_answer"))
	t.Cleanup(ts.Close)
	packrat := &pool.Server{Name: "packrat", URL: ts.URL}

	// A server that is down: a port that was listening and no longer is.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	down := &pool.Server{Name: "abacus", URL: downURL}

	p := pooltest.New(t, nil)
	tb := delegation.NewToolbox([]delegation.ServerTools{
		{Server: packrat, Tools: mustList(t, p, packrat)},
		{Server: down, Tools: []*mcp.Tool{{Name: "calculate", InputSchema: objectSchema}}},
	})
	e := &delegation.Executor{Caller: p, Tools: tb}
	res := e.Run(t.Context(), []delegation.Call{
		{ID: "1", Name: "packrat__tool_error", Arguments: "{}"},
		{ID: "2", Name: "packrat__rpc_error", Arguments: "{}"},
		{ID: "3", Name: "packrat__lost_answer", Arguments: "{}"},
		{ID: "4", Name: "abacus__calculate", Arguments: `{"expression":"1+1"}`},
		{ID: "5", Name: "packrat__tool_error", Arguments: `{"text": unquoted}`},
		{ID: "6", Name: "packrat__forget_everything", Arguments: "{}"},
		{ID: "7", Name: "packrat__tool_error", Arguments: `["not","an","object"]`},
	})
	for i, want := range []struct {
		outcome delegation.Outcome
		has     []string
	}{
		{delegation.OutcomeToolError, []string{`agent "packrat"`, `tool "tool_error"`, "disk full"}},
		{"rpc", []string{`agent "packrat"`, `tool "rpc_error"`, "JSON-RPC error -32042: quota exceeded for notes"}},
		{"outcome_unknown", []string{`agent "packrat"`, `tool "lost_answer"`, "outcome unknown: the tool may have run; not retried"}},
		{"transport", []string{`agent "abacus"`, `tool "calculate"`, "could not be reached; nothing ran"}},
		{delegation.OutcomeBadArguments, []string{"packrat__tool_error", "not valid", "not sent"}},
		{delegation.OutcomeUnknownTool, []string{`no tool named "packrat__forget_everything"`}},
		{delegation.OutcomeBadArguments, []string{"want a JSON object"}},
	} {
		r := res[i]
		if !r.IsError || r.Outcome != want.outcome {
			t.Errorf("call %s: IsError=%v outcome=%q, want an error with outcome %q (content %q)", r.CallID, r.IsError, r.Outcome, want.outcome, r.Content)
		}
		for _, h := range want.has {
			if !strings.Contains(strings.ToLower(r.Content), strings.ToLower(h)) {
				t.Errorf("call %s: content %q does not contain %q", r.CallID, r.Content, h)
			}
		}
	}
	if ev := res[1].Event; ev.Code != -32042 || ev.Message != "quota exceeded for notes" {
		t.Errorf("rpc_error finish event %+v lacks the JSON-RPC code and message", ev)
	}
	var pe *pool.Error
	if !errors.As(res[3].Err, &pe) || !errors.Is(res[3].Err, pool.ErrTransport) {
		t.Errorf("server down: Err = %v, want a *pool.Error of KindTransport", res[3].Err)
	}
	if n := dropped.Load(); n != 0 {
		t.Errorf("lost_answer handler ran %d times", n)
	}
}

// TestFailureRendering covers what the pool reports that a test server
// cannot easily provoke: a call recovered on a new session that still
// failed, and a session that expired without a safe retry.
func TestFailureRendering(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{
			"retried",
			&pool.Error{Kind: pool.KindRPC, Server: "packrat", Method: "tools/call", Tool: "store_note", Code: -32603, Message: "database is locked", Retried: true},
			[]string{"JSON-RPC error -32603: database is locked", "recovered on a new session"},
		},
		{
			"expired and retried",
			&pool.Error{Kind: pool.KindSessionExpired, Server: "packrat", Method: "tools/call", Tool: "store_note", Retried: true, Err: errors.New("404 session not found")},
			[]string{"recovered on a new session and retried once", "404 session not found"},
		},
		{
			"expired, not retried",
			&pool.Error{Kind: pool.KindSessionExpired, Server: "packrat", Method: "tools/call", Tool: "store_note", Code: -32600, Message: "Session has been terminated"},
			[]string{"JSON-RPC error -32600: Session has been terminated", "could not be retried safely"},
		},
		{
			// go-sdk wraps a refused connection in its own -32005
			// *jsonrpc.Error; the pool knows it is no server's answer.
			"transport failure wrapping go-sdk's marker",
			&pool.Error{Kind: pool.KindTransport, Server: "packrat", Method: "tools/call", Tool: "store_note", Err: fmt.Errorf("sending: %w: connection refused", &jsonrpc.Error{Code: -32005, Message: "rejected by transport"})},
			[]string{"could not be reached; nothing ran", "Cause: sending: rejected by transport: connection refused."},
		},
		{
			"refused before it ran",
			&pool.Error{Kind: pool.KindRefused, Server: "packrat", Method: "tools/call", Tool: "store_note", Err: fmt.Errorf("%w: HTTP 413", pool.ErrTooLarge)},
			[]string{"Refused before it ran", "nothing ran", "Cause: "},
		},
		{
			"an error from another kind of caller",
			fmt.Errorf("wrapped: %w", &jsonrpc.Error{Code: -32601, Message: "method not found"}),
			[]string{"JSON-RPC error -32601: method not found"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := failingCaller{err: tc.err}
			tb := delegation.NewToolbox([]delegation.ServerTools{{
				Server: &pool.Server{Name: "packrat"},
				Tools:  []*mcp.Tool{{Name: "store_note", InputSchema: objectSchema}},
			}})
			e := &delegation.Executor{Caller: c, Tools: tb}
			r := e.Run(t.Context(), []delegation.Call{{ID: "1", Name: "packrat__store_note"}})[0]
			if !r.IsError || !errors.Is(r.Err, tc.err) {
				t.Errorf("IsError=%v Err=%v", r.IsError, r.Err)
			}
			if pe := (*pool.Error)(nil); errors.As(tc.err, &pe) && (r.Event.Code != pe.Code || r.Event.Message != pe.Message) {
				t.Errorf("event code %d message %q, want the pool's %d %q", r.Event.Code, r.Event.Message, pe.Code, pe.Message)
			}
			for _, h := range append(tc.want, `agent "packrat"`, `tool "store_note"`) {
				if !strings.Contains(r.Content, h) {
					t.Errorf("content %q does not contain %q", r.Content, h)
				}
			}
		})
	}
}

type failingCaller struct{ err error }

func (c failingCaller) CallTool(context.Context, *pool.Server, *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	return nil, c.err
}

func (c failingCaller) ListTools(context.Context, *pool.Server) ([]*mcp.Tool, error) {
	return nil, c.err
}

// TestCancellationReachesSibling cancels a run while a tool is in flight and
// checks that the sibling's handler sees its context end (go-sdk sent
// notifications/cancelled).
func TestCancellationReachesSibling(t *testing.T) {
	started := make(chan struct{})
	cancelled := make(chan error, 1)
	srv := sibling(t, "packrat", func(s *mcp.Server) {
		addRaw(s, "slow", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			close(started)
			select {
			case <-ctx.Done():
				cancelled <- ctx.Err()
				return nil, ctx.Err()
			case <-time.After(testDeadline):
				cancelled <- errors.New("never cancelled")
				return text("finished"), nil
			}
		})
	})
	e := executor(t, pooltest.New(t, nil), srv)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-started; cancel() }()
	r := e.Run(ctx, []delegation.Call{{ID: "1", Name: "packrat__slow"}})[0]
	if r.Outcome != delegation.OutcomeCanceled || !errors.Is(r.Err, context.Canceled) {
		t.Errorf("result %+v, want outcome canceled wrapping context.Canceled", r)
	}
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("sibling: %v", err)
	}
}

func TestDiscoverKeepsGoingPastAFailedServer(t *testing.T) {
	packrat := sibling(t, "packrat", func(s *mcp.Server) {
		s.AddTool(&mcp.Tool{Name: "store_note", Description: "Store a note", InputSchema: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"text":{"type":"string"}}}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("ok"), nil })
		addRaw(s, "get_note", nil)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := &pool.Server{Name: "abacus", URL: "http://" + ln.Addr().String()}
	ln.Close()

	tb := delegation.Discover(t.Context(), pooltest.New(t, nil), nil, &delegation.DiscoverOptions{Servers: []*pool.Server{down, packrat}})
	var names []string
	for _, tg := range tb.Targets() {
		names = append(names, tg.Name)
	}
	if want := []string{"packrat__get_note", "packrat__store_note"}; !slices.Equal(names, want) {
		t.Errorf("targets %v, want %v", names, want)
	}
	st, _ := tb.Lookup("packrat__store_note")
	if got, want := string(st.Parameters), `{"properties":{"text":{"type":"string"}},"type":"object"}`; got != want {
		t.Errorf("parameters %s, want %s", got, want)
	}
	u := tb.Unavailable()
	if len(u) != 1 || u[0].Server != "abacus" || !errors.Is(u[0], pool.ErrTransport) {
		t.Errorf("unavailable = %v, want abacus with a transport error", u)
	}
}

func mustList(t *testing.T, p *pool.Pool, srv *pool.Server) []*mcp.Tool {
	t.Helper()
	tools, err := p.ListTools(t.Context(), srv)
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

// blockingCaller answers a call when its context ends, with its error.
type blockingCaller struct{}

func (blockingCaller) CallTool(ctx context.Context, _ *pool.Server, _ *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (blockingCaller) ListTools(context.Context, *pool.Server) ([]*mcp.Tool, error) { return nil, nil }

// TestServerTimeout: a server's mcp.json "timeout" bounds each call to it,
// and the failure says so.
func TestServerTimeout(t *testing.T) {
	tb := delegation.NewToolbox([]delegation.ServerTools{{
		Server:  &pool.Server{Name: "packrat"},
		Tools:   []*mcp.Tool{{Name: "store_note", InputSchema: objectSchema}},
		Timeout: 10 * time.Millisecond,
	}})
	e := &delegation.Executor{Caller: blockingCaller{}, Tools: tb}
	r := e.Run(t.Context(), []delegation.Call{{ID: "1", Name: "packrat__store_note"}})[0]
	if !r.IsError || !errors.Is(r.Err, delegation.ErrCallTimeout) || !strings.Contains(r.Content, "timeout") {
		t.Errorf("IsError=%v Err=%v Content=%q; want the server's timeout named", r.IsError, r.Err, r.Content)
	}
}

// TestResultMetaPassesThrough checks that a result's _meta reaches the
// Result as the sibling sent it, for a tool error as for a success (an
// ask that did not answer still cost tokens), and that a call which got
// no result has none.
func TestResultMetaPassesThrough(t *testing.T) {
	srv := sibling(t, "packrat", func(s *mcp.Server) {
		addRaw(s, "ask", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Fail bool }
			json.Unmarshal(req.Params.Arguments, &in)
			if in.Fail {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "not answered"}},
					Meta: mcp.Meta{"example.com/cost": map[string]any{"tokens": 7}}}, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}},
				Meta: mcp.Meta{"example.com/cost": map[string]any{"tokens": 42}}}, nil
		})
		addRaw(s, "broken", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: -32000, Message: "no"}
		})
	})
	e := executor(t, pooltest.New(t, nil), srv)
	res := e.Run(t.Context(), []delegation.Call{
		{ID: "c1", Name: "packrat__ask", Arguments: `{}`},
		{ID: "c2", Name: "packrat__ask", Arguments: `{"fail":true}`},
		{ID: "c3", Name: "packrat__broken", Arguments: `{}`},
	})
	for i, want := range []float64{42, 7} {
		cost, ok := res[i].Meta["example.com/cost"].(map[string]any)
		if !ok || cost["tokens"] != want {
			t.Errorf("result %d (%s): _meta %v, want tokens %v", i, res[i].Outcome, res[i].Meta, want)
		}
	}
	if res[2].Meta != nil {
		t.Errorf("a call without a result has _meta %v", res[2].Meta)
	}
}

// TestToolboxFirst checks that a Toolbox cut to its first tools keeps
// their order and names, and no longer looks up the rest.
func TestToolboxFirst(t *testing.T) {
	tools := func(names ...string) []*mcp.Tool {
		var ts []*mcp.Tool
		for _, n := range names {
			ts = append(ts, &mcp.Tool{Name: n, InputSchema: map[string]any{"type": "object"}})
		}
		return ts
	}
	tb := delegation.NewToolbox([]delegation.ServerTools{
		{Server: &pool.Server{Name: "alpha"}, Tools: tools("a", "b")},
		{Server: &pool.Server{Name: "beta"}, Tools: tools("c", "d")},
		{Server: &pool.Server{Name: "gamma"}, Err: errors.New("down")},
	})
	first := tb.First(3)
	var names []string
	for _, tg := range first.Targets() {
		names = append(names, tg.Name)
	}
	if want := []string{"alpha__a", "alpha__b", "beta__c"}; !slices.Equal(names, want) {
		t.Errorf("First(3) offers %q, want %q", names, want)
	}
	if _, ok := first.Lookup("beta__d"); ok {
		t.Error("First(3) still looks up the fourth tool")
	}
	if first.Len() != 3 || len(first.Unavailable()) != 1 || tb.Len() != 4 {
		t.Errorf("First(3): %d tools, %d unavailable; the whole: %d tools", first.Len(), len(first.Unavailable()), tb.Len())
	}
	if tb.First(4) != tb || tb.First(0).Len() != 0 {
		t.Error("First(len) is not the Toolbox itself, or First(0) is not empty")
	}
}

// TestCallTimeout: agent.json's "call_timeout" (Executor.CallTimeout)
// stops a call to a real sibling that hangs: the sibling is told to stop
// (its handler's context ends), the error is a *CallTimeoutError that
// matches ErrCallTimeout, and the model reads how long, and whose
// deadline it was. A server's mcp.json "timeout" takes precedence.
func TestCallTimeout(t *testing.T) {
	stopped := make(chan struct{}, 4)
	srv := sibling(t, "slow", func(s *mcp.Server) {
		addRaw(s, "hang", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			stopped <- struct{}{}
			return nil, ctx.Err()
		})
	})
	p := pooltest.New(t, nil)
	tools, err := p.ListTools(t.Context(), srv)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		server, agent time.Duration
		after         time.Duration
		want          string
	}{
		{"call_timeout", 0, 300 * time.Millisecond, 300 * time.Millisecond, `Timed out after 300ms ("call_timeout" in agent.json)`},
		{"mcp.json timeout wins", 200 * time.Millisecond, 30 * time.Second, 200 * time.Millisecond, `Timed out after 200ms (the server's "timeout" in mcp.json)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := delegation.NewToolbox([]delegation.ServerTools{{Server: srv, Tools: tools, Timeout: c.server}})
			e := &delegation.Executor{Caller: p, Tools: tb, CallTimeout: c.agent, Chain: delegation.Chain{RunID: "run-1", Agents: []string{"oracle"}, Depth: 1}}
			r := e.Run(t.Context(), []delegation.Call{{ID: "1", Name: delegation.ToolName("slow", "hang")}})[0]
			var te *delegation.CallTimeoutError
			if !r.IsError || !errors.As(r.Err, &te) || !errors.Is(r.Err, delegation.ErrCallTimeout) || te.After != c.after {
				t.Fatalf("IsError=%v Err=%v; want a *CallTimeoutError after %v", r.IsError, r.Err, c.after)
			}
			if !strings.Contains(r.Content, c.want) || strings.Contains(r.Content, "Cause:") {
				t.Errorf("the model reads %q; want %q, without the pool's cause", r.Content, c.want)
			}
			select {
			case <-stopped:
			case <-time.After(testDeadline):
				t.Fatal("the sibling was never told to stop")
			}
		})
	}
}

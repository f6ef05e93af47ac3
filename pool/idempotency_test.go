package pool_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/pool"
)

// keyRecorder is a receiving middleware that records the idempotency key
// (or its absence) of every tools/call, by call id.
type keyRecorder struct {
	mu   sync.Mutex
	keys map[string][]string
}

func (kr *keyRecorder) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" {
			k, _ := p.Meta[idempotency.MetaKey].(string)
			kr.mu.Lock()
			kr.keys[p.Name] = append(kr.keys[p.Name], k)
			kr.mu.Unlock()
		}
		return next(ctx, method, req)
	}
}

func (kr *keyRecorder) sent(tool string) []string {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	return append([]string(nil), kr.keys[tool]...)
}

// guarded starts an mcptest server behind an idempotency guard, and in front
// of the guard a key recorder, so it sees every send, replayed or not.
func guarded(t *testing.T) (*mcptest.Server, *keyRecorder, *ledger.Guard) {
	l, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	g := ledger.NewGuard(l, nil)
	kr := &keyRecorder{keys: map[string][]string{}}
	ts := mcptest.Start(t, &mcptest.Options{Middleware: func(next mcp.MethodHandler) mcp.MethodHandler {
		return kr.middleware(g.Middleware(next))
	}})
	return ts, kr, g
}

// resetFirst resets the connection after the server's answer to the first
// tools/call of call id, once.
func resetFirst(ts *mcptest.Server, id string) {
	var once sync.Once
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.Method != "tools/call" || rpc.CallID != id {
			return false
		}
		hit := false
		once.Do(func() { hit = true })
		if hit {
			ts.ResetMidResponse(w, r)
		}
		return hit
	})
}

func echoCall(id string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"id": id, "text": "hi " + id}}
}

// TestKeyedResendIsReplay: to a server that advertises idempotency, an
// answer cut off mid-response is not outcome_unknown: the pool sends the
// call again with the same key and gets the first execution's result,
// marked as a replay. The tool ran once.
func TestKeyedResendIsReplay(t *testing.T) {
	ts, kr, g := guarded(t)
	resetFirst(ts, "a")
	p := pool.New(nil)
	defer p.Close()
	var info pool.CallInfo
	res, err := p.CallTool(pool.WithCallInfo(t.Context(), &info), &pool.Server{Name: "s", URL: ts.URL()}, echoCall("a"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "hi a" {
		t.Fatalf("result %q", got)
	}
	if n := ts.Executions("a"); n != 1 {
		t.Fatalf("executed %d times, want 1", n)
	}
	keys := kr.sent("echo")
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("keys sent %q, want the same non-empty key twice", keys)
	}
	if !info.Replayed || info.KeyedAttempts != 2 || info.IdempotencyKey != keys[0] {
		t.Fatalf("call info %+v", info)
	}
	st := p.Stats()
	if st.Replays != 1 || st.KeyedRetries != 1 || st.KeyedCalls != 1 {
		t.Fatalf("stats %+v", st)
	}
	if gs := g.Stats(); gs.Replays != 1 || gs.Recorded != 1 {
		t.Fatalf("guard stats %+v", gs)
	}
}

// TestStrangerUnchanged: a server that does not advertise idempotency
// gets no key, and a cut-off answer stays outcome_unknown, not resent.
func TestStrangerUnchanged(t *testing.T) {
	kr := &keyRecorder{keys: map[string][]string{}}
	ts := mcptest.Start(t, &mcptest.Options{Middleware: kr.middleware})
	resetFirst(ts, "a")
	p := pool.New(nil)
	defer p.Close()
	var info pool.CallInfo
	_, err := p.CallTool(pool.WithCallInfo(t.Context(), &info), &pool.Server{Name: "s", URL: ts.URL()}, echoCall("a"))
	if !errors.Is(err, pool.ErrOutcomeUnknown) {
		t.Fatalf("err %v, want outcome_unknown", err)
	}
	if keys := kr.sent("echo"); len(keys) != 1 || keys[0] != "" {
		t.Fatalf("keys sent %q, want one call without a key", keys)
	}
	if st := p.Stats(); st.KeyedCalls != 0 || st.KeyedRetries != 0 || info.IdempotencyKey != "" || info.KeyedAttempts != 0 {
		t.Fatalf("stats %+v info %+v", st, info)
	}
}

// TestCallerKey: a caller's own key is the one sent; reusing it for the
// same call is a replay, for another call a conflict.
func TestCallerKey(t *testing.T) {
	ts, kr, _ := guarded(t)
	p := pool.New(nil)
	defer p.Close()
	srv := &pool.Server{Name: "s", URL: ts.URL()}
	key := idempotency.NewKey(time.Now())
	ctx := pool.WithIdempotencyKey(t.Context(), key)
	if _, err := p.CallTool(ctx, srv, echoCall("a")); err != nil {
		t.Fatal(err)
	}
	var info pool.CallInfo
	if _, err := p.CallTool(pool.WithCallInfo(ctx, &info), srv, echoCall("a")); err != nil || !info.Replayed {
		t.Fatalf("repeat: %v, %+v", err, info)
	}
	_, err := p.CallTool(ctx, srv, echoCall("b"))
	if !errors.Is(err, pool.ErrIdempotencyConflict) || !errors.Is(err, pool.ErrRefused) {
		t.Fatalf("other call, same key: %v", err)
	}
	var pe *pool.Error
	if !errors.As(err, &pe) || pe.Code != idempotency.CodeConflict || pe.Kind != pool.KindRefused {
		t.Fatalf("code, kind: %v", err)
	}
	if ts.Executions("a") != 1 || ts.Executions("b") != 0 {
		t.Fatalf("executions a=%d b=%d", ts.Executions("a"), ts.Executions("b"))
	}
	for _, k := range kr.sent("echo") {
		if k != key {
			t.Fatalf("sent key %q, want the caller's %q", k, key)
		}
	}
	if st := p.Stats(); st.Conflicts != 1 || st.Replays != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestKeyedResendAcrossRestart: the server restarts (every session
// forgotten) while its answer is cut off; the resend goes on a new session
// with the same key and is a replay.
func TestKeyedResendAcrossRestart(t *testing.T) {
	ts, _, _ := guarded(t)
	var once sync.Once
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.Method != "tools/call" || rpc.CallID != "r" {
			return false
		}
		hit := false
		once.Do(func() { hit = true })
		if hit {
			ts.ResetMidResponse(w, r)
			go ts.Restart()
		}
		return hit
	})
	p := pool.New(nil)
	defer p.Close()
	var info pool.CallInfo
	if _, err := p.CallTool(pool.WithCallInfo(t.Context(), &info), &pool.Server{Name: "s", URL: ts.URL()}, echoCall("r")); err != nil {
		t.Fatal(err)
	}
	if ts.Executions("r") != 1 || !info.Replayed {
		t.Fatalf("executions %d, info %+v", ts.Executions("r"), info)
	}
}

// swappedGuard is an idempotency guard whose ledger is closed and opened
// again on the same file when the server restarts, as a new process opens
// the ledger its predecessor left: a call that was running is then
// interrupted.
type swappedGuard struct {
	t      *testing.T
	path   string
	mu     sync.Mutex // protects following fields
	l      *ledger.Ledger
	g      *ledger.Guard
	closed bool
}

func (sg *swappedGuard) reopen() {
	sg.mu.Lock()
	defer sg.mu.Unlock()
	if sg.closed {
		return
	}
	if sg.l != nil {
		sg.l.Close()
	}
	l, err := ledger.Open(sg.path, nil)
	if err != nil {
		sg.t.Error(err)
		return
	}
	sg.l, sg.g = l, ledger.NewGuard(l, nil)
}

func (sg *swappedGuard) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		sg.mu.Lock()
		g := sg.g
		sg.mu.Unlock()
		return g.Middleware(next)(ctx, method, req)
	}
}

// TestInterruptedHasItsOwnKind: a keyed call running when its server
// died is answered by the next process's ledger with -32073 (interrupted,
// for good): the pool returns it as KindInterrupted, which matches
// ErrInterrupted and ErrOutcomeUnknown (it may have taken effect), not as
// the server's rpc error, and does not send it again and again.
func TestInterruptedHasItsOwnKind(t *testing.T) {
	sg := &swappedGuard{t: t, path: filepath.Join(t.TempDir(), "ledger.db")}
	sg.reopen()
	ts := mcptest.Start(t, &mcptest.Options{Middleware: sg.middleware})
	t.Cleanup(func() {
		sg.mu.Lock()
		sg.closed = true
		sg.l.Close()
		sg.mu.Unlock()
	})
	entered, release, forwarded := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	mcp.AddTool(ts.MCPServer(), &mcp.Tool{Name: "hang"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		runs.Add(1)
		close(entered)
		<-release
		return &mcp.CallToolResult{}, nil, nil
	})
	// The first send's process "dies" while the tool runs: the next
	// process's ledger is opened on the same file (the record is still
	// running there, as after a SIGKILL), and the connection is reset.
	var once sync.Once
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.Method != "tools/call" {
			return false
		}
		hit := false
		once.Do(func() { hit = true })
		if !hit {
			return false
		}
		go func() {
			defer close(forwarded)
			ts.Forward(discardResponse{http.Header{}}, r)
		}()
		<-entered
		sg.reopen()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return true
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
		return true
	})
	t.Cleanup(func() { close(release); <-forwarded })
	p := pool.New(nil)
	defer p.Close()
	_, err := p.CallTool(t.Context(), &pool.Server{Name: "s", URL: ts.URL()}, &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{}})
	var pe *pool.Error
	if !errors.As(err, &pe) || pe.Kind != pool.KindInterrupted || pe.Code != idempotency.CodeInterrupted {
		t.Fatalf("err %v, want a KindInterrupted *pool.Error with code %d", err, idempotency.CodeInterrupted)
	}
	if !errors.Is(err, pool.ErrInterrupted) || !errors.Is(err, pool.ErrOutcomeUnknown) || errors.Is(err, pool.ErrRPC) {
		t.Fatalf("err %v: want it to match ErrInterrupted and ErrOutcomeUnknown, not ErrRPC", err)
	}
	if pe.Kind.String() != "interrupted" {
		t.Fatalf("kind %q", pe.Kind)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
	if st := p.Stats(); st.Interrupted != 1 || st.KeyedRetries != 1 {
		t.Fatalf("stats %+v, want one interrupted after one keyed resend", st)
	}
}

// discardResponse is a ResponseWriter whose answer nobody reads.
type discardResponse struct{ h http.Header }

func (d discardResponse) Header() http.Header         { return d.h }
func (d discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (d discardResponse) WriteHeader(int)             {}
func (d discardResponse) Flush()                      {}

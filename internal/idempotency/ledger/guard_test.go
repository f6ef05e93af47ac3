package ledger_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/pgtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(ownerHelperEnv) != "" {
		ownerHelper()
		return
	}
	goleak.VerifyTestMain(pgMain{m})
}

// pgMain stops the shared PostgreSQL server after the tests, before goleak
// looks for goroutines.
type pgMain struct{ m *testing.M }

func (p pgMain) Run() int { return pgtest.Main(p.m) }

type in struct {
	ID string `json:"id"`
}

// rig is a real go-sdk server over Streamable HTTP on loopback with the
// guard in front of three tools, and a client session to it.
type rig struct {
	t      *testing.T
	ledger *ledger.Ledger
	guard  *ledger.Guard
	cs     *mcp.ClientSession
	url    string   // the server's endpoint, for more clients
	runs   sync.Map // id -> *atomic.Int64
	gate   chan struct{}
	enter  chan string
}

func newRig(t *testing.T, b backend, place string, opts *ledger.Options) *rig {
	t.Helper()
	l := b.open(t, place, opts)
	r := &rig{t: t, ledger: l, guard: ledger.NewGuard(l, &ledger.GuardOptions{Wait: 200 * time.Millisecond}),
		gate: make(chan struct{}), enter: make(chan string, 16)}
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "effect"}, func(ctx context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		n := r.count(a.ID)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.ID + " run " + itoa(n)}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		r.count(a.ID)
		r.enter <- a.ID
		select {
		case <-r.gate:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slow " + a.ID}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "read", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(ctx context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		r.count(a.ID)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "read"}}}, nil, nil
	})
	r.guard.Pure("read")
	s.AddReceivingMiddleware(r.guard.Middleware)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.cs, r.url = cs, ts.URL
	t.Cleanup(func() {
		cs.Close()
		ts.Close()
		l.Close()
	})
	return r
}

func itoa(n int64) string { return string(rune('0' + n)) }

func (r *rig) count(id string) int64 {
	v, _ := r.runs.LoadOrStore(id, new(atomic.Int64))
	return v.(*atomic.Int64).Add(1)
}

func (r *rig) runsOf(id string) int64 {
	v, ok := r.runs.Load(id)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func (r *rig) call(tool, id, key string) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"id": id}}
	if key != "" {
		p.Meta = mcp.Meta{idempotency.MetaKey: key}
	}
	return r.cs.CallTool(r.t.Context(), p)
}

func code(t *testing.T, err error) int64 {
	t.Helper()
	var w *jsonrpc.Error
	if !errors.As(err, &w) {
		t.Fatalf("error %v is not a JSON-RPC error", err)
	}
	return w.Code
}

func TestCapabilityAdvertised(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := newRig(t, b, b.place(t), nil)
		exp := r.cs.InitializeResult().Capabilities.Experimental[idempotency.CapabilityName]
		m, ok := exp.(map[string]any)
		if !ok || m["version"] != float64(idempotency.Version) || m["retentionSeconds"] != float64(86400) {
			t.Fatalf("capability %#v", exp)
		}
		if r.cs.InitializeResult().Capabilities.Tools == nil {
			t.Fatal("advertising idempotency lost the tools capability")
		}
	})
}

func TestReplayAndConflict(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := newRig(t, b, b.place(t), nil)
		key := idempotency.NewKey(time.Now())
		first, err := r.call("effect", "a", key)
		if err != nil {
			t.Fatal(err)
		}
		if first.Meta[idempotency.ReplayMetaKey] != nil {
			t.Fatalf("first execution marked as a replay: %v", first.Meta)
		}
		again, err := r.call("effect", "a", key)
		if err != nil {
			t.Fatal(err)
		}
		if r.runsOf("a") != 1 || mcptest.Text(again) != mcptest.Text(first) || again.Meta[idempotency.ReplayMetaKey] != true {
			t.Fatalf("repeat: runs %d, %q vs %q, meta %v", r.runsOf("a"), mcptest.Text(again), mcptest.Text(first), again.Meta)
		}
		_, err = r.call("effect", "b", key)
		if c := code(t, err); c != idempotency.CodeConflict || r.runsOf("b") != 0 {
			t.Fatalf("other arguments, same key: code %d, runs %d", c, r.runsOf("b"))
		}
		// Without a key, and for a pure tool, the guard stays out of the way.
		r.call("effect", "c", "")
		r.call("effect", "c", "")
		r.call("read", "d", key)
		r.call("read", "d", key)
		if r.runsOf("c") != 2 || r.runsOf("d") != 2 {
			t.Fatalf("runs without key %d, pure %d; want 2, 2", r.runsOf("c"), r.runsOf("d"))
		}
		if st := r.guard.Stats(); st.Replays != 1 || st.Conflicts != 1 || st.Recorded != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestBadKeyRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := newRig(t, b, b.place(t), nil)
		_, err := r.call("effect", "a", "no spaces")
		if c := code(t, err); c != jsonrpc.CodeInvalidParams || r.runsOf("a") != 0 {
			t.Fatalf("code %d runs %d", c, r.runsOf("a"))
		}
	})
}

func TestExpiredKeyRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := newRig(t, b, b.place(t), &ledger.Options{Retention: time.Hour})
		_, err := r.call("effect", "a", idempotency.NewKey(time.Now().Add(-2*time.Hour)))
		if c := code(t, err); c != idempotency.CodeKeyExpired || r.runsOf("a") != 0 {
			t.Fatalf("code %d runs %d", c, r.runsOf("a"))
		}
	})
}

// TestStillRunningThenReplay: a repeat of a key whose call is running waits
// for it (bounded), then gets still-running; once it finished, the result.
func TestStillRunningThenReplay(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := newRig(t, b, b.place(t), nil)
		key := idempotency.NewKey(time.Now())
		done := make(chan error, 1)
		go func() {
			_, err := r.call("slow", "s", key)
			done <- err
		}()
		<-r.enter
		_, err := r.call("slow", "s", key)
		if c := code(t, err); c != idempotency.CodeStillRunning {
			t.Fatalf("code %d", c)
		}
		close(r.gate)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		res, err := r.call("slow", "s", key)
		if err != nil || res.Meta[idempotency.ReplayMetaKey] != true || r.runsOf("s") != 1 {
			t.Fatalf("after: %v %v runs %d", res, err, r.runsOf("s"))
		}
	})
}

// TestInterruptedAfterCrash: a record a previous process left running is
// interrupted for the next one, and the tool does not run again. The
// "crash" here is a second ledger opened on the same storage while the
// first call still runs, which is what the next process does (on
// PostgreSQL, after the first ledger's connections are gone: b.crash);
// TestPostgresOwnerKilled and the agent server's tests kill a real process.
func TestInterruptedAfterCrash(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		path := b.place(t)
		r := newRig(t, b, path, nil)
		key := idempotency.NewKey(time.Now())
		done := make(chan struct{})
		go func() {
			r.call("slow", "s", key)
			close(done)
		}()
		<-r.enter
		b.crash(r.ledger)
		next := newRig(t, b, path, nil)
		_, err := next.call("slow", "s", key)
		if c := code(t, err); c != idempotency.CodeInterrupted || next.runsOf("s") != 0 {
			t.Fatalf("code %d runs %d", c, next.runsOf("s"))
		}
		close(r.gate)
		<-done
	})
}

func TestEvictionBoundsCountAndAdvancesHorizon(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		now := time.Now()
		clock := func() time.Time { return now }
		l := b.open(t, b.place(t), &ledger.Options{MaxRecords: 10, Now: clock})
		ctx := t.Context()
		var first string
		for i := range 300 {
			now = now.Add(time.Millisecond)
			k := idempotency.NewKey(now)
			if i == 0 {
				first = k
			}
			if rec, err := l.Begin(ctx, k, "t", "fp"); err != nil || rec != nil {
				t.Fatal(rec, err)
			}
			if err := l.Finish(ctx, k, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		n, err := l.Count(ctx)
		if err != nil || n > 10+256 {
			t.Fatalf("%d records (err %v), want at most MaxRecords plus one eviction period", n, err)
		}
		created, _ := idempotency.KeyTime(first)
		if !l.Horizon().After(created) && !l.Horizon().Equal(created) {
			t.Fatalf("horizon %v is before the first evicted key %v", l.Horizon(), created)
		}
		if rec, _ := l.Get(ctx, first); rec != nil {
			t.Fatal("the oldest record survived eviction")
		}
	})
}

// TestEvictedKeyRefused: once records have been evicted for space, a new
// timestamped key created before the horizon is refused, not run: its
// record may have been among those evicted.
func TestEvictedKeyRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := newRig(t, b, b.place(t), &ledger.Options{MaxRecords: 10})
		for i := range 256 {
			if _, err := r.call("effect", "fill", idempotency.NewKey(time.Now())); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		h := r.ledger.Horizon()
		if h.IsZero() || h.Equal(time.UnixMilli(0)) {
			t.Fatal("no eviction horizon after MaxRecords was exceeded")
		}
		_, err := r.call("effect", "old", idempotency.NewKey(h.Add(-time.Millisecond)))
		if c := code(t, err); c != idempotency.CodeKeyExpired || r.runsOf("old") != 0 {
			t.Fatalf("code %d, runs %d", c, r.runsOf("old"))
		}
		// A key newer than the horizon runs.
		if _, err := r.call("effect", "new", idempotency.NewKey(time.Now())); err != nil || r.runsOf("new") != 1 {
			t.Fatalf("new key: %v, runs %d", err, r.runsOf("new"))
		}
	})
}

package ledger_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
)

// cutRig is a guarded server whose "job" tool, the first time it runs,
// says its process's shutdown cut it off (ledger.CutOff) and answers an
// error, as the ask tool does when the drain cancels it; later it answers.
type cutRig struct {
	guard *ledger.Guard
	cs    *mcp.ClientSession
	runs  atomic.Int64
	cut   bool
	mark  chan bool // what CutOff reported
}

func newCutRig(t *testing.T, path string, cut bool) *cutRig {
	t.Helper()
	l, err := ledger.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &cutRig{guard: ledger.NewGuard(l, &ledger.GuardOptions{Wait: 50 * time.Millisecond}), cut: cut, mark: make(chan bool, 4)}
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "job"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		r.runs.Add(1)
		if r.cut {
			r.mark <- ledger.CutOff(ctx)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "cut off by the shutdown"}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	s.AddReceivingMiddleware(r.guard.Middleware)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.cs = cs
	t.Cleanup(func() {
		cs.Close()
		ts.Close()
		l.Close()
	})
	return r
}

func (r *cutRig) call(t *testing.T, key string) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: "job", Arguments: map[string]any{}}
	if key != "" {
		p.Meta = mcp.Meta{idempotency.MetaKey: key}
	}
	return r.cs.CallTool(t.Context(), p)
}

// TestCutOffLeavesTheRecordRunning: a keyed call whose tool says its
// process's shutdown cut it off is not recorded with what the tool
// returned: a repeat in the same process is still running (not a replay of
// the cut), and the next process finds it interrupted and resumes it when
// its resumer can, so the repeat gets the real answer. Without a key
// CutOff has nothing to mark.
func TestCutOffLeavesTheRecordRunning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	first := newCutRig(t, path, true)
	key := idempotency.NewKey(time.Now())
	if res, err := first.call(t, key); err != nil || !res.IsError {
		t.Fatalf("the cut call answered %v, %v; want the tool's own error result", res, err)
	}
	if !<-first.mark {
		t.Fatal("CutOff found no keyed call to mark")
	}
	if _, err := first.call(t, key); code(t, err) != idempotency.CodeStillRunning {
		t.Fatalf("a repeat in the same process: %v, want still running (the cut is not the outcome)", err)
	}
	if _, err := first.call(t, ""); err != nil {
		t.Fatal(err)
	}
	if <-first.mark {
		t.Error("CutOff reported a keyed call for a call without a key")
	}

	next := newCutRig(t, path, false)
	next.guard.Resumable("job", func(context.Context, string) bool { return true })
	res, err := next.call(t, key)
	if err != nil || res.IsError || res.Meta[idempotency.ReplayMetaKey] == true {
		t.Fatalf("the repeat in the next process answered %v, %v; want the tool run again, not a replay", res, err)
	}
	if next.runs.Load() != 1 || next.guard.Stats().Resumed != 1 {
		t.Errorf("the next process ran it %d times (stats %+v), want once, resumed", next.runs.Load(), next.guard.Stats())
	}
	if res, err := next.call(t, key); err != nil || res.Meta[idempotency.ReplayMetaKey] != true {
		t.Errorf("after the resume: %v, %v; want its replay", res, err)
	}
}

package agentserver

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/waittest"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// TestMaxConcurrentCalls loads an agent server capped at 3 concurrent
// tools/call: callers beyond the cap wait, a waiter whose deadline passes
// gets its deadline error in time, its wait ends on the server when the
// cancellation arrives and its call never runs, the cancelled waits give
// their places back, and under load no more than 3 calls ever run at once
// while every patient caller is served.
func TestMaxConcurrentCalls(t *testing.T) {
	const limit, waiters, load = 3, 8, 24
	s, err := New(&agentdef.Definition{Name: "capped"}, &Options{DataDir: t.TempDir(), MaxConcurrentCalls: limit})
	if err != nil {
		t.Fatal(err)
	}
	var (
		running, peak atomic.Int64
		mu            sync.Mutex
		ran           = map[string]bool{}
		gate          = make(chan struct{})
		entered       = make(chan string, limit)
	)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "hold"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		ID   string `json:"id"`
		Wait bool   `json:"wait,omitempty"`
	}) (*mcp.CallToolResult, any, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		mu.Lock()
		ran[in.ID] = true
		mu.Unlock()
		if in.Wait {
			entered <- in.ID
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done " + in.ID}}}, nil, nil
	})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.CloseSessions()
		ts.Close()
		s.Close()
	})
	call := func(ctx context.Context, id string, wait bool) error {
		cs := connect(t, ts.URL, nil)
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{"id": id, "wait": wait}})
		return err
	}

	// Fill every slot with a call that holds it.
	holders := make(chan error, limit)
	for i := range limit {
		go func() { holders <- call(context.Background(), fmt.Sprintf("holder%d", i), true) }()
	}
	for range limit {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the holders never started")
		}
	}

	// Callers with a deadline wait, and give up on time. Their deadline
	// passes once every one of their calls waits on the server, not on a
	// timer: on a loaded machine a timer can fire while a call is still on
	// its way, and then nothing tells the server it was abandoned until
	// after it has arrived, when a slot may be free. The limiter accepts
	// that case (limit.go), so it is not what this test is about: here
	// every waiter is known to be waiting when its caller gives up, and
	// then it must never run. Their sessions are made first, so that only
	// the calls wait.
	gone := newPassDeadline()
	var wg sync.WaitGroup
	errs := make([]error, waiters)
	returned := make([]time.Time, waiters)
	for i := range waiters {
		cs := connect(t, ts.URL, nil)
		wg.Go(func() {
			_, errs[i] = cs.CallTool(gone, &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{"id": fmt.Sprintf("waiter%d", i)}})
			returned[i] = time.Now()
		})
	}
	waittest.Until(t, 60*time.Second, "every waiter's call to wait on the server for a slot",
		func() bool { return s.limit.waiting.Load() == waiters })
	passed := time.Now()
	gone.pass()
	wg.Wait()
	took := make([]time.Duration, waiters)
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("waiter %d: %v, want its deadline", i, err)
		}
		if took[i] = returned[i].Sub(passed); took[i] > 2*time.Second {
			t.Errorf("waiter %d returned %v after its deadline passed", i, took[i])
		}
	}
	// go-sdk sends notifications/cancelled once the caller has returned,
	// and in the sessionless era the aborted request cancels the call's
	// context; either way the server stops each wait when it learns.
	// Every slot is still held, so each wait can only end refused.
	waittest.Until(t, 60*time.Second, "the waits to end on the server after their callers gave up",
		func() bool { return s.limit.waiting.Load() == 0 })
	mu.Lock()
	for i := range waiters {
		if ran[fmt.Sprintf("waiter%d", i)] {
			t.Errorf("waiter %d ran after its caller gave up", i)
		}
	}
	mu.Unlock()

	// The holders finish; the cancelled waiters left no slot taken.
	close(gate)
	for range limit {
		if err := <-holders; err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, load)
	for i := range load {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			errc <- call(ctx, fmt.Sprintf("load%d", i), false)
		}()
	}
	for range load {
		if err := <-errc; err != nil {
			t.Errorf("a patient caller: %v", err)
		}
	}
	if p := peak.Load(); p > limit {
		t.Errorf("%d calls ran at once, cap %d", p, limit)
	}
	mu.Lock()
	for i := range waiters {
		if ran[fmt.Sprintf("waiter%d", i)] {
			t.Errorf("waiter %d ran once a slot was free, after its caller had given up", i)
		}
	}
	mu.Unlock()
	t.Logf("cap %d: %d waiters gave up at their deadline (slowest returned %v after it) and never ran; %d patient calls all served; at most %d ran at once",
		limit, waiters, slowest(took).Round(time.Millisecond), load, peak.Load())
}

// A passDeadline is a context whose deadline passes when the test calls
// pass rather than at a time: it is done from then on, with the error a
// passed deadline gives (context.DeadlineExceeded), so that a caller sees
// exactly what it would at a real deadline, at a moment the test chose.
type passDeadline struct {
	done chan struct{}
	once sync.Once
}

func newPassDeadline() *passDeadline { return &passDeadline{done: make(chan struct{})} }

func (d *passDeadline) pass() { d.once.Do(func() { close(d.done) }) }

func (d *passDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }
func (d *passDeadline) Done() <-chan struct{}       { return d.done }
func (d *passDeadline) Value(any) any               { return nil }
func (d *passDeadline) Err() error {
	select {
	case <-d.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func slowest(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// TestMaxConcurrentFlag: agent serve takes --max-concurrent and serves
// with it; a negative value is a usage error.
func TestMaxConcurrentFlag(t *testing.T) {
	_, url := startServe(t, t.TempDir(), "--agent", bundledAgent("abacus"), "--max-concurrent", "2")
	cs := connect(t, url, nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "calculate", Arguments: map[string]any{"expression": "20+22"}})
	if err != nil || !strings.Contains(mcptest.Text(res), "42") {
		t.Fatalf("calculate with --max-concurrent 2: %v %v", res, err)
	}
	cmd := exec.Command(switchboardBin, "agent", "serve", "--agent", bundledAgent("abacus"), "--max-concurrent", "-1")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--max-concurrent") {
		t.Fatalf("--max-concurrent -1: %v %s, want exit 2 and the usage", err, out)
	}
}

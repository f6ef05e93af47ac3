package pool

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard-run/switchboard/internal/mcptest"
)

// Callers that share one dial which fails each get an *Error of their own:
// do fills in the caller's method and tool (and, on a re-initialization,
// its kind), and one shared value would be written by every caller at once
// and read by each with another caller's fields. Found by the fault suite's
// nginx row under -race, whose restarts fail dials that several calls wait
// on.
func TestCallersOfAFailedDialGetTheirOwnError(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")

	// Hold the initialize until both callers wait for its dial, then
	// refuse it as a proxy whose upstream is down does.
	const callers = 2
	var waiting atomic.Int32
	bothWait := make(chan struct{})
	old := testHookAcquireWait
	t.Cleanup(func() { testHookAcquireWait = old })
	testHookAcquireWait = func(key) {
		if waiting.Add(1) == callers {
			close(bothWait)
		}
	}
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.Method != "initialize" {
			return false
		}
		<-bothWait
		http.Error(w, "upstream down", http.StatusBadGateway)
		return true
	})

	tools := []string{"echo", "block"}
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i, tool := range tools {
		wg.Go(func() { _, errs[i] = call(t.Context(), p, srv, tool, "x") })
	}
	wg.Wait()
	var got [callers]*Error
	for i, err := range errs {
		if !errors.As(err, &got[i]) {
			t.Fatalf("caller %d: %v, want a *pool.Error", i, err)
		}
		if got[i].Tool != tools[i] || got[i].Method != "tools/call" {
			t.Errorf("caller %d (tools/call %s) got the error of %s %s: %v", i, tools[i], got[i].Method, got[i].Tool, err)
		}
	}
	if got[0] == got[1] {
		t.Errorf("both callers got the same *Error value; each must have its own")
	}
}

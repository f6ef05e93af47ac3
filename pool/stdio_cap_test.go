package pool

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hugeStdioResult is the text of the stdio test server's "huge" tool.
const hugeStdioResult = 5 << 20 // past bigAnswer too

// TestStdioResultCap: a stdio server's line (one JSON-RPC message) longer
// than its MaxResultBytes is refused typed, ErrResultTooLarge naming the
// cap and the server, outcome unknown (the tool ran); the session is
// broken by it, so the process is restarted and the next call works on a
// new one. Under a cap above its size, the same result arrives whole.
func TestStdioResultCap(t *testing.T) {
	p := newTestPool(t, nil)
	srv := stdioServer("1")
	srv.MaxResultBytes = 1 << 20
	before := toolTextOf(mustCall(t, p, srv, "echo", "warm"))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := call(ctx, p, srv, "huge", "x")
	var tl *ResultTooLargeError
	if !errors.Is(err, ErrResultTooLarge) || !errors.As(err, &tl) {
		t.Fatalf("a %d-byte line under a cap of %d: %v (result %v), want ErrResultTooLarge", hugeStdioResult, srv.MaxResultBytes, err, res != nil)
	}
	if tl.Limit != srv.MaxResultBytes || tl.Server != srv.Name {
		t.Errorf("the error names cap %d of server %q, want %d of %q", tl.Limit, tl.Server, srv.MaxResultBytes, srv.Name)
	}
	if k := asPoolError(t, err).Kind; k != KindOutcomeUnknown {
		t.Errorf("kind %v, want outcome_unknown (the tool ran, its answer was not kept)", k)
	}
	after := toolTextOf(mustCall(t, p, srv, "echo", "after"))
	if pidOf(before) == pidOf(after) {
		t.Errorf("the session that met the over-cap line was kept (%q, then %q); want a new process", before, after)
	}

	big := stdioServer("1")
	big.Name, big.Env = "big", map[string]string{stdioServerEnv: "big"} // another process
	big.MaxResultBytes = 8 << 20
	osMemory.mu.Lock()
	osMemory.last = time.Time{} // whatever another test made it
	returned := osMemory.count
	osMemory.mu.Unlock()
	got := toolTextOf(mustCall(t, p, big, "huge", "y"))
	if len(got) != hugeStdioResult {
		t.Errorf("under a cap of %d: %d bytes of text, want %d", big.MaxResultBytes, len(got), hugeStdioResult)
	}
	osMemory.mu.Lock()
	after2 := osMemory.count
	osMemory.mu.Unlock()
	if after2 <= returned {
		t.Errorf("a %d-byte answer did not return memory to the OS (returns %d, then %d)", hugeStdioResult, returned, after2)
	}
}

// TestMemoryReturnIsRateLimited: at most one return per freeEvery, however
// many large answers.
func TestMemoryReturnIsRateLimited(t *testing.T) {
	now := time.Unix(1000, 0)
	freed := 0
	m := &memoryReturn{every: freeEvery, now: func() time.Time { return now }, free: func() { freed++ }}
	for range 5 {
		m.afterBigAnswer()
	}
	if freed != 1 {
		t.Fatalf("5 large answers at once: %d returns, want 1", freed)
	}
	now = now.Add(freeEvery - time.Millisecond)
	m.afterBigAnswer()
	now = now.Add(time.Millisecond)
	m.afterBigAnswer()
	if freed != 2 {
		t.Fatalf("after freeEvery: %d returns, want 2", freed)
	}
}

// toolTextOf is the text of a result's content.
func toolTextOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// pidOf is the pid an echo of the stdio test server ends with.
func pidOf(echo string) string {
	_, pid, _ := strings.Cut(echo, " pid ")
	return pid
}

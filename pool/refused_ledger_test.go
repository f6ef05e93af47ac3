package pool_test

import (
	"errors"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/pool"
)

// TestLedgerRefusalsAreRefused: the ledger's refusal of a key, a conflict
// (-32071) or an expired key (-32074), comes back as KindRefused with its
// own sentinel, not as a bare rpc error: nothing ran, the tool's executions
// say so, and the pool did not send it again.
func TestLedgerRefusalsAreRefused(t *testing.T) {
	ts, kr, _ := guarded(t)
	p := pool.New(nil)
	defer p.Close()
	srv := &pool.Server{Name: "s", URL: ts.URL()}

	key := idempotency.NewKey(time.Now())
	ctx := pool.WithIdempotencyKey(t.Context(), key)
	if _, err := p.CallTool(ctx, srv, echoCall("a")); err != nil {
		t.Fatal(err)
	}
	expired := idempotency.NewKey(time.Now().Add(-2 * idempotency.DefaultRetention))

	for _, tc := range []struct {
		name     string
		key      string
		call     string
		sentinel error
		code     int64
	}{
		{"conflict", key, "b", pool.ErrIdempotencyConflict, idempotency.CodeConflict},
		{"expired", expired, "c", pool.ErrKeyExpired, idempotency.CodeKeyExpired},
	} {
		before := len(kr.sent("echo"))
		_, err := p.CallTool(pool.WithIdempotencyKey(t.Context(), tc.key), srv, echoCall(tc.call))
		var pe *pool.Error
		if !errors.As(err, &pe) {
			t.Fatalf("%s: %v, want a *pool.Error", tc.name, err)
		}
		if pe.Kind != pool.KindRefused || !errors.Is(err, pool.ErrRefused) || !errors.Is(err, tc.sentinel) {
			t.Errorf("%s: kind %v, err %v; want refused matching ErrRefused and %v", tc.name, pe.Kind, err, tc.sentinel)
		}
		if errors.Is(err, pool.ErrRPC) || errors.Is(err, pool.ErrOutcomeUnknown) {
			t.Errorf("%s: %v matches ErrRPC or ErrOutcomeUnknown", tc.name, err)
		}
		if pe.Code != tc.code || pe.Message == "" {
			t.Errorf("%s: code %d message %q, want the server's %d", tc.name, pe.Code, pe.Message, tc.code)
		}
		if n := ts.Executions(tc.call); n != 0 {
			t.Errorf("%s: the tool ran %d times", tc.name, n)
		}
		if sent := len(kr.sent("echo")) - before; sent != 1 {
			t.Errorf("%s: sent %d times, want once", tc.name, sent)
		}
	}
	if st := p.Stats(); st.Conflicts != 1 || st.KeysExpired != 1 {
		t.Errorf("stats conflicts %d expired %d, want 1 and 1", st.Conflicts, st.KeysExpired)
	}
}

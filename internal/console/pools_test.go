package console

import (
	"testing"

	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// TestZeroPool: the page names a pool without traffic on one line; a pool
// whose only traffic is replays, or only a session, is not one.
func TestZeroPool(t *testing.T) {
	if zeroPool(studioapi.PoolInfo{Process: "x", Replays: 1}) {
		t.Fatal("a pool with only replays counts as no traffic")
	}
	if zeroPool(studioapi.PoolInfo{Process: "x", Protocols: map[string]int64{"2026-07-28": 1}}) {
		t.Fatal("a pool with a session counts as no traffic")
	}
	if !zeroPool(studioapi.PoolInfo{Process: "x"}) {
		t.Fatal("an empty pool counts as traffic")
	}
}

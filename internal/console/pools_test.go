package console

import (
	"strings"
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

// TestAgentPoolPanelSaysWhose: the agent page's pool panel names whose
// pool it is, and an agent that was called but called nobody is not told
// "no pool traffic yet" (its calls came through the studio's pool).
func TestAgentPoolPanelSaysWhose(t *testing.T) {
	render := func(d studioapi.AgentDetail) string {
		var b strings.Builder
		if err := pageTemplate.ExecuteTemplate(&b, "agent", agentPage{AgentDetail: d}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	called := studioapi.AgentDetail{AgentInfo: studioapi.AgentInfo{Name: "abacus"}, Pool: &studioapi.PoolInfo{Process: "abacus"},
		Calls: []studioapi.Delegation{{ID: 1, Agent: "abacus", Tool: "calculate", Outcome: "ok"}}}
	page := render(called)
	if !strings.Contains(page, `abacus's own pool, its calls out to siblings and servers:`) || strings.Contains(page, "no pool traffic yet") ||
		!strings.Contains(page, "no calls out yet (the calls to abacus below came through the studio's pool)") {
		t.Errorf("an agent with calls and an idle pool of its own:\n%s", between(page, `id="agent-pool"`, "</dd>"))
	}
	idle := called
	idle.Calls = nil
	if page := render(idle); !strings.Contains(page, "no pool traffic yet") {
		t.Errorf("an agent without calls:\n%s", between(page, `id="agent-pool"`, "</dd>"))
	}
}

// between is s from the first from to the next to.
func between(s, from, to string) string {
	_, rest, _ := strings.Cut(s, from)
	out, _, _ := strings.Cut(rest, to)
	return out
}

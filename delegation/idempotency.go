package delegation

// Idempotency keys of delegations (docs/IDEMPOTENCY.md). A delegation made
// while this agent serves a keyed call (its ask, say) carries a key derived
// from that call's key, the run and the model's tool call id: every resend
// of one delegation carries the same key, no two delegations share one, and
// a turn run again for the same keyed call sends its delegations with the
// keys they had, so a sibling answers them from its record instead of
// running them twice. Without a keyed call to derive from, the pool makes a
// fresh key per call, stable across its own resends.

import (
	"context"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/pool"
)

// OutcomeInterrupted: the sibling's process died while it ran the call; it
// may or may not have taken effect, and it was not run again.
const OutcomeInterrupted Outcome = "interrupted"

// replayNote ends the tool message of a delegation answered from the
// sibling's record, so the model knows this is not a second execution.
const replayNote = "\n\n(replayed: the agent had already run this call before its answer was lost; this is its recorded result, and it did not run again)"

// WithParentKey returns ctx as an agent's idempotency guard makes it for a
// tools/call carrying key: the delegations of a turn run under it carry
// keys derived from key, the run id and the model's tool call id. A
// program that runs turns for requests of its own, and may run one again
// after losing its answer, puts the request's key here (with the same
// chain run id each time) so that siblings answer the repeated
// delegations from their records instead of running them twice. Any
// non-empty string will do; it is hashed, never sent.
func WithParentKey(ctx context.Context, key string) context.Context {
	return idempotency.WithKey(ctx, key)
}

// delegationContext returns ctx carrying the delegation's derived key, when
// there is a keyed call to derive it from.
func delegationContext(ctx context.Context, chain Chain, c Call, t *Target) context.Context {
	parent, ok := idempotency.KeyFrom(ctx)
	if !ok {
		return ctx
	}
	created, _ := idempotency.KeyTime(parent) // zero for a caller's own key: the derived key is then untimed too
	return pool.WithIdempotencyKey(ctx, idempotency.DerivedKey(created, parent, chain.RunID, c.ID, t.Server.Name, t.Tool.Name))
}

// noteReplay marks a result that was a replay, for the model and the event.
func noteReplay(r *Result, ev *Event, info *pool.CallInfo) {
	if !info.Replayed {
		return
	}
	ev.Replayed = true
	if !r.IsError || r.Outcome == OutcomeToolError {
		r.Content += replayNote
	}
}

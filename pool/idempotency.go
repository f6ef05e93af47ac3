package pool

// Exactly once with servers that say they can (docs/IDEMPOTENCY.md).
//
// A server that advertises the run.switchboard/idempotency capability keeps
// a durable record per idempotency key and answers a repeated key from it
// without running the tool again. To such a server every tools/call carries
// a key unique to the logical call (the caller's, from WithIdempotencyKey,
// or a fresh one) and stable across every attempt; and a failure that would
// otherwise be outcome_unknown (or a transport failure, or a still-running
// answer) is sent again with the same key, at most maxKeyedAttempts times in
// all and within keyedWindow, with backoff, within the caller's deadline. The second send either
// runs the call for the first time or returns the first run's result marked
// as a replay; CallInfo says which.
//
// Every other server sees exactly what it saw before: no key, and the retry
// rule of classify.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/idempotency"
)

// maxKeyedAttempts and keyedWindow bound the sends of one keyed call. The
// key makes every send safe, so the bound is about time, not risk: long
// enough to outlast a restart of the server behind a proxy (a new process
// that takes seconds to listen on a loaded machine; with four sends, about
// 0.35 s of backoff, one call of 200 ran out of sends while nginx answered
// 502), short enough that a server failing every time does not hold the
// caller until its own deadline. No send starts once keyedWindow has passed
// since the first failure.
const (
	maxKeyedAttempts = 12
	keyedWindow      = 20 * time.Second
	// drainedWindow replaces keyedWindow once a draining server refused
	// the call (nothing ran): the agent's next process, or a rollout's new
	// replica, can take longer than 20 s to take work (Kubernetes waits up
	// to terminationGracePeriodSeconds, 30 s, for the old one), and a call
	// that never ran costs only its caller's time, within its deadline.
	drainedWindow = 60 * time.Second
	// maxDrainedAttempts bounds the sends within drainedWindow: at the
	// backoff's 2 s cap, about a minute of them.
	maxDrainedAttempts = 40
)

// Backoff between keyed attempts: keyedBackoff doubled per attempt, capped
// at keyedBackoffMax, with jitter of up to half, so callers cut off by one
// restart do not come back in lockstep.
const (
	keyedBackoff    = 100 * time.Millisecond
	keyedBackoffMax = 2 * time.Second
)

// Errors of the idempotency protocol, wrapped in an *Error that keeps the
// server's code and message: check with errors.Is.
var (
	// ErrInterrupted: the server's process died while running the call with
	// this key; whether it took effect is unknown, and it was not run again.
	// Its *Error is KindInterrupted (and matches ErrOutcomeUnknown); the
	// others below are KindRPC.
	ErrInterrupted = errors.New("the call was interrupted by a restart of the server; its outcome is unknown")
	// ErrIdempotencyConflict: the key was used before for a different call.
	ErrIdempotencyConflict = errors.New("idempotency key reused for a different call")
	// ErrKeyExpired: the key is older than the server keeps records for.
	ErrKeyExpired = errors.New("idempotency key expired")
)

type idempotencyKeyCtx struct{}

// WithIdempotencyKey returns a context under which CallTool sends key as the
// call's idempotency key to servers that support it, instead of a fresh
// one. Use one key per logical call, and the same key for every resend of
// it (delegation derives one from the run and the model's tool call id).
// A key is 1 to 200 characters of [A-Za-z0-9._:-]; our agents answer any
// other with an invalid-params error, and the tool does not run.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

// idemState is the pool's idempotency bookkeeping.
type idemState struct {
	capable sync.Map // key -> true: the server advertised the capability

	keyed, replays, keyedRetries, conflicts, interrupted, expired atomic.Int64
}

func (s *idemState) fill(st *Stats) {
	st.KeyedCalls = s.keyed.Load()
	st.Replays = s.replays.Load()
	st.KeyedRetries = s.keyedRetries.Load()
	st.Conflicts = s.conflicts.Load()
	st.Interrupted = s.interrupted.Load()
	st.KeysExpired = s.expired.Load()
}

// advertises reports whether the session's server offered the capability.
func advertises(cs *mcp.ClientSession) bool {
	res := cs.InitializeResult()
	if res == nil || res.Capabilities == nil {
		return false
	}
	_, ok := res.Capabilities.Experimental[idempotency.CapabilityName]
	return ok
}

// keyedCall is one CallTool's idempotency state, across its attempts.
type keyedCall struct {
	p       *Pool
	srv     *Server
	pk      key    // see poolKey
	pkSet   bool   // pk is worked out
	key     string // the idempotency key; made on first use
	sent    bool   // sent with the key at least once
	attempt int
	failed  time.Time // the first failure; see keyedWindow
	// unknown is the first send whose outcome was unknown (it may have
	// run). A later send that provably did not run (refused, not sent)
	// says nothing about it, so the call ends with this one's error.
	unknown *Error
	drained bool // a draining server refused a send (ErrShuttingDown)
	// took is how long the last attempt took, dial and handshake
	// included: about what the next one needs.
	took time.Duration
}

func (p *Pool) newKeyedCall(ctx context.Context, srv *Server) *keyedCall {
	c := &keyedCall{p: p, srv: srv}
	c.key, _ = ctx.Value(idempotencyKeyCtx{}).(string)
	return c
}

// poolKey is the call's pool key, worked out only when it is needed (a
// server that advertises the capability, or a failure): a call that
// succeeds on a server without it pays nothing here.
func (c *keyedCall) poolKey() key {
	if !c.pkSet {
		if c.srv != nil {
			c.pk = c.p.memo.key(c.srv)
		}
		c.pkSet = true
	}
	return c.pk
}

// paramsFor returns the params to send on e: with the key in _meta when e's
// server advertised the capability, else params unchanged.
func (c *keyedCall) paramsFor(e *entry, params *mcp.CallToolParams) *mcp.CallToolParams {
	if !advertises(e.cs) {
		return params
	}
	c.p.idem.capable.Store(c.poolKey(), true)
	if c.key == "" {
		c.key = idempotency.NewKey(time.Now())
	}
	if !c.sent {
		c.sent = true
		c.p.idem.keyed.Add(1)
	}
	cp := *params
	cp.Meta = maps.Clone(params.Meta)
	if cp.Meta == nil {
		cp.Meta = mcp.Meta{}
	}
	cp.Meta[idempotency.MetaKey] = c.key
	return &cp
}

// again decides whether to send the call once more after err, and waits
// the backoff if so. Only calls to a server that advertised the capability
// are ever sent again here; the rest keep classify's rule.
func (c *keyedCall) again(ctx context.Context, err error) bool {
	c.attempt++
	if err == nil || ctx.Err() != nil {
		return false
	}
	var pe *Error
	if !errors.As(err, &pe) {
		return false
	}
	if pe.Kind == KindTransport && errors.Is(err, ErrShuttingDown) {
		c.drained = true
	}
	if c.attempt >= maxKeyedAttempts && !c.drained || c.attempt >= maxDrainedAttempts {
		return false
	}
	if _, ok := c.p.idem.capable.Load(c.poolKey()); !ok && !(pe.Kind == KindTransport && c.drained) {
		// To a server not known to keep records, only what provably did
		// not run after a draining server's refusal is sent again: the
		// server said to come back (Retry-After), and until its next
		// process listens the resends are refused (nothing ran).
		return false
	}
	if pe.Kind == KindOutcomeUnknown && c.unknown == nil {
		c.unknown = pe
	}
	switch {
	case pe.Kind == KindOutcomeUnknown, pe.Kind == KindSessionExpired:
	case pe.Kind == KindTransport && !errors.Is(err, ErrClosed):
	case pe.Kind == KindRPC && pe.Code == idempotency.CodeStillRunning:
	default:
		return false
	}
	if !c.sent && pe.Kind != KindTransport {
		// Sent without a key (the session that carried it did not
		// advertise the capability): a resend could run it twice.
		return false
	}
	d := min(keyedBackoff<<(c.attempt-1), keyedBackoffMax)
	d = d/2 + rand.N(d/2+1)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d+2*c.took {
		// A resend the caller's deadline cuts off in flight would turn
		// what is known (a refusal: nothing ran) into "outcome unknown".
		// It needs about as long as the last attempt; twice that, for a
		// loaded machine.
		return false
	}
	window := keyedWindow
	if c.drained {
		window = drainedWindow
	}
	now := time.Now()
	if c.failed.IsZero() {
		c.failed = now
	} else if now.Add(d).Sub(c.failed) > window {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return false
	case <-c.p.closeNow:
		return false // the pool is closing: the resend would fail with ErrClosed
	}
	c.p.idem.keyedRetries.Add(1)
	c.p.log.DebugContext(ctx, "sending a keyed call again", "attempt", c.attempt+1, "cause", err)
	return true
}

// finish records the outcome of the call in CallInfo and Stats, and gives
// the protocol's errors their sentinels.
func (c *keyedCall) finish(ctx context.Context, res *mcp.CallToolResult, err error) error {
	if info := callInfoFrom(ctx); info != nil {
		info.IdempotencyKey, info.KeyedAttempts, info.Replayed = "", 0, false
		if c.sent {
			info.IdempotencyKey, info.KeyedAttempts = c.key, c.attempt // again counted every send
		}
	}
	if err == nil {
		if res != nil && res.Meta[idempotency.ReplayMetaKey] == true {
			c.p.idem.replays.Add(1)
			if info := callInfoFrom(ctx); info != nil {
				info.Replayed = true
			}
		}
		return nil
	}
	var pe *Error
	if !errors.As(err, &pe) {
		return err
	}
	if c.unknown != nil && pe != c.unknown && (pe.Kind == KindTransport || pe.Kind == KindSessionExpired || pe.Kind == KindRPC && pe.Code == idempotency.CodeStillRunning) {
		// The last send did not run (or found the first still running),
		// but an earlier one may have: the call's outcome is that one's.
		u := *c.unknown
		u.Retried = u.Retried || pe.Retried
		u.Err = fmt.Errorf("%w (sent again with its idempotency key, %d sends in all; the last: %v)", u.Err, c.attempt, pe)
		return &u
	}
	if pe.Kind != KindRPC {
		return err
	}
	var sentinel error
	switch pe.Code {
	case idempotency.CodeInterrupted:
		sentinel = ErrInterrupted
		pe.Kind = KindInterrupted
		c.p.idem.interrupted.Add(1)
	case idempotency.CodeConflict:
		sentinel = ErrIdempotencyConflict
		c.p.idem.conflicts.Add(1)
	case idempotency.CodeKeyExpired:
		sentinel = ErrKeyExpired
		c.p.idem.expired.Add(1)
	default:
		return err
	}
	pe.Err = fmt.Errorf("%w: %w", sentinel, pe.Err)
	return err
}

// Package ledger is the receiving side of Switchboard's idempotency
// (docs/IDEMPOTENCY.md): the durable ledger of the calls an agent has run
// (ledger.go, SQLite) and the guard, a go-sdk receiving middleware that
// answers a repeated key from it (guard.go). The wire names and the key
// format are in package idempotency above.
package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/internal/idempotency"
)

// The guard is a go-sdk receiving middleware. It advertises the capability
// in initialize and server/discover results, and stands in front of every
// tools/call that carries a key:
//
//   - a tool annotated readOnlyHint (registered with Pure) just runs: a
//     repeat recomputes, which is what the hint promises is harmless;
//   - a transactional tool (registered with Transactional) is looked up in
//     its own record table, and run with the Call in its context when the
//     key is new; the tool commits the record with its effect;
//   - every other tool is recorded as running in the Ledger before it runs
//     and its result after, both committed.
//
// Within one process, calls with one key run one at a time: a repeat waits
// (at most GuardOptions.Wait) for the first and then answers from its
// record, so the tool never runs twice concurrently either.

// GuardOptions configure NewGuard. The zero value of every field means its
// default.
type GuardOptions struct {
	Wait   time.Duration // default DefaultWait
	Logger *slog.Logger  // default: discard
}

// Guard answers repeated idempotency keys from the records of their first
// call. Make one with NewGuard.
type Guard struct {
	ledger *Ledger
	wait   time.Duration
	log    *slog.Logger

	mu      sync.Mutex // protects following
	tx      map[string]TxLedger
	pure    map[string]bool
	flights map[string]chan struct{} // key -> closed when the call in this process ends
	resume  map[string]Resumer       // tool -> decides whether an interrupted call goes on

	replays, conflicts, interrupted, stillRunning, expired, recorded, resumed atomic.Int64
}

// A Resumer reports whether the interrupted call with key can go on from
// where it was cut off (a run journal holds its progress), rather than be
// answered interrupted. It must not run anything: it only looks.
type Resumer func(ctx context.Context, key string) bool

// GuardStats counts what the guard answered since it was made.
type GuardStats struct {
	Recorded     int64 `json:"recorded"`      // keyed calls run for the first time
	Replays      int64 `json:"replays"`       // answered from a record; the tool did not run
	Conflicts    int64 `json:"conflicts"`     // key reused for a different request
	Interrupted  int64 `json:"interrupted"`   // key of a call a crash cut off
	StillRunning int64 `json:"still_running"` // key of a call still running past the wait
	Expired      int64 `json:"expired"`       // key older than the retention
	Resumed      int64 `json:"resumed"`       // interrupted call that went on from its journal
}

// NewGuard returns a guard recording in l.
func NewGuard(l *Ledger, opts *GuardOptions) *Guard {
	g := &Guard{ledger: l, wait: idempotency.DefaultWait, log: slog.New(slog.DiscardHandler),
		tx: map[string]TxLedger{}, pure: map[string]bool{}, flights: map[string]chan struct{}{}, resume: map[string]Resumer{}}
	if opts != nil && opts.Wait > 0 {
		g.wait = opts.Wait
	}
	if opts != nil && opts.Logger != nil {
		g.log = opts.Logger
	}
	return g
}

// Transactional declares tool transactional, recording in its own l.
func (g *Guard) Transactional(tool string, l TxLedger) {
	g.mu.Lock()
	g.tx[tool] = l
	g.mu.Unlock()
}

// Pure declares tool free of effects (readOnlyHint): a repeat recomputes.
func (g *Guard) Pure(tool string) {
	g.mu.Lock()
	g.pure[tool] = true
	g.mu.Unlock()
}

// Resumable declares tool resumable: a call of it that a crash
// interrupted is run again under its key when can says it can go on from
// where it was (the tool itself then resumes, not restarts: the ask tool
// replays its run journal), instead of being answered interrupted
// (-32073). Only the same request (fingerprint) is resumed.
func (g *Guard) Resumable(tool string, can Resumer) {
	g.mu.Lock()
	g.resume[tool] = can
	g.mu.Unlock()
}

// Capability is what the guard advertises.
func (g *Guard) Capability() idempotency.CapabilityInfo {
	return idempotency.CapabilityInfo{Version: idempotency.Version, RetentionSeconds: int64(g.ledger.Retention() / time.Second), MaxRecords: g.ledger.MaxRecords()}
}

// Stats reports the guard's counters.
func (g *Guard) Stats() GuardStats {
	return GuardStats{
		Recorded: g.recorded.Load(), Replays: g.replays.Load(), Conflicts: g.conflicts.Load(),
		Interrupted: g.interrupted.Load(), StillRunning: g.stillRunning.Load(), Expired: g.expired.Load(),
		Resumed: g.resumed.Load(),
	}
}

// A Call is the keyed call a transactional tool is asked to record with its
// effect.
type Call struct {
	Key, Tool, Fingerprint string
}

type callKey struct{}

// CallFrom returns the Call of a transactional tool's request, if any.
func CallFrom(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(callKey{}).(Call)
	return c, ok
}

// WithCall returns ctx carrying c, for tests of transactional tools.
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// Middleware is the guard as a go-sdk receiving middleware.
func (g *Guard) Middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/call":
			return g.call(ctx, method, req, next)
		case "initialize", "server/discover":
			res, err := next(ctx, method, req)
			switch r := res.(type) {
			case *mcp.InitializeResult:
				r.Capabilities = g.advertise(r.Capabilities)
			case *mcp.DiscoverResult:
				r.Capabilities = g.advertise(r.Capabilities)
			}
			return res, err
		}
		return next(ctx, method, req)
	}
}

func (g *Guard) advertise(c *mcp.ServerCapabilities) *mcp.ServerCapabilities {
	if c == nil {
		c = &mcp.ServerCapabilities{}
	}
	// go-sdk builds the capabilities afresh for every answer (a clone of
	// the configured ones), so adding to the map here changes no shared
	// state; the clone is shallow, so the map itself is copied.
	exp := make(map[string]any, len(c.Experimental)+1)
	for k, v := range c.Experimental {
		exp[k] = v
	}
	exp[idempotency.CapabilityName] = g.Capability()
	c.Experimental = exp
	return c
}

func (g *Guard) call(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	params, ok := req.GetParams().(*mcp.CallToolParamsRaw)
	if !ok || params == nil {
		return next(ctx, method, req)
	}
	key, found, err := idempotency.KeyFromMeta(params.Meta)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	if !found {
		return next(ctx, method, req)
	}
	ctx = idempotency.WithKey(ctx, key)
	tool := params.Name
	g.mu.Lock()
	pure, txl := g.pure[tool], g.tx[tool]
	g.mu.Unlock()
	if pure {
		return next(ctx, method, req)
	}
	var cred string
	if extra := req.GetExtra(); extra != nil && extra.Header != nil {
		cred = extra.Header.Get("Authorization")
	}
	fp, err := idempotency.Fingerprint(tool, params.Arguments, cred)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	created, timed := idempotency.KeyTime(key)
	if timed && g.ledger.opts.Now().Sub(created) > g.ledger.Retention() {
		g.expired.Add(1)
		return nil, expiredError(key, created, g.ledger.Retention())
	}

	release, err := g.enter(ctx, key, tool)
	if err != nil {
		return nil, err
	}
	defer release()

	if txl != nil {
		if kl, ok := txl.(KeyLocker); ok {
			// Shared by replicas: the in-process flight above does not
			// keep another replica from running the same key now.
			unlock, err := g.lockKey(ctx, kl, key, tool)
			if err != nil {
				return nil, err
			}
			defer unlock()
		}
		rec, err := txl.Lookup(ctx, tool, key)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the call to %s did not run: looking up its idempotency key: %v", tool, err)}
		}
		if rec != nil {
			return g.answer(rec, key, fp)
		}
		g.recorded.Add(1)
		return next(WithCall(ctx, Call{Key: key, Tool: tool, Fingerprint: fp}), method, req)
	}

	rec, err := g.ledger.Begin(ctx, key, tool, fp)
	if err == nil && rec != nil && rec.State == StateRunning && rec.Incarnation != g.ledger.Incarnation() && rec.Fingerprint == fp {
		rec, err = g.awaitReplica(ctx, key, tool, fp)
	}
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the call to %s did not run: %v", tool, err)}
	}
	if rec != nil {
		if !g.resumes(ctx, rec, tool, key, fp) {
			return g.answer(rec, key, fp)
		}
		g.resumed.Add(1)
		g.log.Info("resuming an interrupted call", "tool", tool)
		return g.run(ctx, method, req, next, key, tool)
	}
	if timed && !created.After(g.ledger.Horizon()) {
		// A record of this key may have been evicted for space: refuse
		// rather than risk running it twice.
		g.abandon(key)
		g.expired.Add(1)
		return nil, expiredError(key, created, g.ledger.Retention())
	}
	g.recorded.Add(1)
	return g.run(ctx, method, req, next, key, tool)
}

// resumes reports whether rec, a call a crash interrupted, goes on now:
// the same request, a tool declared Resumable that says it can, and the
// record taken over by this process (so a crash now leaves it
// interrupted again, and a concurrent repeat sees it running).
func (g *Guard) resumes(ctx context.Context, rec *Record, tool, key, fp string) bool {
	if rec.Fingerprint != fp || rec.Tool != tool || rec.State == StateDone {
		return false
	}
	if rec.State != StateInterrupted && rec.Incarnation == g.ledger.Incarnation() {
		return false // running in this process
	}
	g.mu.Lock()
	can := g.resume[tool]
	g.mu.Unlock()
	if can == nil || !can(ctx, key) {
		return false
	}
	ok, err := g.ledger.Reclaim(ctx, key)
	if err != nil {
		g.log.Error("taking over an interrupted call failed; answering interrupted", "tool", tool, "err", err)
		return false
	}
	return ok
}

type cutOffKey struct{}

// CutOff tells the guard that the keyed call of ctx (a tool running under
// it) was cut off by its own process's shutdown and keeps its progress
// itself (the ask tool's run journal): what the tool returns is not the
// call's outcome. The guard then neither records it nor forgets the key:
// the record stays running, as a crash leaves it, so that a repeat in this
// process is still running and the next process finds it interrupted and,
// for a tool declared Resumable that can go on, resumes it. It reports
// whether ctx was a keyed call under a guard.
func CutOff(ctx context.Context) bool {
	cut, ok := ctx.Value(cutOffKey{}).(*atomic.Bool)
	if ok {
		cut.Store(true)
	}
	return ok
}

// run runs a call whose record is running in this process, and records
// its result.
func (g *Guard) run(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler, key, tool string) (mcp.Result, error) {
	cut := new(atomic.Bool)
	res, err := next(context.WithValue(ctx, cutOffKey{}, cut), method, req)
	if cut.Load() {
		g.log.Info("a call cut off by its process's shutdown is left unfinished: the next process resumes it or answers interrupted", "tool", tool)
		return res, err
	}
	if err != nil {
		// A JSON-RPC error from below (unknown tool, invalid arguments, a
		// refused chain): go-sdk answers those before the handler runs.
		g.abandon(key)
		return res, err
	}
	if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.InputRequests != nil {
		// Not an answer but a question (SEP-2322, multi round-trip: the
		// tool needs input first, and holds no effect until it has it).
		// The caller sends the call again, with the same key and its
		// inputResponses; recorded, that retry would be answered with
		// this question again, for ever. In the session era go-sdk asks
		// and re-runs the handler below this middleware, so only a caller
		// of 2026-07-28 brings this here.
		g.abandon(key)
		return res, nil
	}
	raw, err := json.Marshal(res)
	if err == nil {
		// The result is committed before it is answered, on a context
		// that the caller's cancellation does not end: the tool ran.
		err = g.ledger.Finish(context.WithoutCancel(ctx), key, raw)
	}
	if err != nil {
		// The record stays running: a repeat gets still-running from this
		// process and interrupted from the next, never a second run.
		g.log.Error("recording a call's result failed", "tool", tool, "err", err)
	}
	return res, nil
}

// Polling bounds for awaitReplica.
const (
	replicaPollFirst = 10 * time.Millisecond
	replicaPollMax   = 250 * time.Millisecond
)

// awaitReplica waits, at most g.wait, for the call with key that another
// live replica of a shared ledger runs, as enter waits for one of this
// process's: it asks the ledger again, more and more rarely, until the
// record is no longer running (or is gone, and this process claimed it:
// then it returns nil, and the call runs here). Past the wait it returns
// the record still running.
func (g *Guard) awaitReplica(ctx context.Context, key, tool, fp string) (*Record, error) {
	timer := time.NewTimer(g.wait)
	defer timer.Stop()
	for interval := replicaPollFirst; ; interval = min(2*interval, replicaPollMax) {
		poll := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			poll.Stop()
			return nil, ctx.Err()
		case <-timer.C:
			poll.Stop()
			return g.ledger.Begin(ctx, key, tool, fp)
		case <-poll.C:
		}
		rec, err := g.ledger.Begin(ctx, key, tool, fp)
		if err != nil || rec == nil || rec.State != StateRunning {
			return rec, err
		}
	}
}

// lockKey takes kl's lock on key, waiting at most g.wait.
func (g *Guard) lockKey(ctx context.Context, kl KeyLocker, key, tool string) (func(), error) {
	wctx, cancel := context.WithTimeout(ctx, g.wait)
	defer cancel()
	unlock, err := kl.LockKey(wctx, key)
	switch {
	case err == nil:
		return unlock, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		g.stillRunning.Add(1)
		return nil, stillRunningError(key, tool, g.wait)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the call to %s did not run: %v", tool, err)}
}

func (g *Guard) abandon(key string) {
	if err := g.ledger.Abandon(context.Background(), key); err != nil {
		g.log.Error("forgetting an idempotency key failed", "err", err)
	}
}

// enter waits until no other call with key runs in this process, at most
// g.wait, and claims the key.
func (g *Guard) enter(ctx context.Context, key, tool string) (release func(), err error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		g.mu.Lock()
		done, busy := g.flights[key]
		if !busy {
			done = make(chan struct{})
			g.flights[key] = done
			g.mu.Unlock()
			return func() {
				g.mu.Lock()
				delete(g.flights, key)
				g.mu.Unlock()
				close(done)
			}, nil
		}
		g.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(g.wait)
		}
		select {
		case <-done:
		case <-timer.C:
			g.stillRunning.Add(1)
			return nil, stillRunningError(key, tool, g.wait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// answer answers a repeated key from its record.
func (g *Guard) answer(rec *Record, key, fp string) (mcp.Result, error) {
	if rec.Fingerprint != fp {
		g.conflicts.Add(1)
		return nil, conflictError(key)
	}
	switch {
	case rec.State == StateDone:
		var res mcp.CallToolResult
		if err := json.Unmarshal(rec.Result, &res); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the recorded result of idempotency key %q cannot be read: %v", key, err)}
		}
		if res.Meta == nil {
			res.Meta = mcp.Meta{}
		}
		res.Meta[idempotency.ReplayMetaKey] = true
		g.replays.Add(1)
		return &res, nil
	case rec.State == StateInterrupted:
		// The ledger reports a running record of a process that is gone
		// (a previous process on SQLite; on PostgreSQL, any whose owner
		// lock is free) as interrupted; a running record is this
		// process's, or a live replica's.
		g.interrupted.Add(1)
		return nil, &jsonrpc.Error{Code: idempotency.CodeInterrupted, Message: fmt.Sprintf(
			"the call to %s with idempotency key %q was interrupted by a restart of the server while it ran (started %s); whether it took effect is unknown, and it is not run again",
			rec.Tool, key, rec.Created.UTC().Format(time.RFC3339))}
	default:
		g.stillRunning.Add(1)
		return nil, stillRunningError(key, rec.Tool, g.wait)
	}
}

// conflictError refuses key for a call whose fingerprint differs from the
// recorded one. The fingerprint covers the caller's credential, so the
// caller may be somebody else than the one who used the key: the message
// says only that the key cannot be used for this call, the same whether
// the tool, the arguments or the credential differ, and never names the
// recorded call's tool or when it ran. (The code still tells the caller
// that it cannot use the key, as any refusal would; what the key was used
// for stays with whoever used it.)
func conflictError(key string) error {
	return &jsonrpc.Error{Code: idempotency.CodeConflict, Message: fmt.Sprintf(
		"idempotency key %q cannot be used for this call; nothing ran (send every new call with a new key)", key)}
}

func stillRunningError(key, tool string, waited time.Duration) error {
	data, _ := json.Marshal(map[string]any{"retryAfterMs": 500})
	return &jsonrpc.Error{Code: idempotency.CodeStillRunning, Message: fmt.Sprintf(
		"the call to %s with idempotency key %q is still running (waited %v); ask again later", tool, key, waited), Data: data}
}

func expiredError(key string, created time.Time, retention time.Duration) error {
	return &jsonrpc.Error{Code: idempotency.CodeKeyExpired, Message: fmt.Sprintf(
		"idempotency key %q (created %s) is older than this server keeps records for (%v, or evicted for space); it is refused, not run",
		key, created.UTC().Format(time.RFC3339), retention)}
}

// ErrCode reports the idempotency code of err, if it is one of this
// protocol's JSON-RPC errors.
func ErrCode(err error) (int64, bool) {
	var w *jsonrpc.Error
	if !errors.As(err, &w) {
		return 0, false
	}
	switch w.Code {
	case idempotency.CodeConflict, idempotency.CodeStillRunning, idempotency.CodeInterrupted, idempotency.CodeKeyExpired:
		return w.Code, true
	}
	return 0, false
}

package agentserver

// Drain: stopping a replica without losing calls.
//
// A balancer (or Kubernetes) stops sending new work to a replica whose
// /readyz fails, and a client sends a refused request elsewhere only when
// the refusal proves that nothing ran. So on SIGTERM the server first
// drains (Server.Drain): /readyz answers 503 at once, a new session
// (initialize) or a new tools/call gets 503 with Retry-After and the
// JSON-RPC error CodeShuttingDown, and the calls already admitted run to
// their end. Everything else (tools/list, ping, notifications, DELETE, the
// GET stream) is still served: it starts no work, and a client finishing
// its calls may need it.
//
// Two counts decide when the server is idle, under one lock:
//
//   - admitted: the tools/call POSTs the HTTP gate let in and that have not
//     been answered yet. The gate decides and counts in one critical
//     section, so there is no moment at which a call has passed the check
//     but is not counted (STYLE.md: decide and reserve in one section).
//   - running: the tools/call handlers (receiving middleware) still
//     running, each with the cancel of its context. In the session era a
//     handler's context is the session's, not the HTTP request's, so this
//     is the only way to cancel one; it also covers the ask tool's calls to
//     its own native tools, which never pass the HTTP gate.
//
// When the grace ends (Serve's ShutdownGrace), the calls still running are
// cancelled with the cause ErrGraceEnded; each caller gets CodeShuttingDown
// naming it, and the idempotency guard (inside) sees the tool end under a
// cancelled context, as it does when a caller cancels.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/rpccode"
)

// CodeShuttingDown is the JSON-RPC error of a request the agent refused or
// cut because it is shutting down (rpccode.ShuttingDown). With HTTP 503 and
// Retry-After (a new initialize or tools/call while draining) nothing ran:
// the request may be sent to another replica, or again later, and the pool
// does so. In a 200 answer to a call it admitted, the call ran until the
// shutdown grace ended and was cancelled: whether it took effect is unknown.
const CodeShuttingDown = rpccode.ShuttingDown

// DefaultShutdownGrace is how long a draining agent lets the calls in flight
// run before it cancels them: within Kubernetes' default
// terminationGracePeriodSeconds (30 s), with time left to answer and exit.
const DefaultShutdownGrace = 25 * time.Second

// EnvShutdownGrace, when set, is `agent serve`'s default --shutdown-grace
// (a Go duration, e.g. 25s).
const EnvShutdownGrace = "SWITCHBOARD_SHUTDOWN_GRACE"

// drainRetryAfter is the Retry-After of a refusal while draining, in
// seconds: a balancer or a pool that sends it elsewhere needs no wait; one
// that waits for this replica to come back should not hammer it.
const drainRetryAfter = 1

// cutAnswerTimeout bounds how long Serve waits, after cancelling the calls
// left at the end of the grace, for their callers to be answered.
const cutAnswerTimeout = 5 * time.Second

// ErrShuttingDown is why a drained server refuses new work.
var ErrShuttingDown = errors.New("the agent is shutting down")

// ErrGraceEnded is the cause with which the calls still running at the end
// of the shutdown grace are cancelled (context.Cause of a tool's context).
var ErrGraceEnded = errors.New("the agent's shutdown grace ended while the call ran")

// ErrAborted is returned by Serve when Abort was closed while it drained:
// the calls still running were cancelled without waiting out the grace.
var ErrAborted = errors.New("shutdown aborted: stopped without waiting for the calls in flight")

type drainer struct {
	name string

	mu       sync.Mutex // protects following fields
	draining bool
	cause    error                     // non-nil once the calls were cut: new handlers start cancelled
	why      string                    // why the calls were cut, for their callers
	admitted int                       // tools/call POSTs admitted and not yet answered
	running  map[*runningCall]struct{} // tools/call handlers running
	idle     chan struct{}             // closed, once draining, when admitted and running are zero; nil before
}

type runningCall struct{ cancel context.CancelCauseFunc }

func newDrainer(name string) *drainer {
	return &drainer{name: name, running: make(map[*runningCall]struct{})}
}

// start begins draining; it is idempotent. It reports the tools/call
// requests in flight at that moment.
func (d *drainer) start() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.draining {
		d.draining = true
		d.idle = make(chan struct{})
		d.checkIdleLocked()
	}
	return d.inFlightLocked()
}

func (d *drainer) isDraining() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.draining
}

func (d *drainer) inFlight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inFlightLocked()
}

// inFlightLocked is the larger of the two counts: a call the gate admitted
// is usually also running; a native call of an ask is only running.
func (d *drainer) inFlightLocked() int { return max(d.admitted, len(d.running)) }

// checkIdleLocked closes idle once nothing is in flight while draining.
func (d *drainer) checkIdleLocked() {
	if d.draining && d.admitted == 0 && len(d.running) == 0 {
		select {
		case <-d.idle:
		default:
			close(d.idle)
		}
	}
}

// admit counts one tools/call POST, unless the server is draining.
func (d *drainer) admit() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		return false
	}
	d.admitted++
	return true
}

func (d *drainer) answered() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.admitted--; d.admitted < 0 {
		panic("agentserver: drain: more calls answered than admitted")
	}
	d.checkIdleLocked()
}

// wait returns nil once nothing is in flight, or ctx's error, or
// ErrAborted once abort is closed. Call start first.
func (d *drainer) wait(ctx context.Context, abort <-chan struct{}) error {
	d.mu.Lock()
	idle := d.idle
	d.mu.Unlock()
	if idle == nil {
		panic("agentserver: drain: wait before start")
	}
	select {
	case <-idle:
		return nil
	case <-abort:
		return ErrAborted
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cut cancels every call still running with cause (ErrGraceEnded or
// ErrAborted), and every one that starts from now on; why is for their
// callers. It returns how many it cancelled. The cancels run after the lock
// is released: a context's cancellation runs its AfterFuncs.
func (d *drainer) cut(cause error, why string) int {
	d.mu.Lock()
	d.cause, d.why = cause, why
	calls := make([]*runningCall, 0, len(d.running))
	for c := range d.running {
		calls = append(calls, c)
	}
	d.mu.Unlock()
	for _, c := range calls {
		c.cancel(cause)
	}
	return len(calls)
}

// gate wraps the MCP handler, behind the mcphttp middleware (which has
// parsed the message): while draining, a new initialize or tools/call is
// refused before go-sdk sees it; a tools/call admitted is counted until it
// is answered.
func (d *drainer) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, ok := mcphttp.MessageFrom(r.Context())
		if r.Method != http.MethodPost || !ok {
			next.ServeHTTP(w, r)
			return
		}
		switch m.Method {
		case "tools/call":
			if !d.admit() {
				d.refuse(w, m, "calls")
				return
			}
			defer d.answered()
		case "initialize":
			if d.isDraining() {
				d.refuse(w, m, "sessions")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers a request the draining server does not take: 503, so that
// a balancer sends it elsewhere, with the request's own id (the server knows
// it: the body was parsed) and CodeShuttingDown.
func (d *drainer) refuse(w http.ResponseWriter, m *mcphttp.Message, what string) {
	w.Header().Set("Retry-After", strconv.Itoa(drainRetryAfter))
	mcphttp.WriteJSONRPCErrorData(w, http.StatusServiceUnavailable, m.ID, CodeShuttingDown,
		fmt.Sprintf("agent %s is shutting down and takes no new %s; nothing ran: send it to another replica, or again once the agent is back", d.name, what),
		map[string]any{"agent": d.name, "shuttingDown": true, "retryAfterMs": drainRetryAfter * 1000})
}

// middleware tracks every tools/call handler with the cancel of its
// context, and answers one that the shutdown cut with CodeShuttingDown.
func (d *drainer) middleware() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			ctx, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			c := &runningCall{cancel: cancel}
			d.mu.Lock()
			d.running[c] = struct{}{}
			cause := d.cause
			d.mu.Unlock()
			defer func() {
				d.mu.Lock()
				delete(d.running, c)
				d.checkIdleLocked()
				d.mu.Unlock()
			}()
			if cause != nil {
				cancel(cause)
			}
			res, err := next(ctx, method, req)
			var own *jsonrpc.Error
			if errors.As(err, &own) && (own.Code == CodeShuttingDown || own.Code == idempotency.CodeStillRunning) {
				// The tool (the ask, whose run its journal keeps: journal.go)
				// said itself what became of the call, and what to do next.
				return res, err
			}
			if cause := context.Cause(ctx); errors.Is(cause, ErrGraceEnded) || errors.Is(cause, ErrAborted) {
				d.mu.Lock()
				why := d.why
				d.mu.Unlock()
				tool := ""
				if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil {
					tool = p.Name
				}
				return nil, &jsonrpc.Error{Code: CodeShuttingDown, Message: fmt.Sprintf(
					"agent %s shut down while the call to %s ran: %s, and the call was cancelled; whether it took effect is unknown",
					d.name, tool, why)}
			}
			return res, err
		}
	}
}

// Drain makes the server refuse new sessions and new tools/calls (503,
// CodeShuttingDown) and fail Ready, while the calls in flight go on. It is
// idempotent and cannot be undone. It returns the calls in flight.
func (s *Server) Drain() int { return s.drain.start() }

// Draining reports whether Drain was called.
func (s *Server) Draining() bool { return s.drain.isDraining() }

// CallsInFlight reports the tools/call requests being served.
func (s *Server) CallsInFlight() int { return s.drain.inFlight() }

// Ready reports why the server does not take new work, or nil: it is
// draining (ErrShuttingDown), or its stores (the toolsets' and the
// idempotency ledger) are closed (ErrClosed).
func (s *Server) Ready() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.drain.isDraining() {
		return ErrShuttingDown
	}
	return nil
}

// ErrClosed is Ready's answer once the Server is closed.
var ErrClosed = errors.New("the agent's stores are closed")

// serveReadyz is GET /readyz: 200 while Ready, else 503, with a short JSON
// body that says which. Like /healthz it needs no token and names nothing
// secret: a probe (a kubelet, a balancer) has none to send.
func (s *Server) serveReadyz(w http.ResponseWriter, r *http.Request) {
	if err := s.Ready(); err != nil {
		status := "draining"
		if errors.Is(err, ErrClosed) {
			status = "closed"
		}
		mcphttp.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": status, "error": err.Error()})
		return
	}
	mcphttp.WriteJSON(w, http.StatusOK, map[string]any{"status": "ready"})
}

package pool

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Progress. A call made under WithProgress carries a progress token of the
// pool's own, and the server's notifications/progress for that token reach
// the caller's function. A route is keyed by (session, token): a
// notification is delivered only when it arrives on the session the call was
// sent on, so no server (and no other identity's session) can inject progress
// into another caller's call by guessing its token.
//
// go-sdk retires a call when its response is read, but hands notifications
// read before it to a handler goroutine of its own, so one the server sent
// before its response can be handled after the call has returned. A finished
// call's route therefore lingers for progressLinger, then is deleted: the
// routes live are those of calls running plus those ended within the last
// progressLinger, whatever the call rate. Lingering routes are kept in the
// order they ended (the linger is constant, so that is also the order they
// expire in) and one timer for the whole pool deletes them.

type progressKey struct{}

// WithProgress returns a context under which CallTool asks the server for
// progress notifications (it sets a progress token of its own) and passes
// each one to fn as it arrives. fn must not block for long: it runs on the
// session's notification path. It may be called for up to two seconds
// after CallTool returned, for notifications the server sent before its
// answer.
func WithProgress(ctx context.Context, fn func(*mcp.ProgressNotificationParams)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// progressLinger is how long a finished call's progress route keeps
// routing (WithProgress documents it as two seconds).
const progressLinger = 2 * time.Second

type route struct {
	e     *entry
	token string
}

type ended struct {
	r  route
	at time.Time // when it is deleted
}

// progressRoutes is the pool's table of progress routes.
type progressRoutes struct {
	mu     sync.Mutex // protects the fields below
	fns    map[route]func(*mcp.ProgressNotificationParams)
	ended  []ended     // routes of finished calls, oldest first
	timer  *time.Timer // deletes the oldest ended routes; nil when none
	closed bool
}

// progressToken returns a fresh token when ctx asks for progress, and the
// caller's function.
func (p *Pool) progressToken(ctx context.Context) (string, func(*mcp.ProgressNotificationParams)) {
	fn, ok := ctx.Value(progressKey{}).(func(*mcp.ProgressNotificationParams))
	if !ok || fn == nil {
		return "", nil
	}
	return "switchboard-" + strconv.FormatUint(p.tokenID.Add(1), 10), fn
}

// add routes token's notifications on e's session to fn.
func (r *progressRoutes) add(e *entry, token string, fn func(*mcp.ProgressNotificationParams)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if r.fns == nil {
		r.fns = make(map[route]func(*mcp.ProgressNotificationParams))
	}
	r.fns[route{e, token}] = fn
}

// end schedules the deletion of a finished call's route.
func (r *progressRoutes) end(e *entry, token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.ended = append(r.ended, ended{route{e, token}, time.Now().Add(progressLinger)})
	if r.timer == nil {
		r.timer = time.AfterFunc(progressLinger, r.expire)
	}
}

func (r *progressRoutes) expire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	now := time.Now()
	n := 0
	for n < len(r.ended) && !r.ended[n].at.After(now) {
		delete(r.fns, r.ended[n].r)
		n++
	}
	r.ended = append(r.ended[:0], r.ended[n:]...)
	if len(r.ended) == 0 {
		r.timer = nil
		return
	}
	r.timer.Reset(r.ended[0].at.Sub(now))
}

// close drops every route, for Pool.Close.
func (r *progressRoutes) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.fns, r.ended = nil, nil
}

// len is the number of routes, for tests.
func (r *progressRoutes) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.fns)
}

func (r *progressRoutes) route(e *entry, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		token = fmt.Sprint(req.Params.ProgressToken)
	}
	r.mu.Lock()
	fn := r.fns[route{e, token}]
	r.mu.Unlock()
	if fn != nil {
		fn(req.Params)
	}
}

// withMeta returns a copy of params whose _meta also holds kv; the caller's
// params and _meta are not modified.
func withMeta(params *mcp.CallToolParams, kv map[string]string) *mcp.CallToolParams {
	c := *params
	c.Meta = maps.Clone(params.Meta)
	if c.Meta == nil {
		c.Meta = mcp.Meta{}
	}
	for k, v := range kv {
		c.Meta[k] = v
	}
	return &c
}

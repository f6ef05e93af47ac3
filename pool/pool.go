package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"
)

// maxRetries bounds how often one request is sent again on a new session. A
// request is retried only when it provably did not run (see classify), and
// never on a session dialed for the retry itself: a second failure means the
// server is not behaving, and looping would hide it.
const maxRetries = 1

// Test hooks, set by the package's own tests.
var (
	testHookClose        = func(inUse int) {} // a close starts; called with p.mu held
	testHookCleanerSwept = func() {}          // the idle cleaner finished a sweep
	testHookAwaitNotices = func(n int) {}     // a close waits for n cancel notices
)

// Options configure a Pool. The zero value of every field means its default.
type Options struct {
	IdleTimeout  time.Duration // idle entries are closed after this; default 5m; negative: never
	DialTimeout  time.Duration // bound on connect+initialize; default 30s
	CloseTimeout time.Duration // bound on a background close; default 10s
	ToolsTTL     time.Duration // tools/list cache lifetime; default 1m; negative: no cache
	HTTPClient   *http.Client  // its Transport carries every request; default http.DefaultTransport
	Logger       *slog.Logger  // default: discard
	ClientInfo   *mcp.Implementation
	// MaxConcurrentPerServer caps the requests in flight per pool key;
	// waiting callers honour their contexts. Zero means no cap.
	MaxConcurrentPerServer int
	// TracerProvider makes the spans of requests, dials and
	// re-initializations (trace.go); default the global provider,
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
}

// Pool is a pooled MCP client session manager. It is safe for concurrent use.
//
// Sessions are keyed by (endpoint, caller identity, protocol era) and never
// shared across identities. Slow work (dialing, closing) never happens under
// the pool's lock: entries are moved out under the lock and closed after it
// is released, in goroutines that Close waits for.
type Pool struct {
	opts    Options
	base    http.RoundTripper
	log     *slog.Logger
	tracer  trace.Tracer
	dials   singleflight.Group
	bg      sync.WaitGroup // dials, entries until closed, watchers, the cleaner; Add only under mu while !closed, or while holding a count
	tokenID atomic.Uint64  // progress tokens

	progress sync.Map  // progress token (string) -> func(*mcp.ProgressNotificationParams)
	idem     idemState // idempotency.go

	mu        sync.Mutex // protects following fields
	closed    bool
	entries   map[key]*entry      // live entries
	draining  map[*entry]struct{} // out of the map, not yet closed
	gens      map[key]uint64      // last dial generation per key
	reinit    map[key]bool        // the last entry of key was lost to expiry or death
	eras      map[key]string      // negotiated protocol version per key, pinned on re-dial
	sems      map[key]*semaphore  // per-key concurrency caps, while anyone uses them
	cleanerOn bool                // the idle cleaner runs
	lingering []*time.Timer       // progress tokens of finished calls, see forgetProgress
	closeNow  chan struct{}       // closed by Close; stops the cleaner
	counters  counters            // for Stats
}

type counters struct {
	dials, dialFailures, reinits, retries, waits int64
	invalidations, closes                        map[string]int64
}

// New returns a Pool. Call Close when done with it.
func New(opts *Options) *Pool {
	p := &Pool{
		entries:  make(map[key]*entry),
		draining: make(map[*entry]struct{}),
		gens:     make(map[key]uint64),
		reinit:   make(map[key]bool),
		eras:     make(map[key]string),
		sems:     make(map[key]*semaphore),
		closeNow: make(chan struct{}),
		counters: counters{invalidations: map[string]int64{}, closes: map[string]int64{}},
	}
	if opts != nil {
		p.opts = *opts
	}
	o := &p.opts
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 5 * time.Minute
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 30 * time.Second
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 10 * time.Second
	}
	if o.ToolsTTL == 0 {
		o.ToolsTTL = time.Minute
	}
	if o.ClientInfo == nil {
		o.ClientInfo = &mcp.Implementation{Name: "switchboard-pool", Version: "0.1.0"}
	}
	p.base = http.DefaultTransport
	if o.HTTPClient != nil && o.HTTPClient.Transport != nil {
		p.base = o.HTTPClient.Transport
	}
	p.tracer = newTracer(o.TracerProvider)
	p.log = o.Logger
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p
}

// CallTool calls a tool on srv through a pooled session. A tool that fails
// (IsError) is a result, not an error; errors are *Error.
func (p *Pool) CallTool(ctx context.Context, srv *Server, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	if params == nil {
		params = &mcp.CallToolParams{}
	}
	params = p.withProgressToken(ctx, params)
	if tok := params.GetProgressToken(); tok != nil {
		defer p.forgetProgress(tok)
	}
	var res *mcp.CallToolResult
	kc := p.newKeyedCall(ctx, srv) // idempotency.go
	for {
		err := p.do(ctx, srv, "tools/call", params.Name, func(ctx context.Context, e *entry) error {
			r, err := e.cs.CallTool(ctx, withTraceMeta(ctx, kc.paramsFor(e, params)))
			res = r
			return err
		})
		if !kc.again(ctx, err) {
			return res, kc.finish(ctx, res, err)
		}
	}
}

// ListTools lists all of srv's tools (every page), from the per-key cache
// when it is fresh. The cache goes with the session, and is dropped on
// notifications/tools/list_changed and after Options.ToolsTTL.
func (p *Pool) ListTools(ctx context.Context, srv *Server) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	err := p.do(ctx, srv, "tools/list", "", func(ctx context.Context, e *entry) error {
		cached, ok, ver := e.cachedTools(time.Now(), p.opts.ToolsTTL)
		if ok {
			tools = slices.Clone(cached) // callers may reorder or trim their list
			return nil
		}
		var all []*mcp.Tool
		params := &mcp.ListToolsParams{}
		for {
			res, err := e.cs.ListTools(ctx, params)
			if err != nil {
				return err
			}
			all = append(all, res.Tools...)
			if res.NextCursor == "" {
				break
			}
			params = &mcp.ListToolsParams{Cursor: res.NextCursor}
		}
		if p.opts.ToolsTTL > 0 {
			e.storeTools(all, time.Now(), ver)
		}
		tools = all
		return nil
	})
	return tools, err
}

// do runs op on a pooled session for srv, invalidating the session and
// retrying once on a new one when the failure proves op did not run.
func (p *Pool) do(ctx context.Context, srv *Server, method, tool string, op func(context.Context, *entry) error) (err error) {
	if srv != nil {
		var span trace.Span
		ctx, span = p.startRequestSpan(ctx, srv, method, tool)
		defer func() { endSpan(span, err) }()
	}
	if srv == nil || (srv.URL == "" && srv.Command == "") {
		return &Error{Kind: KindTransport, Method: method, Tool: tool, Err: errors.New("server has neither url nor command")}
	}
	k := srv.key()
	release, err := p.admit(ctx, k)
	if err != nil {
		return &Error{Kind: KindTransport, Server: srv.Name, Method: method, Tool: tool, Err: err}
	}
	defer release()

	retried := false
	info := callInfoFrom(ctx)
	for attempt := 0; ; attempt++ {
		e, err := p.acquire(ctx, srv, k)
		if err != nil {
			var pe *Error
			if errors.As(err, &pe) {
				pe.Method, pe.Tool = method, tool
				if attempt > 0 {
					// The session expired and re-initializing it failed.
					pe.Kind = KindSessionExpired
					pe.Err = fmt.Errorf("re-initializing the session failed: %w", pe.Err)
				}
				return pe
			}
			return &Error{Kind: KindTransport, Server: srv.Name, Method: method, Tool: tool, Retried: retried, Err: err}
		}
		pr := &probe{noticeSent: make(chan struct{})}
		if info != nil {
			info.Attempts, info.Retried = attempt+1, retried
		}
		err = op(withProbe(ctx, pr), e)
		if err == nil {
			p.release(e)
			return nil
		}
		ev := pr.evidence(e.http)
		v := classify(err, ev, ctx.Err())
		if ctx.Err() != nil && e.http && ev.posts > 0 && v.invalidate == "" {
			// go-sdk tells the server the call is cancelled from a goroutine
			// of its own; closing the session first would lose that.
			p.mu.Lock()
			e.addNoticeLocked(pr)
			p.mu.Unlock()
		}
		if v.invalidate != "" {
			p.invalidate(e, v.invalidate)
		}
		p.release(e)
		if v.retry && attempt < maxRetries {
			p.mu.Lock()
			p.counters.retries++
			p.mu.Unlock()
			retried = true
			markRetry(ctx, err)
			p.log.DebugContext(ctx, "retrying on a new session", "server", srv.Name, "method", method, "tool", tool, "cause", err)
			continue
		}
		pe := &Error{Kind: v.kind, Server: srv.Name, Method: method, Tool: tool, Retried: retried, Err: err}
		if own := pr.ownError(); own != nil && v.kind == KindTransport {
			pe.Err = fmt.Errorf("the request was not sent: %w (go-sdk: %w)", own, err)
		}
		if v.rpc != nil {
			pe.Code, pe.Message = v.rpc.Code, v.rpc.Message
		}
		return pe
	}
}

// A semaphore caps the requests in flight for one key. It lives in
// Pool.sems while callers hold or wait for it, and no longer, so a pool that
// sees many identities over time does not keep one per identity.
type semaphore struct {
	slots chan struct{}
	users int // callers holding or waiting for a slot; guarded by Pool.mu
}

// admit applies Options.MaxConcurrentPerServer.
func (p *Pool) admit(ctx context.Context, k key) (release func(), err error) {
	n := p.opts.MaxConcurrentPerServer
	if n <= 0 {
		return func() {}, nil
	}
	p.mu.Lock()
	sem, ok := p.sems[k]
	if !ok {
		sem = &semaphore{slots: make(chan struct{}, n)}
		p.sems[k] = sem
	}
	sem.users++
	p.mu.Unlock()
	leave := func() {
		p.mu.Lock()
		if sem.users--; sem.users == 0 {
			delete(p.sems, k)
		}
		p.mu.Unlock()
	}
	release = func() {
		<-sem.slots
		leave()
	}
	select {
	case sem.slots <- struct{}{}:
		return release, nil
	default:
	}
	p.mu.Lock()
	p.counters.waits++
	p.mu.Unlock()
	select {
	case sem.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		leave()
		return nil, fmt.Errorf("waiting for a free slot (at most %d requests in flight): %w", n, ctx.Err())
	}
}

// acquire returns a live entry for k with its use count taken, dialing one if
// there is none. Concurrent callers share one dial.
func (p *Pool) acquire(ctx context.Context, srv *Server, k key) (*entry, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, &Error{Kind: KindTransport, Server: srv.Name, Err: ErrClosed}
	}
	if e := p.entries[k]; e != nil {
		e.inUse++
		e.lastUsed = time.Now()
		p.mu.Unlock()
		return e, nil
	}
	p.mu.Unlock()

	// The dial is shared, and must not fail for everyone when the first
	// caller gives up: it runs on a context without the caller's cancellation,
	// bounded by DialTimeout instead.
	ch := p.dials.DoChan(k.String(), func() (any, error) {
		return p.dial(context.WithoutCancel(ctx), srv, k)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		e := r.Val.(*entry)
		p.mu.Lock()
		defer p.mu.Unlock()
		if e.state != stateLive {
			return nil, &Error{Kind: KindTransport, Server: srv.Name, Err: errors.New("session ended right after it was established")}
		}
		e.inUse++
		e.lastUsed = time.Now()
		return e, nil
	case <-ctx.Done():
		return nil, &Error{Kind: KindTransport, Server: srv.Name, Err: fmt.Errorf("waiting for the session to be established: %w", ctx.Err())}
	}
}

func (k key) String() string { return k.endpoint + "\x00" + k.identity + "\x00" + k.protocol }

// dial connects a new session for k and installs it as the live entry.
func (p *Pool) dial(ctx context.Context, srv *Server, k key) (*entry, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, &Error{Kind: KindTransport, Server: srv.Name, Method: "initialize", Err: ErrClosed}
	}
	p.bg.Add(1)
	defer p.bg.Done()
	p.gens[k]++
	gen := p.gens[k]
	version := srv.ProtocolVersion
	if version == "" {
		version = p.eras[k]
	}
	reinit := p.reinit[k]
	p.counters.dials++
	p.mu.Unlock()

	spanName := "pool.dial"
	if reinit {
		spanName = "pool.reinitialize"
	}
	ctx, span := p.tracer.Start(ctx, spanName, trace.WithAttributes(
		attribute.String("switchboard.server", srv.Name),
		attribute.Int64("switchboard.pool.generation", int64(gen)),
		attribute.Bool("switchboard.pool.reinitialization", reinit),
	))
	var dialErr error
	defer func() { endSpan(span, dialErr) }()

	ctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	e, err := p.connect(ctx, srv, k, gen, version)
	if errors.Is(err, errStaleInitialize) {
		// A server/discover answer set a session id that go-sdk would have
		// sent on its fallback initialize. Dial afresh with the era pinned.
		e, err = p.connect(ctx, srv, k, gen, Protocol20251125)
	}
	if err != nil {
		pe := &Error{Kind: KindTransport, Server: srv.Name, Method: "initialize", Err: err}
		if w, ok := rpcError(err); ok {
			pe.Kind, pe.Code, pe.Message = KindRPC, w.Code, w.Message
		}
		p.mu.Lock()
		p.counters.dialFailures++
		p.mu.Unlock()
		dialErr = pe
		return nil, pe
	}

	// The entry holds a count on p.bg from here until its close completes,
	// so Close waits for entries still in use to be released and closed.
	p.bg.Add(1)
	p.mu.Lock()
	if p.closed {
		e.state = stateClosed
		p.mu.Unlock()
		p.closeEntry(e, reasonClosed)
		return nil, &Error{Kind: KindTransport, Server: srv.Name, Method: "initialize", Err: ErrClosed}
	}
	if res := e.cs.InitializeResult(); res != nil && srv.ProtocolVersion == "" {
		p.eras[k] = res.ProtocolVersion
	}
	if reinit {
		p.counters.reinits++
		p.reinit[k] = false
	}
	now := time.Now()
	e.created, e.lastUsed = now, now
	p.entries[k] = e
	p.bg.Add(1) // the watcher
	p.startCleanerLocked()
	p.mu.Unlock()

	go p.watch(e)
	p.log.DebugContext(ctx, "session established", "server", srv.Name, "generation", gen, "session", e.cs.ID(), "reinitialization", reinit)
	return e, nil
}

// connect builds the transport and runs MCP initialization (or discovery).
func (p *Pool) connect(ctx context.Context, srv *Server, k key, gen uint64, version string) (*entry, error) {
	e := &entry{key: k, srv: *srv, gen: gen, http: srv.URL != ""}
	e.abortCtx, e.abort = context.WithCancel(context.Background())
	e.onExpiry = func() { p.invalidate(e, reasonExpired) }
	client := mcp.NewClient(p.opts.ClientInfo, &mcp.ClientOptions{
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { e.clearTools() },
		ProgressNotificationHandler: p.routeProgress,
	})
	var t mcp.Transport
	if e.http {
		t = &mcp.StreamableClientTransport{
			Endpoint:   srv.URL,
			HTTPClient: &http.Client{Transport: &recorder{base: p.base, headers: srv.Headers, entry: e}},
		}
	} else {
		cmd := exec.Command(srv.Command, srv.Args...)
		cmd.Env = os.Environ()
		for _, k := range sortedKeys(srv.Env) {
			cmd.Env = append(cmd.Env, k+"="+srv.Env[k])
		}
		t = &mcp.CommandTransport{Command: cmd}
	}
	e.dialing.Store(true)
	cs, err := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: version})
	e.dialing.Store(false)
	if err != nil {
		e.abort()
		return nil, err
	}
	e.cs = cs
	return e, nil
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// watch invalidates e when its session ends on its own (the GET stream saw a
// 404, a keepalive failed, a stdio server exited), so that the next caller
// gets a new session instead of a dead one.
func (p *Pool) watch(e *entry) {
	defer p.bg.Done()
	e.cs.Wait()
	p.invalidate(e, reasonDied)
}

// release returns e after use. Releasing more often than acquiring panics,
// as database/sql does for a connection returned twice.
func (p *Pool) release(e *entry) {
	p.mu.Lock()
	e.inUse--
	if e.inUse < 0 {
		p.mu.Unlock()
		panic("pool: entry released more often than acquired")
	}
	e.lastUsed = time.Now()
	closeIt := e.state == stateDraining && e.inUse == 0
	if closeIt {
		e.state = stateClosed
	}
	reason := e.closeReason
	p.mu.Unlock()
	if closeIt {
		p.closeEntry(e, reason)
	}
}

// invalidate drops e if it is still the live entry for its key. It is
// closed now if nobody uses it, else when its last user releases it: the
// calls still running on it each get their own result or their own error,
// never a transport closed under them.
func (p *Pool) invalidate(e *entry, reason string) {
	p.mu.Lock()
	if e.state != stateLive {
		p.mu.Unlock()
		return
	}
	if p.entries[e.key] == e {
		delete(p.entries, e.key)
	}
	p.counters.invalidations[reason]++
	if reason == reasonExpired || reason == reasonDied || reason == reasonRejected || reason == reasonBroken {
		p.reinit[e.key] = true
	}
	e.closeReason = reason
	closeIt := e.inUse == 0
	if closeIt {
		e.state = stateClosed
	} else {
		e.state = stateDraining
		p.draining[e] = struct{}{}
	}
	p.mu.Unlock()
	p.log.Debug("session invalidated", "server", e.srv.Name, "generation", e.gen, "reason", reason)
	if closeIt {
		p.closeEntry(e, reason)
	}
}

// closeEntry closes e's session in a goroutine, bounded by CloseTimeout: a
// close sends DELETE, which against a server that just went away can take a
// whole connection timeout. The goroutine releases the entry's count on
// p.bg. The caller must not hold p.mu, and e must be stateClosed.
func (p *Pool) closeEntry(e *entry, reason string) {
	go func() {
		defer p.bg.Done()
		p.mu.Lock()
		testHookClose(e.inUse)
		notices := e.notices
		e.notices = nil
		p.mu.Unlock()
		p.awaitNotices(notices)
		done := make(chan struct{})
		go func() {
			e.cs.Close()
			close(done)
		}()
		timer := time.NewTimer(p.opts.CloseTimeout)
		select {
		case <-done:
			timer.Stop()
		case <-timer.C:
			p.log.Warn("session close timed out; aborting its requests", "server", e.srv.Name, "timeout", p.opts.CloseTimeout)
			e.abort()
			<-done
		}
		e.abort()
		p.mu.Lock()
		delete(p.draining, e)
		p.counters.closes[reason]++
		p.mu.Unlock()
	}()
}

// noticeGrace bounds how long a close waits for cancel notices to be
// delivered (a server that has gone away cannot be told anything).
const noticeGrace = 2 * time.Second

// awaitNotices waits, at most noticeGrace in all, until the cancel notices
// of calls cancelled on a session have been delivered, so that closing the
// session (or the process exiting after Pool.Close) does not lose them.
func (p *Pool) awaitNotices(notices []*probe) {
	if len(notices) == 0 {
		return
	}
	testHookAwaitNotices(len(notices))
	t := time.NewTimer(min(noticeGrace, p.opts.CloseTimeout))
	defer t.Stop()
	for _, n := range notices {
		select {
		case <-n.noticeSent:
		case <-t.C:
			return
		}
	}
}

// Close closes every session (sending DELETE where one is live), waits for
// calls in flight to finish and for all background work. It is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.bg.Wait()
		return nil
	}
	p.closed = true
	close(p.closeNow)
	for _, t := range p.lingering {
		t.Stop()
	}
	p.lingering = nil
	var now []*entry
	for k, e := range p.entries {
		delete(p.entries, k)
		e.closeReason = reasonClosed
		if e.inUse == 0 {
			e.state = stateClosed
			now = append(now, e)
		} else {
			e.state = stateDraining
			p.draining[e] = struct{}{}
		}
	}
	p.mu.Unlock()
	for _, e := range now {
		p.closeEntry(e, reasonClosed)
	}
	p.bg.Wait()
	return nil
}

// Stats reports the pool's current state and counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{
		Dials:                 p.counters.dials,
		DialFailures:          p.counters.dialFailures,
		Reinitializations:     p.counters.reinits,
		Retries:               p.counters.retries,
		WaitCount:             p.counters.waits,
		InvalidationsByReason: maps.Clone(p.counters.invalidations),
		ClosesByReason:        maps.Clone(p.counters.closes),
	}
	p.idem.fill(&s)
	for _, n := range p.counters.invalidations {
		s.Invalidations += n
	}
	for _, n := range p.counters.closes {
		s.Closes += n
	}
	for _, e := range p.entries {
		s.Open++
		if e.inUse > 0 {
			s.InUse++
		} else {
			s.Idle++
		}
	}
	for e := range p.draining {
		s.Open++
		if e.inUse > 0 {
			s.InUse++
		}
	}
	return s
}

// Stats is a snapshot of a Pool, in the spirit of sql.DBStats: current values
// first, then counters since the pool was created.
type Stats struct {
	Open  int `json:"open"`   // sessions open: live plus draining
	InUse int `json:"in_use"` // sessions with requests in flight
	Idle  int `json:"idle"`   // live sessions without requests in flight

	Dials             int64 `json:"dials"`             // connect+initialize attempts
	DialFailures      int64 `json:"dial_failures"`     // attempts that failed
	Reinitializations int64 `json:"reinitializations"` // sessions established to replace an expired or dead one
	Retries           int64 `json:"retries"`           // requests sent again on a new session
	Invalidations     int64 `json:"invalidations"`     // sessions dropped as unusable
	Closes            int64 `json:"closes"`            // sessions closed
	WaitCount         int64 `json:"wait_count"`        // requests that waited for MaxConcurrentPerServer

	InvalidationsByReason map[string]int64 `json:"invalidations_by_reason"`
	ClosesByReason        map[string]int64 `json:"closes_by_reason"`

	// Idempotency (idempotency.go), for servers that advertise it.
	KeyedCalls   int64 `json:"keyed_calls"`   // tools/call sent with an idempotency key
	KeyedRetries int64 `json:"keyed_retries"` // keyed calls sent again after a failure
	Replays      int64 `json:"replays"`       // answers the server gave from its record
	Conflicts    int64 `json:"conflicts"`     // keys the server said were used for another call
	Interrupted  int64 `json:"interrupted"`   // calls a crash of the server cut off
	KeysExpired  int64 `json:"keys_expired"`  // keys older than the server's retention
}

var _ io.Closer = (*Pool)(nil)

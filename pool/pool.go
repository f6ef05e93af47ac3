package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
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
	testHookAcquireWait  = func(k key) {}     // a caller is about to wait for k's dial; p.mu not held
)

// Options configure a Pool. The zero value of every field means its default.
type Options struct {
	IdleTimeout  time.Duration // idle entries are closed after this; default 5m; negative: never
	DialTimeout  time.Duration // bound on connect+initialize; default 30s
	CloseTimeout time.Duration // bound on a background close; default 10s
	ToolsTTL     time.Duration // tools/list cache lifetime; default 1m; negative: no cache
	// Transport carries every HTTP request. Default: DefaultTransport(),
	// shared by the process's pools and tuned for many concurrent calls to
	// few hosts.
	Transport http.RoundTripper
	Logger    *slog.Logger // default: discard
	// ClientInfo is the name and version the pool gives in initialize,
	// which servers log and may act on; default switchboard-pool.
	ClientInfo *mcp.Implementation
	// Notifications keeps every HTTP session's standalone GET stream open,
	// so that the server's notifications (tools/list_changed, which drops
	// the tool cache at once) arrive while the session is idle. Off, an idle
	// session holds no stream, no connection and no goroutine of its own;
	// the tool cache is then correct within ToolsTTL, and a session the
	// server forgot is found on its next request (404, retried). Progress
	// needs no stream: it comes on the call's own response.
	Notifications bool
	// MaxConcurrentPerKey caps the requests in flight per pool key (one
	// server as seen by one identity: two identities on one server have a
	// cap each); waiting callers honour their contexts. Zero means no cap.
	MaxConcurrentPerKey int
	// TracerProvider makes the spans of requests, dials and
	// re-initializations; default the global provider,
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// OAuth configures OAuth for HTTP servers; nil: the tokens that
	// `switchboard login` stored (see OAuthOptions.TokenDir), nobody to
	// ask.
	OAuth *OAuthOptions
	// Elicit answers a server's elicitation/create (go-sdk fills in the
	// schema's defaults, SEP-1034). nil: the pool does not offer
	// elicitation, so a server does not ask. A server that sends its
	// requests on the standalone GET stream (the TypeScript SDK's) needs
	// Notifications too.
	Elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
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
	bg      sync.WaitGroup // dials, entries until closed, watchers, the cleaner; Add only under mu while !closed, or while holding a count
	tokenID atomic.Uint64  // progress tokens

	// life is cancelled when a Shutdown's context ends before the calls in
	// flight do: dials in progress and every request still running are
	// aborted then.
	life  context.Context
	abort context.CancelFunc

	progress progressRoutes
	subs     subscriptions // subscribe.go
	memo     keyMemo
	idem     idemState    // idempotency.go
	oauth    oauthClients // oauth.go: tokens per (URL, identity), shared by the key's sessions

	mu        sync.Mutex // protects following fields
	closed    bool
	entries   map[key]*entry      // live entries
	dialing   map[key]*dialCall   // dials in progress: at most one per key, and only for a key without a live entry
	draining  map[*entry]struct{} // out of the map, not yet closed
	keys      map[key]*keyState   // what outlives one session of a key; bounded, see keyStateLocked
	sems      map[key]*semaphore  // per-key concurrency caps, while anyone uses them
	cleanerOn bool                // the idle cleaner runs
	closeQ    []closeJob          // sessions waiting to be closed, see closeEntry
	closers   int                 // goroutines working closeQ, at most maxClosers
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
		dialing:  make(map[key]*dialCall),
		draining: make(map[*entry]struct{}),
		keys:     make(map[key]*keyState),
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
	p.base = o.Transport
	if p.base == nil {
		p.base = defaultTransport
	}
	p.life, p.abort = context.WithCancel(context.Background())
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
	token, progress := p.progressToken(ctx)
	if progress != nil {
		params = withMeta(params, map[string]string{"progressToken": token})
	}
	var res *mcp.CallToolResult
	kc := p.newKeyedCall(ctx, srv) // idempotency.go
	for {
		began := time.Now()
		err := p.do(ctx, srv, "tools/call", params.Name, func(a *attempt, e *entry) error {
			if progress != nil {
				// Each attempt's session routes the token; a retry's new
				// session gets a route of its own.
				p.progress.add(e, token, progress)
				defer p.progress.end(e, token)
			}
			ctx := a.request()
			sent := withTraceMeta(ctx, kc.paramsFor(e, params))
			if sent == params && e.writesMeta() {
				sent = own(params, func(c *mcp.CallToolParams) { c.Meta = maps.Clone(c.Meta) })
			}
			r, err := e.cs.CallTool(ctx, sent)
			res = r
			return err
		})
		kc.took = time.Since(began)
		if !kc.again(ctx, err) {
			return res, refusedByLedger(kc.finish(ctx, res, err))
		}
	}
}

// ListTools lists all of srv's tools (every page), from the per-key cache
// when it is fresh. The cache goes with the session, and is dropped on
// notifications/tools/list_changed and after Options.ToolsTTL. A server
// with more than 2,000 tools, or whose pages do not end, gets a KindRefused
// error wrapping a *ListError.
func (p *Pool) ListTools(ctx context.Context, srv *Server) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	err := p.do(ctx, srv, "tools/list", "", func(a *attempt, e *entry) error {
		cached, ok, ver := e.cachedTools(time.Now(), p.opts.ToolsTTL)
		if ok {
			tools = slices.Clone(cached) // callers may reorder or trim their list
			return nil
		}
		// Each page is a request of its own with its own probe, so that a
		// 404 to page 2 is evidence about page 2. A retry lists again from
		// the first page, on the new session.
		all, err := listAll(srv, "tools/list", maxToolsPerServer, func(cursor string) ([]*mcp.Tool, string, error) {
			res, err := e.cs.ListTools(a.request(), &mcp.ListToolsParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return res.Tools, res.NextCursor, nil
		})
		if err != nil {
			return err
		}
		if p.opts.ToolsTTL > 0 {
			e.storeTools(all, time.Now(), ver)
		}
		tools = all
		return nil
	})
	return tools, err
}

// own returns a copy of params for one request, with the maps go-sdk writes
// to copied by clone; nil stays nil. On a session of the 2026-07-28 era
// (entry.writesMeta) go-sdk writes the per-request _meta (protocol
// version, client info and capabilities) into the params it is given, in
// place: the caller's params must not change under it (it may send them
// again, or concurrently), and a retry on a new session must not carry the
// version the first session spoke.
func own[P any](params *P, clone func(*P)) *P {
	if params == nil {
		return nil
	}
	c := *params
	clone(&c)
	return &c
}

// do runs op on a pooled session for srv, invalidating the session and
// retrying once on a new one when the failure proves op did not run.
func (p *Pool) do(ctx context.Context, srv *Server, method, tool string, op func(*attempt, *entry) error) (err error) {
	big := false // an answer passed bigAnswer (memory.go)
	defer func() {
		if big {
			osMemory.afterBigAnswer()
		}
	}()
	traced := srv != nil && p.traces()
	if traced {
		var span trace.Span
		ctx, span = p.startRequestSpan(ctx, srv, method, tool)
		defer func() { endSpan(span, err) }()
	}
	if srv == nil || (srv.URL == "" && srv.Command == "") {
		return &Error{Kind: KindTransport, Method: method, Tool: tool, Err: errors.New("server has neither url nor command")}
	}
	k := p.memo.key(srv)
	release, err := p.admit(ctx, k)
	if err != nil {
		return &Error{Kind: KindTransport, Server: srv.Name, Method: method, Tool: tool, Err: err}
	}
	defer release()

	retried := false
	info := callInfoFrom(ctx)
	for n := 0; ; n++ {
		a := newAttempt(ctx)
		a.maxBody, a.server = srv.maxResultBytes(), srv.Name
		e, err := p.acquire(ctx, srv, k, a)
		if err != nil {
			var pe *Error
			if errors.As(err, &pe) {
				pe.Method, pe.Tool = method, tool
				if n > 0 && !errors.Is(pe.Err, ErrShuttingDown) {
					// The session expired and re-initializing it failed.
					pe.Kind = KindSessionExpired
					pe.Err = fmt.Errorf("re-initializing the session failed: %w", pe.Err)
				}
				a.unref()
				return pe
			}
			a.unref()
			return &Error{Kind: KindTransport, Server: srv.Name, Method: method, Tool: tool, Retried: retried, Err: err}
		}
		if info != nil {
			info.Attempts, info.Retried = n+1, retried
		}
		err = op(a, e)
		if a.answered.Load() > bigAnswer || e.proc != nil && e.proc.sawBig.Swap(false) {
			big = true
		}
		if err == nil {
			p.release(e, a)
			return nil
		}
		pr := a.pr
		if pr == nil {
			pr = newProbe(ctx) // op failed before its first request: no POST
		}
		if e.proc != nil {
			if tooBig := e.proc.overCap(); tooBig != nil {
				// A line of the server's stdout passed the cap (stdio.go):
				// the session failed with it, whichever call it answered.
				pr.resultTooLarge(tooBig)
			}
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
		p.release(e, a)
		if v.retry && n < maxRetries {
			p.mu.Lock()
			p.counters.retries++
			p.mu.Unlock()
			retried = true
			if traced {
				markRetry(ctx, err) // else the span in ctx is the caller's
			}
			p.log.DebugContext(ctx, "retrying on a new session", "server", srv.Name, "method", method, "tool", tool, "cause", err)
			continue
		}
		if e.proc != nil && ctx.Err() == nil && v.kind != KindRPC && e.proc.overCap() == nil {
			// Over stdio a failure the server did not answer is its
			// process ending (stdout closed): say how it ended.
			if xe := e.proc.exitError(exitGrace); xe != nil {
				err = fmt.Errorf("%w (%w)", err, xe)
				p.invalidate(e, reasonDied)
			}
		}
		pe := &Error{Kind: v.kind, Server: srv.Name, Method: method, Tool: tool, Retried: retried, Err: err}
		if own := pr.ownError(); own != nil && v.kind == KindTransport {
			pe.Err = fmt.Errorf("the request was not sent: %w (go-sdk: %w)", own, err)
		}
		if v.cause != nil && !errors.Is(pe.Err, v.cause) {
			pe.Err = fmt.Errorf("%w: %w", v.cause, pe.Err)
		}
		if v.rpc != nil {
			pe.Code, pe.Message = v.rpc.Code, boundMessage(v.rpc.Message)
		}
		status, said := pr.answered()
		said.addTo(pe, status)
		return pe
	}
}

// An attempt is one try of a pool operation on one session. Each request
// the operation sends (a call, one page of a list) takes a probe of its own
// with request; the evidence of a failure is the probe of the request that
// failed, the last one taken. The first probe lives in the attempt, so a
// one-request operation allocates one attempt for its evidence.
//
// The attempt's context is the caller's, cancelled also when Shutdown gives
// up on the calls in flight (forceClose): go-sdk sends a call's POST inside
// the call, so only cancelling its context can end a call whose server never
// answers. That spares the RoundTripper a context, a hook and a body wrapper
// per request. The context is cancelled for good once the attempt is
// released and every response body it was handed is closed (go-sdk drains a
// stream after the answer it waited for; cancelling before would cost the
// connection).
type attempt struct {
	ctx    context.Context
	cancel context.CancelFunc
	refs   atomic.Int32 // 1 for the operation, plus each open response body
	first  probe
	pr     *probe
	// maxBody and server: the cap of the answer to each request of the
	// attempt (Server.MaxResultBytes) and the Server's name, for the
	// recorder; zero: no cap.
	maxBody int64
	server  string
	// answered counts the bytes of the attempt's answers read (answerBody),
	// for the return of memory after a large one (memory.go).
	answered atomic.Int64
	next     *attempt // in entry.attempts while the attempt uses the entry; guarded by Pool.mu
}

func newAttempt(ctx context.Context) *attempt {
	a := &attempt{}
	a.ctx, a.cancel = context.WithCancel(ctx)
	a.refs.Store(1)
	return a
}

// request returns the context for the attempt's next request.
func (a *attempt) request() context.Context {
	if a.pr == nil {
		a.first.Context, a.first.attempt = a.ctx, a
		a.pr = &a.first
	} else {
		a.pr = newProbe(a.ctx)
		a.pr.attempt = a
	}
	return a.pr
}

// tooLarge is the error of an answer past the attempt's cap; size -1: not
// known (reading stopped at the cap).
func (a *attempt) tooLarge(size int64) *ResultTooLargeError {
	return &ResultTooLargeError{Server: a.server, Limit: a.maxBody, Size: size}
}

// unref drops one reference; the last one cancels the attempt's context.
func (a *attempt) unref() {
	if a.refs.Add(-1) == 0 {
		a.cancel()
	}
}

// A keyState is what the pool remembers about a key across its sessions:
// the last dial generation, the negotiated era (pinned on re-dial), and
// whether the last session was lost to expiry or death (so that the next
// dial is a re-initialization). None of it is needed for correctness: a key
// that lost its state starts afresh (generation 1, its era discovered again).
type keyState struct {
	gen    uint64
	era    string
	reinit bool
}

// maxKeyStates bounds the states kept for keys with neither a live entry nor
// a dial in progress: a pool that sees many identities over time, with the
// idle sweep off or keys invalidated and never dialed again, must not keep
// one per identity it ever served.
var maxKeyStates = 4096

// keyStateLocked returns k's state, creating it, and when the states of
// keys at rest exceed maxKeyStates, forgets half of them. p.mu must be held.
func (p *Pool) keyStateLocked(k key) *keyState {
	if ks := p.keys[k]; ks != nil {
		return ks
	}
	if len(p.keys)-len(p.entries)-len(p.dialing) >= maxKeyStates {
		drop := len(p.keys) - len(p.entries) - len(p.dialing) - maxKeyStates/2
		for kk := range p.keys {
			if drop <= 0 {
				break
			}
			if p.entries[kk] == nil && p.dialing[kk] == nil {
				delete(p.keys, kk)
				drop--
			}
		}
	}
	ks := &keyState{}
	p.keys[k] = ks
	return ks
}

// A semaphore caps the requests in flight for one key. It lives in
// Pool.sems while callers hold or wait for it, and no longer, so a pool that
// sees many identities over time does not keep one per identity.
type semaphore struct {
	slots chan struct{}
	users int // callers holding or waiting for a slot; guarded by Pool.mu
}

// admit applies Options.MaxConcurrentPerKey.
func (p *Pool) admit(ctx context.Context, k key) (release func(), err error) {
	n := p.opts.MaxConcurrentPerKey
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

// A dialCall is a dial in progress for one key. The first caller that finds
// neither a live entry nor a dial for its key reserves one under p.mu, in the
// same critical section as the lookup (database/sql counts numOpen before it
// opens; net/http's Transport queues a wantConn), and every later caller
// waits for that one. Deciding under the lock and reserving after unlocking
// would let a caller that looked just before a dial was installed start a
// second one for the same key.
type dialCall struct {
	done chan struct{} // closed when e or err is set
	e    *entry        // the installed entry; nil on failure; set under p.mu
	err  error
	// waiters counts the callers that will take e once done is closed;
	// guarded by p.mu. The dial hands the count to e.reserved, so that the
	// idle cleaner cannot close a session its callers have not reached yet.
	waiters int
}

// acquire returns a live entry for k with its use count taken, dialing one if
// there is none. Concurrent callers share one dial.
func (p *Pool) acquire(ctx context.Context, srv *Server, k key, a *attempt) (*entry, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, &Error{Kind: KindTransport, Server: srv.Name, Err: ErrClosed}
	}
	if e := p.entries[k]; e != nil && e.proc != nil && e.proc.hasExited() {
		// A stdio server that exited: its watcher has not replaced it yet.
		// A call sent on it could not run; dial a new one instead.
		p.mu.Unlock()
		p.invalidate(e, reasonDied)
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, &Error{Kind: KindTransport, Server: srv.Name, Err: ErrClosed}
		}
	}
	if e := p.entries[k]; e != nil {
		e.takeLocked(a)
		p.mu.Unlock()
		return e, nil
	}
	dc := p.dialing[k]
	if dc == nil {
		dc = p.startDialLocked(ctx, srv, k)
	}
	dc.waiters++
	p.mu.Unlock()
	testHookAcquireWait(k)

	select {
	case <-dc.done:
		if pe, ok := dc.err.(*Error); ok {
			// Every waiter of the dial gets it, and do fills in the
			// caller's method, tool and kind: each caller needs its own.
			own := *pe
			return nil, &own
		}
		if dc.err != nil {
			return nil, dc.err
		}
		e := dc.e
		p.mu.Lock()
		defer p.mu.Unlock()
		e.reserved--
		if e.state != stateLive {
			return nil, &Error{Kind: KindTransport, Server: srv.Name, Err: errors.New("session ended right after it was established")}
		}
		e.takeLocked(a)
		return e, nil
	case <-ctx.Done():
		p.mu.Lock()
		if dc.e != nil {
			dc.e.reserved-- // installed already: give up the place kept for us
		} else {
			dc.waiters--
		}
		p.mu.Unlock()
		return nil, &Error{Kind: KindTransport, Server: srv.Name, Err: fmt.Errorf("waiting for the session to be established: %w", ctx.Err())}
	}
}

func (k key) String() string { return k.endpoint + "\x00" + k.identity + "\x00" + k.protocol }

// startDialLocked reserves the dial of k and starts it. p.mu must be held,
// the pool open, and k without a live entry or a dial.
//
// The dial is shared, and must not fail for everyone when the first caller
// gives up: it runs on a context without the caller's cancellation (but with
// its values, so its span is the request's child, and none of go-sdk's: see
// dialContext), bounded by DialTimeout and by the pool's life instead.
func (p *Pool) startDialLocked(ctx context.Context, srv *Server, k key) *dialCall {
	dc := &dialCall{done: make(chan struct{})}
	p.dialing[k] = dc
	ks := p.keyStateLocked(k)
	ks.gen++
	version := srv.ProtocolVersion
	if version == "" {
		version = ks.era
	}
	p.counters.dials++
	p.bg.Add(1)
	go p.dial(dialContext{context.WithoutCancel(ctx)}, *srv, k, dc, ks.gen, version, ks.reinit)
	return dc
}

// dial connects a new session for k and installs it as the live entry,
// then completes dc. It runs in its own goroutine, holding a count on p.bg.
func (p *Pool) dial(ctx context.Context, srv Server, k key, dc *dialCall, gen uint64, version string, reinit bool) {
	defer p.bg.Done()
	spanName := "pool.dial"
	if reinit {
		spanName = "pool.reinitialize"
	}
	ctx, span := p.tracer.Start(ctx, spanName, trace.WithAttributes(
		attribute.String("switchboard.server", srv.Name),
		attribute.Int64("switchboard.pool.generation", int64(gen)),
		attribute.Bool("switchboard.pool.reinitialization", reinit),
	))
	ctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	stop := context.AfterFunc(p.life, cancel)
	dl := &dialLog{}
	ctx = context.WithValue(ctx, dialLogKey{}, dl)
	e, err := p.connect(ctx, &srv, k, gen, version)
	if errors.Is(err, errStaleInitialize) {
		// A server/discover answer set a session id that go-sdk would have
		// sent on its fallback initialize. Dial afresh with the era pinned.
		version = Protocol20251125
		e, err = p.connect(ctx, &srv, k, gen, version)
	}
	if errors.Is(err, errForgottenInDial) {
		// The session was gone before the handshake ended: an idle timeout
		// shorter than the handshake, or initialize and initialized sent
		// to two replicas. Nothing but the handshake ran on it, so one
		// more dial, in the era the last one used, is safe; a second such
		// failure is the answer.
		e, err = p.connect(ctx, &srv, k, gen, version)
	}
	if status, a := dl.get(); err != nil && (evidence{overHTTP: true, posts: 1, status: status, rpc: a.rpc}).drainRefusal() {
		// A draining server refused the handshake before it ran
		// anything: once more, which behind a balancer reaches a replica
		// that takes sessions.
		dl.set(0, answer{})
		e, err = p.connect(ctx, &srv, k, gen, version)
	}
	stop()
	cancel()
	if err == nil && srv.ProtocolVersion != "" {
		if got := e.cs.InitializeResult().ProtocolVersion; got != srv.ProtocolVersion {
			// go-sdk falls back to the version the server offers; a pin says
			// the caller needs this one.
			e.cs.Close()
			e.abort()
			err = fmt.Errorf("%w: the server speaks MCP %s, and the pin (protocolVersion) is %s", ErrProtocolVersion, got, srv.ProtocolVersion)
		}
	}

	if err != nil {
		pe := &Error{Kind: KindTransport, Server: srv.Name, Method: "initialize", Err: err}
		if w, ok := rpcError(err); ok {
			pe.Kind, pe.Code, pe.Message = KindRPC, w.Code, boundMessage(w.Message)
		}
		status, a := dl.get()
		if errors.As(err, new(*RedirectError)) || errors.Is(err, ErrTooLarge) {
			// Refused, not unreachable: dialing again (a keyed resend
			// would) is refused again.
			pe.Kind = KindRefused
		}
		if (evidence{overHTTP: true, posts: 1, status: status, rpc: a.rpc}).drainRefusal() {
			// The server is draining and opens no session (the pool's
			// retry after a drain refusal finds it so while it is the only
			// replica): nothing ran; later, or elsewhere, it may.
			pe.Kind = KindTransport
			pe.Err = fmt.Errorf("%w: %w", ErrShuttingDown, err)
		}
		a.addTo(pe, status)
		p.mu.Lock()
		delete(p.dialing, k)
		p.counters.dialFailures++
		p.mu.Unlock()
		endSpan(span, pe)
		dc.err = pe
		close(dc.done)
		return
	}

	// The entry holds a count on p.bg from here until its close completes,
	// so Close waits for entries still in use to be released and closed.
	p.bg.Add(1)
	p.mu.Lock()
	delete(p.dialing, k)
	if p.closed {
		e.state = stateClosed
		p.mu.Unlock()
		p.closeEntry(e, reasonClosed)
		dc.err = &Error{Kind: KindTransport, Server: srv.Name, Method: "initialize", Err: ErrClosed}
		endSpan(span, dc.err)
		close(dc.done)
		return
	}
	if p.entries[k] != nil {
		// Only a reserved dial installs, and a key has a dial only while
		// it has no live entry.
		p.mu.Unlock()
		panic("pool: a dial found its key's slot taken")
	}
	// From here on a 404 invalidates the entry as any live one; one seen
	// between Connect's return and now was only marked, so it is honoured
	// once the entry is installed (below, outside the lock).
	e.state = stateLive
	forgotten := e.forgotten.Load()
	ks := p.keyStateLocked(k)
	if res := e.cs.InitializeResult(); res != nil && srv.ProtocolVersion == "" {
		ks.era = res.ProtocolVersion
	}
	if reinit {
		p.counters.reinits++
		ks.reinit = false
	}
	now := time.Now()
	e.created, e.lastUsed = now, now
	e.reserved = dc.waiters
	p.entries[k] = e
	dc.e = e
	// A session ends on its own only through a stream it holds open (the
	// standalone GET stream) or a process that exits; an HTTP session
	// without the stream fails only as the result of a request, which do
	// sees (a later request then fails locally, without a POST, and is
	// retried on a new session). Only those need a goroutine waiting.
	watched := !e.http || p.opts.Notifications
	if watched {
		p.bg.Add(1) // the watcher
	}
	p.startCleanerLocked()
	p.mu.Unlock()

	if watched {
		go p.watch(e)
	}
	if forgotten {
		p.invalidate(e, reasonExpired)
	}
	p.log.DebugContext(ctx, "session established", "server", srv.Name, "generation", gen, "session", e.cs.ID(), "reinitialization", reinit)
	endSpan(span, nil)
	close(dc.done)
}

// connect builds the transport and runs MCP initialization (or discovery).
func (p *Pool) connect(ctx context.Context, srv *Server, k key, gen uint64, version string) (*entry, error) {
	e := &entry{key: k, srv: *srv, gen: gen, http: srv.URL != ""}
	e.abortCtx, e.abort = context.WithCancel(context.Background())
	e.onExpiry = func() { p.invalidate(e, reasonExpired) }
	e.ended = make(chan struct{})
	copts := &mcp.ClientOptions{
		ElicitationHandler: p.opts.Elicit,
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			p.progress.route(e, req)
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			p.subs.route(e, req.Params)
		},
	}
	if p.opts.Notifications || !e.http {
		// With a handler, go-sdk also opens subscriptions/listen (a
		// resident stream) on a 2026-07-28 server that lists changes.
		copts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { e.clearTools() }
	}
	client := mcp.NewClient(p.opts.ClientInfo, copts)
	var t mcp.Transport
	if e.http {
		home := originOfURL(srv.URL)
		t = &mcp.StreamableClientTransport{
			Endpoint: srv.URL,
			HTTPClient: &http.Client{
				Transport: &streamTracker{s: &e.stream, base: &recorder{base: p.oauth.transport(p.base, srv, p.opts.OAuth, p.log), headers: srv.Headers, home: home, entry: e}},
				// A redirect to another origin is refused, so that the
				// configured headers and tokens never leave theirs (origin.go).
				CheckRedirect: checkRedirect(home),
			},
			DisableStandaloneSSE: !p.opts.Notifications,
		}
	} else {
		sp, err := startStdio(srv, p.log)
		if err != nil {
			e.abort()
			return nil, err
		}
		e.proc = sp
		// Our cap (stdio.go, Server.MaxResultBytes) bounds a line, typed;
		// go-sdk's own (16 MiB, untyped) would refuse a larger cap.
		t = &mcp.IOTransport{Reader: sp, Writer: sp, MaxLineLength: -1}
	}
	e.dialing.Store(true)
	cs, err := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: version})
	e.dialing.Store(false)
	if err == nil && e.forgotten.Load() {
		cs.Close()
		err = errForgottenInDial
	} else if err != nil && e.forgotten.Load() {
		err = fmt.Errorf("%w: %w", errForgottenInDial, err)
	}
	if err != nil {
		e.abort()
		if e.proc != nil {
			// go-sdk closed the connection, so the process is ending (or
			// had ended, which is what failed the dial).
			e.proc.Close()
			if xe := e.proc.exitError(0); xe != nil {
				err = fmt.Errorf("%w (%w)", err, xe)
			}
		}
		return nil, err
	}
	e.cs = cs
	if res := cs.InitializeResult(); res != nil {
		e.protocol = res.ProtocolVersion
	}
	return e, nil
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// watch invalidates e when its session ends on its own (the GET stream saw a
// 404, a stdio server exited), so that the next caller
// gets a new session instead of a dead one.
func (p *Pool) watch(e *entry) {
	defer p.bg.Done()
	e.cs.Wait()
	p.invalidate(e, reasonDied)
}

// takeLocked counts a use of e by attempt a. p.mu must be held.
func (e *entry) takeLocked(a *attempt) {
	e.inUse++
	e.lastUsed = time.Now()
	a.next, e.attempts = e.attempts, a
}

// release returns e after use by attempt a. Releasing more often than
// acquiring panics, as database/sql does for a connection returned twice.
func (p *Pool) release(e *entry, a *attempt) {
	p.mu.Lock()
	for pa := &e.attempts; *pa != nil; pa = &(*pa).next {
		if *pa == a {
			*pa = a.next
			break
		}
	}
	a.next = nil
	a.unref()
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
	if e.state == stateDialing {
		// Not installed, so not ours to close: its dial sees the mark.
		e.forgotten.Store(true)
		p.mu.Unlock()
		return
	}
	if e.state != stateLive {
		p.mu.Unlock()
		return
	}
	if p.entries[e.key] == e {
		delete(p.entries, e.key)
	}
	p.counters.invalidations[reason]++
	if reason == reasonExpired || reason == reasonDied || reason == reasonRejected || reason == reasonBroken {
		p.keyStateLocked(e.key).reinit = true
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

// maxClosers bounds the sessions the pool closes at once. Closing 10,000
// sessions (Close, or an idle sweep) must not fire 10,000 DELETEs at once on
// new connections: they ran into the server's close deadline and the
// process's descriptor limit, and the server kept sessions it was never told
// about. Closes queue, and at most maxClosers goroutines work the queue.
const maxClosers = 32

type closeJob struct {
	e      *entry
	reason string
}

// closeEntry queues e's session to be closed, bounded by CloseTimeout: a
// close sends DELETE, which against a server that just went away can take a
// whole connection timeout. The close releases the entry's count on p.bg.
// The caller must not hold p.mu, and e must be stateClosed.
func (p *Pool) closeEntry(e *entry, reason string) {
	p.mu.Lock()
	p.closeQ = append(p.closeQ, closeJob{e, reason})
	if p.closers < maxClosers {
		// The entry's own count on p.bg is held, so Add is safe here.
		p.closers++
		p.bg.Add(1)
		go p.closer()
	}
	p.mu.Unlock()
}

// closer closes queued sessions until the queue is empty.
func (p *Pool) closer() {
	defer p.bg.Done()
	for {
		p.mu.Lock()
		if len(p.closeQ) == 0 {
			p.closeQ = nil
			p.closers--
			p.mu.Unlock()
			return
		}
		j := p.closeQ[0]
		p.closeQ[0] = closeJob{}
		p.closeQ = p.closeQ[1:]
		testHookClose(j.e.inUse)
		notices := j.e.notices
		j.e.notices = nil
		p.mu.Unlock()
		p.closeSession(j.e, j.reason, notices)
	}
}

func (p *Pool) closeSession(e *entry, reason string, notices []*probe) {
	defer p.bg.Done()
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
	close(e.ended)
	p.mu.Lock()
	delete(p.draining, e)
	p.counters.closes[reason]++
	p.mu.Unlock()
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
		case <-n.notice():
		case <-t.C:
			return
		}
	}
}

// Close closes every session (sending DELETE where one is live), and waits
// for the calls in flight to return and for all background work. It is
// idempotent, and Shutdown(context.Background()).
func (p *Pool) Close() error {
	return p.Shutdown(context.Background())
}

// Shutdown closes the pool as Close does, waiting for calls in flight until
// ctx is done, as http.Server.Shutdown does for its connections. Then it
// aborts them (their requests are cancelled and their sessions closed under
// them, so they return outcome_unknown or transport errors) together with
// any dial in progress, waits for that to take effect, and returns ctx's
// error. Dials and closes are themselves bounded by DialTimeout and
// CloseTimeout, so after the abort Shutdown returns within those bounds.
func (p *Pool) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.closeNow)
		p.progress.close()
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
	} else {
		p.mu.Unlock()
	}

	done := make(chan struct{})
	go func() {
		p.bg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	p.abort()
	p.mu.Lock()
	for _, j := range p.closeQ {
		j.e.abort() // a queued DELETE fails at once instead of waiting out CloseTimeout
	}
	var stuck []*entry
	for e := range p.draining {
		if e.state == stateDraining && !e.forced {
			for a := e.attempts; a != nil; a = a.next {
				a.cancel() // ends the calls' requests; see attempt
			}
			// The count on p.bg is taken under the lock while the entry
			// still holds its own, so the group never reaches zero between.
			e.forced = true
			p.bg.Add(1)
			stuck = append(stuck, e)
		}
	}
	p.mu.Unlock()
	for _, e := range stuck {
		go p.forceClose(e)
	}
	<-done
	return ctx.Err()
}

// forceClose aborts e's requests and closes its session under the calls
// still running on it (their attempts' contexts were cancelled), for a
// Shutdown whose context ended: their results are lost. The entry's own close follows when they release it. It
// runs in a goroutine holding a count on p.bg.
func (p *Pool) forceClose(e *entry) {
	defer p.bg.Done()
	e.abort()
	e.cs.Close()
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
		if e.protocol != "" {
			if s.Protocols == nil {
				s.Protocols = make(map[string]int)
			}
			s.Protocols[e.protocol]++
		}
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
	s.Dialing = len(p.dialing)
	return s
}

// Stats is a snapshot of a Pool, in the spirit of sql.DBStats: current values
// first, then counters since the pool was created.
type Stats struct {
	Open  int `json:"open"`   // sessions open: live plus draining
	InUse int `json:"in_use"` // sessions with requests in flight
	Idle  int `json:"idle"`   // live sessions without requests in flight
	// Dialing is the number of sessions being established (at most one per
	// key); they are not yet counted in Open.
	Dialing int `json:"dialing"`

	Dials             int64 `json:"dials"`             // connect+initialize attempts
	DialFailures      int64 `json:"dial_failures"`     // attempts that failed
	Reinitializations int64 `json:"reinitializations"` // sessions established to replace an expired or dead one
	Retries           int64 `json:"retries"`           // requests sent again on a new session
	Invalidations     int64 `json:"invalidations"`     // sessions dropped as unusable
	Closes            int64 `json:"closes"`            // sessions closed
	WaitCount         int64 `json:"wait_count"`        // requests that waited for MaxConcurrentPerKey

	// Protocols counts the live sessions by the MCP version each
	// negotiated: 2025-11-25 is the session era, 2026-07-28 the sessionless
	// one (Server.ProtocolVersion pins one; unpinned, go-sdk's
	// server/discover finds the newest both sides speak). Its keys are
	// go-sdk's known versions, a bounded set.
	Protocols map[string]int `json:"protocols,omitempty"`

	// InvalidationsByReason and ClosesByReason count sessions dropped and
	// closed since the pool was created, one counter per reason (as
	// database/sql's DBStats has one per close reason); the reasons are the
	// pool's own, a bounded set, so they can be metric labels.
	InvalidationsByReason map[string]int64 `json:"invalidations_by_reason"`
	ClosesByReason        map[string]int64 `json:"closes_by_reason"`

	// Idempotency (docs/IDEMPOTENCY.md), for servers that advertise it.
	KeyedCalls   int64 `json:"keyed_calls"`   // tools/call sent with an idempotency key
	KeyedRetries int64 `json:"keyed_retries"` // keyed calls sent again after a failure
	Replays      int64 `json:"replays"`       // answers the server gave from its record
	Conflicts    int64 `json:"conflicts"`     // keys the server said were used for another call
	Interrupted  int64 `json:"interrupted"`   // calls a crash of the server cut off
	KeysExpired  int64 `json:"keys_expired"`  // keys older than the server's retention
}

var _ io.Closer = (*Pool)(nil)

// DefaultTransport returns the HTTP transport of every Pool whose Options
// give none, shared as http.DefaultTransport is: a caller that needs to
// drop the pools' idle connections (a server it knows restarted) calls
// CloseIdleConnections on it. It is a func, not a variable, so that no
// package can swap the transport under every pool of the process; set
// Options.Transport instead.
//
// It is a clone of http.DefaultTransport that keeps more idle connections:
// that one keeps 2 per host, so with more concurrent calls to one server
// every call beyond the second opened (and soon closed) a connection of its
// own. A pool talks to few hosts with many concurrent calls, so this keeps
// 256 per host, 1,024 in all.
func DefaultTransport() *http.Transport { return defaultTransport }

var defaultTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	return t
}()

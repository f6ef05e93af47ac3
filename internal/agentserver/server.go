// Package agentserver runs one agent as an MCP server over Streamable HTTP:
// the native toolsets its agent.json names, and an ask tool that hands a task
// to the agent's own model turn. Every tools/call is checked against the
// delegation chain it carries before any tool runs (chain.go); the HTTP side
// is go-sdk's StreamableHTTPHandler behind the mcphttp middleware.
//
// New builds a Server for tests and for in-process use; Main is the
// `switchboard agent serve` command around it.
package agentserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/agents"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/dirlock"
	"github.com/switchboard-run/switchboard/internal/journal"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/pgdb"
	"github.com/switchboard-run/switchboard/internal/proxy"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// DefaultSessionTimeout closes a session that has seen no request for this
// long; go-sdk and the python SDK use about the same.
const DefaultSessionTimeout = 30 * time.Minute

// Options configure a Server. The zero value of every field means its
// default.
type Options struct {
	// DataDir is the agent's private data directory, created if missing;
	// default .switchboard/data/<name> under the current directory.
	DataDir string
	// SessionTimeout closes idle sessions; default DefaultSessionTimeout;
	// negative: never.
	SessionTimeout time.Duration
	// MaxBodyBytes bounds a request body; default
	// mcphttp.DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Token, when set, is a bearer token every request must carry.
	Token string
	// MaxConcurrentCalls caps the tools/call requests that run at once;
	// more wait for a slot, each until its caller gives up (see limit.go).
	// Zero means no cap.
	MaxConcurrentCalls int
	// Budget bounds the process's connections, in-flight body bytes and
	// body time; default mcphttp.NewBudget(nil).
	Budget *mcphttp.BudgetOptions
	// ModelTimeout bounds each model request of the ask tool's turns
	// (runtime.Options.ModelTimeout); zero: its default.
	ModelTimeout time.Duration
	// Logger; default: discard.
	Logger *slog.Logger
	// DatabaseURL, when set (postgres:// or postgresql://), puts the
	// idempotency ledger and the toolsets' stores (packrat's notes) in that
	// PostgreSQL database, in a schema of the agent's own
	// (pgdb.SchemaFor), shared by every replica of the agent; without it,
	// SQLite files in DataDir.
	DatabaseURL string
	// NoResumableStreams turns off resumable SSE: by default each
	// session's SSE events are kept (bounded, in memory) so a client can
	// resume a dropped stream (resume.go).
	NoResumableStreams bool
	// Pool carries the agent's own delegations (the ask tool's model turn).
	// When nil the Server makes one on first use and closes it in Close.
	Pool *pool.Pool
	// Journal bounds the run journal (DataDir/journal.db, journal.go);
	// nil means its defaults.
	Journal *journal.Options
	// NoContinuity turns off the agent's own session continuity
	// (continuity.go): by default a session-era client keeps its session
	// across the agent's restart and, with DatabaseURL, on any replica.
	NoContinuity bool
}

// Server is one agent served over MCP.
type Server struct {
	def     *agentdef.Definition
	dataDir string
	dirLock *dirlock.Lock // held from New to Close
	logger  *slog.Logger
	mcp     *mcp.Server
	handler http.Handler
	closers []namedCloser // the toolsets', in registration order
	ask     *asker
	metrics *serverMetrics
	limit   *limiter // nil without Options.MaxConcurrentCalls
	budget  *mcphttp.Budget
	self    *selfSession
	idem    *idemServer      // idempotency.go
	drain   *drainer         // drain.go
	journal *journal.Journal // journal.go
	// continuity keeps the sessions of the agent's own clients
	// (continuity.go); nil with Options.NoContinuity.
	continuity *proxy.Continuity

	closed          atomic.Bool // Close has begun: the stores are (being) closed
	dbURL, dbSchema string      // Options.DatabaseURL and its schema (pgdb.SchemaFor)
	token           string      // Options.Token: /runs needs it as /mcp does (runs.go)

	closeOnce sync.Once
	closeErr  error
}

type namedCloser struct {
	name string
	io.Closer
}

// New builds the server for def: it creates the data directory and
// registers every toolset def names, plus ask. A toolset name that package
// agents does not know is an error that names it.
func New(def *agentdef.Definition, opts *Options) (_ *Server, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if def == nil || def.Name == "" {
		return nil, errors.New("agentserver: an agent definition with a name is required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.SessionTimeout == 0:
		o.SessionTimeout = DefaultSessionTimeout
	case o.SessionTimeout < 0:
		o.SessionTimeout = 0 // go-sdk: never
	}
	dataDir, err := prepareDataDir(o.DataDir, def.Name)
	if err != nil {
		return nil, err
	}
	// One process per data directory (internal/dirlock): a second agent
	// process on it would take the first's running calls and runs for
	// interrupted ones.
	lock, err := dirlock.Acquire(dataDir, "agent "+def.Name)
	if err != nil {
		return nil, fmt.Errorf("agent %s: data directory: %w", def.Name, err)
	}
	defer func() {
		if err != nil {
			lock.Release()
		}
	}()
	logger := o.Logger.With("agent", def.Name)

	var schema string
	if o.DatabaseURL != "" {
		if err := pgdb.CheckURL(o.DatabaseURL); err != nil {
			return nil, fmt.Errorf("agent %s: %w", def.Name, err)
		}
		if schema, err = pgdb.SchemaFor(def.Name); err != nil {
			return nil, fmt.Errorf("agent %s: %w", def.Name, err)
		}
	}
	// The toolsets' server-wide handlers (completion, subscriptions) go in
	// before the server is made: go-sdk takes them only then.
	handlers, err := agents.MergeHandlers(def.Tools)
	if err != nil {
		return nil, fmt.Errorf("agent %s (%s): %w", def.Name, def.Dir, err)
	}
	s := &Server{def: def, dataDir: dataDir, dirLock: lock, dbURL: o.DatabaseURL, dbSchema: schema, token: o.Token, logger: logger, budget: mcphttp.NewBudget(o.Budget), self: &selfSession{}, drain: newDrainer(def.Name)}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: def.Name, Title: def.Name, Version: version()}, &mcp.ServerOptions{
		Instructions:       def.Description,
		Logger:             sdkLogger(logger), // sdklog.go
		CompletionHandler:  handlers.Complete,
		SubscribeHandler:   handlers.Subscribe,
		UnsubscribeHandler: handlers.Unsubscribe,
	})
	// Innermost of all, inside the ledger's guard, so that what it records
	// is what the caller got (bound.go).
	s.mcp.AddReceivingMiddleware(boundToolErrors)
	if err := s.startIdempotency(); err != nil { // innermost but for the bound: idempotency.go
		return nil, err
	}
	if o.MaxConcurrentCalls > 0 {
		// Added first, so innermost: a call the chain refuses takes no slot.
		s.limit = newLimiter(def.Name, o.MaxConcurrentCalls, logger, s.self)
		s.mcp.AddReceivingMiddleware(s.limit.middleware)
	}
	s.mcp.AddReceivingMiddleware(chainMiddleware(def.Name, def.MaxDepth, logger, s.self))
	// Outside the chain, the cap and the guard, so that a call cut at the
	// end of the shutdown grace is cancelled wherever it is (waiting for a
	// slot, running), and its caller told why (drain.go).
	s.mcp.AddReceivingMiddleware(s.drain.middleware())
	// Added after the chain's, so outside it: a refused call is traced too.
	s.mcp.AddReceivingMiddleware(traceMiddleware(def.Name))

	for _, name := range def.Tools {
		ts, ok := agents.Lookup(name)
		if !ok {
			s.closeToolsets()
			return nil, fmt.Errorf("agent %s (%s): unknown toolset %q in \"tools\" (known: %s)",
				def.Name, def.Dir, name, strings.Join(agents.Names(), ", "))
		}
		c, err := ts(s.mcp, agents.Env{DataDir: dataDir, DatabaseURL: s.dbURL, DatabaseSchema: s.dbSchema, Logger: logger.With("toolset", name)})
		if err != nil {
			s.closeToolsets()
			return nil, fmt.Errorf("agent %s: toolset %q: %w", def.Name, name, err)
		}
		if c != nil {
			s.closers = append(s.closers, namedCloser{name, c})
		}
	}
	s.ask = newAsker(def, o.Pool, logger)
	s.ask.modelTimeout = o.ModelTimeout
	if len(def.Tools) > 0 {
		s.ask.native = func(ctx context.Context, next delegation.Caller) (*nativeCaller, error) {
			return connectNative(ctx, s.mcp, s.self, def.Name, next)
		}
	}
	s.metrics = newServerMetrics(def.Name, s.ask.poolStats)
	s.metrics.registerSessions(def.Name, s.sessionCount)
	s.ask.metrics = s.metrics
	s.ask.register(s.mcp)
	if err := s.startJournal(o.Journal); err != nil {
		s.closeToolsets()
		return nil, err
	}
	if err := s.declareIdempotency(); err != nil {
		s.journal.Close()
		s.closeToolsets()
		return nil, err
	}

	streamable := retryField(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      o.SessionTimeout,
		MaxRequestBodyBytes: o.MaxBodyBytes,
		Logger:              logger,
		EventStore:          eventStore(!o.NoResumableStreams), // resume.go: resumable SSE
	}), sseRetry)
	// The sessionless era (2026-07-28) on the same endpoint, from the same
	// mcp.Server, so both eras see the same tools and receiving middleware
	// (chain, limit, trace, idempotency). go-sdk's stateless handler serves
	// each request on a session of its own that ends with it; a cancelled
	// HTTP request cancels the tool's context, which in this era is how a
	// caller cancels (there is no session to send notifications/cancelled
	// on). No event store: priming events are a 2025-11-25 feature, and a
	// sessionless stream has no session to resume it in.
	sessionless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		PropagateRequestCancellation: true,
		MaxRequestBodyBytes:          o.MaxBodyBytes,
		Logger:                       logger,
	})
	ttl := time.Duration(0)
	if o.SessionTimeout > 0 {
		// Outlive go-sdk's own timer, so the binding is never the first to
		// forget a live session; go-sdk's 404 then prunes it.
		ttl = o.SessionTimeout + time.Minute
	}
	// A binding forgotten for idleness is a session go-sdk should have
	// closed already; close it anyway, so the table and go-sdk never
	// disagree about what is open.
	expired := s.closeSession
	var restore func(context.Context, string, string) bool
	var sessioned http.Handler = streamable
	if !o.NoContinuity {
		if sessioned, err = s.startContinuity(streamable, ttl); err != nil {
			s.journal.Close()
			s.closeToolsets()
			return nil, err
		}
		// Continuity knows which go-sdk session a client's id maps to now,
		// and closes that one.
		expired, restore = s.continuity.Expire, s.continuity.Restore
	}
	// The drain gate sits behind the middleware, which has parsed the
	// message by then, and in front of both eras (drain.go).
	s.handler = mcphttp.New(s.drain.gate(mcphttp.ByEra(sessioned, sessionless)), &mcphttp.Options{
		MaxBodyBytes:     o.MaxBodyBytes,
		Token:            o.Token,
		SessionIdleTTL:   ttl,
		OnSessionExpired: expired,
		RestoreSession:   restore,
		RefuseCall:       refuseUnreadableChain(def.Name),
		Budget:           s.budget,
		Logger:           logger,
	})
	return s, nil
}

// sessionCount is how many MCP sessions the agent has open.
func (s *Server) sessionCount() int {
	n := 0
	for range s.mcp.Sessions() {
		n++
	}
	return n
}

// closeSession ends the go-sdk session with id, if it is still open.
func (s *Server) closeSession(id string) {
	for ss := range s.mcp.Sessions() {
		if ss.ID() == id {
			ss.Close()
			return
		}
	}
}

// Budget is the process's budget (connections, body bytes, body time); the
// HTTP server in front of Handler should use its Listener and Handler.
func (s *Server) Budget() *mcphttp.Budget { return s.budget }

// Handler serves the agent's MCP endpoint (Streamable HTTP) at whatever path
// it is mounted on; `agent serve` mounts it at /mcp.
func (s *Server) Handler() http.Handler { return s.handler }

// DataDir is the agent's data directory (absolute).
func (s *Server) DataDir() string { return s.dataDir }

// CloseSessions ends every MCP session, which also ends their open SSE
// streams; an http.Server's Shutdown waits for those, so call this first.
func (s *Server) CloseSessions() {
	for ss := range s.mcp.Sessions() {
		ss.Close()
	}
}

// Close ends every session and releases the toolsets and the pool the
// Server made. It is idempotent. The HTTP server in front of Handler should
// be shut down before Close, so no tool runs against a closed toolset.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.CloseSessions()
		if s.continuity != nil {
			s.continuity.Wait() // the DELETEs of expired sessions
		}
		err := s.closeToolsets()
		s.closeErr = errors.Join(err, s.ask.close())
		if s.journal != nil {
			s.closeErr = errors.Join(s.closeErr, s.journal.Close())
		}
		// Last: the directory is free only once its files are closed.
		s.closeErr = errors.Join(s.closeErr, s.dirLock.Release())
	})
	return s.closeErr
}

func (s *Server) closeToolsets() error {
	var errs []error
	for _, c := range s.closers {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("agent %s: closing toolset %q: %w", s.def.Name, c.name, err))
		}
	}
	s.closers = nil
	return errors.Join(errs...)
}

// prepareDataDir returns the absolute data directory, creating it.
func prepareDataDir(dir, name string) (string, error) {
	if dir == "" {
		dir = filepath.Join(".switchboard", "data", name)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("agent %s: data directory %q: %w", name, dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("agent %s: creating the data directory: %w", name, err)
	}
	// Whatever mode a directory that already existed had: it holds what
	// the agent was asked to keep.
	if err := os.Chmod(abs, 0o700); err != nil {
		return "", fmt.Errorf("agent %s: data directory %s: %w", name, abs, err)
	}
	return abs, nil
}

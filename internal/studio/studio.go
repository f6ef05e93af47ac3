// Package studio runs every agent of a project as a supervised child process
// behind one HTTP endpoint: what `switchboard up` (package upcmd) starts.
// An agent whose agent.json gives a url runs on another host; the studio
// proxies to it the same way and starts nothing (remote.go).
// It wires the packages that do the work, one reason to change each:
// supervisor (the agents' processes), proxy (forwarding to them, across
// their restarts), observe (what passes through, recorded), fleetmetrics
// (/metrics) and console (the pages and their API). Its own files are the
// wiring (studio.go), the routing with its gate (routes.go) and the agents
// on other hosts (remote.go).
package studio

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/console"
	"github.com/switchboard-run/switchboard/internal/dirlock"
	"github.com/switchboard-run/switchboard/internal/fleetmetrics"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/observe"
	"github.com/switchboard-run/switchboard/internal/proxy"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/supervisor"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// ErrTokenRequired is returned by Start when asked to listen beyond loopback
// without a token.
var ErrTokenRequired = errors.New("a bearer token is required to listen beyond loopback")

// Options configure a Studio. The zero value of every field means its
// default.
type Options struct {
	// Dir is the project directory holding agents/; default ".".
	Dir string
	// Listen is the address to listen on; default DefaultListen. Port 0
	// picks a free port (see Studio.URL).
	Listen string
	// Executable is the switchboard binary agents run as; default
	// os.Executable().
	Executable string
	// Token is the bearer token /api/ requires. Required when Listen is not
	// a loopback address.
	Token string
	// Logger gets the studio's own logs; default: discard.
	Logger *slog.Logger
	// AgentOutput gets every agent's log lines, prefixed by its name;
	// default os.Stderr.
	AgentOutput io.Writer
	// LogFormat is passed to agents' --log-format; default "text".
	LogFormat string
	// Env is added to the agents' environment (after os.Environ()).
	Env []string

	// RestartWait is how long a request for an agent that is (re)starting is
	// held before the studio answers 503; default 10s, negative: answer at
	// once. Holding it lets the request reach the new process (where the
	// caller's stale session gets the 404 its pool recovers from) instead of
	// failing with a 503 that leaves the caller unsure whether anything ran.
	RestartWait time.Duration
	// StartTimeout bounds how long an agent may take to listen; default
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// StopTimeout is how long an agent gets between SIGTERM and SIGKILL;
	// default 10s.
	StopTimeout time.Duration
	// MinBackoff and MaxBackoff bound the delay before restarting an agent
	// that exited; defaults 250ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// HealthyAfter is how long an agent must run for its backoff to reset;
	// default 30s.
	HealthyAfter time.Duration
	// MaxBodyBytes bounds a proxied request body; default
	// mcphttp.DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Budget bounds the studio's connections, in-flight body bytes and
	// body time; default mcphttp.NewBudget(nil).
	Budget *mcphttp.BudgetOptions
	// AgentMaxConcurrent is passed to every agent as --max-concurrent: the
	// tools/call requests one agent runs at once; default
	// DefaultAgentMaxConcurrent, negative: no cap.
	AgentMaxConcurrent int
	// RemoteCheckInterval is how often an agent on another host (its
	// agent.json gives a url) is checked while it answers; default
	// DefaultRemoteCheckInterval. See remote.go.
	RemoteCheckInterval time.Duration
	// SessionIdleTTL forgets a proxied session unused for this long, and
	// closes it at its agent; default sessionIdleTTL (31m, longer than
	// the agents' own idle timeout).
	SessionIdleTTL time.Duration
	// Now is the clock by which proxied sessions are idle; default
	// time.Now. For tests.
	Now func() time.Time
	// DatabaseURL, when set (postgres:// or postgresql://), keeps the
	// studio's session continuity in that database (schema
	// switchboard_studio) instead of <Dir>/.switchboard/studio/continuity.db
	// (continuity.go).
	DatabaseURL string

	// wrapUpstream, when set, wraps what carries proxied requests to the
	// agents: a test in this package sees there what reached an agent
	// (and with which credentials) after the studio's checks.
	wrapUpstream func(http.RoundTripper) http.RoundTripper
	// wrapHandler, set by a test in this package, wraps the studio's
	// handler: a handler that will not return shows what Close says of it.
	wrapHandler func(http.Handler) http.Handler
}

// DefaultAgentMaxConcurrent is the default cap on the tools/calls one agent
// started by the studio runs at once; more wait for a slot (each until its
// caller's deadline). It bounds what a flood of calls can make an agent do
// at once, far above what one person's tools ask of it.
const DefaultAgentMaxConcurrent = 32

// maxHeaderBytes bounds a request's header: MCP sends a handful of short
// headers.
const maxHeaderBytes = 64 << 10

// DefaultStartTimeout bounds how long an agent may take to listen.
const DefaultStartTimeout = 30 * time.Second

// shutdownTimeout bounds how long Close waits for proxied requests.
const shutdownTimeout = 5 * time.Second

// ErrStillServing is wrapped by Close's error when requests were still
// being served shutdownTimeout after Close ended the streams that never end
// by themselves; the error names them (method and path, at most
// maxNamedRequests), and their connections were closed.
var ErrStillServing = errors.New("requests still being served")

// maxNamedRequests bounds how many of the requests still served Close's
// error names.
const maxNamedRequests = 8

// inflight is the requests being served, so that Close can name those that
// did not stop. It costs one short critical section per request.
type inflight struct {
	mu   sync.Mutex        // protects following fields
	next uint64            // key of the next request
	reqs map[uint64]string // method and path, by key
}

func (f *inflight) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		if f.reqs == nil {
			f.reqs = make(map[uint64]string)
		}
		k := f.next
		f.next++
		f.reqs[k] = r.Method + " " + r.URL.Path
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			delete(f.reqs, k)
			f.mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}

// names returns up to max of the requests being served, sorted, and how
// many there are.
func (f *inflight) names(max int) ([]string, int) {
	f.mu.Lock()
	all := make([]string, 0, len(f.reqs))
	for _, n := range f.reqs {
		all = append(all, n)
	}
	f.mu.Unlock()
	slices.Sort(all)
	return all[:min(max, len(all))], len(all)
}

// Studio is a running studio. Close it when done.
type Studio struct {
	opts      Options
	lock      *dirlock.Lock // the project's, held from Start to Close
	logger    *slog.Logger
	url       string
	ln        net.Listener
	srv       *http.Server
	handler   http.Handler
	inflight  inflight // what srv is serving, for Close's error
	transport *http.Transport
	pool      *pool.Pool          // lists agents' tools
	agents    map[string]*managed // fixed after Start
	names     []string            // sorted; fixed after Start

	budget    *mcphttp.Budget   // the whole process's: connections, body bytes, body time
	agentKeys map[string]string // agent name by its key; fixed after Start
	// agentHeaders are the headers the studio's own pool sends straight
	// to an agent: a remote agent's bearer token. Fixed after Start.
	agentHeaders map[string]map[string]string
	// models is the model each agent runs, by name (model.go); fixed
	// after Start.
	models map[string]*studioapi.AgentModel

	// What the proxy sees, recorded (package observe); the agents' log
	// lines; the fleet's /metrics; the pages and their API.
	observer *observe.Observer
	logs     *observe.Logs
	fleet    *fleetmetrics.Fleet
	console  *console.Console

	stop    context.CancelFunc // stops the supervisors
	wg      sync.WaitGroup     // supervisors and the server
	served  chan error
	closed  atomic.Bool // Close has begun: /readyz fails (ready.go)
	closing sync.Once
	closeE  error

	// life ends when Close begins: what is proxied to remote agents ends
	// with it, as a local agent's exit ends what is proxied to it.
	life    context.Context
	endLife context.CancelFunc

	// sessions keeps every agent's proxied sessions beyond the studio's
	// process (continuity.go).
	sessions *sessionDB
}

// managed is an agent and its route.
type managed struct {
	// proc is the agent's supervisor, or its remote (remote.go) for an
	// agent on another host.
	proc  supervisor.Member
	route *mcphttp.Handler // the agent's MCP route: the proxy behind the mcphttp middleware
	// continuity keeps the proxy's sessions across the agent's restarts
	// and the studio's own (continuity.go).
	continuity *proxy.Continuity
	// remote is proc for an agent on another host; nil for the others.
	remote *remote
}

// Start loads every agent under <Dir>/agents, listens, and starts the agents.
// It returns once the studio serves; the agents come up in the background
// (see WaitReady). ctx bounds only the start.
func Start(ctx context.Context, opts *Options) (_ *Studio, err error) {
	o, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	if err := checkExposure(o.Listen, o.Token); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.Listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("studio: %w (is a studio already running? see %s/healthz, or pass --listen 127.0.0.1:0)", err, "http://"+o.Listen)
		}
		return nil, fmt.Errorf("studio: %w", err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if !mcphttp.IsLoopback(host) && o.Token == "" {
		// The name resolved somewhere the pre-check could not see.
		ln.Close()
		return nil, fmt.Errorf("studio: %w: %s resolved to %s; set %s", ErrTokenRequired, o.Listen, host, studioapi.EnvToken)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		// Listening on every interface: agents and local clients reach it
		// on loopback. Go reports a wildcard listener as [::] even for
		// "0.0.0.0" (it is dual-stack), so the asked-for host decides.
		host = "127.0.0.1"
		if asked, _, _ := net.SplitHostPort(o.Listen); strings.Contains(asked, ":") {
			host = "::1"
		}
	}
	studioURL := "http://" + net.JoinHostPort(host, port)
	// One studio per project (internal/dirlock): a second would start a
	// second process of every agent, on the same data directories. Taken
	// once listening, so that the lock names where the first one serves.
	lock, err := lockProject(o.Dir, studioURL)
	if err != nil {
		ln.Close()
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.Release()
		}
	}()
	// Loaded once the studio knows its own address: an agent's mcp.json
	// may name ${SWITCHBOARD_STUDIO_URL} without a default, which the
	// agents get set, and so does the studio reading the file. Every other
	// variable is the environment's; a missing one is a ConfigError
	// naming the file.
	defs, err := agentdef.LoadAllWith(filepath.Join(o.Dir, "agents"), func(k string) (string, bool) {
		switch {
		case k == studioapi.EnvStudioURL:
			return studioURL, true
		case k == studioapi.EnvToken && o.Token != "":
			return o.Token, true
		}
		return os.LookupEnv(k)
	})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("studio: %w", err)
	}

	s := &Studio{
		opts:      o,
		lock:      lock,
		logger:    o.Logger,
		url:       studioURL,
		ln:        ln,
		transport: proxy.NewTransport(),
		agents:    make(map[string]*managed),
		served:    make(chan error, 1),
		budget:    mcphttp.NewBudget(o.Budget),
		agentKeys: make(map[string]string),

		agentHeaders: make(map[string]map[string]string),
	}
	s.life, s.endLife = context.WithCancel(context.Background())
	if s.sessions, err = openSessions(ctx, o); err != nil {
		ln.Close()
		return nil, fmt.Errorf("studio: %w", err)
	}
	keys := make(map[string]string)   // by agent name; the agents the studio runs
	tokens := make(map[string]string) // remote agents' bearer tokens, by name
	for _, d := range defs {
		if d.Remote() {
			tok, err := remoteToken(d, o.Env)
			if err != nil {
				ln.Close()
				s.sessions.Close()
				return nil, fmt.Errorf("studio: %w", err)
			}
			tokens[d.Name] = tok
			if tok != "" {
				s.agentHeaders[d.Name] = map[string]string{"Authorization": "Bearer " + tok}
			}
			continue
		}
		keys[d.Name] = rand.Text()
		s.agentKeys[keys[d.Name]] = d.Name
	}
	s.pool = pool.New(&pool.Options{
		Transport:  s.transport,
		Logger:     o.Logger.With("component", "pool"),
		ClientInfo: &mcp.Implementation{Name: "switchboard-studio", Version: "0"},
	})
	// What the studio keeps for its pages is scrubbed of the credentials
	// in the environment, the token and the agents' keys.
	scrub := newScrubber(o, keys, tokens)
	delegations := observe.NewDelegations()
	runs := observe.NewRuns(scrub, delegations)
	s.logs = observe.NewLogs(scrub)
	cfg := &supervisor.Config{
		Executable: o.Executable,
		LogFormat:  o.LogFormat,
		// The studio's own address last: agents reach their siblings
		// through it, whatever Env says.
		// And the agents' own continuity off: the studio's keeps their
		// sessions (continuity.go).
		Env:          append(slices.Clip(o.Env), studioapi.EnvStudioURL+"="+s.url, proxy.EnvContinuity+"=0"),
		StartTimeout: o.StartTimeout,
		StopTimeout:  o.StopTimeout,
		MinBackoff:   o.MinBackoff,
		MaxBackoff:   o.MaxBackoff,
		HealthyAfter: o.HealthyAfter,
		Logger:       o.Logger,
		Output:       supervisor.NewOutput(o.AgentOutput, s.logs.Add),
		AgentEnv: func(name string) []string {
			env := []string{studioapi.EnvAgentKey + "=" + keys[name]}
			if o.Token != "" {
				// What the bundled tools/mcp.json sends, so that agents
				// reach their siblings through a studio that requires it.
				env = append(env, studioapi.EnvToken+"="+o.Token)
			}
			return env
		},
		MaxConcurrent: o.AgentMaxConcurrent,
	}
	for _, d := range defs {
		cfg.PrefixWidth = max(cfg.PrefixWidth, len(d.Name))
	}
	s.models = make(map[string]*studioapi.AgentModel, len(defs))
	for _, d := range defs {
		if !d.Remote() { // a remote's model is its own host's business
			s.models[d.Name] = agentModel(d, s.pool, childEnv(cfg.Env))
		}
	}
	for _, d := range defs {
		if d.Remote() {
			rem, err := newRemote(d, tokens[d.Name], s.upstreamBase(), o.RemoteCheckInterval, o.Logger)
			if err != nil {
				ln.Close()
				s.pool.Close()
				s.sessions.Close()
				return nil, fmt.Errorf("studio: %w", err)
			}
			route, cont := s.agentProxy(rem, &remoteTransport{r: rem, wait: o.RestartWait, life: s.life, resent: observe.NoteReplayed})
			s.agents[d.Name] = &managed{proc: rem, route: route, continuity: cont, remote: rem}
			s.names = append(s.names, d.Name)
			continue
		}
		dir, err := filepath.Abs(d.Dir)
		if err != nil {
			ln.Close()
			s.pool.Close()
			s.sessions.Close()
			return nil, fmt.Errorf("studio: agent %s: %w", d.Name, err)
		}
		proc := supervisor.New(d, dir, filepath.Join(o.Dir, ".switchboard", "data", d.Name), cfg)
		route, cont := s.agentProxy(proc, nil)
		s.agents[d.Name] = &managed{proc: proc, route: route, continuity: cont}
		s.names = append(s.names, d.Name)
	}
	slices.Sort(s.names)
	s.wire(delegations, runs, scrub)
	if len(defs) == 0 {
		o.Logger.Warn("no agents found", "dir", filepath.Join(o.Dir, "agents"))
	}

	s.handler = s.routes()
	served := s.budget.Handler(s.handler)
	if o.wrapHandler != nil {
		served = o.wrapHandler(served)
	}
	s.srv = &http.Server{
		// The budget sets each request's body deadline (no ReadTimeout:
		// it would also end SSE streams, whose request is still "read").
		Handler:           s.inflight.track(served),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
		// No WriteTimeout: SSE streams are long-lived by design.
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.served <- s.srv.Serve(s.budget.Listener(ln))
	}()

	// The supervisors live until Close, not until ctx is done.
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	for _, name := range s.names {
		s.wg.Go(func() { s.agents[name].proc.Run(runCtx) })
	}
	o.Logger.Info("studio serving", "url", s.url, "agents", s.names)
	return s, nil
}

// wire makes the observer, the fleet's metrics and the console of the
// agents s runs.
func (s *Studio) wire(delegations *observe.Delegations, runs *observe.Runs, scrub *logging.Scrubber) {
	tools := observe.NewTools(s.names, s.listTools)
	fleet := make([]fleetmetrics.Agent, 0, len(s.names))
	procs := make(map[string]supervisor.Member, len(s.names))
	for _, name := range s.names {
		m := s.agents[name]
		a := fleetmetrics.Agent{Name: name, Proc: m.proc, Sessions: m.route.Sessions}
		if m.remote != nil {
			a.Transport, a.Scraped = m.remote.rt, m.remote.noteMetrics
		}
		fleet = append(fleet, a)
		procs[name] = m.proc
	}
	s.fleet = fleetmetrics.New(&fleetmetrics.Options{
		Agents:    fleet,
		Transport: s.transport,
		PoolStats: s.pool.Stats,
		Logger:    s.logger,
	})
	series := observe.NewSeries(s.names)
	s.observer = &observe.Observer{
		Budget:  s.budget,
		MaxBody: s.opts.MaxBodyBytes,
		RefusesUnread: func(agent string, r *http.Request) bool {
			m := s.agents[agent]
			return m != nil && m.route.RefusesUnread(r)
		},
		AgentOfKey:  s.agentKeyOf,
		Delegations: delegations,
		Runs:        runs,
		Series:      series,
		Metrics:     observe.NewMetrics(s.fleet.Registerer(), tools),
	}
	s.console = console.New(&console.Options{
		URL:         s.url,
		Names:       s.names,
		Procs:       procs,
		Token:       s.opts.Token,
		Pool:        s.pool,
		Tools:       tools,
		Pools:       s.fleet.Pools,
		Delegations: delegations,
		Runs:        runs,
		Series:      series,
		Logs:        s.logs,
		Scrub:       scrub,
		Logger:      s.logger,
		Auth:        s.AuthState,
		Models:      s.models,
		Headers:     s.agentHeaders,
		HTTP:        &http.Client{Transport: s.transport},
	})
}

// newScrubber redacts the credentials in the environment (the studio's and
// the agents'), the token, the agents' keys and the remote agents' tokens.
func newScrubber(o Options, agentKeys, remoteTokens map[string]string) *logging.Scrubber {
	secrets := logging.SecretsFromEnv(append(os.Environ(), o.Env...))
	if o.Token != "" {
		secrets = append(secrets, o.Token)
	}
	for _, k := range agentKeys {
		secrets = append(secrets, k)
	}
	for _, k := range remoteTokens {
		if k != "" {
			secrets = append(secrets, k)
		}
	}
	return logging.NewScrubber(secrets)
}

// listTools lists agent's tools for the metrics' tool label: through the
// studio's pool, straight to the agent, never through the studio's own
// routes.
func (s *Studio) listTools(ctx context.Context, agent string) ([]string, error) {
	st := s.agents[agent].proc.Status()
	if !st.Routable() {
		return nil, fmt.Errorf("agent %s is %s", agent, st.State)
	}
	tools, err := s.pool.ListTools(ctx, s.toolServer(agent, st))
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names, err
}

func resolve(opts *Options) (Options, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Dir == "" {
		o.Dir = "."
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return o, fmt.Errorf("studio: %w", err)
	}
	o.Dir = dir
	if o.Listen == "" {
		o.Listen = studioapi.DefaultListen
	}
	if o.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("studio: finding the switchboard binary to run agents with: %w", err)
		}
		o.Executable = exe
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.AgentOutput == nil {
		o.AgentOutput = os.Stderr
	}
	if o.LogFormat == "" {
		o.LogFormat = "text"
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if o.SessionIdleTTL <= 0 {
		o.SessionIdleTTL = sessionIdleTTL
	}
	if o.RestartWait == 0 {
		o.RestartWait = 10 * time.Second
	}
	def(&o.StartTimeout, DefaultStartTimeout)
	def(&o.StopTimeout, 10*time.Second)
	def(&o.MinBackoff, 250*time.Millisecond)
	def(&o.MaxBackoff, 30*time.Second)
	def(&o.HealthyAfter, 30*time.Second)
	def(&o.RemoteCheckInterval, DefaultRemoteCheckInterval)
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = mcphttp.DefaultMaxBodyBytes
	}
	switch {
	case o.AgentMaxConcurrent == 0:
		o.AgentMaxConcurrent = DefaultAgentMaxConcurrent
	case o.AgentMaxConcurrent < 0:
		o.AgentMaxConcurrent = 0 // agent serve: no cap
	}
	return o, nil
}

// checkExposure refuses an address beyond loopback without a token. A host
// name other than localhost counts as beyond loopback: it may resolve to
// anything.
func checkExposure(listen, token string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("studio: listen address %q: %w", listen, err)
	}
	if token != "" || mcphttp.IsLoopback(host) {
		return nil
	}
	shown := host
	if shown == "" {
		shown = "every interface"
	}
	return fmt.Errorf("studio: refusing to listen on %s (%s) without a bearer token: %w; set %s (clients then send Authorization: Bearer <token>) or listen on 127.0.0.1",
		listen, shown, ErrTokenRequired, studioapi.EnvToken)
}

// URL is the studio's base URL, e.g. http://127.0.0.1:54321; agents are at
// URL()+"/api/agents/<name>/mcp".
func (s *Studio) URL() string { return s.url }

// AgentURL is the proxied MCP endpoint of agent name.
func (s *Studio) AgentURL(name string) string { return s.console.AgentURL(name) }

// Agents returns every agent's state, sorted by name, without tools: it
// does no I/O.
func (s *Studio) Agents() []studioapi.AgentInfo { return s.console.Agents() }

// Delegations returns the most recent tools/calls the proxy forwarded (at
// most n), newest first.
func (s *Studio) Delegations(n int) []studioapi.Delegation {
	return s.observer.Delegations.Recent(n)
}

// agentKeyOf returns the agent whose key r carries, or "".
func (s *Studio) agentKeyOf(r *http.Request) string {
	k := r.Header.Get(studioapi.HeaderAgentKey)
	if k == "" {
		return ""
	}
	return s.agentKeys[k]
}

// Handler is the studio's HTTP handler (what it serves on URL).
func (s *Studio) Handler() http.Handler { return s.handler }

// WaitReady waits until every agent has finished its first start, running or
// not (an agent on another host: its first check), and returns an error
// naming those that are not running (or do not answer).
func (s *Studio) WaitReady(ctx context.Context) error {
	for _, name := range s.names {
		select {
		case <-s.agents[name].proc.FirstDone():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var down []string
	for _, name := range s.names {
		switch st := s.agents[name].proc.Status(); {
		case st.Remote != nil && !st.Remote.Reachable:
			down = append(down, fmt.Sprintf("%s (remote at %s, unreachable: %s)", name, st.Remote.URL, st.Remote.Error))
		case st.Remote == nil && st.State != studioapi.StateRunning:
			down = append(down, fmt.Sprintf("%s (%s: %s)", name, st.State, st.LastErr))
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("agents not running: %s", strings.Join(down, "; "))
	}
	return nil
}

// Close stops serving, stops every agent (SIGTERM, then SIGKILL after
// StopTimeout) and waits for all of it. It is idempotent.
func (s *Studio) Close() error {
	s.closing.Do(func() {
		s.closed.Store(true)
		// First the asks started from the page (console/ask.go): their
		// event streams would hold Shutdown, and their calls go through
		// this very server.
		if s.console != nil {
			s.console.Close()
		}
		// Then end what never ends by itself: the clients' standalone
		// streams held through session continuity (and the requests
		// waiting for a session's renewal), and everything proxied to a
		// remote agent (life). Shutdown would wait for them in vain.
		for _, m := range s.agents {
			m.continuity.EndStreams()
		}
		s.endLife()
		// Then stop accepting and stop the agents at the same time: the
		// agents' exit is what ends the calls still proxied to them.
		shutdown := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			defer cancel()
			// The budget closes the connections Shutdown would wait for.
			shutdown <- s.budget.Shutdown(ctx, s.srv)
		}()
		s.stop()
		var errs []error
		if err := <-shutdown; err != nil {
			named, n := s.inflight.names(maxNamedRequests)
			errs = append(errs, fmt.Errorf("studio: closing %s: %w %v after Close began, their connections closed: %d (%s): %w",
				s.url, ErrStillServing, shutdownTimeout, n, strings.Join(named, ", "), err))
			s.srv.Close()
		}
		s.wg.Wait()
		for _, m := range s.agents {
			m.continuity.Wait() // the DELETEs of expired sessions still going
		}
		errs = append(errs, s.sessions.Close())
		if err := <-s.served; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("studio: serving: %w", err))
		}
		errs = append(errs, s.pool.Close())
		s.transport.CloseIdleConnections()
		// Last: the agents have exited, so their directories are free too.
		errs = append(errs, s.lock.Release())
		s.closeE = errors.Join(errs...)
	})
	return s.closeE
}

// Restart stops agent name's process and starts it again at once.
func (s *Studio) Restart(name, reason string) error {
	m, ok := s.agents[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownAgent, name)
	}
	return m.proc.Restart(reason)
}

// Stop stops agent name until StartAgent.
func (s *Studio) Stop(name, reason string) error {
	m, ok := s.agents[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownAgent, name)
	}
	return m.proc.Stop(reason)
}

// StartAgent starts agent name again after Stop, or after it was given up.
func (s *Studio) StartAgent(name, reason string) error {
	m, ok := s.agents[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownAgent, name)
	}
	return m.proc.Start(reason)
}

// ErrUnknownAgent names an agent the studio does not run.
var ErrUnknownAgent = errors.New("unknown agent")

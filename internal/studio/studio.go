// Package studio runs every agent of a project as a supervised child process
// behind one HTTP endpoint: what `switchboard up` (package upcmd) starts.
// It wires the packages that do the work, one reason to change each:
// supervisor (the agents' processes), proxy (forwarding to them, across
// their restarts), observe (what passes through, recorded), fleetmetrics
// (/metrics) and console (the pages and their API). Its own files are the
// wiring (studio.go) and the routing with its gate (routes.go).
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
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/console"
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
	// SessionIdleTTL forgets a proxied session unused for this long, and
	// closes it at its agent; default sessionIdleTTL (31m, longer than
	// the agents' own idle timeout).
	SessionIdleTTL time.Duration
	// Now is the clock by which proxied sessions are idle; default
	// time.Now. For tests.
	Now func() time.Time

	// wrapUpstream, when set, wraps what carries proxied requests to the
	// agents: a test in this package sees there what reached an agent
	// (and with which credentials) after the studio's checks.
	wrapUpstream func(http.RoundTripper) http.RoundTripper
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

// Studio is a running studio. Close it when done.
type Studio struct {
	opts      Options
	logger    *slog.Logger
	url       string
	ln        net.Listener
	srv       *http.Server
	handler   http.Handler
	transport *http.Transport
	pool      *pool.Pool          // lists agents' tools
	agents    map[string]*managed // fixed after Start
	names     []string            // sorted; fixed after Start

	budget    *mcphttp.Budget   // the whole process's: connections, body bytes, body time
	agentKeys map[string]string // agent name by its key; fixed after Start

	// What the proxy sees, recorded (package observe); the agents' log
	// lines; the fleet's /metrics; the pages and their API.
	observer *observe.Observer
	logs     *observe.Logs
	fleet    *fleetmetrics.Fleet
	console  *console.Console

	stop    context.CancelFunc // stops the supervisors
	wg      sync.WaitGroup     // supervisors and the server
	served  chan error
	closing sync.Once
	closeE  error
}

// managed is an agent and its route.
type managed struct {
	proc  *supervisor.Agent
	route *mcphttp.Handler // the agent's MCP route: the proxy behind the mcphttp middleware
	// continuity keeps the proxy's sessions across the agent's restarts.
	continuity *proxy.Continuity
}

// Start loads every agent under <Dir>/agents, listens, and starts the agents.
// It returns once the studio serves; the agents come up in the background
// (see WaitReady). ctx bounds only the start.
func Start(ctx context.Context, opts *Options) (*Studio, error) {
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
		logger:    o.Logger,
		url:       studioURL,
		ln:        ln,
		transport: proxy.NewTransport(),
		agents:    make(map[string]*managed),
		served:    make(chan error, 1),
		budget:    mcphttp.NewBudget(o.Budget),
		agentKeys: make(map[string]string),
	}
	keys := make(map[string]string) // by agent name
	for _, d := range defs {
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
	scrub := newScrubber(o, keys)
	delegations := observe.NewDelegations()
	runs := observe.NewRuns(scrub, delegations)
	s.logs = observe.NewLogs(scrub)
	cfg := &supervisor.Config{
		Executable: o.Executable,
		LogFormat:  o.LogFormat,
		// The studio's own address last: agents reach their siblings
		// through it, whatever Env says.
		Env:          append(slices.Clip(o.Env), studioapi.EnvStudioURL+"="+s.url),
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
	for _, d := range defs {
		dir, err := filepath.Abs(d.Dir)
		if err != nil {
			ln.Close()
			s.pool.Close()
			return nil, fmt.Errorf("studio: agent %s: %w", d.Name, err)
		}
		proc := supervisor.New(d, dir, filepath.Join(o.Dir, ".switchboard", "data", d.Name), cfg)
		route, cont := s.agentProxy(proc)
		s.agents[d.Name] = &managed{proc: proc, route: route, continuity: cont}
		s.names = append(s.names, d.Name)
	}
	slices.Sort(s.names)
	s.wire(delegations, runs, scrub)
	if len(defs) == 0 {
		o.Logger.Warn("no agents found", "dir", filepath.Join(o.Dir, "agents"))
	}

	s.handler = s.routes()
	s.srv = &http.Server{
		// The budget sets each request's body deadline (no ReadTimeout:
		// it would also end SSE streams, whose request is still "read").
		Handler:           s.budget.Handler(s.handler),
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
	procs := make(map[string]*supervisor.Agent, len(s.names))
	for _, name := range s.names {
		m := s.agents[name]
		fleet = append(fleet, fleetmetrics.Agent{Name: name, Proc: m.proc, Sessions: m.route.Sessions})
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
	})
}

// newScrubber redacts the credentials in the environment (the studio's and
// the agents'), the token and the agents' keys.
func newScrubber(o Options, agentKeys map[string]string) *logging.Scrubber {
	secrets := logging.SecretsFromEnv(append(os.Environ(), o.Env...))
	if o.Token != "" {
		secrets = append(secrets, o.Token)
	}
	for _, k := range agentKeys {
		secrets = append(secrets, k)
	}
	return logging.NewScrubber(secrets)
}

// listTools lists agent's tools for the metrics' tool label: through the
// studio's pool, straight to the agent, never through the studio's own
// routes.
func (s *Studio) listTools(ctx context.Context, agent string) ([]string, error) {
	st := s.agents[agent].proc.Status()
	if st.State != studioapi.StateRunning || st.Upstream == nil {
		return nil, fmt.Errorf("agent %s is %s", agent, st.State)
	}
	tools, err := s.pool.ListTools(ctx, &pool.Server{Name: agent, URL: st.Upstream.String(), ProtocolVersion: pool.Protocol20251125})
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
// not, and returns an error naming those that are not running.
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
		if st := s.agents[name].proc.Status(); st.State != studioapi.StateRunning {
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
		// Stop accepting and stop the agents at the same time: the agents'
		// exit is what ends proxied SSE streams, which Shutdown waits for.
		shutdown := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			defer cancel()
			shutdown <- s.srv.Shutdown(ctx)
		}()
		s.stop()
		var errs []error
		if err := <-shutdown; err != nil {
			s.srv.Close()
		}
		s.wg.Wait()
		for _, m := range s.agents {
			m.continuity.Wait() // the DELETEs of expired sessions still going
		}
		if err := <-s.served; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("studio: serving: %w", err))
		}
		errs = append(errs, s.pool.Close())
		s.transport.CloseIdleConnections()
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

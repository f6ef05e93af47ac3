// Package studio runs every agent of a project as a supervised child process
// behind one HTTP endpoint: `switchboard up`. It routes
// /api/agents/<name>/mcp to each agent's MCP server (proxy.go, routes.go),
// lists the agents and their tools at /api/agents (agents.go), and restarts
// an agent that crashes (supervisor.go). What passes through the proxy is
// observed (observe.go) for the fleet's /metrics (metrics.go), the
// recent delegations (delegations.go), and the console (console.go): runs
// with their hops (runs.go), agent pages with their actions (agentpage.go,
// supervisor_control.go) and charts (timeseries.go), which the pages at /
// show (page.go).
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

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/supervisor"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// ReadyFormat is the line `switchboard up` prints on stdout once it serves;
// the argument is the studio's base URL.
const ReadyFormat = "switchboard studio listening on %s\n"

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
	// StartTimeout bounds how long an agent may take to listen; default 30s.
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
}

// DefaultAgentMaxConcurrent is the default cap on the tools/calls one agent
// started by the studio runs at once; more wait for a slot (each until its
// caller's deadline). It bounds what a flood of calls can make an agent do
// at once, far above what one person's tools ask of it.
const DefaultAgentMaxConcurrent = 32

// EnvAgentKey is set in each agent's environment to a key of its own, which
// the bundled tools/mcp.json sends as HeaderAgentKey: the studio then knows
// that a delegation came from the agent it started, not only that the
// chain says so.
const EnvAgentKey = "SWITCHBOARD_AGENT_KEY"

// HeaderAgentKey carries an agent's key to the studio; the proxy does not
// forward it.
const HeaderAgentKey = "X-Switchboard-Agent-Key"

// maxHeaderBytes bounds a request's header: MCP sends a handful of short
// headers.
const maxHeaderBytes = 64 << 10

// shutdownTimeout bounds how long Close waits for proxied requests.
const shutdownTimeout = 5 * time.Second

// listToolsTimeout bounds one agent's tools/list for /api/agents.
const listToolsTimeout = 5 * time.Second

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

	metrics     *studioMetrics
	delegations *delegationLog
	budget      *mcphttp.Budget       // the whole process's: connections, body bytes, body time
	tools       map[string]*toolNames // by agent; fixed after Start (labels.go)
	agentKeys   map[string]string     // agent name by its key; fixed after Start
	console                           // runs, charts, log tails (console.go)

	stop    context.CancelFunc // stops the supervisors
	wg      sync.WaitGroup     // supervisors and the server
	served  chan error
	closing sync.Once
	closeE  error
}

// managed is an agent and its route.
type managed struct {
	proc  *supervisor.Agent
	proxy *mcphttp.Handler
	// continuity keeps the proxy's sessions across the agent's restarts.
	continuity *continuity
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
		transport: newTransport(),
		agents:    make(map[string]*managed),
		served:    make(chan error, 1),
		budget:    mcphttp.NewBudget(o.Budget),
		tools:     make(map[string]*toolNames),
		agentKeys: make(map[string]string),
	}
	keys := make(map[string]string) // by agent name
	for _, d := range defs {
		keys[d.Name] = rand.Text()
		s.agentKeys[keys[d.Name]] = d.Name
		s.tools[d.Name] = &toolNames{}
	}
	s.pool = pool.New(&pool.Options{
		HTTPClient: &http.Client{Transport: s.transport},
		Logger:     o.Logger.With("component", "pool"),
		ClientInfo: &mcp.Implementation{Name: "switchboard-studio", Version: "0"},
	})
	s.delegations = newDelegationLog()
	s.console = newConsole(o, s.delegations, keys)
	s.metrics = newStudioMetrics(s)
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
		Output:       supervisor.NewOutput(o.AgentOutput, s.logs.add),
		AgentEnv: func(name string) []string {
			env := []string{EnvAgentKey + "=" + keys[name]}
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
		proxy, cont := s.agentProxy(proc)
		s.agents[d.Name] = &managed{proc: proc, proxy: proxy, continuity: cont}
		s.names = append(s.names, d.Name)
	}
	slices.Sort(s.names)
	s.series = newSeriesLog(s.names)
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
	def(&o.StartTimeout, 30*time.Second)
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
func (s *Studio) AgentURL(name string) string { return s.url + "/api/agents/" + name + "/mcp" }

// maxBody is the bound of a proxied request body.
func (s *Studio) maxBody() int64 { return s.opts.MaxBodyBytes }

// agentKeyOf returns the agent whose key r carries, or "".
func (s *Studio) agentKeyOf(r *http.Request) string {
	k := r.Header.Get(HeaderAgentKey)
	if k == "" {
		return ""
	}
	return s.agentKeys[k]
}

// Budget reports the studio's budget use (connections, body bytes).
func (s *Studio) Budget() mcphttp.BudgetStats { return s.budget.Stats() }

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
			m.continuity.wait() // the DELETEs of expired sessions still going
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

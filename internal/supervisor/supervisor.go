// Package supervisor runs agents as child processes and keeps them
// running: `switchboard agent serve` for each agent, restarted with
// backoff, stopped, restarted and started again on request, and reported
// in the studio API's terms (studioapi.State, studioapi.ControlEvent). It
// knows agent definitions and processes, nothing of HTTP or of the proxy
// that routes to them.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// The supervisor runs one agent as a child process and keeps it running.
//
// The child is `switchboard agent serve` on a loopback ephemeral port; the
// only way to learn the port is the one line the child prints on stdout when
// it listens (agentserver.ReadyFormat). A child that exits on its own is
// restarted after an exponential backoff, reset once a run has stayed up for
// a healthy period. The child leads its own process group, so stopping it
// reaches whatever it started too (stdio MCP servers), and Pdeathsig kills
// it if the studio dies without stopping it (SIGKILL, a crash). After
// studioapi.GiveUpAfter failed runs in a row it is given up: no further
// restarts, the state says so, and last_error says why. Pdeathsig
// fires when the OS thread that forked the child exits; Go keeps its threads
// unless a goroutine exits while locked to one, which this package never does.

// DefaultShutdownGrace and EnvShutdownGrace are agent serve's own
// (agentserver's, checked equal by a test: this package runs processes and
// does not import the server). The supervisor reads the variable as the
// agent would and passes the grace explicitly, so that its wait before
// SIGKILL is known to cover it.
const (
	DefaultShutdownGrace = 25 * time.Second
	EnvShutdownGrace     = "SWITCHBOARD_SHUTDOWN_GRACE"
)

// childWaitDelay bounds how long an agent's exit waits for its output pipes
// (see exec.Cmd.WaitDelay).
const childWaitDelay = 2 * time.Second

// Config is what every agent's supervisor shares. Every field must be set
// (the studio resolves its defaults), but for the ones said optional.
type Config struct {
	// Executable is the switchboard binary agents run as.
	Executable string
	// LogFormat is passed to each agent's --log-format.
	LogFormat string
	// Env is added to every agent's environment, after os.Environ().
	Env          []string
	StartTimeout time.Duration // how long an agent may take to listen
	// StopTimeout is how long an agent may take to exit after SIGTERM
	// beyond its ShutdownGrace; SIGKILL follows.
	StopTimeout time.Duration
	// ShutdownGrace, optional, is each agent's --shutdown-grace: how long
	// the calls in flight may run once it drains; default
	// $SWITCHBOARD_SHUTDOWN_GRACE in the agents' environment, else
	// DefaultShutdownGrace. The supervisor waits this long plus
	// StopTimeout before SIGKILL.
	ShutdownGrace time.Duration
	// MinBackoff and MaxBackoff bound the delay before restarting an agent
	// that exited; HealthyAfter is how long a run must last for the
	// backoff to reset.
	MinBackoff, MaxBackoff, HealthyAfter time.Duration
	Logger                               *slog.Logger
	// Output gets every agent's log lines, prefixed by its name padded to
	// PrefixWidth.
	Output      *Output
	PrefixWidth int

	// AgentEnv, optional, is added to one agent's environment (its key,
	// the token); MaxConcurrent is its --max-concurrent (0: none passed).
	AgentEnv      func(name string) []string
	MaxConcurrent int
}

// Agent is one supervised agent.
type Agent struct {
	def     *agentdef.Definition
	dir     string // absolute agent folder
	dataDir string // absolute data directory
	cfg     *Config

	firstDone chan struct{} // closed once the first start has succeeded or failed
	firstOnce sync.Once

	ctl agentControl // restarts and stops asked for from the page (control.go)

	// run, nil but in this package's tests, stands for runOnce: one run
	// of the child, so that the restart loop can be tested without
	// processes (supervisor_policy_test.go).
	run func(ctx context.Context) (ranFor time.Duration, err error)

	mu        sync.Mutex    // protects following fields
	changed   chan struct{} // closed and replaced on every state change; see AwaitRunning
	state     studioapi.State
	upstream  *url.URL // the child's /mcp; nil unless running
	pid       int
	restarts  int
	failures  int       // consecutive failed runs
	lastErr   string    // why it last exited; "" once it runs again
	lastErrAt time.Time // when, kept with lastExit
	lastExit  string    // why it last exited, kept after it runs again
	lastLine  string    // the child's last stderr line, for lastErr
	nextStart time.Time // restarting: when the next attempt begins
}

// New returns the supervisor of the agent def, whose folder is dir (an
// absolute path) and whose data directory is dataDir. It starts nothing:
// Run does.
func New(def *agentdef.Definition, dir, dataDir string, cfg *Config) *Agent {
	return &Agent{def: def, dir: dir, dataDir: dataDir, cfg: cfg, firstDone: make(chan struct{}), changed: make(chan struct{}), state: studioapi.StateStarting}
}

// Def is the agent's definition.
func (a *Agent) Def() *agentdef.Definition { return a.def }

// FirstDone is closed once the agent's first start has succeeded or failed.
func (a *Agent) FirstDone() <-chan struct{} { return a.firstDone }

func (a *Agent) markFirst() { a.firstOnce.Do(func() { close(a.firstDone) }) }

// Run keeps the agent running until ctx is done, then stops it and returns.
func (a *Agent) Run(ctx context.Context) {
	defer func() {
		a.mu.Lock()
		a.state, a.upstream, a.pid = studioapi.StateStopped, nil, 0
		a.changedLocked()
		a.mu.Unlock()
		a.markFirst()
	}()
	run := a.runOnce
	if a.run != nil {
		run = a.run
	}
	policy := a.cfg.policy()
	failures := 0
	for ctx.Err() == nil {
		ranFor, err := run(a.ctl.begin(ctx))
		if ctx.Err() != nil {
			return
		}
		if a.controlled(ctx, false) {
			failures = 0
			continue
		}
		var delay time.Duration
		var givenUp bool
		failures, delay, givenUp = policy.afterExit(failures, ranFor)
		a.mu.Lock()
		a.upstream, a.pid, a.failures = nil, 0, failures
		a.lastErr, a.lastErrAt = err.Error(), time.Now()
		if a.lastLine != "" {
			a.lastErr += " (last log line: " + a.lastLine + ")"
		}
		a.lastExit = a.lastErr
		if givenUp {
			a.state, a.nextStart = studioapi.StateGivenUp, time.Time{}
		} else {
			a.state, a.nextStart = studioapi.StateRestarting, time.Now().Add(delay)
			a.restarts++
		}
		a.changedLocked()
		lastErr := a.lastErr
		a.mu.Unlock()
		a.markFirst()
		if givenUp {
			a.ctl.record(studioapi.ControlEvent{Event: studioapi.EventExited, Reason: lastErr + " (given up)"})
			a.cfg.Logger.Error("agent keeps failing; giving up until it is started on request", "agent", a.def.Name, "err", lastErr, "consecutive_failures", failures)
			// Parked as a stopped agent is: StartAgent (the page's start)
			// tries again, with a fresh count of failures.
			select {
			case why := <-a.ctl.park():
				a.ctl.record(studioapi.ControlEvent{Event: studioapi.EventStarted, Reason: why})
				a.cfg.Logger.Info("agent started on request", "agent", a.def.Name, "reason", why)
				failures = 0
				continue
			case <-ctx.Done():
				return
			}
		}
		a.ctl.record(studioapi.ControlEvent{Event: studioapi.EventExited, Reason: lastErr, NextStart: time.Now().Add(delay)})
		a.cfg.Logger.Warn("agent exited; restarting", "agent", a.def.Name, "err", lastErr, "in", delay, "consecutive_failures", failures)

		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-a.ctl.woken():
			// A restart or stop asked for during the backoff: a restart
			// starts now, a stop cancels the pending start.
			t.Stop()
			a.controlled(ctx, true)
			failures = 0
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// park marks the agent stopped between runs, as a stop request does, and
// returns the channel a start request (resume) sends on.
func (c *agentControl) park() <-chan string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.start = make(chan string, 1)
	c.wake = nil
	// A request that came between the run's end and here: a restart is
	// taken as the start it asks for, a stop is what parking is already.
	if c.req == requestRestart {
		c.start <- c.reason
	}
	c.req, c.reason = requestNone, ""
	return c.start
}

// runOnce starts the child and returns when it has exited, or when ctx is
// done and the child has been stopped. ranFor is how long it was running
// (listening); err says why it ended on its own.
func (a *Agent) runOnce(ctx context.Context) (ranFor time.Duration, err error) {
	name := a.def.Name
	prefix := fmt.Sprintf("%-*s | ", a.cfg.PrefixWidth, name)
	ready := make(chan *url.URL, 1)
	stdout := &lineWriter{line: func(l string) {
		if u, ok := parseReady(l, name); ok {
			select {
			case ready <- u:
			default:
			}
			return
		}
		a.cfg.Output.writeLine(name, prefix, l)
	}}
	stderr := &lineWriter{line: func(l string) {
		a.mu.Lock()
		a.lastLine = l
		a.mu.Unlock()
		a.cfg.Output.writeLine(name, prefix, l)
	}}

	cmd := exec.Command(a.cfg.Executable, "agent", "serve",
		"--agent", a.dir,
		"--listen", "127.0.0.1:0",
		"--data-dir", a.dataDir,
		"--log-format", a.cfg.LogFormat)
	if a.cfg.MaxConcurrent > 0 {
		cmd.Args = append(cmd.Args, "--max-concurrent", strconv.Itoa(a.cfg.MaxConcurrent))
	}
	cmd.Args = append(cmd.Args, "--shutdown-grace", a.grace().String())
	cmd.Env = append(os.Environ(), a.cfg.Env...)
	if a.cfg.AgentEnv != nil {
		cmd.Env = append(cmd.Env, a.cfg.AgentEnv(a.def.Name)...)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// After the child exits, its output pipes may stay open in a grandchild
	// that escaped the group; don't let that hold Wait forever.
	cmd.WaitDelay = childWaitDelay

	a.markStarting()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s: %w", a.cfg.Executable, err)
	}
	pid := cmd.Process.Pid
	a.mu.Lock()
	a.pid = pid
	a.mu.Unlock()

	// Every path below receives from exited before returning, so this
	// goroutine never outlives runOnce.
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		stdout.flush()
		stderr.flush()
		exited <- err
	}()

	start := time.NewTimer(a.cfg.StartTimeout)
	defer start.Stop()
	select {
	case u := <-ready:
		a.markRunning(u)
		a.cfg.Logger.Info("agent running", "agent", name, "pid", pid, "upstream", u.String())
	case err := <-exited:
		killGroup(pid)
		return 0, fmt.Errorf("exited before it was ready: %w", exitError(err))
	case <-start.C:
		a.terminate(pid, exited)
		return 0, fmt.Errorf("did not print its listening line within %v", a.cfg.StartTimeout)
	case <-ctx.Done():
		a.terminate(pid, exited)
		return 0, nil
	}

	readyAt := time.Now()
	select {
	case err := <-exited:
		killGroup(pid)
		return time.Since(readyAt), fmt.Errorf("exited: %w", exitError(err))
	case <-ctx.Done():
		a.terminate(pid, exited)
		return time.Since(readyAt), nil
	}
}

// markStarting records that a run begins, before its process does.
func (a *Agent) markStarting() {
	a.mu.Lock()
	defer a.mu.Unlock()
	// A retry stays "restarting" until it listens: "starting" for a moment
	// every few seconds would hide that it keeps failing; the first start
	// is "starting".
	if a.state != studioapi.StateRestarting {
		a.state = studioapi.StateStarting
	}
	a.changedLocked()
	a.upstream, a.pid, a.lastLine = nil, 0, ""
}

// markRunning records that the run's process listens at u.
func (a *Agent) markRunning(u *url.URL) {
	a.mu.Lock()
	// Running again: the last exit is history, not the current error.
	a.state, a.upstream, a.lastErr, a.nextStart = studioapi.StateRunning, u, "", time.Time{}
	a.changedLocked()
	a.mu.Unlock()
	a.markFirst()
}

// unroute stops the proxy routing to the run's process, which is about to
// be asked to end (see terminate).
func (a *Agent) unroute() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.upstream != nil {
		a.upstream = nil
		a.changedLocked()
	}
}

// grace is the agents' --shutdown-grace: Config.ShutdownGrace, else the
// variable in the agents' environment (Config.Env after os.Environ, the
// last one winning, as in exec.Cmd), else the default. A value that is not
// a positive duration leaves the default here; the agent itself refuses it
// at startup, naming the variable, which is the error a person needs.
func (a *Agent) grace() time.Duration {
	if a.cfg.ShutdownGrace > 0 {
		return a.cfg.ShutdownGrace
	}
	v, ok := os.LookupEnv(EnvShutdownGrace)
	for _, kv := range a.cfg.Env {
		if rest, found := strings.CutPrefix(kv, EnvShutdownGrace+"="); found {
			v, ok = rest, true
		}
	}
	if d, err := time.ParseDuration(v); ok && err == nil && d > 0 {
		return d
	}
	return DefaultShutdownGrace
}

// terminate asks the child's process group to end, waits up to its
// shutdown grace plus StopTimeout, then kills it.
//
// The child drains first (agent serve: the calls in flight finish, new
// ones get 503), so the proxy must not send it new work meanwhile: its
// upstream is cleared before the signal, and a request for the agent is
// held (AwaitRunning) until the next process listens, as across a restart,
// or answered as down once the agent is stopped.
func (a *Agent) terminate(pid int, exited <-chan error) {
	a.unroute()
	syscall.Kill(-pid, syscall.SIGTERM)
	wait := a.grace() + a.cfg.StopTimeout
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		a.cfg.Logger.Warn("agent did not stop in time; killing it", "agent", a.def.Name, "pid", pid, "after", wait)
		syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	}
	killGroup(pid)
}

// killGroup kills what is left of the child's process group once the child
// itself has exited (processes it started and did not stop).
func killGroup(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }

func exitError(err error) error {
	if err == nil {
		return errors.New("exit status 0")
	}
	return err
}

// parseReady reads the child's "listening on" line.
func parseReady(line, name string) (*url.URL, bool) {
	rest, ok := strings.CutPrefix(line, "switchboard agent "+name+" listening on ")
	if !ok {
		return nil, false
	}
	u, err := url.Parse(strings.TrimSpace(rest))
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, false
	}
	return u, true
}

// changedLocked wakes everyone waiting in AwaitRunning. a.mu must be held.
func (a *Agent) changedLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// AwaitRunning returns the agent's status once it is running, or as it is
// when waiting makes no sense: it is stopped, its next start is further off
// than the wait allows, max has passed, or ctx is done.
//
// The proxy holds a request for a restarting agent here instead of
// answering 503 at once: a request it never forwarded provably did not run,
// and once forwarded to the new process it meets the spec's 404 for the old
// session, which the caller's pool recovers from. A 503 would leave the
// caller unable to tell whether anything ran.
//
// gone, when not empty, is an address the agent is known not to listen on
// any more (a connection to it was refused): a "running" state still naming
// it is stale, and AwaitRunning waits past it.
func (a *Agent) AwaitRunning(ctx context.Context, max time.Duration, gone string) Status {
	if max <= 0 {
		return a.Status()
	}
	deadline := time.NewTimer(max)
	defer deadline.Stop()
	limit := time.Now().Add(max)
	for {
		a.mu.Lock()
		st := a.statusLocked()
		changed := a.changed
		a.mu.Unlock()
		switch {
		case st.Routable() && st.Upstream.Host != gone,
			st.State == studioapi.StateStopped, st.State == studioapi.StateGivenUp,
			// Restarting: worth waiting only if the next start is within
			// the wait.
			st.State == studioapi.StateRestarting && st.NextStart.After(limit):
			return st
		}
		select {
		case <-changed:
		case <-deadline.C:
			return a.Status()
		case <-ctx.Done():
			return a.Status()
		}
	}
}

// Status is a snapshot of the agent, taken under its lock.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.statusLocked()
}

func (a *Agent) statusLocked() Status {
	return Status{
		State: a.state, Upstream: a.upstream, PID: a.pid,
		Restarts: a.restarts, Failures: a.failures, LastErr: a.lastErr, LastErrAt: a.lastErrAt,
		LastExit: a.lastExit, NextStart: a.nextStart,
	}
}

// Status is where an agent is, at one moment.
type Status struct {
	State    studioapi.State
	Upstream *url.URL // the child's /mcp while running
	PID      int
	Restarts int
	Failures int    // consecutive failed runs
	LastErr  string // why it last exited; empty while running
	// LastErrAt is when; LastExit keeps the reason after it runs again.
	LastErrAt time.Time
	LastExit  string
	NextStart time.Time // restarting: when the next attempt begins
	// Remote is where an agent on another host runs and what its last
	// check found; nil for a process of the studio's.
	Remote *studioapi.RemoteAgent
}

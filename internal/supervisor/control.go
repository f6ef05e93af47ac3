package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// Restarting and stopping an agent on request (the agent page's buttons),
// and the agent's history of exits, restarts and stops.
//
// Each run of the child gets a context of its own (begin), which a request
// cancels: runOnce then stops the child the way it does at shutdown
// (SIGTERM, then SIGKILL) and returns, and the supervisor's loop asks
// controlled what to do instead of counting a failure: start again at
// once (restart), or wait, stopped, until asked to start. Between runs,
// while the loop waits out the backoff after an exit, a request wakes that
// wait instead (wake): a restart starts the agent now rather than at its
// retry time, and a stop cancels the pending start. The wake channel is
// armed by end itself, in the same critical section that clears the run's
// cancel, so there is no moment between runs at which a request finds
// neither and is refused.

// maxControlHistory bounds an agent's history.
const maxControlHistory = 50

// ErrNoProcess is returned by a restart or stop asked for while the agent
// has no process (it is waiting to be started again after an exit).
var ErrNoProcess = errors.New("the agent has no process right now")

// ErrNotStopped is returned by a start asked for while the agent is not
// stopped.
var ErrNotStopped = errors.New("the agent is not stopped")

type controlRequest int

const (
	requestNone controlRequest = iota
	requestRestart
	requestStop
)

// agentControl is the zero-value-ready control state of one agent.
type agentControl struct {
	mu      sync.Mutex // protects following fields
	cancel  context.CancelFunc
	req     controlRequest
	reason  string
	stopped bool
	start   chan string // while stopped: receives a start request's reason
	// wake, between runs (after an exit, before the next start), is
	// signalled by a request; nil while a run is under way or stopped.
	wake    chan struct{}
	history []studioapi.ControlEvent
}

// begin returns the context for one run of the child.
func (c *agentControl) begin(ctx context.Context) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	run, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	c.wake = nil
	return run
}

// end clears the run's context and returns the request that ended it.
func (c *agentControl) end() (controlRequest, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
		c.cancel = nil
	}
	req, reason := c.req, c.reason
	c.req, c.reason = requestNone, ""
	if req == requestStop {
		c.stopped = true
		c.start = make(chan string, 1)
	}
	if req == requestNone {
		// The run ended on its own: until the next begin, a request
		// wakes the backoff wait (or is taken up by park).
		c.wake = make(chan struct{}, 1)
	} else {
		c.wake = nil
	}
	return req, reason
}

// woken returns the channel a request signals while the agent waits out
// its backoff.
func (c *agentControl) woken() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wake
}

func (c *agentControl) record(e studioapi.ControlEvent) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recordLocked(e)
}

func (c *agentControl) recordLocked(e studioapi.ControlEvent) {
	if len(c.history) >= maxControlHistory {
		c.history = append(c.history[:0], c.history[1:]...)
	}
	c.history = append(c.history, e)
}

// newestFirst returns the agent's history, newest first.
func (c *agentControl) newestFirst() []studioapi.ControlEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]studioapi.ControlEvent, len(c.history))
	for i, e := range c.history {
		out[len(out)-1-i] = e
	}
	return out
}

// ask cancels the current run with req. It fails when there is no run.
func (c *agentControl) ask(req controlRequest, reason string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return fmt.Errorf("%w: it is stopped (start it first)", ErrNoProcess)
	}
	if c.cancel == nil && c.wake == nil {
		return ErrNoProcess
	}
	if c.req == requestNone || req == requestStop {
		c.req, c.reason = req, reason
	}
	if c.cancel != nil {
		c.cancel()
		return nil
	}
	select {
	case c.wake <- struct{}{}:
	default: // already signalled; the request above replaced or joined it
	}
	return nil
}

// resume starts a stopped agent.
func (c *agentControl) resume(reason string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		return ErrNotStopped
	}
	c.stopped = false
	c.start <- reason
	return nil
}

// controlled handles the end of a run that a request caused, and reports
// whether it did. A stop keeps the agent stopped until a start or ctx ends.
// inBackoff says the request came while the agent waited to be started
// again after an exit: that exit already counted the restart to come.
func (a *Agent) controlled(ctx context.Context, inBackoff bool) bool {
	req, reason := a.ctl.end()
	switch req {
	case requestRestart:
		a.mu.Lock()
		if !inBackoff {
			a.restarts++
		}
		a.state, a.upstream, a.pid, a.nextStart = studioapi.StateStarting, nil, 0, time.Time{}
		a.changedLocked()
		a.mu.Unlock()
		a.ctl.record(studioapi.ControlEvent{Event: studioapi.EventRestarted, Reason: reason})
		a.cfg.Logger.Info("agent restarted on request", "agent", a.def.Name, "reason", reason)
		return true
	case requestStop:
		a.mu.Lock()
		if inBackoff {
			a.restarts-- // the restart the exit counted will not happen
		}
		a.state, a.upstream, a.pid, a.nextStart = studioapi.StateStopped, nil, 0, time.Time{}
		a.changedLocked()
		a.mu.Unlock()
		a.ctl.record(studioapi.ControlEvent{Event: studioapi.EventStopped, Reason: reason})
		a.cfg.Logger.Info("agent stopped on request", "agent", a.def.Name, "reason", reason)
		a.ctl.mu.Lock()
		start := a.ctl.start
		a.ctl.mu.Unlock()
		select {
		case why := <-start:
			a.ctl.record(studioapi.ControlEvent{Event: studioapi.EventStarted, Reason: why})
			a.cfg.Logger.Info("agent started on request", "agent", a.def.Name, "reason", why)
		case <-ctx.Done():
		}
		return true
	}
	return false
}

// Restart stops the agent's process and starts it again at once.
func (a *Agent) Restart(reason string) error { return a.ctl.ask(requestRestart, reason) }

// Stop stops the agent until Start.
func (a *Agent) Stop(reason string) error { return a.ctl.ask(requestStop, reason) }

// Start starts the agent again after Stop, or after it was given up.
func (a *Agent) Start(reason string) error { return a.ctl.resume(reason) }

// History returns the agent's exits, restarts and stops, newest first.
func (a *Agent) History() []studioapi.ControlEvent { return a.ctl.newestFirst() }

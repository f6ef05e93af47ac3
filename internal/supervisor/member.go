package supervisor

import (
	"context"
	"errors"
	"time"

	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// Member is one agent of the studio as its routes, its console and its
// metrics read it: *Agent, a process the studio runs, or an agent on
// another host that the studio only proxies to (package studio's remote,
// whose state is always studioapi.StateRemote). Whoever holds a Member
// routes to Status().Upstream when Status().Routable(), and needs no
// other case.
type Member interface {
	Def() *agentdef.Definition
	// FirstDone is closed once the first start (for a remote: the first
	// check) is over, whatever its outcome.
	FirstDone() <-chan struct{}
	// Run keeps the member going until ctx is done.
	Run(ctx context.Context)
	Status() Status
	// AwaitRunning returns the status once it is routable, or as it is
	// when waiting makes no sense (see [Agent.AwaitRunning]).
	AwaitRunning(ctx context.Context, max time.Duration, gone string) Status
	History() []studioapi.ControlEvent
	// Restart, Stop and Start act on the process; a member without one
	// here answers ErrNotSupervised.
	Restart(reason string) error
	Stop(reason string) error
	Start(reason string) error
}

var _ Member = (*Agent)(nil)

// ErrNotSupervised is returned by a restart, stop or start asked of an
// agent that runs on another host: the studio has no process of it to act
// on.
var ErrNotSupervised = errors.New("the agent runs on another host; the studio does not start or stop it")

// Routable reports whether the proxy sends requests to Upstream: the
// agent runs here and listens, or runs on another host (where it may or
// may not answer: Remote says what the last check found).
func (s Status) Routable() bool {
	return s.Upstream != nil && (s.State == studioapi.StateRunning || s.State == studioapi.StateRemote)
}

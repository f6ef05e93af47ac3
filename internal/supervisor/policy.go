package supervisor

import (
	"time"

	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// The restart decision after a run that ended on its own, kept apart from
// the processes so that it can be read, and tested, as a function: Run
// feeds it how long the run lasted and acts on what it says.
//
//	run lasted ≥ healthyAfter     the count of failures starts again: this is failure 1
//	otherwise                     failure n+1
//	failure n < giveUpAfter       restart after backoff(n): minBackoff·2^(n-1), capped at maxBackoff
//	failure n ≥ giveUpAfter       given up: no restart until one is asked for
//
// A run that a request ended (restart, stop) is not a failure and never
// reaches the policy; a start asked for after a stop or a give-up begins a
// fresh count (Run sets it to 0).

// restartPolicy is Config's backoff and health settings with
// studioapi.GiveUpAfter.
type restartPolicy struct {
	minBackoff, maxBackoff, healthyAfter time.Duration
	giveUpAfter                          int
}

func (c *Config) policy() restartPolicy {
	return restartPolicy{
		minBackoff: c.MinBackoff, maxBackoff: c.MaxBackoff, healthyAfter: c.HealthyAfter,
		giveUpAfter: studioapi.GiveUpAfter,
	}
}

// afterExit is the decision for a run that lasted ranFor and ended on its
// own, after failures consecutive failed runs: the new count, the delay
// before the next start, and whether the agent is given up instead (delay
// is then meaningless).
func (p restartPolicy) afterExit(failures int, ranFor time.Duration) (n int, delay time.Duration, givenUp bool) {
	if ranFor >= p.healthyAfter {
		failures = 0
	}
	n = failures + 1
	return n, backoff(n, p.minBackoff, p.maxBackoff), n >= p.giveUpAfter
}

// backoff is lo·2^(n-1), capped at hi.
func backoff(n int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

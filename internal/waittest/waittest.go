// Package waittest waits, in a test, for something another goroutine or
// process does: it polls a condition until a deadline, and fails the test
// naming what it waited for. Tests never sleep a fixed time to let
// something happen; where no channel or hook says when it has, they poll
// with this.
package waittest

import (
	"testing"
	"time"
)

// maxInterval bounds the pause between two polls: the first polls come
// quickly, for what is nearly done, then they space out, so that a
// condition that costs a request does not flood what it asks.
const maxInterval = 20 * time.Millisecond

// Until returns once cond holds, polling it, and fails t (t.Fatalf) when it
// still does not after timeout. what names the awaited state in the
// failure, as "the agent to run".
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for interval := time.Millisecond; !cond(); interval = min(2*interval, maxInterval) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(interval)
	}
}

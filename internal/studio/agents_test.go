package studio

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// TestAgentFails: an agent that keeps failing to start is restarting, with
// its retry time and failure count, until studioapi.GiveUpAfter failures in a row;
// then it is given up, with the reason and its time, and not started again.
func TestAgentFails(t *testing.T) {
	dir := projecttest.New(t)
	writeAgent(t, dir, "abacus", "broken", func(d map[string]any) { d["tools"] = []string{"nope"} })
	s := startStudio(t, dir, &Options{MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	r := waitAgent(t, s, "broken", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRestarting && a.RetryAt != nil })
	if r.ConsecutiveFailures < 1 || r.LastError == "" || r.LastErrorAt == nil {
		t.Errorf("restarting agent %+v: want its failures, last error and its time", r)
	}
	a := waitAgent(t, s, "broken", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateGivenUp })
	if a.ConsecutiveFailures != studioapi.GiveUpAfter || a.Restarts != studioapi.GiveUpAfter-1 || a.RetryAt != nil ||
		!strings.Contains(a.LastError, `unknown toolset "nope"`) || a.LastErrorAt == nil {
		t.Errorf("given up: %+v", a)
	}
	// Given up means no further start: the supervisor waits for the studio
	// to close, and the state does not change.
	for _, now := range s.Agents() {
		if now.Name == "broken" && (now.State != studioapi.StateGivenUp || now.Restarts != a.Restarts) {
			t.Errorf("after giving up: %+v", now)
		}
	}
	// Started on request, it is tried again from a fresh count.
	if err := s.StartAgent("broken", "fixed, maybe"); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, s, "broken", func(b studioapi.AgentInfo) bool { return b.Restarts > a.Restarts })
}

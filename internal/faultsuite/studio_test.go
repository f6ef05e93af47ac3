package faultsuite

import (
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/studio"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/waittest"
)

// startStudio runs a studio over dir's agents, as the rows that kill agent
// processes need it: on a loopback port, running agents from the real
// binary, restarting a killed agent within milliseconds (backoff 20 to 200
// ms) so the row's load meets the new process. edit, when not nil, changes
// the options further. The studio is closed at test cleanup, where a failed
// test logs the agents' output; startStudio returns once every agent is
// ready, and fails t if that takes longer than ready.
func startStudio(t *testing.T, dir string, ready time.Duration, edit func(*studio.Options)) *studio.Studio {
	t.Helper()
	out := &syncBuffer{}
	opts := &studio.Options{
		Dir:         dir,
		Listen:      "127.0.0.1:0",
		Executable:  switchboardBin,
		AgentOutput: out,
		MinBackoff:  20 * time.Millisecond,
		MaxBackoff:  200 * time.Millisecond,
	}
	if edit != nil {
		edit(opts)
	}
	s, err := studio.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("agent output:\n%s", out)
		}
	})
	if err := s.WaitReady(ctxTimeout(t, ready)); err != nil {
		t.Fatal(err)
	}
	return s
}

// runningAgent returns the info of s's agent name once it runs with a pid
// other than notPID (0: any), as it does again after a kill and the
// studio's restart; it fails t after timeout.
func runningAgent(t *testing.T, s *studio.Studio, name string, notPID int, timeout time.Duration) studioapi.AgentInfo {
	t.Helper()
	var info studioapi.AgentInfo
	waittest.Until(t, timeout, name+" to run with a pid other than the one killed", func() bool {
		for _, a := range s.Agents() {
			if a.Name == name {
				info = a
			}
		}
		return info.State == studioapi.StateRunning && info.PID != 0 && info.PID != notPID
	})
	return info
}

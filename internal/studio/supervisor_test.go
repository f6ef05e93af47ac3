package studio

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

func TestBackoff(t *testing.T) {
	lo, hi := 250*time.Millisecond, 30*time.Second
	for n, want := range map[int]time.Duration{
		1: 250 * time.Millisecond, 2: 500 * time.Millisecond, 3: time.Second,
		8: 30 * time.Second, 100: 30 * time.Second,
	} {
		if got := backoff(n, lo, hi); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestLineWriter(t *testing.T) {
	var lines []string
	w := &lineWriter{line: func(l string) { lines = append(lines, l) }}
	w.Write([]byte("one\ntw"))
	w.Write([]byte("o\r\nthree"))
	w.flush()
	w.Write([]byte(strings.Repeat("x", maxLine+1)))
	if len(lines) != 4 || lines[0] != "one" || lines[1] != "two" || lines[2] != "three" || len(lines[3]) != maxLine+1 {
		t.Fatalf("lines %q", lines)
	}
}

func TestParseReady(t *testing.T) {
	if u, ok := parseReady("switchboard agent abacus listening on http://127.0.0.1:4242/mcp", "abacus"); !ok || u.String() != "http://127.0.0.1:4242/mcp" {
		t.Errorf("ready line: %v %v", u, ok)
	}
	for _, l := range []string{
		"switchboard agent packrat listening on http://127.0.0.1:4242/mcp", // another agent's
		"switchboard agent abacus listening on ftp://x/mcp",
		"abacus listening on http://127.0.0.1:1/mcp",
	} {
		if _, ok := parseReady(l, "abacus"); ok {
			t.Errorf("parseReady(%q) accepted", l)
		}
	}
}

// TestAgentFails: an agent that keeps failing to start is restarting, with
// its retry time and failure count, until studioapi.GiveUpAfter failures in a row;
// then it is given up, with the reason and its time, and not started again.
func TestAgentFails(t *testing.T) {
	dir := mcphttptest.Project(t)
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

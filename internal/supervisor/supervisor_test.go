package supervisor

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/agentserver"
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

// TestShutdownGrace: the supervisor's grace default and variable are agent
// serve's, and the variable in the agents' environment is the grace it
// passes and waits for.
func TestShutdownGrace(t *testing.T) {
	if DefaultShutdownGrace != agentserver.DefaultShutdownGrace || EnvShutdownGrace != agentserver.EnvShutdownGrace {
		t.Fatalf("supervisor's %v %s, agent serve's %v %s: want the same", DefaultShutdownGrace, EnvShutdownGrace, agentserver.DefaultShutdownGrace, agentserver.EnvShutdownGrace)
	}
	t.Setenv(EnvShutdownGrace, "")
	for _, c := range []struct {
		cfg  Config
		want time.Duration
	}{
		{Config{}, DefaultShutdownGrace},
		{Config{Env: []string{EnvShutdownGrace + "=3s"}}, 3 * time.Second},
		{Config{Env: []string{EnvShutdownGrace + "=3s", EnvShutdownGrace + "=4s"}}, 4 * time.Second},
		{Config{Env: []string{EnvShutdownGrace + "=soon"}}, DefaultShutdownGrace},
		{Config{Env: []string{EnvShutdownGrace + "=3s"}, ShutdownGrace: time.Minute}, time.Minute},
	} {
		a := &Agent{cfg: &c.cfg}
		if got := a.grace(); got != c.want {
			t.Errorf("grace with %+v = %v, want %v", c.cfg, got, c.want)
		}
	}
	t.Setenv(EnvShutdownGrace, "7s")
	if got := (&Agent{cfg: &Config{}}).grace(); got != 7*time.Second {
		t.Errorf("grace with $%s=7s = %v", EnvShutdownGrace, got)
	}
}

package supervisor

import (
	"strings"
	"testing"
	"time"
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

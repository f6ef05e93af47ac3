package observe

import (
	"sync"
	"time"

	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// logTailLines is how many of an agent's log lines the page keeps.
const logTailLines = 200

// maxLogLine bounds one kept line.
const maxLogLine = 2 << 10

// Logs keeps the last lines each agent wrote; make it with NewLogs.
type Logs struct {
	scrub *logging.Scrubber

	mu    sync.Mutex // protects lines and total
	lines map[string][]studioapi.LogLine
	total map[string]int // lines ever seen per agent, for pollers
}

// NewLogs keeps lines redacted by scrub.
func NewLogs(scrub *logging.Scrubber) *Logs {
	return &Logs{scrub: scrub, lines: make(map[string][]studioapi.LogLine), total: make(map[string]int)}
}

// Add keeps a line the supervisor relays from agent name.
func (t *Logs) Add(name, line string) {
	l := studioapi.LogLine{Time: time.Now(), Line: Elide(t.scrub.String(line), maxLogLine)}
	t.mu.Lock()
	defer t.mu.Unlock()
	ls := t.lines[name]
	if len(ls) >= logTailLines {
		ls = append(ls[:0], ls[1:]...)
	}
	t.lines[name] = append(ls, l)
	t.total[name]++
}

// Tail returns name's kept lines, oldest first, and how many it ever wrote.
func (t *Logs) Tail(name string) ([]studioapi.LogLine, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]studioapi.LogLine(nil), t.lines[name]...), t.total[name]
}

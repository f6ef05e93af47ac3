package askcmd

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/pool"
)

// printer shows the agent's progress notifications as they arrive: a
// delegation.Event (one JSON line) as a line per start and finish, any other
// message as it is. It keeps the finish events for --json.
//
// go-sdk handles notifications in order, but the response to the call can
// overtake the last of them (it is handled on the read loop, notifications
// on a queue), and the pool drops a notification that arrives after its
// call returned. So the agent's result lists every delegation too, and stop
// prints the finish events that did not arrive in time; later notifications
// are silent, so nothing prints after the answer.
type printer struct {
	w io.Writer
	// onEvent, when set, is told of each delegation event shown.
	onEvent func(delegation.Event)

	mu       sync.Mutex // protects following fields
	done     bool
	finished []delegation.Event
	printed  map[string]bool // finish events shown, by their JSON
	notes    []string        // plain-text progress messages shown
}

func newPrinter(w io.Writer) *printer { return &printer{w: w, printed: map[string]bool{}} }

// progress is the pool.WithProgress callback.
func (p *printer) progress(n *mcp.ProgressNotificationParams) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || n.Message == "" {
		return
	}
	var ev delegation.Event
	if err := json.Unmarshal([]byte(n.Message), &ev); err != nil || ev.Phase == "" {
		p.notes = append(p.notes, n.Message)
		fmt.Fprintf(p.w, "· %s\n", shownLine(n.Message))
		return
	}
	if ev.Phase == delegation.PhaseFinish {
		p.finished = append(p.finished, ev)
		p.printed[eventKey(ev)] = true
	}
	if p.onEvent != nil {
		p.onEvent(ev)
	}
	fmt.Fprintln(p.w, eventLine(ev))
}

// note prints a line of ask's own, unless the printer has stopped.
func (p *printer) note(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		fmt.Fprintf(p.w, "· %s\n", shownLine(msg)) // it may quote the studio's record of a server
	}
}

// stop silences the printer, prints what the agent's result (final)
// carries that no notification showed in time (finish events, unavailable
// siblings), and returns the complete list of finish events: final's when
// there is one, else the events seen.
func (p *printer) stop(final askResult) []delegation.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
	for _, u := range final.Unavailable {
		if !slices.ContainsFunc(p.notes, func(n string) bool { return strings.Contains(n, u) }) {
			fmt.Fprintf(p.w, "· unavailable: %s\n", shownLine(u))
		}
	}
	return p.stopEvents(final.Delegations)
}

func (p *printer) stopEvents(final []delegation.Event) []delegation.Event {
	if final == nil {
		return p.finished
	}
	for _, ev := range final {
		if ev.Phase == delegation.PhaseFinish && !p.printed[eventKey(ev)] {
			fmt.Fprintln(p.w, eventLine(ev))
		}
	}
	return final
}

// eventKey identifies an event by its JSON form, which is what both the
// notification and the agent's result carry.
func eventKey(ev delegation.Event) string {
	b, _ := json.Marshal(ev)
	return string(b)
}

// eventLine renders one event, one line whatever its names and message
// hold (a server names its own tools, and writes its own errors), for
// example
//
//	12:00:01.120 → packrat.store_note
//	12:00:01.164 ✓ packrat.store_note 44ms (recovered on a new session)
//	12:00:01.170 ✗ abacus.calculate 3ms: rpc -32042 quota exceeded
func eventLine(ev delegation.Event) string {
	at := ev.Time.Local().Format("15:04:05.000")
	what := shownLine(ev.Agent + "." + ev.Tool)
	if ev.Phase == delegation.PhaseStart {
		return fmt.Sprintf("%s → %s", at, what)
	}
	d := ev.Duration().Round(time.Millisecond)
	var b strings.Builder
	mark := "✓"
	if ev.Outcome != delegation.OutcomeOK {
		mark = "✗"
	}
	fmt.Fprintf(&b, "%s %s %s %v", at, mark, what, d)
	switch ev.Outcome {
	case delegation.OutcomeOK:
	case delegation.Outcome(pool.KindOutcomeUnknown.String()):
		b.WriteString(": outcome unknown: the tool may have run; not retried")
	default:
		fmt.Fprintf(&b, ": %s", shownLine(strings.ReplaceAll(string(ev.Outcome), "_", " ")))
		if ev.Code != 0 || ev.Message != "" {
			fmt.Fprintf(&b, " %d %s", ev.Code, shownLine(ev.Message))
		}
	}
	switch {
	case ev.Recovered:
		b.WriteString(" (recovered on a new session)")
	case ev.Retried:
		b.WriteString(" (retried once on a new session)")
	}
	return b.String()
}

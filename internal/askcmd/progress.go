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
	"github.com/switchboard-run/switchboard/runtime"
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
//
// The answer's text, sent as the model writes it (runtime.AnswerDelta
// JSON lines), is printed on answer as it comes when answer is set (stdout
// on a terminal), and dropped otherwise: the result carries the answer
// whole. printAnswer then prints the final answer once (see there).
type printer struct {
	w io.Writer
	// answer, when set, is where the answer is printed as it comes.
	answer io.Writer
	// onEvent, when set, is told of each delegation event shown.
	onEvent func(delegation.Event)

	mu       sync.Mutex // protects following fields
	done     bool
	finished []delegation.Event
	printed  map[string]bool // finish events shown, by their JSON
	notes    []string        // plain-text progress messages shown
	streamed strings.Builder // the answer as printed since the last withdrawal
	openLine bool            // the answer printed last did not end its line
	// broken: a line on w cut the answer as printed since the last
	// withdrawal, which is then not the answer as a person reads it.
	broken bool
}

func newPrinter(w io.Writer) *printer { return &printer{w: w, printed: map[string]bool{}} }

// progress is the pool.WithProgress callback.
func (p *printer) progress(n *mcp.ProgressNotificationParams) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || n.Message == "" {
		return
	}
	if d, ok := answerDelta(n.Message); ok {
		p.answerLocked(d)
		return
	}
	p.endLineLocked()
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
		p.endLineLocked()
		fmt.Fprintf(p.w, "· %s\n", shownLine(msg)) // it may quote the studio's record of a server
	}
}

// answerDelta reads a progress message that is a piece of the answer.
func answerDelta(msg string) (runtime.AnswerDelta, bool) {
	var probe struct {
		Text *string `json:"answer_delta"`
	}
	var d runtime.AnswerDelta
	if json.Unmarshal([]byte(msg), &probe) != nil || probe.Text == nil || json.Unmarshal([]byte(msg), &d) != nil {
		return d, false
	}
	return d, true
}

func (p *printer) answerLocked(d runtime.AnswerDelta) {
	if p.answer == nil {
		return
	}
	if d.Discard {
		if p.streamed.Len() > 0 {
			p.endLineLocked()
			fmt.Fprintln(p.w, "· the text above was not the answer (the model request was sent again, or the model went on to use tools)")
		}
		p.streamed.Reset()
		p.broken = false
		return
	}
	text := shown(d.Text)
	if text == "" {
		return
	}
	io.WriteString(p.answer, text)
	p.streamed.WriteString(text)
	p.openLine = !strings.HasSuffix(text, "\n")
}

// endLineLocked ends the answer's line before a line on w, so that the
// two do not run together on a terminal.
func (p *printer) endLineLocked() {
	if p.answer == nil || !p.openLine {
		return
	}
	io.WriteString(p.answer, "\n")
	p.openLine = false
	p.broken = p.streamed.Len() > 0
}

// endAnswer ends the line of an answer that was being printed when the
// ask failed.
func (p *printer) endAnswer() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLineLocked()
}

// printAnswer prints the final answer on stdout, once, after stop. The
// rule: the answer that counts is the final one, the ask's result. When
// none of it was printed as it came, it is printed as always. When what
// was printed since the last withdrawal is the answer (its ends trimmed)
// and nothing cut it, only the newline that ends it is printed. Otherwise
// (a retry or a think block the stream could not tell, a lost progress
// message, a note that cut it) a line on stderr says so, and the final
// answer is printed whole after it: the last answer on the terminal is
// the answer.
func (p *printer) printAnswer(stdout, stderr io.Writer, answer string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	streamed := strings.TrimSpace(p.streamed.String())
	switch {
	case p.answer == nil || streamed == "":
		if answer != "" {
			fmt.Fprintln(stdout, answer)
		}
	case streamed == strings.TrimSpace(answer) && !p.broken:
		if p.openLine {
			fmt.Fprintln(stdout)
		}
	default:
		p.endLineLocked()
		fmt.Fprintln(stderr, "· the answer as it came is not the final one; the final answer:")
		if answer != "" {
			fmt.Fprintln(stdout, answer)
		}
	}
	p.openLine = false
}

// stop silences the printer, prints what the agent's result (final)
// carries that no notification showed in time (finish events, unavailable
// siblings), and returns the complete list of finish events: final's when
// there is one, else the events seen.
func (p *printer) stop(final askResult) []delegation.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
	if final.Resumed && final.RunID != "" && !slices.ContainsFunc(p.notes, func(n string) bool { return strings.Contains(n, final.RunID) }) {
		// The agent's note that it resumed the run is a notification the
		// response overtook, as the finish events below: the result says it.
		p.endLineLocked()
		if final.Steps > 0 && final.ReplayedSteps >= final.Steps {
			// Nothing was asked again: the run was over, and this is its
			// end as the journal keeps it (the agent's own words).
			fmt.Fprintf(p.w, "· run %s is over; its end, from the journal\n", shownLine(final.RunID))
		} else {
			fmt.Fprintf(p.w, "· resumed run %s from its journal (%d model steps and %d delegations replayed)\n",
				shownLine(final.RunID), final.ReplayedSteps, final.ReplayedDelegations)
		}
	}
	for _, u := range final.Unavailable {
		if !slices.ContainsFunc(p.notes, func(n string) bool { return strings.Contains(n, u) }) {
			p.endLineLocked()
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
			p.endLineLocked()
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

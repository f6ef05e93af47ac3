package askcmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestResumedRunIsSaidWhenItsNoteCameLate: the agent says it resumed a
// run in a progress notification, which the response can overtake (and
// the pool then drops it). A person is told either way, once: from the
// note when it came, from the result when it did not.
func TestResumedRunIsSaidWhenItsNoteCameLate(t *testing.T) {
	final := askResult{durable: durable{RunID: "R1", Resumed: true, ReplayedSteps: 3, ReplayedDelegations: 2}}
	for _, c := range []struct {
		name string
		note bool // the agent's note arrived before the response
		want string
	}{
		{"note arrived", true, "· resuming run R1 from its journal (attempt 2: 3 model steps and 2 delegations journaled)\n"},
		{"note overtaken", false, "· resumed run R1 from its journal (3 model steps and 2 delegations replayed)\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var w bytes.Buffer
			p := newPrinter(&w)
			if c.note {
				p.progress(&mcp.ProgressNotificationParams{Message: "resuming run R1 from its journal (attempt 2: 3 model steps and 2 delegations journaled)"})
			}
			p.stop(final)
			if got := w.String(); got != c.want {
				t.Errorf("printed %q, want %q", got, c.want)
			}
		})
	}
	// A resume of a run that was over: its whole end came from the
	// journal, which the result says when the note was overtaken.
	var over bytes.Buffer
	newPrinter(&over).stop(askResult{durable: durable{RunID: "R3", Resumed: true, ReplayedSteps: 2, Steps: 2}})
	if got, want := over.String(), "· run R3 is over; its end, from the journal\n"; got != want {
		t.Errorf("a run that was over: printed %q, want %q", got, want)
	}
	var w bytes.Buffer
	newPrinter(&w).stop(askResult{durable: durable{RunID: "R2"}})
	if strings.Contains(w.String(), "resumed") {
		t.Errorf("a run that was not resumed is said to be: %q", w.String())
	}
}

package faultsuite

// The model endpoint rows: a coordinator agent's chat endpoint fails while
// a person asks it something. They are counted per ask, not per MCP call,
// so they have a table of their own (docs/FAULTS.md, "A model endpoint that
// fails").

import (
	"fmt"
	"io"
	"time"
)

// A ModelRow is what one model endpoint fault did to the asks made under
// it: `switchboard ask` against a studio whose oracle (the real agent
// process) sends its chat requests to a scripted endpoint that fails at the
// step after the delegation ran.
type ModelRow struct {
	Fault    string `json:"fault"`    // what the endpoint did
	Settings string `json:"settings"` // the agents' model settings
	Asks     int    `json:"asks"`
	Answered int    `json:"answered"` // exit 0, status answered
	Failed   int    `json:"failed"`   // exit 1, the error naming the endpoint
	// Attempts is how many times the oracle sent the failing step's
	// request, per ask (the most of any ask).
	Attempts int `json:"attempts"`
	// MaxExecutions is the most times the sibling ran any ask's
	// delegation, from packrat's archive; Duplicates counts the asks
	// whose delegation ran more than once. Must be 0.
	MaxExecutions int64 `json:"max_executions"`
	Duplicates    int   `json:"duplicates"`
	// Slowest is the longest an ask took, as the person waited for it.
	Slowest time.Duration `json:"slowest"`
	// Saw is what the person saw: the exit code and the error or the
	// live notes.
	Saw string `json:"saw"`
}

// WriteModelMarkdown writes rows as the model endpoint table of
// docs/FAULTS.md.
func WriteModelMarkdown(w io.Writer, rows []ModelRow) {
	fmt.Fprintln(w, "| model endpoint fault (at step 2, after the delegation ran) | settings | asks | answered | failed | attempts of step 2 | max executions of the delegation | executed twice | slowest ask | what the person saw |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %d | %d | %.1f s | %s |\n",
			cell(r.Fault), cell(r.Settings), r.Asks, r.Answered, r.Failed, r.Attempts,
			r.MaxExecutions, r.Duplicates, r.Slowest.Seconds(), cell(r.Saw))
	}
}

package askcmd

// What the answer cost: the ask tool's result carries its turn's usage
// (runtime.Result.Usage, nested turns of the siblings it asked included),
// which --json passes on as it came and a person reads as one line on
// stderr after the answer, where it does not mix with an answer a script
// reads from stdout.

import (
	"fmt"
	"io"
	"strconv"

	"github.com/switchboard-run/switchboard/runtime"
)

// turnCost is the usage members of the ask tool's structured result, and
// of the --json object.
type turnCost struct {
	Usage       runtime.Usage       `json:"usage,omitzero"`
	NestedUsage runtime.Usage       `json:"nested_usage,omitzero"`
	StepUsage   []runtime.StepUsage `json:"step_usage,omitempty"`
}

// printUsage writes the usage line, or nothing when the agent reported no
// model request (an agent that is not a switchboard agent, a turn that
// failed before its first request).
func printUsage(w io.Writer, c turnCost) {
	if line := usageLine(c); line != "" {
		fmt.Fprintln(w, line)
	}
}

// usageLine is "tokens: 1,234 (prompt 1,000 of which 200 cached,
// completion 234) in 3 model requests, of which 400 by siblings, $0.0012":
// the cached and reasoning parts when the endpoint itemized them, the
// siblings' part when there is one, the cost when the agent priced its
// model.
func usageLine(c turnCost) string {
	u := c.Usage
	if u.Requests == 0 && u.TotalTokens == 0 {
		return ""
	}
	prompt := "prompt " + thousands(u.PromptTokens)
	if u.CachedTokens > 0 {
		prompt += " of which " + thousands(u.CachedTokens) + " cached"
	}
	completion := "completion " + thousands(u.CompletionTokens)
	if u.ReasoningTokens > 0 {
		completion += " of which " + thousands(u.ReasoningTokens) + " reasoning"
	}
	requests := "requests"
	if u.Requests == 1 {
		requests = "request"
	}
	line := fmt.Sprintf("tokens: %s (%s, %s) in %s model %s", thousands(u.TotalTokens), prompt, completion, thousands(u.Requests), requests)
	if n := c.NestedUsage.TotalTokens; n > 0 {
		line += ", of which " + thousands(n) + " by siblings"
	}
	if u.CostUSD > 0 {
		line += ", " + dollars(u.CostUSD)
	}
	return line
}

// thousands renders n with thousands separators.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// dollars renders a cost: four decimals under a dollar, where a turn's
// cost usually is, two above.
func dollars(v float64) string {
	if v < 1 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

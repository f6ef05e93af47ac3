package runtime

// Models do not always call a tool by the name they were offered. They
// write the server and the tool the way MCP, or their training, spells
// them: "abacus.calculate", "abacus/calculate", "abacus_calculate", with
// OpenAI's "functions." namespace in front, or the bare tool name. The
// turn owns the model's names (delegation offers <server>__<tool>), so it
// puts them right before the executor sees them: a name that, folded to
// lower case, is one of an offered tool's spellings and of no other
// tool's is routed to it, and the repair recorded (Result.NameRepairs, a
// log line, and the corrected name in the history, so that the model
// learns it and strict providers see only offered names). A name that
// matches no tool, or several, is not guessed: the tool message lists the
// offered names closest to it.
//
// The index is built only when a name is not offered exactly, so a turn
// whose model names its tools right pays nothing for it.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/switchboard-run/switchboard/delegation"
)

// NameRepair records a tool name the model wrote that the turn routed to
// the offered tool it meant.
type NameRepair struct {
	Step   int    `json:"step"`
	CallID string `json:"call_id"`
	// From is the name as the model wrote it; To the offered name.
	From string `json:"from"`
	To   string `json:"to"`
}

// functionsPrefix is the namespace OpenAI's models see their tools in
// ("functions.get_weather"), which some write into the call.
const functionsPrefix = "functions."

// maxSuggestions bounds the names an unknown-tool message lists.
const maxSuggestions = 3

// toolIndex finds the offered tool a model meant.
type toolIndex struct {
	names []string            // the offered model tool names, in offer order
	tools []string            // the MCP tool name of each, folded
	alias map[string][]string // a folded spelling → the offered names it spells
}

func newToolIndex(tb *delegation.Toolbox) *toolIndex {
	idx := &toolIndex{alias: map[string][]string{}}
	for _, t := range tb.Targets() {
		idx.names = append(idx.names, t.Name)
		idx.tools = append(idx.tools, strings.ToLower(t.Tool.Name))
		server, tool := t.Server.Name, t.Tool.Name
		for _, s := range []string{t.Name, server + "." + tool, server + "/" + tool, server + "_" + tool, server + "__" + tool, tool} {
			k := strings.ToLower(s)
			if !slices.Contains(idx.alias[k], t.Name) {
				idx.alias[k] = append(idx.alias[k], t.Name)
			}
		}
	}
	return idx
}

// resolve returns the one offered name that name spells, or the offered
// names it could mean: the several it spells (ambiguous), or the closest
// when it spells none.
func (idx *toolIndex) resolve(name string) (to string, could []string, ambiguous bool) {
	n := strings.TrimSpace(name)
	if len(n) > len(functionsPrefix) && strings.EqualFold(n[:len(functionsPrefix)], functionsPrefix) {
		n = n[len(functionsPrefix):]
	}
	switch m := idx.alias[strings.ToLower(n)]; len(m) {
	case 1:
		return m[0], nil, false
	case 0:
		return "", idx.closest(n), false
	default:
		return "", m, true
	}
}

// closest returns the offered names nearest to name, at most
// maxSuggestions, nearest first: a tool whose name contains the one
// written, or is contained in it ("calc", "calculate"), then by edit
// distance to the offered name or the tool's own, whichever is nearer.
func (idx *toolIndex) closest(name string) []string {
	type scored struct {
		name string
		d    int
	}
	n := strings.ToLower(name)
	all := make([]scored, 0, len(idx.names))
	for i, o := range idx.names {
		d := min(editDistance(n, strings.ToLower(o)), editDistance(n, idx.tools[i]))
		if strings.Contains(idx.tools[i], n) || strings.Contains(n, idx.tools[i]) {
			d = 0
		}
		all = append(all, scored{o, d})
	}
	slices.SortStableFunc(all, func(a, b scored) int { return cmp.Compare(a.d, b.d) })
	var out []string
	for _, s := range all[:min(len(all), maxSuggestions)] {
		out = append(out, s.name)
	}
	return out
}

// unknownToolText is the tool message for a name that is no offered tool.
func unknownToolText(name string, candidates []string, ambiguous bool) string {
	if len(candidates) == 0 {
		return fmt.Sprintf("Error: there is no tool named %q, and no tools are offered.", name)
	}
	if ambiguous {
		return fmt.Sprintf("Error: there is no tool named %q; it could mean any of %s. Call one of them by its exact name.", name, strings.Join(candidates, ", "))
	}
	return fmt.Sprintf("Error: there is no tool named %q. The closest offered tools are %s. Call a tool by its exact offered name.", name, strings.Join(candidates, ", "))
}

// editDistance is the Levenshtein distance between a and b, by bytes
// (tool names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

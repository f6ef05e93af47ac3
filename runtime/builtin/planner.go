package builtin

import (
	"regexp"
	"strings"
)

// This file is the planner: the task (the latest user message) becomes
// ordered steps, each step gets the tool that fits it best or none, and the
// steps are grouped into batches, a batch being the tool calls one response
// may carry together. Everything here is a function of the task and the
// tool list alone, so every request of a turn recomputes the same plan and
// the handler needs no memory between requests.

// sepKind says how a step was joined to the one before it.
type sepKind int

const (
	sepFirst  sepKind = iota
	sepStrong         // "then", ";", a sentence end, ", and": runs after
	sepAnd            // a plain "and": may run alongside
)

type step struct {
	text  string
	sep   sepKind
	tool  *tool // nil: no tool fits
	score float64
	batch int // steps with a tool and the same batch are called together
}

// scoreThreshold is the least score a tool needs to be called for a step:
// one word of its name (3), or a command word plus some overlap. Below it
// the step is answered as "no tool fits" rather than guessed at.
const scoreThreshold = 3.0

// separatorRE finds where one step ends and the next begins. Alternatives
// that start at the same place are tried in order, so ", and then" is one
// separator, not ", and" followed by "then".
var separatorRE = regexp.MustCompile(`(?i)(?:\s*[.!?]+\s+|\s*;\s*|\s*\n+\s*)(?:(?:and\s+)?then\b,?\s*)?|,?\s+and\s+then\s+|,?\s+then\s+|,\s*(?:and\s+)?(?:after that|afterwards|next|finally|also)\s*,?\s+|,\s*and\s+|\s+and\s+(?:also\s+)?`)

type piece struct {
	text string
	sep  sepKind
	raw  string // the separator text before it, to glue a merged piece back
}

// splitTask cuts task at every separator. It keeps all pieces; plan decides
// which are steps.
func splitTask(task string) []piece {
	task = strings.TrimSpace(task)
	var out []piece
	prev, sep, raw := 0, sepFirst, ""
	for _, loc := range separatorRE.FindAllStringIndex(task, -1) {
		out = append(out, piece{text: task[prev:loc[0]], sep: sep, raw: raw})
		raw = task[loc[0]:loc[1]]
		sep = sepStrong
		if m := strings.Join(strings.Fields(strings.ToLower(raw)), " "); m == "and" || m == "and also" {
			sep = sepAnd
		}
		prev = loc[1]
	}
	return append(out, piece{text: task[prev:], sep: sep, raw: raw})
}

// plan splits task into steps and picks each step's tool. A piece becomes a
// step of its own only if it reads like a request: it starts with a command
// (after fillers like "please"), and, when it follows a plain "and" or ", and",
// a tool fits it too. Anything else is content of the step before it:
// "remember that Alice and Bob lead the launch" stays one step.
func plan(task string, tools []*tool, parallel bool) []step {
	var steps []step
	for _, p := range splitTask(task) {
		text := strings.TrimSpace(p.text)
		if len(steps) == 0 {
			if text != "" {
				steps = append(steps, step{text: text, sep: sepFirst})
			}
			continue
		}
		keep := text != "" && startsCommand(text, tools)
		if keep && p.sep == sepAnd {
			t, _ := bestTool(text, tools)
			keep = t != nil
		}
		if !keep {
			steps[len(steps)-1].text += p.raw + text
			continue
		}
		steps = append(steps, step{text: text, sep: p.sep})
	}
	for i := range steps {
		steps[i].tool, steps[i].score = bestTool(steps[i].text, tools)
	}
	assignBatches(steps, parallel)
	return steps
}

// startsCommand reports whether text opens with a command word, a question
// word, or a word of some tool's name ("convert ...", "search ...").
func startsCommand(text string, tools []*tool) bool {
	ws := words(stripFillers(text))
	if len(ws) == 0 {
		return false
	}
	if commandWords[ws[0]] {
		return true
	}
	for _, t := range tools {
		if t.nameStems[stem(ws[0])] {
			return true
		}
	}
	return false
}

// bestTool returns the highest-scoring tool for text, or nil if none reaches
// scoreThreshold. Ties go to the tool listed first, so the choice is
// deterministic and the caller's order is a tie-breaker it controls.
func bestTool(text string, tools []*tool) (*tool, float64) {
	intents := detectIntents(text)
	st := stems(text)
	var best *tool
	var bestScore float64
	for _, t := range tools {
		s := score(t, st, intents)
		if s > bestScore {
			best, bestScore = t, s
		}
	}
	if bestScore < scoreThreshold {
		return nil, bestScore
	}
	return best, bestScore
}

// score adds up the evidence that t does what the step asks: each of the
// step's stems weighs what it weighs among the tool's features (name 3,
// description and parameter names 1, parameter descriptions 0.5), and each
// intent of the step that the tool's name serves adds 6 if it is the step's
// command or 2 if it only occurs in the step; an intent only the tool's
// description mentions adds a third of that.
func score(t *tool, stepStems []string, intents map[intent]bool) float64 {
	var s float64
	for _, st := range stepStems {
		s += t.features[st]
	}
	for in, leading := range intents {
		w := 2.0
		if leading {
			w = 6
		}
		switch {
		case t.intents[in]:
			s += w
		case descServes(t, in):
			s += w / 3
		}
	}
	return s
}

func descServes(t *tool, in intent) bool {
	for _, k := range intentKeywords[in] {
		if t.features[k] >= 1 {
			return true
		}
	}
	return false
}

// refRE finds words that point back at an earlier result: a step saying
// "multiply that by 3" or "delete it" needs the step before it done first.
var refRE = regexp.MustCompile(`(?i)\b(?:that|it|this|those|them|the result|the answer|the same|its|the note|the id)\b`)

// assignBatches numbers the batches. A step joins the batch of the step
// before it only when both have tools, they were joined by a plain "and",
// parallel calls are allowed, the step does not refer back to an earlier
// result, and no two calls of the batch go to the same agent while one of
// them changes state (a search after a store must see the store).
func assignBatches(steps []step, parallel bool) {
	batch := -1
	var cur []*step
	for i := range steps {
		s := &steps[i]
		if s.tool == nil {
			s.batch = -1
			cur = cur[:0]
			continue
		}
		// cur is non-empty only while the steps before this one all have
		// tools, so steps[i-1] is cur's last.
		join := parallel && len(cur) > 0 && s.sep == sepAnd && steps[i-1].tool != nil &&
			!refRE.MatchString(stripCommand(s.text, s.tool))
		for _, c := range cur {
			if join && c.tool.agent == s.tool.agent && (c.tool.mutates || s.tool.mutates) {
				join = false
			}
		}
		if !join {
			batch++
			cur = cur[:0]
		}
		s.batch = batch
		cur = append(cur, s)
	}
}

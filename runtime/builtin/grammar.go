package builtin

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// This file is the grammar of doc.go: a task into steps, a step into a tool
// and the text its arguments come from. Every way out of a step that is not
// a tool is an error saying what could not be read, never a guess.

// errUnmapped is the class of every reason a step was not done; the
// answer quotes the reason (stepError).
var errUnmapped = errors.New("not mapped")

func unmapped(format string, args ...any) error {
	return &stepError{kind: errUnmapped, reason: fmt.Sprintf(format, args...)}
}

// stepError is why a step was not done: its class (errUnmapped,
// errNotDone) for errors.Is, and the reason alone, which the answer quotes
// after its own words ("I can't tell what to do with ...: <reason>").
type stepError struct {
	kind   error
	reason string
}

func (e *stepError) Error() string { return e.kind.Error() + ": " + e.reason }
func (e *stepError) Unwrap() error { return e.kind }

// reasonOf is the reason err gives for a step not done: a stepError's
// reason, else the whole text (an error of the expression parser).
func reasonOf(err error) string {
	if se, ok := errors.AsType[*stepError](err); ok {
		return se.reason
	}
	return err.Error()
}

// errNoLead marks a step whose first words name no tool and begin none of
// the grammar's phrases: words, not a request. After an "and" that is
// what keeps "remember that Alice and Bob met" one note.
var errNoLead = errors.New("no lead")

// leadError is an unmapped error that is also errNoLead; its text is the
// unmapped one alone, since that is what the answer quotes.
type leadError struct{ err error }

func (e leadError) Error() string   { return e.err.Error() }
func (e leadError) Unwrap() []error { return []error{e.err, errNoLead} }

func noLead(format string, args ...any) error { return leadError{unmapped(format, args...)} }

// stepSep splits a task into steps: ", then", "and then", "then", ";",
// and a sentence end.
var stepSep = regexp.MustCompile(`(?i)\s*(?:,?\s+and\s+then\s+|,\s*then\s+|\s+then\s+|;\s*|[.!?]\s+)`)

// splitTask returns the task's steps, trimmed, without empty ones: split
// at stepSep, then at each "and" that begins a step (see splitAnd).
func splitTask(task string, tools []*tool) []string {
	var steps []string
	for _, s := range stepSep.Split(strings.TrimSpace(task), -1) {
		s = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(s), ".!?"))
		if s != "" {
			steps = append(steps, splitAnd(s, tools)...)
		}
	}
	return steps
}

// andRE is a plain "and" between words.
var andRE = regexp.MustCompile(`(?i)\s+and\s+`)

// standIn is the previous step's figure while a task is read before any
// of it is done: a number, so that "multiply it by 2" reads.
const standIn = "1"

// splitAnd splits a step at the first "and" after which the words begin a
// step of their own (they lead to a tool or to one of the grammar's
// phrases: "and work out 17% of 2340", "and remember that ..."), and then
// splits the rest the same way. Any other "and" belongs to the text around
// it: "days between March 1 and March 9", "add 2 and 3", "remember that
// Alice and Bob met". A bare expression after "and" ("the numbers 3 and
// 4") does not begin a step. An "and" inside quotes or braces (a JSON
// argument, a quoted value) never splits. Whether both sides then read
// completely is for the planner to check: one that does not is refused.
func splitAnd(step string, tools []*tool) []string {
	locs := andRE.FindAllStringIndex(step, maxAnds+1)
	if len(locs) > maxAnds {
		return []string{step} // refused whole by tooManyAnds
	}
	for _, loc := range locs {
		if quoted(step[:loc[0]]) {
			continue
		}
		left, right := strings.TrimSpace(step[:loc[0]]), strings.TrimSpace(step[loc[1]:])
		if left == "" || right == "" {
			continue
		}
		m, err := mapStep(right, tools, standIn)
		if err == nil && m.bare || errors.Is(err, errNoLead) {
			continue
		}
		return append([]string{left}, splitAnd(right, tools)...)
	}
	return []string{step}
}

// maxAnds bounds the "and"s of one step: each is read as a possible step,
// so that reading a long step is not quadratic in its length.
const maxAnds = 32

// tooManyAnds is the refusal of a step with more than maxAnds "and"s,
// which splitAnd did not read.
func tooManyAnds(step string) error {
	if len(andRE.FindAllStringIndex(step, maxAnds+1)) > maxAnds {
		return unmapped("it has more than %d \"and\"s; separate its steps with \"then\" or \";\"", maxAnds)
	}
	return nil
}

// quoted: the text ends inside a quoted string or a JSON object.
func quoted(s string) bool {
	depth, in := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && c == '{':
			depth++
		case !in && c == '}':
			depth--
		}
	}
	return in || depth > 0
}

// politeness is dropped from the front of a step.
var polite = []string{"please ", "can you ", "could you ", "would you "}

// Phrases that ask the same thing as a verb any search tool has: the
// object follows the phrase.
var askPhrases = []string{"tell me what you know about ", "what do you know about ", "what do we know about ", "tell me about "}

// searchVerbs are tried in order for an askPhrase.
var searchVerbs = []string{"search", "find", "recall", "lookup"}

// arithmeticVerbs introduce an expression.
var arithmeticVerbs = []string{"what is ", "what's ", "how much is ", "calculate ", "compute ", "evaluate ", "work out ", "figure out "}

// notVerbs are first words that say nothing about which tool: questions
// and pronouns, which descriptions use in their examples ("what weekday
// is ...?").
var notVerbs = map[string]bool{
	"what": true, "what's": true, "how": true, "who": true, "when": true, "where": true, "why": true, "which": true,
	"is": true, "are": true, "the": true, "a": true, "an": true, "i": true, "me": true, "my": true, "it": true,
	"tell": true, "show": true, "give": true, "do": true, "does": true,
	// Words that join or qualify, and the days a date tool reads: none is
	// a request, even where a description happens to use it.
	"and": true, "or": true, "but": true, "then": true, "so": true, "if": true, "not": true, "no": true,
	"to": true, "of": true, "in": true, "on": true, "at": true, "by": true, "for": true, "from": true, "with": true,
	"we": true, "you": true, "they": true, "he": true, "she": true, "this": true, "that": true, "there": true,
	"today": true, "tomorrow": true, "yesterday": true,
}

// A mapped step: which tool, and the text its arguments are read from.
type mapping struct {
	tool *tool
	obj  string // the step without its verb or phrase
	// arith: the step asked for arithmetic; obj is the expression.
	arith bool
	// bare: the step is an expression and nothing else ("2+2").
	bare bool
	// args: the arguments, read already by a phrase (phrases.go).
	args map[string]any
}

// mapStep finds the one tool the step names (see doc.go for the order of
// the rules). prior is the previous step's figure, "" if none, for "the
// result", "it" and "that".
func mapStep(step string, tools []*tool, prior string) (mapping, error) {
	text := step
	for _, p := range polite {
		if len(text) > len(p) && strings.EqualFold(text[:len(p)], p) {
			text = strings.TrimSpace(text[len(p):])
		}
	}
	verb, obj, _ := strings.Cut(text, " ")
	obj = strings.TrimSpace(obj)
	lower := strings.ToLower(text)

	// 1. The step starts with a tool's name.
	if t, err := byName(verb, tools); t != nil || err != nil {
		return mapping{tool: t, obj: obj}, err
	}
	// 2. A question about what is known: a search.
	for _, p := range askPhrases {
		if strings.HasPrefix(lower, p) {
			subject := trimArticle(strings.TrimSpace(text[len(p):]))
			for _, v := range searchVerbs {
				if t, err := byVerb(v, tools); t != nil || err != nil {
					return mapping{tool: t, obj: subject}, err
				}
			}
			return mapping{}, unmapped("no offered tool searches (none has search, find, recall or lookup in its name or description)")
		}
	}
	// 3. The questions of the date and unit tools' descriptions.
	if ph, ok, err := readPhrase(text, prior); ok {
		if err != nil {
			return mapping{}, err
		}
		t, args, err := phraseCall(ph, tools)
		return mapping{tool: t, args: args}, err
	}
	// 4. Arithmetic: "what is E", "calculate E", "add A and B", ...
	expr, isArith, bare, err := arithmetic(lower, prior)
	if isArith {
		if err != nil {
			return mapping{}, err
		}
		t, err := expressionTool(tools)
		return mapping{tool: t, obj: expr, arith: true, bare: bare}, err
	}
	// 5. The first word is a verb a tool offers.
	v := strings.ToLower(verb)
	if notVerbs[v] || !isWord(v) {
		return mapping{}, noLead("it starts with %q, which names no tool, and it is not arithmetic; start the step with a tool's name or a verb from its description", v)
	}
	t, err := byVerb(v, tools)
	if rest, ok := strings.CutPrefix(obj, "that "); ok && v == "note" && err != nil {
		// "note that X" says what "remember that X" says, where "note"
		// alone is in several tools' names (store_note, get_note, ...).
		if rt, rerr := byVerb("remember", tools); rt != nil && rerr == nil {
			return mapping{tool: rt, obj: rest}, nil
		}
	}
	if t == nil && err == nil {
		err = noLead("no offered tool has %q in its name or offers it as a verb in its description", v)
	}
	if strings.EqualFold(verb, "remember") || strings.EqualFold(verb, "note") {
		// "remember that X": the content is X.
		if rest, ok := strings.CutPrefix(obj, "that "); ok {
			obj = rest
		}
	}
	return mapping{tool: t, obj: obj}, err
}

// byName is the tool called name ("packrat__store_note", or "store_note"
// when only one server has it).
func byName(name string, tools []*tool) (*tool, error) {
	var found []*tool
	for _, t := range tools {
		if strings.EqualFold(t.name, name) {
			return t, nil
		}
		if strings.EqualFold(t.short, name) {
			found = append(found, t)
		}
	}
	return one(found, fmt.Sprintf("named %q", name))
}

// byVerb is the one tool whose name has the word verb, else the one whose
// description has it.
func byVerb(verb string, tools []*tool) (*tool, error) {
	var inName, inDesc []*tool
	for _, t := range tools {
		switch {
		case contains(t.nameWords, verb):
			inName = append(inName, t)
		case t.descVerbs[verb]:
			inDesc = append(inDesc, t)
		}
	}
	if len(inName) > 0 {
		return one(inName, fmt.Sprintf("with %q in their names", verb))
	}
	return one(inDesc, fmt.Sprintf("with %q in their descriptions", verb))
}

// expressionTool is the one tool taking an arithmetic expression.
func expressionTool(tools []*tool) (*tool, error) {
	var found []*tool
	for _, t := range tools {
		for _, p := range t.params {
			if p.isExpression() {
				found = append(found, t)
				break
			}
		}
	}
	if len(found) == 0 {
		return nil, unmapped("no offered tool takes an arithmetic expression")
	}
	return one(found, "taking an arithmetic expression")
}

// one returns the only tool of found, nil for none, and an error naming
// them all when there are several: the grammar never picks among equals.
func one(found []*tool, what string) (*tool, error) {
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0], nil
	}
	var names []string
	for _, t := range found {
		names = append(names, t.display())
	}
	return nil, unmapped("ambiguous: %d tools %s (%s); name one of them at the start of the step", len(found), what, strings.Join(names, ", "))
}

// isWord: w is letters only (a number or a symbol is never a verb).
func isWord(w string) bool {
	return w != "" && !strings.ContainsFunc(w, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r > 0x7f) })
}

func contains(ws []string, w string) bool {
	for _, x := range ws {
		if x == w {
			return true
		}
	}
	return false
}

func trimArticle(s string) string {
	for _, a := range []string{"the ", "a ", "an "} {
		if len(s) > len(a) && strings.EqualFold(s[:len(a)], a) {
			return strings.TrimSpace(s[len(a):])
		}
	}
	return s
}

// References to the previous step's figure.
var priorRef = regexp.MustCompile(`\b(?:the result|that result|the answer|it|that|this)\b`)

// substitutePrior replaces the references to the previous result in an
// expression with prior; whole is for free text, where only a reference
// that is the whole text ("remember the result") counts, so that "remember
// it rains" stays as written. ok is false when the text refers to a result
// and there is none.
func substitutePrior(s, prior string, whole bool) (string, bool) {
	if whole {
		if loc := priorRef.FindStringIndex(strings.ToLower(s)); loc == nil || loc[0] != 0 || loc[1] != len(s) {
			return s, true
		}
	} else if !priorRef.MatchString(s) {
		return s, true
	}
	if prior == "" {
		return s, false
	}
	return priorRef.ReplaceAllLiteralString(strings.ToLower(s), prior), true
}

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
// answer quotes the error's text.
var errUnmapped = errors.New("not mapped")

func unmapped(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUnmapped}, args...)...)
}

// stepSep splits a task into steps: ", then", "and then", "then", ";",
// and a sentence end.
var stepSep = regexp.MustCompile(`(?i)\s*(?:,?\s+and\s+then\s+|,\s*then\s+|\s+then\s+|;\s*|[.!?]\s+)`)

// splitTask returns the task's steps, trimmed, without empty ones.
func splitTask(task string) []string {
	var steps []string
	for _, s := range stepSep.Split(strings.TrimSpace(task), -1) {
		s = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(s), ".!?"))
		if s != "" {
			steps = append(steps, s)
		}
	}
	return steps
}

// politeness is dropped from the front of a step.
var polite = []string{"please ", "can you ", "could you ", "would you "}

// Phrases that ask the same thing as a verb any search tool has: the
// object follows the phrase.
var askPhrases = []string{"tell me what you know about ", "what do you know about ", "what do we know about ", "tell me about "}

// searchVerbs are tried in order for an askPhrase.
var searchVerbs = []string{"search", "find", "recall", "lookup"}

// arithmeticVerbs introduce an expression.
var arithmeticVerbs = []string{"what is ", "what's ", "how much is ", "calculate ", "compute ", "evaluate "}

// notVerbs are first words that say nothing about which tool: questions
// and pronouns, which descriptions use in their examples ("what weekday
// is ...?").
var notVerbs = map[string]bool{
	"what": true, "what's": true, "how": true, "who": true, "when": true, "where": true, "why": true, "which": true,
	"is": true, "are": true, "the": true, "a": true, "an": true, "i": true, "me": true, "my": true, "it": true,
	"tell": true, "show": true, "give": true, "do": true, "does": true,
}

// A mapped step: which tool, and the text its arguments are read from.
type mapping struct {
	tool *tool
	obj  string // the step without its verb or phrase
	// arith: the step asked for arithmetic; obj is the expression.
	arith bool
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
	// 3. Arithmetic: "what is E", "calculate E", "add A and B", ...
	expr, isArith, err := arithmetic(lower, prior)
	if isArith {
		if err != nil {
			return mapping{}, err
		}
		t, err := expressionTool(tools)
		return mapping{tool: t, obj: expr, arith: true}, err
	}
	// 4. The first word is a verb in one tool's name or description.
	v := strings.ToLower(verb)
	if notVerbs[v] {
		return mapping{}, unmapped("it starts with %q, which names no tool, and it is not arithmetic; start the step with a tool's name or a verb from its description", v)
	}
	t, err := byVerb(v, tools)
	if t == nil && err == nil {
		err = unmapped("no offered tool has %q in its name or description", v)
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
		case t.descWords[verb]:
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

package builtin

import (
	"regexp"
	"strings"
	"unicode"
)

// This file is the model's vocabulary: how text becomes comparable words,
// which words carry no meaning for tool choice, and the small table of
// intents (store, search, calculate, ...) that lets "remember" find a tool
// called store_note although the two words share no letters.

// words splits s into lower-case words of letters and digits. Apostrophes
// are dropped inside words so "what's" and "whats" are one word.
func words(s string) []string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "'", ""), "’", "")
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// stem strips the commonest English suffixes so that "notes", "noted" and
// "noting" meet "note". It is deliberately crude: both sides of every
// comparison go through it, so it only has to be consistent.
func stem(w string) string {
	switch {
	case len(w) > 5 && strings.HasSuffix(w, "ing"):
		w = w[:len(w)-3]
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		w = w[:len(w)-3] + "y"
	case len(w) > 4 && strings.HasSuffix(w, "ed"):
		w = w[:len(w)-2]
	case len(w) > 4 && (strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "sses")):
		w = w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us"):
		w = w[:len(w)-1]
	}
	if len(w) > 3 && strings.HasSuffix(w, "e") {
		w = w[:len(w)-1]
	}
	return w
}

// stems returns the distinct stems of the meaningful words of s, in order.
func stems(s string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range words(s) {
		if stopwords[w] {
			continue
		}
		st := stem(w)
		if !seen[st] {
			seen[st] = true
			out = append(out, st)
		}
	}
	return out
}

// splitName splits a tool or parameter name into words: "store_note",
// "storeNote" and "store-note" all give [store note].
func splitName(name string) []string {
	var b strings.Builder
	prevLower := false
	for _, r := range name {
		switch {
		case r == '_' || r == '-' || r == '.' || r == ' ':
			b.WriteByte(' ')
			prevLower = false
		case unicode.IsUpper(r):
			if prevLower {
				b.WriteByte(' ')
			}
			b.WriteRune(unicode.ToLower(r))
			prevLower = false
		default:
			b.WriteRune(r)
			prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
		}
	}
	return strings.Fields(b.String())
}

var stopwords = set(`a an the and or but if of to in on at by for from with about into onto as is are was
were be been being am do does did done have has had having i me my mine we us our you your yours he him
his she her it its they them their this that these those there here what whats which who whom whose
when where why how can could would should will shall may might must please pls kindly just also then
now so too very really any some all every each no not any anything something everything nothing
thing things let lets ok okay hey hi hello thanks thank know tell say said want need like go went get
got make made up out over via per than`)

// fillers are words a request may start with before its command; they are
// skipped when looking for the command and stripped from argument text.
var fillerRE = regexp.MustCompile(`(?i)^(?:\s*(?:please|pls|kindly|also|now|then|and|next|finally|first|firstly|second|secondly|lastly|afterwards|after that|ok|okay|so|hey|oh|well|just|can you|could you|would you|will you|would you please|i want you to|i'd like you to|id like you to|i need you to|i would like you to|go ahead and|try to|be sure to|make sure to)\b[\s,:]*)+`)

// stripFillers removes leading filler words ("please", "then", "can you").
func stripFillers(s string) string {
	return strings.TrimSpace(fillerRE.ReplaceAllString(strings.TrimSpace(s), ""))
}

// intent is what a step asks for, independent of how any tool is named.
type intent int

const (
	intentNone intent = iota
	intentStore
	intentSearch
	intentList
	intentGet
	intentDelete
	intentCalculate
	intentConvert
	intentDate
)

func (i intent) String() string {
	return [...]string{"none", "store", "search", "list", "get", "delete", "calculate", "convert", "date"}[i]
}

// intentRule recognizes an intent in a step. A rule whose match starts the
// step (after fillers) is the step's command and weighs far more than one
// found in the middle, where it is usually part of the content ("remember
// that I must search the attic").
type intentRule struct {
	intent intent
	re     *regexp.Regexp
}

var arithmeticRE = regexp.MustCompile(`(?i)\d\s*(?:[-+*/^×÷%]|\bx\b|\bplus\b|\bminus\b|\btimes\b|\bdivided\b|\bmultiplied\b|\bover\b)\s*[-\d(.]|\d\s*(?:%|percent)\s+of\s+\d|\b(?:sqrt|square root)\b`)

var intentRules = []intentRule{
	{intentDate, regexp.MustCompile(`(?i)\b(?:how many days|days? (?:between|until|till|since|from|after|before|ago)|weekday|day of (?:the )?week|what day|which day|add \d+ (?:days?|weeks?)|subtract \d+ (?:days?|weeks?)|\d+ (?:days?|weeks?) (?:after|before|from|later|earlier|ago)|date math|dates?\b)`)},
	{intentConvert, regexp.MustCompile(`(?i)\b(?:convert|conversion|how many [a-z°]+ (?:is|are|in)|-?\d[\d.,]*\s*°?\s*[a-z°]+(?: [a-z]+)? (?:in|to|into|as) °?[a-z]+)`)},
	{intentCalculate, regexp.MustCompile(`(?i)\b(?:calculate|calc|compute|evaluate|eval|work out|figure out|sum of|product of|average of|mean of|total of|multiply|divide|subtract|add -?\d|double|halve|square root)\b`)},
	{intentDelete, regexp.MustCompile(`(?i)\b(?:delete|remove|forget|erase|discard|drop)\b`)},
	{intentGet, regexp.MustCompile(`(?i)\b(?:(?:get|fetch|open|read|show|display)(?: me)? (?:note|the note|entry|item|record) ?#?\d*|note (?:#|number |id )?\d+)\b`)},
	{intentList, regexp.MustCompile(`(?i)\b(?:list|(?:show|give)(?: me)? (?:all|my|the|recent|latest)(?: recent| latest)? notes|recent notes|latest notes)\b`)},
	{intentSearch, regexp.MustCompile(`(?i)\b(?:search|find|look ?up|look for|recall|what (?:do|did) you (?:know|have|remember)|what did i (?:say|note|store|save|write)|tell me (?:about|what|everything|anything)|do you (?:know|remember|have) (?:anything|something)|anything (?:about|on)|everything (?:about|on)|what(?:s| is) known about)\b`)},
	{intentStore, regexp.MustCompile(`(?i)\b(?:remember|save|store|note(?: down)?(?: that)?|make a note|take a note|keep in mind|keep track|record|jot(?: down)?|write down|archive|memori[sz]e|log that)\b`)},
}

// questionCalcRE is "what is 12*(3+4)": a question that is arithmetic only
// because of what follows it, so it is checked together with arithmeticRE.
var questionCalcRE = regexp.MustCompile(`(?i)^(?:what(?:'s|’s|s| is| are)|how much(?: is| are)?)(?:\s|$)`)

// intentKeywords are the stems that, in a tool's name or description, mean
// the tool serves the intent.
var intentKeywords = map[intent][]string{
	intentStore:     {"stor", "sav", "remember", "record", "archiv", "add", "creat", "put", "writ", "insert", "log", "memoriz"},
	intentSearch:    {"search", "find", "query", "lookup", "recall", "look"},
	intentList:      {"list", "recent", "latest"},
	intentGet:       {"get", "fetch", "read", "show", "open"},
	intentDelete:    {"delet", "remov", "forget", "eras", "discard"},
	intentCalculate: {"calculat", "calc", "comput", "evaluat", "eval", "arithmetic", "expression"},
	intentConvert:   {"convert", "conversion", "unit"},
	intentDate:      {"dat", "day", "calendar", "weekday"},
}

// detectIntents returns the intents found in step with, for each, whether it
// is the step's leading command.
func detectIntents(step string) map[intent]bool {
	core := stripFillers(step)
	// A question opening ("what is", "how much is") does not push the
	// command out of the lead: "what is 5 km in miles" leads with convert.
	q := 0
	if loc := questionCalcRE.FindStringIndex(core); loc != nil {
		q = loc[1]
	}
	out := map[intent]bool{}
	for _, r := range intentRules {
		loc := r.re.FindStringIndex(core)
		if loc == nil {
			continue
		}
		lead := leadingAt(core, loc[0]) || loc[0] >= q && leadingAt(core[q:], loc[0]-q)
		out[r.intent] = out[r.intent] || lead
	}
	if questionCalcRE.MatchString(core) && arithmeticRE.MatchString(core) {
		out[intentCalculate] = true
	} else if arithmeticRE.MatchString(core) {
		if _, ok := out[intentCalculate]; !ok {
			out[intentCalculate] = false
		}
	}
	return out
}

// leadingAt reports whether offset i in s is within its first two words:
// "remember", "please remember", "tell me about".
func leadingAt(s string, i int) bool {
	return len(strings.Fields(s[:i])) <= 1
}

// commandWords may start a step of their own; a clause after "and" that
// starts with anything else is content ("Alice and Bob").
var commandWords = set(`remember save store note record keep jot write archive log memorize memorise search
find look lookup recall tell show list give get fetch read retrieve open display delete remove forget erase
discard drop calculate calc compute evaluate eval convert what whats how when which who where
is are do does did can could would will multiply divide subtract add sum double halve count check
determine make take create set update`)

func set(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

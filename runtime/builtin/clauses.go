package builtin

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// This file reads the free-text parts of a step: the content after a
// command ("remember that X" → "X"), the subject of a question ("what do
// you know about the launch" → "launch"), and the "titled ..." and
// "tagged ..." clauses a note may carry.

func cut(s string, span [2]int) string {
	return strings.TrimSpace(strings.TrimRight(strings.TrimSpace(s[:span[0]]), ",;:-") + " " + s[span[1]:])
}

// storeCmdREs peel a storing command off its content, one layer at a time:
// "please" / "make a note" / "that" in "please make a note that X".
var storeCmdREs = []*regexp.Regexp{
	regexp.MustCompile(`(?i)^(?:remember|note(?: down)?|record|store|save|keep in mind|bear in mind|jot(?: down)?|write down|archive|log|memori[sz]e|(?:make|take|add|create|write|leave)(?: me)?(?: a| the| this)? (?:note|memo|reminder)s?)\b`),
	regexp.MustCompile(`(?i)^\s*(?:(?:a|the|this|my) )?(?:note|memo|fact|reminder)\b`),
	regexp.MustCompile(`(?i)^\s*(?:this|it|the following)\s*:`),
	regexp.MustCompile(`(?i)^\s*(?:in (?:packrat|the archive|your notes|memory)\b)`),
	regexp.MustCompile(`(?i)^\s*(?:that|saying|which says|reading|with the text|with text|:|-|,)`),
}

// stripCommand removes the leading command of a step: "remember that the
// launch moved to Friday." gives "the launch moved to Friday", and
// "remember that" gives "". For tools that do not store, only a leading
// command word is removed.
func stripCommand(text string, t *tool) string {
	s := stripFillers(text)
	if t != nil && t.intents[intentStore] {
		for _, re := range storeCmdREs {
			s = strings.TrimSpace(re.ReplaceAllString(s, ""))
		}
	} else if ws := strings.Fields(s); len(ws) > 1 && (commandWords[strings.ToLower(ws[0])] || (t != nil && t.nameStems[stem(strings.ToLower(ws[0]))])) {
		s = strings.Join(ws[1:], " ")
	}
	return strings.TrimSpace(strings.TrimRight(s, ".!?;, "))
}

// topicCueRE marks where the subject of a question begins.
var topicCueRE = regexp.MustCompile(`(?i)\b(?:about|regarding|concerning|re:|on the subject of)\s+`)
var topicForRE = regexp.MustCompile(`(?i)\b(?:for|on|with|mentioning|containing)\s+`)

// queryNoise are words that are part of asking, not of what is asked about.
var queryNoise = set(`note notes archive archives memory memories search searching find look lookup recall
remember tell show list know knew say said stored saved wrote written mention mentioned info information
details detail anything everything something stuff whatever packrat give tag tags tagged`)

// topicPhrase is the part of a search step that names its subject, as
// written: "tell me what you know about the launch?" gives "the launch".
func topicPhrase(text string) string {
	s := stripFillers(text)
	if loc := topicCueRE.FindStringIndex(s); loc != nil {
		s = s[loc[1]:]
	} else if loc := topicForRE.FindStringIndex(s); loc != nil && allNoise(s[:loc[0]]) {
		s = s[loc[1]:]
	}
	return strings.TrimSpace(strings.TrimRight(s, ".!?;, "))
}

func allNoise(s string) bool {
	for _, w := range words(s) {
		if !stopwords[w] && !queryNoise[w] && !commandWords[w] {
			return false
		}
	}
	return true
}

// topic is the search query for a step: its subject without stopwords or
// command words, original case kept ("launch", "Q3 budget"); "" if only
// such words remain. Search tools
// tend to require every query word to match, so fewer, meaningful words
// find more.
func topic(text string, t *tool) string {
	phrase := topicPhrase(text)
	var kept []string
	for _, f := range strings.Fields(phrase) {
		w := strings.Trim(f, `.,;:!?"'()[]{}“”‘’`)
		lw := strings.ToLower(strings.ReplaceAll(w, "'", ""))
		if w == "" || stopwords[lw] || queryNoise[lw] || (t != nil && t.nameStems[stem(lw)]) {
			continue
		}
		kept = append(kept, w)
	}
	return strings.Join(kept, " ")
}

var titleRE = regexp.MustCompile(`(?i)[,;]?\s*\b(?:titled|entitled|with (?:the )?title|under the title|title:)\s*(?:"([^"]+)"|“([^”]+)”|'([^']+)'|(.+?)(?:\s+(?:saying|that says|which says|reading|that|with|about|tagged)\b|\s*[,;:.!?]|$))`)

func findTitle(text string) (string, [2]int, bool) {
	m := titleRE.FindStringSubmatchIndex(text)
	if m == nil {
		return "", [2]int{}, false
	}
	for g := 1; g <= 4; g++ {
		start, end := m[2*g], m[2*g+1]
		if start < 0 {
			continue
		}
		if g < 4 { // quoted: the span takes the closing quote too
			_, size := utf8.DecodeRuneInString(text[end:])
			end += size
		}
		return strings.TrimSpace(text[start:m[2*g+1]]), [2]int{m[0], end}, true
	}
	return "", [2]int{}, false
}

// tagsRE finds a closing "tagged a, b and c" clause. It must end the step,
// and findTags refuses lists with stopwords, so "Bob tagged the release"
// stays content.
var tagsRE = regexp.MustCompile(`(?i)[,;]?\s*\b(?:tagged(?: as| with)?|with (?:the )?tags?|tags?:|labell?ed(?: as| with)?|with (?:the )?labels?|under (?:the )?tags?)\s+((?:#?[\w-]+)(?:\s*(?:,|and|&|\s)\s*#?[\w-]+){0,7})\s*[.!?]?\s*$`)

func findTags(text string) ([]string, [2]int, bool) {
	m := tagsRE.FindStringSubmatchIndex(text)
	if m == nil {
		return nil, [2]int{}, false
	}
	var tags []string
	for _, w := range strings.FieldsFunc(text[m[2]:m[3]], func(r rune) bool { return r == ',' || r == '&' || r == ' ' }) {
		w = strings.ToLower(strings.TrimPrefix(w, "#"))
		switch {
		case w == "" || w == "and":
		case stopwords[w]:
			return nil, [2]int{}, false
		default:
			tags = append(tags, w)
		}
	}
	if len(tags) == 0 {
		return nil, [2]int{}, false
	}
	return tags, [2]int{m[0], m[1]}, true
}

package builtin

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// This file fills a tool call's arguments from the words of its step. Each
// parameter is classified by its name, type and description (a "text" to
// store, a search "query", an arithmetic "expression", an "id", a unit, a
// date, ...) and filled by the extractor for its kind. Only parameters the
// schema declares are ever filled. A required parameter is always filled,
// with the step itself when nothing better is found, except an id, which is
// never guessed: a step that needs an id no text or earlier result gives is
// skipped and the answer says why.

type kind int

const (
	kindOther kind = iota
	kindText
	kindQuery
	kindExpr
	kindID
	kindUnitFrom
	kindUnitTo
	kindValue
	kindDate
	kindDays
	kindLimit
	kindTitle
	kindTags
	kindTag
	kindEnum
	kindBool
)

// prior is a finished call of this turn whose result a later step may use
// ("delete it", "multiply that by 2").
type prior struct {
	tool    *tool
	content string
	failed  bool
}

// Why a step with a tool was not called; the answer quotes them after
// "it": "it needs the id from an earlier result, and there was none".
var (
	// errNeedsEarlierResult means the step refers to something (an id)
	// that neither its text nor any earlier result provides.
	errNeedsEarlierResult = errors.New("needs a value from an earlier result, and there was none")
	// errNoContent means a step like "remember that" says nothing to store.
	errNoContent = errors.New("has nothing to pass after the command")
)

func nameIs(n string, names ...string) bool { return slices.Contains(names, n) }

func isNumeric(p *param) bool { return p.typ == "integer" || p.typ == "number" }

// classify decides what a parameter holds. Names decide first because tool
// authors name parameters for what they hold; descriptions break the tie
// for generic names like "from" (a unit, or a date?).
func classify(p *param, t *tool) kind {
	n := strings.ToLower(p.name)
	ws := splitName(p.name)
	last := ""
	if len(ws) > 0 {
		last = ws[len(ws)-1]
	}
	desc := strings.ToLower(p.desc)
	dateish := t.intents[intentDate] || strings.Contains(desc, "date") || strings.Contains(desc, "yyyy") ||
		p.format == "date" || p.format == "date-time"
	unitish := t.intents[intentConvert] || strings.Contains(desc, "unit")
	switch {
	case p.typ == "boolean":
		return kindBool
	case len(p.enum) > 0:
		return kindEnum
	case nameIs(n, "text", "content", "note", "body", "message", "memo", "fact", "entry", "contents"):
		return kindText
	case nameIs(n, "query", "q", "search", "keywords", "keyword", "terms", "term", "topic", "search_query", "phrase", "pattern", "search_term"):
		return kindQuery
	case nameIs(n, "expression", "expr", "formula", "equation", "calculation", "math", "input") && t.intents[intentCalculate],
		nameIs(n, "expression", "expr", "formula", "equation"):
		return kindExpr
	case last == "id" || last == "ids" || n == "uuid":
		return kindID
	case nameIs(n, "title", "subject", "heading", "headline"):
		return kindTitle
	case nameIs(n, "tags", "labels", "categories") || (p.typ == "array" && nameIs(n, "tag", "label")):
		return kindTags
	case nameIs(n, "tag", "label", "category"):
		return kindTag
	case isNumeric(p) && nameIs(n, "limit", "max", "max_results", "maxresults", "top_k", "topk", "k", "top", "count", "num_results", "page_size", "size", "n_results"):
		return kindLimit
	case isNumeric(p) && (strings.Contains(n, "day") || strings.Contains(n, "week") || strings.Contains(desc, "number of days")):
		return kindDays
	case strings.Contains(n, "date") || p.format == "date" || p.format == "date-time":
		return kindDate
	case nameIs(n, "from", "to", "start", "end", "since", "until", "begin", "a", "b", "first", "second", "other") && dateish && !unitish:
		return kindDate
	case nameIs(n, "from", "from_unit", "source", "source_unit", "unit_from", "src", "input_unit", "fromunit", "unit"):
		return kindUnitFrom
	case nameIs(n, "to", "to_unit", "target", "target_unit", "unit_to", "dest", "output_unit", "tounit"):
		return kindUnitTo
	case nameIs(n, "value", "amount", "quantity", "number", "x", "n", "num", "magnitude") && (isNumeric(p) || unitish):
		return kindValue
	case t.intents[intentStore] && p.typ == "string" && p.required:
		return kindText
	}
	return kindOther
}

// fillArgs returns the arguments for calling t for the step text. prior
// holds the results of the turn's earlier batches, oldest first.
func fillArgs(text string, t *tool, prior []prior) (map[string]any, error) {
	args := map[string]any{}
	rest := text // text with consumed clauses (", tagged x") removed

	// Clauses that name a title or tags are taken out of the text first, so
	// that "remember X, tagged work" stores "X" tagged "work".
	for _, p := range t.params {
		switch classify(p, t) {
		case kindTitle:
			if v, span, ok := findTitle(rest); ok {
				args[p.name] = v
				rest = cut(rest, span)
			}
		case kindTags, kindTag:
			if v, span, ok := findTags(rest); ok {
				if classify(p, t) == kindTag {
					args[p.name] = v[0]
				} else {
					args[p.name] = v
				}
				rest = cut(rest, span)
			}
		}
	}

	conv, hasConv := findConversion(rest)
	dates := assignDates(rest, t)
	usedNumbers := map[int]bool{}
	for _, p := range t.params {
		if _, done := args[p.name]; done {
			continue
		}
		var v any
		switch classify(p, t) {
		case kindText:
			if v = stripCommand(rest, t); v == "" {
				if p.required {
					return nil, fmt.Errorf("%s: %w", p.name, errNoContent)
				}
				continue
			}
		case kindQuery:
			// If consuming "tagged work" left no subject, the tag is it.
			v = cmpOr(topic(rest, t), topic(text, t), topicPhrase(text), strings.TrimSpace(text))
		case kindExpr:
			v = expression(rest, prior)
		case kindID:
			id, ok := findID(rest, p, prior)
			if !ok {
				if p.required {
					return nil, fmt.Errorf("%s: %w", p.name, errNeedsEarlierResult)
				}
				continue
			}
			v = id
		case kindUnitFrom:
			if hasConv {
				v = conv.from
			}
		case kindUnitTo:
			if hasConv {
				v = conv.to
			}
		case kindValue:
			if hasConv {
				v = number(conv.value, p)
			} else if n, ok := nextNumber(rest, usedNumbers); ok {
				v = number(n, p)
			}
		case kindDate:
			if d, ok := dates[p.name]; ok {
				v = isoIfWanted(d, p)
			}
		case kindDays:
			if d, ok := findDays(rest); ok {
				v = number(d, p)
			}
		case kindLimit:
			if n, ok := findLimit(rest); ok {
				v = number(n, p)
			}
		case kindEnum:
			v = matchEnum(rest, p)
		case kindBool:
			if p.required {
				v = mentions(rest, p.name)
			}
		case kindOther:
			if p.required {
				v = fallback(rest, t, p, usedNumbers)
			}
		}
		if v == nil {
			if !p.required {
				continue
			}
			v = fallback(rest, t, p, usedNumbers)
		}
		if !p.required && p.def != nil && fmt.Sprint(v) == fmt.Sprint(p.def) {
			continue // saying the default adds nothing
		}
		args[p.name] = v
	}
	return args, nil
}

// fallback satisfies a required parameter nothing specific filled: with the
// step itself for strings, and for numbers with the next number in the text
// or, failing that, the schema's default or minimum.
func fallback(text string, t *tool, p *param, used map[int]bool) any {
	switch p.typ {
	case "integer", "number":
		if n, ok := nextNumber(text, used); ok {
			return number(n, p)
		}
		switch {
		case p.def != nil:
			return p.def
		case p.min != nil:
			return number(strconv.FormatFloat(*p.min, 'f', -1, 64), p)
		}
		return 0
	case "boolean":
		return false
	case "array":
		if p.itemType == "string" || p.itemType == "" {
			return []string{orText(stripCommand(text, t), text)}
		}
		return []any{}
	case "object":
		return map[string]any{}
	}
	if len(p.enum) > 0 {
		return p.enum[0]
	}
	return orText(stripCommand(text, t), text)
}

func cmpOr(ss ...string) string { return cmp.Or(ss...) }

func orText(s, text string) string {
	if s == "" {
		return strings.TrimSpace(text)
	}
	return s
}

var numberRE = regexp.MustCompile(`-?\d+(?:,\d{3})*(?:\.\d+)?`)

// nextNumber returns the first number in text, outside dates, not used by
// an earlier parameter, thousands separators removed.
func nextNumber(text string, used map[int]bool) (string, bool) {
	dates := dateRE.FindAllStringIndex(text, -1)
	for _, loc := range numberRE.FindAllStringIndex(text, -1) {
		for len(dates) > 0 && dates[0][1] <= loc[0] {
			dates = dates[1:]
		}
		if used[loc[0]] || len(dates) > 0 && loc[0] >= dates[0][0] {
			continue
		}
		used[loc[0]] = true
		return strings.ReplaceAll(text[loc[0]:loc[1]], ",", ""), true
	}
	return "", false
}

// number renders a number found in text as the parameter's type: a JSON
// number for number and integer (integers truncated), else the text.
func number(lit string, p *param) any {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return lit
	}
	switch p.typ {
	case "integer":
		return int64(math.Trunc(f))
	case "number":
		return json.Number(strconv.FormatFloat(f, 'f', -1, 64))
	}
	return lit
}

var limitRE = regexp.MustCompile(`(?i)\b(?:top|first|last|latest|newest|limit(?: it)?(?: to| of)?|at most|up to|no more than|max(?:imum)?(?: of)?)\s+(\d+)\b|\b(\d+)\s+(?:(?:latest|newest|recent|most recent|last|first)\s+)?(?:results?|notes?|items?|entries|matches|hits)\b`)

func findLimit(text string) (string, bool) {
	m := limitRE.FindStringSubmatch(text)
	if m == nil {
		return "", false
	}
	if m[1] != "" {
		return m[1], true
	}
	return m[2], true
}

var idRE = regexp.MustCompile(`(?i)(?:\b(?:id|number|no\.?|note|item|entry|record)\s*#?\s*|#)(\d+)\b`)
var uuidRE = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)

// findID looks for an id in the step ("note 3", "#3", "id 3"), then, when
// the step has exactly one number and nothing else to be, takes it, then
// looks in the newest earlier result ("Stored note 3.", {"id": 3}).
func findID(text string, p *param, prior []prior) (any, bool) {
	if m := idRE.FindStringSubmatch(text); m != nil {
		return number(m[1], p), true
	}
	if m := uuidRE.FindString(text); m != "" && !isNumeric(p) {
		return m, true
	}
	if nums := numberRE.FindAllString(text, -1); len(nums) == 1 && !strings.Contains(nums[0], ".") {
		return number(nums[0], p), true
	}
	for i := len(prior) - 1; i >= 0; i-- {
		if prior[i].failed {
			continue
		}
		if id, ok := idInResult(prior[i].content); ok {
			return number(id, p), true
		}
	}
	return nil, false
}

// idInResult finds the first "id" in a tool result: the top-level one, else
// the first in a list ({"notes":[{"id":3}]}), else "note 3" in text.
func idInResult(content string) (string, bool) {
	var v any
	if json.Unmarshal([]byte(content), &v) == nil {
		if id, ok := findKey(v, "id"); ok {
			return id, true
		}
	}
	if m := idRE.FindStringSubmatch(content); m != nil {
		return m[1], true
	}
	return "", false
}

// findKey searches v breadth-first for key and returns its scalar value as
// text; breadth-first so a top-level id wins over a nested one.
func findKey(v any, key string) (string, bool) {
	queue := []any{v}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		switch c := cur.(type) {
		case map[string]any:
			if x, ok := c[key]; ok {
				switch s := x.(type) {
				case float64:
					return strconv.FormatFloat(s, 'f', -1, 64), true
				case string:
					return s, true
				}
			}
			keys := make([]string, 0, len(c))
			for k := range c {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				queue = append(queue, c[k])
			}
		case []any:
			queue = append(queue, c...)
		}
	}
	return "", false
}

func mentions(text, name string) bool {
	lw := " " + strings.Join(words(text), " ") + " "
	return strings.Contains(lw, " "+strings.Join(splitName(name), " ")+" ")
}

// enumSynonyms widen a step's words so that "how many days until" can pick
// an enum value named "days_between" or "diff".
var enumSynonyms = []struct {
	re    *regexp.Regexp
	stems []string
}{
	{regexp.MustCompile(`(?i)\b(?:between|until|till|since|how many days|how long|difference|from .+ to)\b`), []string{"between", "diff", "differenc", "until", "sinc", "count"}},
	{regexp.MustCompile(`(?i)\b(?:after|later|from now|add|plus|in \d+ days)\b`), []string{"add", "plu", "after", "forward", "offset", "shift"}},
	{regexp.MustCompile(`(?i)\b(?:before|ago|earlier|subtract|minus)\b`), []string{"subtract", "sub", "minu", "befor", "back"}},
	{regexp.MustCompile(`(?i)\b(?:weekday|day of (?:the )?week|what day|which day)\b`), []string{"weekday", "dow", "week"}},
}

// matchEnum picks the enum value the step names, literally or by its words;
// a word shared by several values counts for less, so "day" does not decide
// between "add_days" and "days_between". Nil when nothing fits and the
// parameter is optional.
func matchEnum(text string, p *param) any {
	lower := " " + strings.Join(words(text), " ") + " "
	stepStems := map[string]bool{}
	for _, s := range stems(text) {
		stepStems[s] = true
	}
	for _, syn := range enumSynonyms {
		if syn.re.MatchString(text) {
			for _, s := range syn.stems {
				stepStems[s] = true
			}
		}
	}
	valueStems := make([][]string, len(p.enum))
	df := map[string]int{}
	for i, e := range p.enum {
		s, ok := e.(string)
		if !ok {
			continue
		}
		for _, w := range splitName(s) {
			st := stem(w)
			if !slices.Contains(valueStems[i], st) {
				valueStems[i] = append(valueStems[i], st)
				df[st]++
			}
		}
	}
	best, bestScore := -1, 0.0
	for i, e := range p.enum {
		s, ok := e.(string)
		if !ok {
			continue
		}
		var sc float64
		if strings.Contains(lower, " "+strings.Join(splitName(s), " ")+" ") {
			sc += 2
		} else if !p.required {
			// An optional choice is made only when the step names it.
			continue
		}
		for _, st := range valueStems[i] {
			if stepStems[st] {
				sc += 1 / float64(df[st])
			}
		}
		if sc > bestScore {
			best, bestScore = i, sc
		}
	}
	switch {
	case best >= 0:
		return p.enum[best]
	case !p.required:
		return nil
	case p.def != nil:
		return p.def
	case len(p.enum) > 0:
		return p.enum[0]
	}
	return nil
}

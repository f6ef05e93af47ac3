package builtin

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// This file extracts the structured pieces of a step that calculator, unit
// and date tools take: an arithmetic expression, a quantity with its units,
// dates, a number of days. Each is found by pattern, never computed: the
// tool does the arithmetic, the model only reads it off the text.

// mathWords turn spoken arithmetic into symbols, longest phrases first.
var mathWords = []struct{ re, with string }{
	{`\bmultiplied by\b`, "*"},
	{`\bdivided by\b`, "/"},
	{`\bto the power of\b`, "^"},
	{`\bsquare root of\s+(\(.*?\)|-?\d+(?:\.\d+)?)`, "sqrt($1)"},
	{`\bsquared\b`, "^2"},
	{`\bcubed\b`, "^3"},
	{`\btimes\b`, "*"},
	{`\bplus\b`, "+"},
	{`\bminus\b`, "-"},
	{`\bover\b`, "/"},
	{`\bmod(?:ulo)?\b`, "%"},
	{`(\d)\s*x\s*(\d)`, "$1*$2"},
	{`×`, "*"},
	{`÷`, "/"},
	{`−`, "-"},
	{`(-?\d+(?:\.\d+)?)\s*(?:%|percent) of\s+(-?\d+(?:\.\d+)?)`, "$1/100*$2"},
}

var mathWordREs = func() []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, m := range mathWords {
		out = append(out, regexp.MustCompile(`(?i)`+m.re))
	}
	return out
}()

// operand is a number or a parenthesized group, for the verb forms below.
const operand = `(-?\d+(?:\.\d+)?|\([^()]*\))`

// mathVerbs rewrite "add 5 to 7" forms, whose operands come in an order
// the symbols do not follow.
var mathVerbs = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(?i)\badd\s+` + operand + `\s+to\s+` + operand), "$2 + $1"},
	{regexp.MustCompile(`(?i)\bsubtract\s+` + operand + `\s+from\s+` + operand), "$2 - $1"},
	{regexp.MustCompile(`(?i)\bmultiply\s+` + operand + `\s+(?:by|with)\s+` + operand), "$1 * $2"},
	{regexp.MustCompile(`(?i)\bdivide\s+` + operand + `\s+by\s+` + operand), "$1 / $2"},
	{regexp.MustCompile(`(?i)\bdouble\s+` + operand), "$1 * 2"},
	{regexp.MustCompile(`(?i)\b(?:halve|half of)\s+` + operand), "$1 / 2"},
}

// aggregateRE finds "the sum of 3, 5 and 10", "the average of 2 and 4".
var aggregateRE = regexp.MustCompile(`(?i)\b(sum|total|product|average|mean) of\s+(` + operand + `(?:\s*,\s*` + operand + `)*(?:\s*,?\s*and\s+` + operand + `)?)`)

var listSepRE = regexp.MustCompile(`\s*(?:,\s*and|,|and)\s+|\s*,\s*`)

func aggregate(m string) string {
	sub := aggregateRE.FindStringSubmatch(m)
	ops := listSepRE.Split(strings.TrimSpace(sub[2]), -1)
	switch strings.ToLower(sub[1]) {
	case "product":
		return strings.Join(ops, " * ")
	case "average", "mean":
		return fmt.Sprintf("(%s) / %d", strings.Join(ops, " + "), len(ops))
	}
	return strings.Join(ops, " + ")
}

// resultRefRE finds a reference to the previous result inside arithmetic.
var resultRefRE = regexp.MustCompile(`(?i)\b(?:that|it|this|the result|the answer|that result|this result|that number)\b`)

var thousandsRE = regexp.MustCompile(`(\d),(\d{3})\b`)

var mathFuncs = set(`sqrt abs sin cos tan log ln exp floor ceil round min max pow`)

// expression reads the arithmetic out of a step: "what is 12*(3+4)?" gives
// "12*(3+4)", "multiply that by 3" after a result of 84 gives "(84) * 3".
func expression(text string, prior []prior) string {
	s := stripFillers(text)
	if n, ok := lastNumber(prior); ok && resultRefRE.MatchString(s) {
		if strings.HasPrefix(n, "-") {
			n = "(" + n + ")" // "2^that" must not become "2^-3"
		}
		s = resultRefRE.ReplaceAllString(s, n)
	}
	for i, re := range mathWordREs {
		s = re.ReplaceAllString(s, mathWords[i].with)
	}
	for _, v := range mathVerbs {
		s = v.re.ReplaceAllString(s, v.with)
	}
	s = aggregateRE.ReplaceAllStringFunc(s, aggregate)
	s = thousandsRE.ReplaceAllString(s, "$1$2")
	if e := longestMathRun(s); e != "" {
		return e
	}
	return orText(stripCommand(text, nil), text)
}

// longestMathRun returns the longest stretch of s made of numbers,
// operators, parentheses and known functions that holds a digit, with
// unbalanced parentheses and dangling operators trimmed.
func longestMathRun(s string) string {
	type run struct{ start, end, tokens int }
	var best, cur run
	inRun, hasDigit := false, false
	flush := func() {
		if inRun && hasDigit && cur.tokens > best.tokens {
			best = cur
		}
		inRun, hasDigit = false, false
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			if !inRun {
				cur, inRun = run{start: i}, true
			}
			hasDigit = true
			for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
				i++
			}
			cur.end, cur.tokens = i, cur.tokens+1
		case strings.IndexByte("+-*/^%()", c) >= 0 || (c == ',' && inRun && strings.Count(s[cur.start:i], "(") > strings.Count(s[cur.start:i], ")")):
			if !inRun {
				cur, inRun = run{start: i}, true
			}
			i++
			cur.end, cur.tokens = i, cur.tokens+1
		case c == ' ' || c == '\t':
			i++
		case isLetter(c):
			j := i
			for j < len(s) && isLetter(s[j]) {
				j++
			}
			w := strings.ToLower(s[i:j])
			if mathFuncs[w] || w == "pi" {
				if !inRun {
					cur, inRun = run{start: i}, true
				}
				if w == "pi" {
					hasDigit = true
				}
				cur.end, cur.tokens = j, cur.tokens+1
			} else {
				flush()
			}
			i = j
		default:
			flush()
			i++
		}
	}
	flush()
	if best.tokens == 0 {
		return ""
	}
	return balance(strings.TrimSpace(s[best.start:best.end]))
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// balance drops unmatched parentheses and operators hanging off either end:
// "(3+4))*" becomes "(3+4)".
func balance(e string) string {
	for {
		before := e
		e = strings.TrimSpace(e)
		e = strings.TrimRight(e, "+-*/^%, ")
		e = strings.TrimLeft(e, "*/^%, )")
		for strings.HasSuffix(e, "(") {
			e = strings.TrimSpace(e[:len(e)-1])
		}
		if open, closed := strings.Count(e, "("), strings.Count(e, ")"); closed > open && strings.HasSuffix(e, ")") {
			e = e[:len(e)-1]
		} else if open > closed && strings.HasPrefix(e, "(") {
			e = e[1:]
		}
		if e == before {
			return e
		}
	}
}

// lastNumber is the numeric outcome of the newest successful earlier call:
// what follows the last "=" in a text result, a "result" (or "value",
// "answer") field of a JSON result, or the text's first number.
func lastNumber(prior []prior) (string, bool) {
	for i := len(prior) - 1; i >= 0; i-- {
		if prior[i].failed {
			continue
		}
		if n, ok := numberIn(prior[i].content); ok {
			return n, true
		}
	}
	return "", false
}

func numberIn(content string) (string, bool) {
	var v map[string]any
	if json.Unmarshal([]byte(content), &v) == nil {
		for _, k := range []string{"result", "value", "answer", "converted", "days", "total"} {
			switch x := v[k].(type) {
			case float64:
				return strconv.FormatFloat(x, 'f', -1, 64), true
			case string:
				if numberRE.MatchString(x) && numberRE.FindString(x) == strings.TrimSpace(x) {
					return x, true
				}
			}
		}
		return "", false
	}
	s := content
	if i := strings.LastIndex(s, "="); i >= 0 {
		s = s[i+1:]
	}
	if m := numberRE.FindString(s); m != "" {
		return strings.ReplaceAll(m, ",", ""), true
	}
	return "", false
}

type conversion struct {
	value, from, to string
}

const unitPat = `((?:(?:square|sq|cubic|cu|fluid|fl|nautical|metric|imperial|us|degrees?|deg)\s+)?°?\s?[a-zA-Z]+(?:\s*/\s*[a-zA-Z]+)?|°)`
const numPat = `(-?\d+(?:,\d{3})*(?:\.\d+)?)`

var (
	convertRE  = regexp.MustCompile(`(?i)` + numPat + `\s*` + unitPat + `\s+(?:to|in|into|as)\s+` + unitPat)
	howManyRE  = regexp.MustCompile(`(?i)\bhow many\s+` + unitPat + `\s+(?:(?:is|are|make|makes|equals?|in)\s+)+` + numPat + `\s*` + unitPat)
	degreesRE  = regexp.MustCompile(`(?i)^(?:degrees?|deg)\s+`)
	unitStopRE = regexp.MustCompile(`(?i)^(?:the|a|an|and|then|please)$`)
)

// findConversion reads "5 km to miles", "72 °F in celsius" or "how many
// feet are in 3 miles". Units are passed as written (lower-cased, without
// a leading "degrees"): the tool knows its units, the model does not.
func findConversion(text string) (conversion, bool) {
	if m := howManyRE.FindStringSubmatch(text); m != nil {
		return conversion{value: strings.ReplaceAll(m[2], ",", ""), from: unit(m[3]), to: unit(m[1])}, true
	}
	if m := convertRE.FindStringSubmatch(text); m != nil && !unitStopRE.MatchString(m[3]) {
		return conversion{value: strings.ReplaceAll(m[1], ",", ""), from: unit(m[2]), to: unit(m[3])}, true
	}
	return conversion{}, false
}

// unit tidies a unit as written: "degrees Fahrenheit" → "fahrenheit",
// "Miles" → "miles". Symbols keep their case, which can matter ("Mb" is
// not "MB").
func unit(u string) string {
	u = strings.Join(strings.Fields(degreesRE.ReplaceAllString(strings.TrimSpace(u), "")), " ")
	r := []rune(u)
	if len(r) > 3 && strings.ToLower(string(r[1:])) == string(r[1:]) {
		u = strings.ToLower(u)
	}
	return u
}

const monthPat = `(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)`

// dateRE matches the date forms people write. Relative words ("today")
// are passed to the tool as written: resolving them here would make the
// model's answer depend on the clock.
var dateRE = regexp.MustCompile(`(?i)\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2})?(?:z|[+-]\d{2}:?\d{2})?)?\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b` +
	monthPat + `\.?\s+\d{1,2}(?:st|nd|rd|th)?(?:,?\s+\d{4})?\b|\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?` + monthPat + `\.?(?:,?\s+\d{4})?\b|\b(?:today|tomorrow|yesterday|now)\b`)

func findDates(text string) []string {
	return dateRE.FindAllString(text, -1)
}

var monthNum = map[string]int{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}

var (
	mdyRE = regexp.MustCompile(`(?i)^(` + monthPat + `)\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})$`)
	dmyRE = regexp.MustCompile(`(?i)^(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(` + monthPat + `)\.?,?\s+(\d{4})$`)
)

// isoIfWanted rewrites "March 3, 2025" as 2025-03-03 when the parameter
// asks for ISO dates (format "date", or "YYYY-MM-DD" in its description).
// Dates without a year stay as written: the year would be a guess.
func isoIfWanted(d string, p *param) string {
	if !(p.format == "date" || strings.Contains(strings.ToUpper(p.desc), "YYYY") || strings.Contains(strings.ToLower(p.desc), "iso")) {
		return d
	}
	var mon, day, year string
	if m := mdyRE.FindStringSubmatch(d); m != nil {
		mon, day, year = m[1], m[2], m[3]
	} else if m := dmyRE.FindStringSubmatch(d); m != nil {
		day, mon, year = m[1], m[2], m[3]
	} else {
		return d
	}
	dn, _ := strconv.Atoi(day)
	return fmt.Sprintf("%s-%02d-%02d", year, monthNum[strings.ToLower(mon[:3])], dn)
}

var daysRE = regexp.MustCompile(`(?i)(-?\d+)\s*(days?|weeks?)\b`)

// findDays reads "10 days" or "2 weeks" (as 14 days).
func findDays(text string) (string, bool) {
	m := daysRE.FindStringSubmatch(text)
	if m == nil {
		return "", false
	}
	if strings.HasPrefix(strings.ToLower(m[2]), "week") {
		n, _ := strconv.Atoi(m[1])
		return strconv.Itoa(n * 7), true
	}
	return m[1], true
}

// Date parameters are ranked so the first date of the text goes to the
// start: schemas often list properties alphabetically, which puts "end"
// before "start".
var (
	firstDateNames  = set(`date start start_date from from_date since begin begin_date date1 a first`)
	secondDateNames = set(`end end_date to to_date until date2 b second other other_date until_date`)
	untilRE         = regexp.MustCompile(`(?i)\b(?:until|till|til)\b`)
	sinceRE         = regexp.MustCompile(`(?i)\b(?:since|ago)\b`)
)

// assignDates maps t's date parameters to the dates in text, in order. A
// question with one date and two date parameters counts from or to
// "today" ("how many days until 2025-12-25"), passed as the word: the tool
// resolves it, so the model stays independent of the clock.
func assignDates(text string, t *tool) map[string]string {
	var params []*param
	for _, p := range t.params {
		if classify(p, t) == kindDate {
			params = append(params, p)
		}
	}
	rank := func(p *param) int {
		switch n := strings.ToLower(p.name); {
		case firstDateNames[n]:
			return 0
		case secondDateNames[n]:
			return 2
		}
		return 1
	}
	slices.SortStableFunc(params, func(a, b *param) int { return rank(a) - rank(b) })
	dates := findDates(text)
	if len(params) >= 2 && len(dates) == 1 {
		switch {
		case untilRE.MatchString(text):
			dates = []string{"today", dates[0]}
		case sinceRE.MatchString(text):
			dates = []string{dates[0], "today"}
		}
	}
	out := map[string]string{}
	for i, p := range params {
		if i < len(dates) {
			out[p.name] = dates[i]
		}
	}
	return out
}

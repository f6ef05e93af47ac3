package builtin

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file reads the questions the date and unit tools' own descriptions
// ask ("how many days until ...?", "what weekday is ...?", 5 km to mi) in
// the forms people write them, and turns each into that tool's arguments.
// A date is passed on only in a form the date tool reads (YYYY-MM-DD or
// "today"), converted from the written forms whose meaning is certain
// ("March 1, 2026", "1 March 2026", "2026/03/01"); a numeric date whose
// day and month could be swapped (03/04/2026), and a date without its
// year, are refused rather than guessed. Nothing here knows a particular
// tool by name: the tools are found by their parameters.

// A phrase is a step read by one of the rules below: which kind of tool,
// and the arguments by their role.
type phrase struct {
	kind string // "date" or "convert"
	// date: the operation (add, subtract, between, weekday) and its
	// operands; convert: value, from, to.
	op, date, endDate, unit string
	amount                  int64
	value                   float64
	from, to                string
}

// The date phrases, in any case, without the trailing "?".
var (
	// "how many days between A and B", "how many days are there from A to
	// B", "the number of days between A and B".
	daysBetweenRE = regexp.MustCompile(`(?i)^(?:how many days|the number of days|number of days|count the days|days)\s+(?:are there\s+|is it\s+|are\s+)?(?:between|from)\s+(.+?)\s+(?:and|to|until|till)\s+(.+)$`)
	// "how many days until B", "how many days are left until B".
	daysUntilRE = regexp.MustCompile(`(?i)^how many days\s+(?:are there\s+|are left\s+|is it\s+|left\s+)?(?:until|till|before)\s+(.+)$`)
	// "how many days since A", "how many days have passed since A".
	daysSinceRE = regexp.MustCompile(`(?i)^how many days\s+(?:have passed\s+|has it been\s+|is it\s+|are there\s+)?since\s+(.+)$`)
	// "what weekday is D", "what day of the week was D", "which weekday
	// is D on".
	weekdayRE = regexp.MustCompile(`(?i)^(?:what|which)\s+(?:weekday|day of the week)\s+(?:is|was|will be|falls on|is it on|was it on)\s+(.+?)(?:\s+on)?$`)
	// "what weekday does D fall on".
	weekdayFallsRE = regexp.MustCompile(`(?i)^(?:what|which)\s+(?:weekday|day of the week)\s+(?:does|did|will)\s+(.+?)\s+(?:fall on|fall|be)$`)
	// "the weekday of D", "the day of the week of D" (after "tell me").
	weekdayOfRE = regexp.MustCompile(`(?i)^(?:tell me\s+)?(?:the\s+)?(?:weekday|day of the week)\s+(?:of|for|on)\s+(.+)$`)
	// "what date is 90 days after D", "what is 2 weeks before D", "90
	// days from D".
	dateOffsetRE = regexp.MustCompile(`(?i)^(?:(?:what|which)\s+(?:date|day)\s+(?:is|was|will it be|will be|is it)\s+|what is\s+|what's\s+)?(\S+)\s+(days?|weeks?|months?|years?)\s+(after|from|later than|before|earlier than)\s+(.+)$`)
	// "add 90 days to D", "subtract 2 weeks from D".
	dateAddRE      = regexp.MustCompile(`(?i)^add\s+(\S+)\s+(days?|weeks?|months?|years?)\s+to\s+(.+)$`)
	dateSubtractRE = regexp.MustCompile(`(?i)^subtract\s+(\S+)\s+(days?|weeks?|months?|years?)\s+from\s+(.+)$`)
	// "D plus 90 days", "what is D minus 2 weeks".
	datePlusRE = regexp.MustCompile(`(?i)^(?:what is\s+|what's\s+|what date is\s+)?(.+?)\s+(plus|minus|\+|-)\s+(\S+)\s+(days?|weeks?|months?|years?)$`)
)

// The unit phrases. A quantity is a number or "a", "an", "one"; a unit is
// whatever words follow it, for the tool to judge (its description lists
// the units it knows, and its error names one it does not).
var (
	// "how many grams in 3.5 pounds", "how many grams are there in 3.5 lb".
	howManyInRE = regexp.MustCompile(`(?i)^how many\s+(.+?)\s+(?:are there in|are there in a|are in|is in|in|make|make up|per)\s+(\S+)\s*(.*)$`)
	// "how many miles is 5 km".
	howManyIsRE = regexp.MustCompile(`(?i)^how many\s+(.+?)\s+(?:is|are)\s+(\S+)\s*(.*)$`)
	// "convert 5 km to mi", "change 3 cups into ml".
	convertRE = regexp.MustCompile(`(?i)^(?:convert|change|turn)\s+(\S+?)\s*([^\s\d].*?)\s+(?:to|into|in)\s+(.+)$`)
	// "what is 100 °F in °C", "5 km in miles", "how much is 3 cups in ml".
	inUnitsRE = regexp.MustCompile(`(?i)^(?:what is\s+|what's\s+|how much is\s+|how much are\s+)?(\S+?)\s*([^\s\d].*?)\s+(?:in|to|into|as|expressed in)\s+(.+)$`)
)

// notUnitWords start text that is arithmetic or a date, never a unit.
var notUnitWords = []string{"plus", "minus", "times", "divided", "multiplied", "over", "percent", "%", "of", "to", "and", "squared", "cubed", "mod", "x"}

// readPhrase reads a step as a date or unit question. ok says it is one
// (its lead is certain); err says why its operands cannot be used. prior
// is the previous step's figure, for "it" as a date. The step keeps its
// case: a unit's case is part of its meaning (Mb is a megabit, MB a
// megabyte).
func readPhrase(text, prior string) (ph phrase, ok bool, err error) {
	s := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(text), "?.!"))
	date := func(d string) (string, error) { return readDate(d, prior) }
	if m := daysBetweenRE.FindStringSubmatch(s); m != nil {
		ph = phrase{kind: "date", op: "between"}
		if ph.date, err = date(m[1]); err == nil {
			ph.endDate, err = date(m[2])
		}
		return ph, true, err
	}
	if m := daysUntilRE.FindStringSubmatch(s); m != nil {
		ph = phrase{kind: "date", op: "between", date: "today"}
		ph.endDate, err = date(m[1])
		return ph, true, err
	}
	if m := daysSinceRE.FindStringSubmatch(s); m != nil {
		ph = phrase{kind: "date", op: "between", endDate: "today"}
		ph.date, err = date(m[1])
		return ph, true, err
	}
	for _, re := range []*regexp.Regexp{weekdayRE, weekdayFallsRE, weekdayOfRE} {
		if m := re.FindStringSubmatch(s); m != nil {
			ph = phrase{kind: "date", op: "weekday"}
			ph.date, err = date(m[1])
			return ph, true, err
		}
	}
	offset := func(amount, unit, dir, d string) (phrase, bool, error) {
		ph := phrase{kind: "date", op: dir, unit: strings.TrimSuffix(strings.ToLower(unit), "s") + "s"}
		n, err := readAmount(amount)
		if err != nil {
			return ph, true, err
		}
		ph.amount = n
		ph.date, err = date(d)
		return ph, true, err
	}
	if m := dateAddRE.FindStringSubmatch(s); m != nil {
		return offset(m[1], m[2], "add", m[3])
	}
	if m := dateSubtractRE.FindStringSubmatch(s); m != nil {
		return offset(m[1], m[2], "subtract", m[3])
	}
	// A number of any kind is the amount: "1.5 months after" is refused
	// for not being whole, not read as something else.
	if m := dateOffsetRE.FindStringSubmatch(s); m != nil && (isAmount(m[1]) || numberRE.FindString(m[1]) == m[1]) {
		dir := "add"
		if w := strings.ToLower(m[3]); w == "before" || w == "earlier than" {
			dir = "subtract"
		}
		return offset(m[1], m[2], dir, m[4])
	}
	if m := datePlusRE.FindStringSubmatch(s); m != nil && isAmount(m[3]) && looksLikeDate(m[1]) {
		dir := "add"
		if strings.EqualFold(m[2], "minus") || m[2] == "-" {
			dir = "subtract"
		}
		return offset(m[3], m[4], dir, m[1])
	}

	for _, re := range []*regexp.Regexp{howManyInRE, howManyIsRE} {
		if m := re.FindStringSubmatch(s); m != nil && isQuantity(m[2]) {
			return convertPhrase(m[2], m[3], m[1])
		}
	}
	for _, re := range []*regexp.Regexp{convertRE, inUnitsRE} {
		if m := re.FindStringSubmatch(s); m != nil && isQuantity(m[1]) && isUnit(m[2]) && isUnit(m[3]) {
			return convertPhrase(m[1], m[2], m[3])
		}
	}
	return phrase{}, false, nil
}

func convertPhrase(quantity, from, to string) (phrase, bool, error) {
	ph := phrase{kind: "convert", from: strings.TrimSpace(from), to: strings.TrimSpace(to)}
	v, err := readQuantity(quantity)
	if err != nil {
		return ph, true, err
	}
	ph.value = v
	switch {
	case ph.from == "":
		return ph, true, unmapped("%q has no unit to convert from", quantity)
	case !isUnit(ph.from):
		return ph, true, unmapped("%q is not a unit", ph.from)
	case !isUnit(ph.to):
		return ph, true, unmapped("%q is not a unit", ph.to)
	}
	return ph, true, nil
}

// isUnit: s may be a unit's name or symbol: it has a letter or a degree
// sign, no digit other than a power (m2, cm3), and does not start with an
// arithmetic word.
func isUnit(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || !strings.ContainsFunc(s, func(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 0x7f }) {
		return false
	}
	f := strings.Fields(s)
	if slices.Contains(notUnitWords, strings.ToLower(f[0])) || len(f) > 4 {
		return false
	}
	for i, r := range s {
		if r >= '0' && r <= '9' && (i == 0 || !isLetter(s[i-1])) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isQuantity(s string) bool { _, err := readQuantity(s); return err == nil }

// readQuantity is a number, or "a", "an", "one" for 1 ("how many feet in
// a mile").
func readQuantity(s string) (float64, error) {
	switch strings.ToLower(s) {
	case "a", "an", "one":
		return 1, nil
	}
	if !numberRE.MatchString(s) || numberRE.FindString(s) != s {
		return 0, unmapped("%q is not a number", s)
	}
	return strconv.ParseFloat(s, 64)
}

func isAmount(s string) bool { _, err := readAmount(s); return err == nil }

// readAmount is a whole number of days, weeks, months or years: the date
// tool takes an integer, and 1.5 months is not a date.
func readAmount(s string) (int64, error) {
	switch strings.ToLower(s) {
	case "a", "an", "one":
		return 1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, unmapped("%q is not a whole number of days, weeks, months or years", s)
	}
	return n, nil
}

// Written dates, lower case.
var (
	isoDateRE   = regexp.MustCompile(`^(\d{4})-(\d{1,2})-(\d{1,2})$`)
	ymdSlashRE  = regexp.MustCompile(`^(\d{4})/(\d{1,2})/(\d{1,2})$`)
	numericRE   = regexp.MustCompile(`^(\d{1,2})[/.-](\d{1,2})[/.-](\d{4})$`)
	monthDayRE  = regexp.MustCompile(`^([a-z]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(\d{4}))?$`)
	dayMonthRE  = regexp.MustCompile(`^(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([a-z]+)\.?(?:,?\s+(\d{4}))?$`)
	isoInTextRE = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}\b`)
)

var monthNames = map[string]time.Month{}

func init() {
	for m := time.January; m <= time.December; m++ {
		full := strings.ToLower(m.String())
		monthNames[full] = m
		monthNames[full[:3]] = m
	}
	monthNames["sept"] = time.September
}

// looksLikeDate: s reads as a date (for "D plus 90 days", which is
// otherwise arithmetic on a number of days).
func looksLikeDate(s string) bool {
	_, err := readDate(s, "")
	return err == nil
}

// readDate converts a written date to the form the date tool reads:
// YYYY-MM-DD, or "today". "it", "that" and "the result" are the previous
// step's date.
func readDate(s, prior string) (string, error) {
	written := strings.TrimSpace(s) // for messages; s is read lower-cased
	s = strings.TrimSpace(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "the "))
	s = strings.TrimPrefix(s, "on ")
	if ref, ok := substitutePrior(s, prior, true); ref != s || !ok {
		if !ok {
			return "", unmapped("%q refers to an earlier result, and there is none", written)
		}
		if prior == standIn {
			// The task is being read before any of it is done: the date
			// is the one the step before will compute.
			return "0001-01-01", nil
		}
		// The previous step's figure; a date tool's result names its date
		// in ISO form ("2025-04-15 (Tuesday)").
		if ds := isoInTextRE.FindAllString(ref, -1); len(ds) == 1 {
			return ds[0], nil
		}
		s = ref
	}
	if s == "today" {
		return s, nil
	}
	valid := func(y, m, d int) (string, error) {
		t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
		if m < 1 || m > 12 || t.Day() != d || y < 1 {
			return "", unmapped("%q is not a date: there is no day %d in month %d of %d", written, d, m, y)
		}
		return t.Format("2006-01-02"), nil
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n } // the patterns admit only digits
	if m := isoDateRE.FindStringSubmatch(s); m != nil {
		return valid(atoi(m[1]), atoi(m[2]), atoi(m[3]))
	}
	if m := ymdSlashRE.FindStringSubmatch(s); m != nil {
		return valid(atoi(m[1]), atoi(m[2]), atoi(m[3]))
	}
	if m := numericRE.FindStringSubmatch(s); m != nil {
		a, b, y := atoi(m[1]), atoi(m[2]), atoi(m[3])
		switch {
		case a == b || b > 12:
			return valid(y, a, b) // month first, or the same either way
		case a > 12:
			return valid(y, b, a) // day first
		}
		return "", unmapped("%q is ambiguous: it is %s %d, %d read month first and %s %d, %d read day first; write it as YYYY-MM-DD",
			written, time.Month(a), b, y, time.Month(b), a, y)
	}
	named := func(month string, day, year string) (string, error) {
		mo, ok := monthNames[month]
		if !ok {
			return "", unmapped("%q is not a date I can read: write it as YYYY-MM-DD or as March 1, 2026", written)
		}
		if year == "" {
			return "", unmapped("%q has no year: write it as %s %s, YYYY", written, mo, day)
		}
		return valid(atoi(year), int(mo), atoi(day))
	}
	if m := monthDayRE.FindStringSubmatch(s); m != nil {
		return named(m[1], m[2], m[3])
	}
	if m := dayMonthRE.FindStringSubmatch(s); m != nil {
		return named(m[2], m[1], m[3])
	}
	return "", unmapped("%q is not a date I can read: write it as YYYY-MM-DD, as March 1, 2026, or today", written)
}

// phraseCall is the one offered tool for ph, found by its parameters, and
// its arguments.
func phraseCall(ph phrase, tools []*tool) (*tool, map[string]any, error) {
	if ph.kind == "convert" {
		var found []*tool
		for _, t := range tools {
			if p := paramNamed(t, "from"); p == nil || p.typ != "string" {
				continue
			}
			if p := paramNamed(t, "to"); p == nil || p.typ != "string" {
				continue
			}
			if numberParam(t) != nil {
				found = append(found, t)
			}
		}
		if len(found) == 0 {
			return nil, nil, unmapped("no offered tool converts units (none takes a number, from and to)")
		}
		t, err := one(found, "converting units")
		if err != nil {
			return nil, nil, err
		}
		return t, map[string]any{numberParam(t).name: ph.value, "from": ph.from, "to": ph.to}, nil
	}
	var found []*tool
	for _, t := range tools {
		if operationParam(t, ph.op) != nil && paramNamed(t, "date") != nil {
			found = append(found, t)
		}
	}
	if len(found) == 0 {
		return nil, nil, unmapped("no offered tool does the date operation %q (none has a date parameter and an operation %q)", ph.op, ph.op)
	}
	t, err := one(found, "doing date arithmetic")
	if err != nil {
		return nil, nil, err
	}
	args := map[string]any{operationParam(t, ph.op).name: ph.op, "date": ph.date}
	switch ph.op {
	case "between":
		end := paramNamed(t, "end_date")
		if end == nil {
			return nil, nil, unmapped("%s has no end_date parameter for the second date", t.display())
		}
		args[end.name] = ph.endDate
	case "add", "subtract":
		amount := paramNamed(t, "amount")
		if amount == nil {
			return nil, nil, unmapped("%s has no amount parameter for %d %s", t.display(), ph.amount, ph.unit)
		}
		args[amount.name] = ph.amount
		unit := paramNamed(t, "unit")
		switch {
		case unit != nil && (len(unit.enum) == 0 || slices.Contains(unit.enum, ph.unit)):
			args[unit.name] = ph.unit
		case ph.unit != "days":
			return nil, nil, unmapped("%s takes no unit %q", t.display(), ph.unit)
		}
	}
	return t, args, nil
}

// numberParam is the tool's first number parameter, "value" if it has one.
func numberParam(t *tool) *param {
	if p := paramNamed(t, "value"); p != nil && (p.typ == "number" || p.typ == "integer") {
		return p
	}
	for _, p := range t.params {
		if p.typ == "number" || p.typ == "integer" {
			return p
		}
	}
	return nil
}

// operationParam is the tool's parameter whose enum lists op.
func operationParam(t *tool, op string) *param {
	for _, p := range t.params {
		if slices.Contains(p.enum, op) {
			return p
		}
	}
	return nil
}

package builtin

import (
	"fmt"
	"regexp"
	"strings"
)

// This file reads arithmetic: the word forms of doc.go rewritten into an
// expression, which is then checked for being complete. The check is
// syntax only (the tool evaluates); it exists so that "calculate 2 + " is
// refused with a reason instead of being sent as something else.

// arithForms rewrite a whole step ("add 2 and 3") into an expression.
var arithForms = []struct {
	re   *regexp.Regexp
	op   string
	swap bool // the second operand comes first ("subtract A from B")
}{
	{regexp.MustCompile(`^(?:add|sum)\s+(.+?)\s+(?:and|to)\s+(.+)$`), "+", false},
	{regexp.MustCompile(`^(?:the\s+)?sum\s+of\s+(.+?)\s+and\s+(.+)$`), "+", false},
	{regexp.MustCompile(`^subtract\s+(.+?)\s+from\s+(.+)$`), "-", true},
	{regexp.MustCompile(`^multiply\s+(.+?)\s+(?:by|and)\s+(.+)$`), "*", false},
	{regexp.MustCompile(`^divide\s+(.+?)\s+by\s+(.+)$`), "/", false},
	{regexp.MustCompile(`^(?:the\s+)?product\s+of\s+(.+?)\s+and\s+(.+)$`), "*", false},
	{regexp.MustCompile(`^(?:the\s+)?difference\s+between\s+(.+?)\s+and\s+(.+)$`), "-", false},
	{regexp.MustCompile(`^(?:the\s+)?quotient\s+of\s+(.+?)\s+and\s+(.+)$`), "/", false},
}

// percentForms ask what percentage one number is of another: each gives
// the part and the whole.
var percentForms = []*regexp.Regexp{
	regexp.MustCompile(`^what\s+(?:percent|percentage|%)\s+of\s+(?P<whole>.+?)\s+is\s+(?P<part>.+)$`),
	regexp.MustCompile(`^what\s+(?:percent|percentage|%)\s+is\s+(?P<part>.+?)\s+of\s+(?P<whole>.+)$`),
	regexp.MustCompile(`^(?P<part>.+?)\s+is\s+what\s+(?:percent|percentage|%)\s+of\s+(?P<whole>.+)$`),
}

// averageOf is "the average of 2, 4 and 9" (or "mean"): the operands are
// a list, which the expression language has no word for.
var averageOf = regexp.MustCompile(`^(?:the\s+)?(?:average|mean)\s+of\s+(.+)$`)

// averageSep separates an average's operands.
var averageSep = regexp.MustCompile(`\s*,\s*(?:and\s+)?|\s+and\s+`)

// squareRootOf is "square root of 16": a number after it becomes the
// call's argument, since the expression language has no prefix operator.
var squareRootOf = regexp.MustCompile(`(?:the\s+)?square\s+root\s+of\s+(\d+(?:\.\d+)?)`)

// operand parenthesizes a word form's operand unless it is one token.
func operand(s string) string {
	s = strings.TrimSpace(s)
	if strings.ContainsAny(s, " +-*/%^") {
		return "(" + s + ")"
	}
	return s
}

// percentOf is "17% of 2340" (or "17 percent of"), which the expression
// language would read as a remainder.
var percentOf = regexp.MustCompile(`(\d+(?:\.\d+)?)\s*(?:%|percent)\s+of\s+`)

// wordOps are the operators written as words.
var wordOps = strings.NewReplacer(
	" plus ", " + ", " minus ", " - ", " times ", " * ", " multiplied by ", " * ",
	" divided by ", " / ", " to the power of ", " ^ ", "square root of ", "sqrt ",
	" squared ", " ^ 2 ", " cubed ", " ^ 3 ",
)

// roundTo is "round X to N decimal places": the tool's round(x, digits).
var roundTo = regexp.MustCompile(`^round\s+(.+?)\s+to\s+(\d+)\s+(?:decimal places|decimal place|decimals|places|digits)$`)

// arithmetic reads a step (lower case) as arithmetic. isArith says the step
// is arithmetic: it starts with an arithmetic verb ("calculate", "what
// is") or a word form ("add 2 and 3"), or is an expression by itself
// (bare). err says why its expression cannot be used.
func arithmetic(lower, prior string) (expr string, isArith, bare bool, err error) {
	s, hard, soft := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(lower), "?.!")), false, false
	for _, re := range percentForms {
		if m := re.FindStringSubmatch(s); m != nil {
			part, whole := m[re.SubexpIndex("part")], m[re.SubexpIndex("whole")]
			expr, err := arithExpr(operand(part)+" / "+operand(whole)+" * 100", prior)
			return expr, true, false, err
		}
	}
	for _, v := range arithmeticVerbs {
		if rest, ok := strings.CutPrefix(s, v); ok {
			s = rest
			hard = v != "what is " && v != "what's " && v != "how much is "
			soft = !hard
			break
		}
	}
	for _, f := range arithForms {
		if m := f.re.FindStringSubmatch(s); m != nil {
			a, b := m[1], m[2]
			if f.swap {
				a, b = b, a
			}
			s, hard = operand(a)+" "+f.op+" "+operand(b), true
			break
		}
	}
	if m := roundTo.FindStringSubmatch(s); m != nil {
		s, hard = fmt.Sprintf("round(%s, %s)", m[1], m[2]), true
	}
	if m := averageOf.FindStringSubmatch(s); m != nil {
		var terms []string
		for _, x := range averageSep.Split(m[1], -1) {
			terms = append(terms, operand(x))
		}
		s, hard = fmt.Sprintf("(%s) / %d", strings.Join(terms, " + "), len(terms)), true
	}
	expr, err = arithExpr(s, prior)
	switch {
	case hard:
		return expr, true, false, err
	case err == nil && strings.ContainsAny(expr, "0123456789"):
		// "what is 2+2", or a bare "2+2".
		return expr, true, !soft, nil
	case soft && err != nil && strings.ContainsAny(s, "0123456789+*/^"):
		// "what is 2 +": arithmetic, and incomplete.
		return "", true, false, err
	}
	return "", false, false, nil
}

// arithExpr rewrites the word forms of an expression and checks it.
func arithExpr(s, prior string) (string, error) {
	s = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(s), "?.!"))
	s = percentOf.ReplaceAllString(s, "$1/100*")
	s = squareRootOf.ReplaceAllString(s, "sqrt($1)")
	s = strings.TrimSpace(wordOps.Replace(" " + s + " "))
	s, ok := substitutePrior(s, prior, false)
	if !ok {
		return "", unmapped("%q refers to an earlier result, and there is none", s)
	}
	if s == "" {
		return "", unmapped("there is no expression to calculate")
	}
	if err := checkExpr(s); err != nil {
		return "", unmapped("cannot read %q as arithmetic: %v", s, err)
	}
	return s, nil
}

// checkExpr checks that s is a complete expression of numbers, the
// constants pi and e, function calls, + - * / % ^, parentheses and commas.
func checkExpr(s string) error {
	operand := true // an operand is expected next
	depth := 0
	values := 0
	last := ""
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
			continue
		case c >= '0' && c <= '9' || c == '.':
			j := i
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
				j++
			}
			if !operand {
				return fmt.Errorf("two values in a row at %q (write the operator between them)", s[i:j])
			}
			last, operand, values, i = s[i:j], false, values+1, j
			continue
		case c >= 'a' && c <= 'z':
			j := i
			for j < len(s) && s[j] >= 'a' && s[j] <= 'z' || j < len(s) && s[j] >= '0' && s[j] <= '9' && j > i {
				j++
			}
			word := s[i:j]
			k := j
			for k < len(s) && s[k] == ' ' {
				k++
			}
			isCall := k < len(s) && s[k] == '('
			if !operand || !isCall && word != "pi" && word != "e" {
				return fmt.Errorf("%q is not a number, a constant or a function call", word)
			}
			if isCall {
				last, i = word, j // the "(" comes next and expects an operand
				continue
			}
			last, operand, values, i = word, false, values+1, j
			continue
		case c == '(':
			if !operand {
				return fmt.Errorf("a value before %q (write the operator)", "(")
			}
			depth++
		case c == ')':
			if operand && last != "(" {
				return fmt.Errorf("%q comes after %q, where a value belongs", ")", last)
			}
			if depth == 0 {
				return fmt.Errorf("%q closes nothing", ")")
			}
			depth--
			operand = false
		case c == ',':
			if operand || depth == 0 {
				return fmt.Errorf("misplaced %q", ",")
			}
			operand = true
		case c == '+' || c == '-':
			operand = true // binary, or unary when an operand was expected
		case c == '*' || c == '/' || c == '%' || c == '^':
			if operand {
				return fmt.Errorf("%q has no value before it", string(c))
			}
			operand = true
		default:
			return fmt.Errorf("%q is not arithmetic", string(c))
		}
		last = string(c)
		i++
	}
	switch {
	case values == 0:
		return fmt.Errorf("there is no number in it")
	case operand:
		return fmt.Errorf("it is incomplete: it ends with %q", last)
	case depth > 0:
		return fmt.Errorf("%d parenthesis not closed", depth)
	}
	return nil
}

package abacus

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// This file is the calculator: a small recursive-descent parser that turns
// an expression into a tree, and an evaluator for the tree. Parsing finishes
// before anything is evaluated, so "1/0 +" reports the syntax error, not the
// division. Every error carries the 1-based character position it is about,
// so a model can fix its expression instead of guessing.
//
// Grammar, loosest binding first:
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/" | "%") unary }
//	unary   = ("-" | "+") unary | power
//	power   = primary [ "^" unary ]          right-associative: 2^3^2 = 2^9
//	primary = number | name | name "(" [ expr { "," expr } ] ")" | "(" expr ")"
//
// Unary minus binds looser than "^", as in mathematics: -2^2 = -4, and
// 2^-1 = 0.5. There is no implicit multiplication: "2(3)" and "2pi" are
// errors, because guessing what was meant is worse than asking.

// Limits that keep one call cheap.
const (
	maxExprRunes = 1000
	maxDepth     = 100
)

// An ExprError is a syntax or evaluation error at a position of the
// expression.
type ExprError struct {
	Pos int    // 1-based character (not byte) position; len+1 for "end of input"
	Msg string // what is wrong there
}

func (e *ExprError) Error() string { return fmt.Sprintf("%s at position %d", e.Msg, e.Pos) }

func errAt(pos int, format string, args ...any) *ExprError {
	return &ExprError{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokNum
	tokName
	tokOp // one of + - * / % ^ ( ) ,
)

type token struct {
	kind tokenKind
	pos  int     // 1-based rune position
	text string  // as written, for errors
	op   rune    // tokOp: the operator, after aliases (× → *, ** → ^)
	num  float64 // tokNum
}

func (t token) String() string {
	if t.kind == tokEOF {
		return "end of input"
	}
	return strconv.Quote(t.text)
}

// opAliases maps what people (and models) type to the operator it means.
var opAliases = map[rune]rune{
	'+': '+', '-': '-', '−': '-', '*': '*', '×': '*', '·': '*', '/': '/', '÷': '/',
	'%': '%', '^': '^', '(': '(', ')': ')', ',': ',',
}

// lex splits s into tokens.
func lex(s string) ([]token, error) {
	rs := []rune(s)
	var toks []token
	for i := 0; i < len(rs); {
		r, pos := rs[i], i+1
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '*' && i+1 < len(rs) && rs[i+1] == '*':
			toks = append(toks, token{kind: tokOp, pos: pos, text: "**", op: '^'})
			i += 2
		case opAliases[r] != 0:
			toks = append(toks, token{kind: tokOp, pos: pos, text: string(r), op: opAliases[r]})
			i++
		case isDigit(r) || r == '.':
			j := i
			for j < len(rs) && isDigit(rs[j]) {
				j++
			}
			if j < len(rs) && rs[j] == '.' {
				j++
				for j < len(rs) && isDigit(rs[j]) {
					j++
				}
			}
			// An exponent only if digits follow: "2e" is 2 then the name e,
			// which the parser rejects as a missing operator.
			if j < len(rs) && (rs[j] == 'e' || rs[j] == 'E') {
				k := j + 1
				if k < len(rs) && (rs[k] == '+' || rs[k] == '-') {
					k++
				}
				if k < len(rs) && isDigit(rs[k]) {
					for k < len(rs) && isDigit(rs[k]) {
						k++
					}
					j = k
				}
			}
			// "1..2" or "1.2.3" is one malformed number, not two numbers.
			if j < len(rs) && rs[j] == '.' {
				for j < len(rs) && (isDigit(rs[j]) || rs[j] == '.') {
					j++
				}
				return nil, errAt(pos, "malformed number %q", string(rs[i:j]))
			}
			text := string(rs[i:j])
			v, err := strconv.ParseFloat(text, 64)
			switch {
			case math.IsInf(v, 0):
				return nil, errAt(pos, "number %q is too large", text)
			case errors.Is(err, strconv.ErrRange):
				// Underflow: too small to represent, so zero is the value.
			case err != nil || text == ".":
				return nil, errAt(pos, "malformed number %q", text)
			}
			toks = append(toks, token{kind: tokNum, pos: pos, text: text, num: v})
			i = j
		case unicode.IsLetter(r) || r == '_':
			j := i
			for j < len(rs) && (unicode.IsLetter(rs[j]) || isDigit(rs[j]) || rs[j] == '_') {
				j++
			}
			toks = append(toks, token{kind: tokName, pos: pos, text: string(rs[i:j])})
			i = j
		default:
			return nil, errAt(pos, "unexpected character %q", r)
		}
	}
	return append(toks, token{kind: tokEOF, pos: len(rs) + 1}), nil
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }

// A node is a parsed expression.
type node interface {
	eval() (float64, error)
}

type (
	numNode struct{ v float64 }
	negNode struct {
		pos int
		x   node
	}
	binNode struct {
		op   rune
		pos  int // the operator's position
		l, r node
	}
	callNode struct {
		fn   *function
		name string
		pos  int
		args []node
	}
)

func (n numNode) eval() (float64, error) { return n.v, nil }

func (n negNode) eval() (float64, error) {
	x, err := n.x.eval()
	return -x, err
}

func (n binNode) eval() (float64, error) {
	l, err := n.l.eval()
	if err != nil {
		return 0, err
	}
	r, err := n.r.eval()
	if err != nil {
		return 0, err
	}
	var v float64
	switch n.op {
	case '+':
		v = l + r
	case '-':
		v = l - r
	case '*':
		v = l * r
	case '/':
		if r == 0 {
			return 0, errAt(n.pos, "division by zero")
		}
		v = l / r
	case '%':
		if r == 0 {
			return 0, errAt(n.pos, "remainder (%%) by zero")
		}
		v = math.Mod(l, r)
	case '^':
		if l == 0 && r < 0 {
			return 0, errAt(n.pos, "zero raised to a negative power (division by zero)")
		}
		v = math.Pow(l, r)
	}
	return checked(v, n.pos)
}

func (n callNode) eval() (float64, error) {
	args := make([]float64, len(n.args))
	for i, a := range n.args {
		v, err := a.eval()
		if err != nil {
			return 0, err
		}
		args[i] = v
	}
	v, err := n.fn.call(args)
	if err != nil {
		return 0, errAt(n.pos, "%s: %v", n.name, err)
	}
	return checked(v, n.pos)
}

// checked turns the IEEE escape values into errors: a calculator that
// answers "+Inf" or "NaN" has not answered.
func checked(v float64, pos int) (float64, error) {
	switch {
	case math.IsNaN(v):
		return 0, errAt(pos, "result is not a real number")
	case math.IsInf(v, 0):
		return 0, errAt(pos, "result is too large (overflow)")
	}
	return v, nil
}

type parser struct {
	toks  []token
	i     int
	depth int
}

// parseExpr parses s into a tree.
func parseExpr(s string) (node, error) {
	if n := len([]rune(s)); n > maxExprRunes {
		return nil, errAt(maxExprRunes+1, "expression is %d characters long; at most %d are allowed", n, maxExprRunes)
	}
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	if toks[0].kind == tokEOF {
		return nil, errAt(1, "empty expression")
	}
	p := &parser{toks: toks}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		if t.kind == tokOp && t.op == ')' {
			return nil, errAt(t.pos, "unmatched %s", t)
		}
		return nil, errAt(t.pos, "expected an operator, found %s", t)
	}
	return n, nil
}

func (p *parser) peek() token { return p.toks[p.i] }

// next consumes a token; it stays on the final EOF token.
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

// isOp reports whether the next token is one of ops.
func (p *parser) isOp(ops string) bool {
	t := p.peek()
	return t.kind == tokOp && strings.ContainsRune(ops, t.op)
}

func (p *parser) expr() (node, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		return nil, errAt(p.peek().pos, "expression nested more than %d levels deep", maxDepth)
	}
	l, err := p.term()
	if err != nil {
		return nil, err
	}
	for p.isOp("+-") {
		op := p.next()
		r, err := p.term()
		if err != nil {
			return nil, err
		}
		l = binNode{op: op.op, pos: op.pos, l: l, r: r}
	}
	return l, nil
}

func (p *parser) term() (node, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for p.isOp("*/%") {
		op := p.next()
		r, err := p.unary()
		if err != nil {
			return nil, err
		}
		l = binNode{op: op.op, pos: op.pos, l: l, r: r}
	}
	return l, nil
}

func (p *parser) unary() (node, error) {
	if p.isOp("+-") {
		op := p.next()
		p.depth++
		defer func() { p.depth-- }()
		if p.depth > maxDepth {
			return nil, errAt(op.pos, "too many signs in a row")
		}
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		if op.op == '-' {
			return negNode{pos: op.pos, x: x}, nil
		}
		return x, nil
	}
	return p.power()
}

func (p *parser) power() (node, error) {
	base, err := p.primary()
	if err != nil {
		return nil, err
	}
	if !p.isOp("^") {
		return base, nil
	}
	op := p.next()
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		return nil, errAt(op.pos, "too many powers in a row")
	}
	exp, err := p.unary()
	if err != nil {
		return nil, err
	}
	return binNode{op: '^', pos: op.pos, l: base, r: exp}, nil
}

func (p *parser) primary() (node, error) {
	t := p.next()
	switch {
	case t.kind == tokNum:
		return numNode{t.num}, nil
	case t.kind == tokName:
		return p.name(t)
	case t.kind == tokOp && t.op == '(':
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		if c := p.peek(); !(c.kind == tokOp && c.op == ')') {
			return nil, errAt(c.pos, "expected %q to close the %q at position %d, found %s", ")", "(", t.pos, c)
		}
		p.next()
		return x, nil
	case t.kind == tokEOF:
		return nil, errAt(t.pos, "unexpected end of input, expected a number, name or %q", "(")
	default:
		return nil, errAt(t.pos, "unexpected %s, expected a number, name or %q", t, "(")
	}
}

// name parses a constant or a function call whose name token is t.
func (p *parser) name(t token) (node, error) {
	lower := strings.ToLower(t.text)
	if v, ok := constants[lower]; ok {
		if p.isOp("(") {
			return nil, errAt(p.peek().pos, "%s is a constant, not a function", t.text)
		}
		return numNode{v}, nil
	}
	fn, ok := functions[lower]
	if !ok {
		return nil, errAt(t.pos, "unknown name %q (known: %s)", t.text, knownNames())
	}
	if !p.isOp("(") {
		return nil, errAt(p.peek().pos, "expected %q after function %s, found %s", "(", t.text, p.peek())
	}
	open := p.next()
	var args []node
	if p.isOp(")") {
		p.next()
	} else {
		for {
			a, err := p.expr()
			if err != nil {
				return nil, err
			}
			args = append(args, a)
			if p.isOp(",") {
				p.next()
				continue
			}
			if p.isOp(")") {
				p.next()
				break
			}
			c := p.peek()
			return nil, errAt(c.pos, "expected %q or %q in the call of %s at position %d, found %s", ",", ")", t.text, open.pos, c)
		}
	}
	if len(args) < fn.minArgs || (fn.maxArgs >= 0 && len(args) > fn.maxArgs) {
		return nil, errAt(t.pos, "%s takes %s, got %d", lower, fn.arity(), len(args))
	}
	return callNode{fn: fn, name: lower, pos: t.pos, args: args}, nil
}

// Evaluate parses and evaluates an arithmetic expression. Its errors are
// *ExprError values naming the position.
func Evaluate(expr string) (float64, error) {
	n, err := parseExpr(expr)
	if err != nil {
		return 0, err
	}
	v, err := n.eval()
	if err != nil {
		return 0, err
	}
	if v == 0 {
		v = 0 // no "-0"
	}
	return v, nil
}

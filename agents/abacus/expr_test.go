package abacus

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestEvaluate(t *testing.T) {
	tests := []struct {
		expr string
		want float64
	}{
		{"1", 1},
		{"2 + 3 * 4", 14},
		{"(2 + 3) * 4", 20},
		{"10 - 4 - 3", 3},   // left-associative
		{"100 / 10 / 5", 2}, // left-associative
		{"2 ^ 3 ^ 2", 512},  // right-associative
		{"-2 ^ 2", -4},      // unary minus binds looser than ^
		{"(-2) ^ 2", 4},
		{"2 ^ -1", 0.5},
		{"-3 * -2", 6},
		{"--3", 3},
		{"+3", 3},
		{"2 * -(3 + 1)", -8},
		{"7 % 3", 1},
		{"-7 % 3", -1}, // sign of the dividend, like Go and C
		{"7.5 % 2", 1.5},
		{"1 + 2 * 3 % 4", 3},
		{".5 + 1.", 1.5},
		{"1e3 + 2.5E-1", 1000.25},
		{"1e-999", 0}, // underflows to zero
		{"sqrt(16) + abs(-3)", 7},
		{"round(2.5)", 3},
		{"round(-2.5)", -3},
		{"round(3.14159, 2)", 3.14},
		{"round(1234, -2)", 1200},
		{"min(3, 1, 2)", 1},
		{"max(3, sqrt(17))", math.Sqrt(17)},
		{"floor(-1.5) + ceil(1.2)", 0},
		{"ln(e)", 1},
		{"log10(1000)", 3},
		{"exp(0)", 1},
		{"2 * pi", 2 * math.Pi},
		{"PI", math.Pi},
		{"SQRT(4)", 2},
		{"3 × 4 ÷ 2 − 1", 5},
		{"2 ** 10", 1024},
		{"((((1))))", 1},
		{"0 * -1", 0},
		{"  42  ", 42},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := Evaluate(tt.expr)
			if err != nil {
				t.Fatalf("Evaluate(%q): %v", tt.expr, err)
			}
			if math.Abs(got-tt.want) > 1e-12*math.Max(1, math.Abs(tt.want)) {
				t.Errorf("Evaluate(%q) = %v, want %v", tt.expr, got, tt.want)
			}
			if math.Signbit(got) && got == 0 {
				t.Errorf("Evaluate(%q) = -0", tt.expr)
			}
		})
	}
}

func TestEvaluateErrors(t *testing.T) {
	tests := []struct {
		expr    string
		wantPos int
		wantMsg string
	}{
		{"", 1, "empty expression"},
		{"   ", 1, "empty expression"},
		{"1 / 0", 3, "division by zero"},
		{"1 / (2 - 2)", 3, "division by zero"},
		{"5 % 0", 3, "by zero"},
		{"0 ^ -1", 3, "zero raised to a negative power"},
		{"1 +", 4, "unexpected end of input"},
		{"1 + * 2", 5, `unexpected "*"`},
		{"(1 + 2", 7, `expected ")" to close the "(" at position 1`},
		{"1 + 2)", 6, `unmatched ")"`},
		{"2 3", 3, `expected an operator, found "3"`},
		{"2(3)", 2, `expected an operator, found "("`},
		{"2pi", 2, `expected an operator, found "pi"`},
		{"2e", 2, `expected an operator, found "e"`},
		{"1 $ 2", 3, `unexpected character '$'`},
		{"1..2", 1, "malformed number"},
		{".", 1, "malformed number"},
		{"1e999", 1, "too large"},
		{"1.2.3 + 1", 1, `malformed number "1.2.3"`},
		{"foo(1)", 1, `unknown name "foo"`},
		{"sqrt 4", 6, `expected "(" after function sqrt`},
		{"pi(2)", 3, "pi is a constant"},
		{"sqrt()", 1, "sqrt takes 1 argument, got 0"},
		{"sqrt(1, 2)", 1, "sqrt takes 1 argument, got 2"},
		{"round(1, 2, 3)", 1, "round takes 1 to 2 arguments"},
		{"min()", 1, "min takes at least 1"},
		{"max(1 2)", 7, `expected "," or ")" in the call of max at position 4`},
		{"1 + sqrt(-4)", 5, "square root of a negative number (-4)"},
		{"ln(0)", 1, "not positive"},
		{"round(1, 0.5)", 1, "digits must be a whole number"},
		{"10 ^ 400", 4, "overflow"},
		{"(-8) ^ (1/3)", 6, "not a real number"},
		{"é + 1", 1, `unknown name "é"`},
		{"1 + ü", 5, `unknown name "ü"`}, // positions count characters, not bytes
		{strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200), 101, "nested more than"},
		{strings.Repeat("-", 200) + "1", 100, "too many signs"},
		{strings.Repeat("1+", 600) + "1", maxExprRunes + 1, "at most 1000"},
	}
	for _, tt := range tests {
		name := tt.expr
		if len(name) > 30 {
			name = name[:30]
		}
		t.Run(name, func(t *testing.T) {
			_, err := Evaluate(tt.expr)
			var ee *ExprError
			if !errors.As(err, &ee) {
				t.Fatalf("Evaluate(%q) error = %v, want an *ExprError", tt.expr, err)
			}
			if ee.Pos != tt.wantPos || !strings.Contains(ee.Msg, tt.wantMsg) {
				t.Errorf("Evaluate(%q) = %q at %d, want %q at %d", tt.expr, ee.Msg, ee.Pos, tt.wantMsg, tt.wantPos)
			}
			if !strings.Contains(err.Error(), "position") {
				t.Errorf("error %q does not name the position", err)
			}
		})
	}
}

func TestFormatNumber(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0.1 + 0.2, "0.3"},
		{14, "14"},
		{-3, "-3"},
		{1e20, "1e+20"},
		{1.5e-7, "1.5e-07"},
		{math.Copysign(0, -1), "0"},
		{2.0 / 3, "0.666666666666667"},
		{123456789012345, "123456789012345"},
	}
	for _, tt := range tests {
		if got := formatNumber(tt.v); got != tt.want {
			t.Errorf("formatNumber(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

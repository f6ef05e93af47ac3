package abacus

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// constants the calculator knows by name (names are case-insensitive).
var constants = map[string]float64{
	"pi": math.Pi,
	"e":  math.E,
}

// A function is a calculator function.
type function struct {
	minArgs, maxArgs int // maxArgs < 0: no upper bound
	call             func(args []float64) (float64, error)
}

func (f *function) arity() string {
	switch {
	case f.minArgs == f.maxArgs && f.minArgs == 1:
		return "1 argument"
	case f.minArgs == f.maxArgs:
		return fmt.Sprintf("%d arguments", f.minArgs)
	case f.maxArgs < 0:
		return fmt.Sprintf("at least %d argument(s)", f.minArgs)
	default:
		return fmt.Sprintf("%d to %d arguments", f.minArgs, f.maxArgs)
	}
}

func unary(f func(float64) float64) *function {
	return &function{1, 1, func(a []float64) (float64, error) { return f(a[0]), nil }}
}

// logarithm is a function of one argument, which must be positive.
func logarithm(log func(float64) float64) *function {
	return &function{1, 1, func(a []float64) (float64, error) {
		if a[0] <= 0 {
			return 0, fmt.Errorf("logarithm of a number that is not positive (%s)", formatNumber(a[0]))
		}
		return log(a[0]), nil
	}}
}

// maxRoundDigits bounds round's second argument: beyond it float64 has no
// digits left to round.
const maxRoundDigits = 15

var functions = map[string]*function{
	"abs":   unary(math.Abs),
	"ceil":  unary(math.Ceil),
	"floor": unary(math.Floor),
	"exp":   unary(math.Exp),
	"sqrt": {1, 1, func(a []float64) (float64, error) {
		if a[0] < 0 {
			return 0, fmt.Errorf("square root of a negative number (%s)", formatNumber(a[0]))
		}
		return math.Sqrt(a[0]), nil
	}},
	"ln":    logarithm(math.Log),
	"log10": logarithm(math.Log10),
	// round(x) rounds half away from zero; round(x, d) to d decimal places
	// (negative d rounds to tens, hundreds, ...).
	"round": {1, 2, func(a []float64) (float64, error) {
		if len(a) == 1 {
			return math.Round(a[0]), nil
		}
		d := a[1]
		if d != math.Trunc(d) || math.Abs(d) > maxRoundDigits {
			return 0, fmt.Errorf("digits must be a whole number from %d to %d, got %s", -maxRoundDigits, maxRoundDigits, formatNumber(d))
		}
		p := math.Pow(10, d)
		return math.Round(a[0]*p) / p, nil
	}},
	"min": {1, -1, func(a []float64) (float64, error) { return slices.Min(a), nil }},
	"max": {1, -1, func(a []float64) (float64, error) { return slices.Max(a), nil }},
}

// knownNames lists the functions and constants, for error messages.
func knownNames() string {
	var fs, cs []string
	for n := range functions {
		fs = append(fs, n+"()")
	}
	for n := range constants {
		cs = append(cs, n)
	}
	slices.Sort(fs)
	slices.Sort(cs)
	return strings.Join(append(fs, cs...), ", ")
}

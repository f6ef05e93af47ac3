package abacus

import (
	"math"
	"strconv"
)

// significantDigits is how many digits results are shown (and returned)
// with: enough for any everyday quantity, few enough that float64 noise
// (0.1+0.2 = 0.30000000000000004) does not reach the answer.
const significantDigits = 15

// roundSignificant rounds v to significantDigits significant digits.
func roundSignificant(v float64) float64 {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', significantDigits, 64), 64)
	if err != nil {
		return v
	}
	return r
}

// formatNumber renders v for a reader: whole numbers without a fraction or
// exponent up to 1e15, everything else in the shortest form that round-trips
// the value rounded to significantDigits.
func formatNumber(v float64) string {
	v = roundSignificant(v)
	if v == 0 {
		return "0"
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

package abacus

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// This file is the calendar arithmetic behind date_math. Dates are civil
// dates without a time of day or zone: they are held as midnight UTC so that
// no daylight-saving change can make a day 23 hours long and turn "days
// between" into an off-by-one.

const isoDate = "2006-01-02"

// now is the clock "today" is read from; tests replace it.
var now = time.Now

// The date_math operations.
const (
	opAdd      = "add"
	opSubtract = "subtract"
	opBetween  = "between"
	opWeekday  = "weekday"
)

// The units date_math adds.
const (
	unitDays   = "days"
	unitWeeks  = "weeks"
	unitMonths = "months"
	unitYears  = "years"
)

// maxDateAmount bounds amount: about 27 000 years in days, so every result
// stays within the years 0001-9999 or is refused cleanly.
const maxDateAmount = 10_000_000

// parseDate reads an ISO 8601 date (YYYY-MM-DD), an RFC 3339 timestamp (its
// date, in its own zone), or "today" (the server's local date).
func parseDate(field, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "today") {
		y, m, d := now().Date()
		return civil(y, m, d), nil
	}
	if s == "" {
		return time.Time{}, fmt.Errorf("%s is empty: give a date as YYYY-MM-DD", field)
	}
	t, err := time.Parse(isoDate, s)
	if err != nil {
		ts, err2 := time.Parse(time.RFC3339, s)
		if err2 != nil {
			return time.Time{}, fmt.Errorf("%s %q is not a date in the form YYYY-MM-DD: %w", field, s, dateParseReason(err))
		}
		t = ts
	}
	y, m, d := t.Date()
	return civil(y, m, d), nil
}

// dateParseReason keeps the useful part of a time.Parse error ("month out
// of range") and drops its echo of the layout, which reads as noise.
func dateParseReason(err error) error {
	var pe *time.ParseError
	if errors.As(err, &pe) && pe.Message != "" {
		return errors.New(strings.TrimPrefix(pe.Message, ": "))
	}
	return errors.New("expected four-digit year, two-digit month and day")
}

func civil(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

// addDate adds n units to t. Months and years clamp to the end of a shorter
// month (January 31 + 1 month = February 28 or 29; February 29 + 1 year =
// February 28), which is what people mean; time.AddDate would roll over
// into March.
func addDate(t time.Time, n int, unit string) (time.Time, error) {
	if n > maxDateAmount || n < -maxDateAmount {
		return time.Time{}, fmt.Errorf("amount %d is out of range (at most %d in size)", n, maxDateAmount)
	}
	var r time.Time
	switch unit {
	case unitDays, "":
		r = t.AddDate(0, 0, n)
	case unitWeeks:
		r = t.AddDate(0, 0, 7*n)
	case unitMonths, unitYears:
		months := n
		if unit == unitYears {
			months = 12 * n
		}
		y, m, d := t.Date()
		first := civil(y, m, 1).AddDate(0, months, 0)
		last := first.AddDate(0, 1, -1).Day()
		r = civil(first.Year(), first.Month(), min(d, last))
	default:
		return time.Time{}, fmt.Errorf("unknown unit %q: use days, weeks, months or years", unit)
	}
	if r.Year() < 1 || r.Year() > 9999 {
		return time.Time{}, fmt.Errorf("result is outside the years 0001-9999")
	}
	return r, nil
}

// daysBetween is the number of days from a to b (negative if b is earlier).
func daysBetween(a, b time.Time) int {
	// Unix seconds, not b.Sub(a): a Duration saturates at about 292 years.
	// Both are midnight UTC, so the division is exact.
	return int((b.Unix() - a.Unix()) / 86400)
}

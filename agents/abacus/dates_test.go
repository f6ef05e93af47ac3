package abacus

import (
	"strings"
	"testing"
	"time"
)

func TestDateMath(t *testing.T) {
	defer func(old func() time.Time) { now = old }(now)
	now = func() time.Time { return time.Date(2025, 6, 15, 23, 30, 0, 0, time.Local) }

	n := func(v int) *int { return &v }
	days := func(v int) *int { return &v }
	tests := []struct {
		in   dateMathIn
		want dateMathOut
	}{
		{dateMathIn{Operation: "add", Date: "2025-01-15", Amount: n(90), Unit: "days"},
			dateMathOut{Result: "2025-04-15", Weekday: "Tuesday"}},
		{dateMathIn{Operation: "add", Date: "2025-01-15", Amount: n(2), Unit: "weeks"},
			dateMathOut{Result: "2025-01-29", Weekday: "Wednesday"}},
		{dateMathIn{Operation: "subtract", Date: "2025-03-01", Amount: n(1), Unit: "days"},
			dateMathOut{Result: "2025-02-28", Weekday: "Friday"}},
		{dateMathIn{Operation: "add", Date: "2024-02-28", Amount: n(1)}, // unit defaults to days
			dateMathOut{Result: "2024-02-29", Weekday: "Thursday"}},
		{dateMathIn{Operation: "add", Date: "2025-01-31", Amount: n(1), Unit: "months"},
			dateMathOut{Result: "2025-02-28", Weekday: "Friday"}},
		{dateMathIn{Operation: "add", Date: "2024-01-31", Amount: n(1), Unit: "months"},
			dateMathOut{Result: "2024-02-29", Weekday: "Thursday"}},
		{dateMathIn{Operation: "subtract", Date: "2025-03-31", Amount: n(1), Unit: "months"},
			dateMathOut{Result: "2025-02-28", Weekday: "Friday"}},
		{dateMathIn{Operation: "add", Date: "2024-02-29", Amount: n(1), Unit: "years"},
			dateMathOut{Result: "2025-02-28", Weekday: "Friday"}},
		{dateMathIn{Operation: "add", Date: "2025-10-15", Amount: n(-14), Unit: "months"},
			dateMathOut{Result: "2024-08-15", Weekday: "Thursday"}},
		{dateMathIn{Operation: "add", Date: "today", Amount: n(1)},
			dateMathOut{Result: "2025-06-16", Weekday: "Monday"}},
		{dateMathIn{Operation: "between", Date: "2025-01-01", EndDate: "2025-12-25"},
			dateMathOut{EndDate: "2025-12-25", Days: days(358)}},
		{dateMathIn{Operation: "between", Date: "2025-03-10", EndDate: "2025-03-01"},
			dateMathOut{EndDate: "2025-03-01", Days: days(-9)}},
		// Across a daylight-saving change, still whole days.
		{dateMathIn{Operation: "between", Date: "2025-03-01", EndDate: "2025-04-01"},
			dateMathOut{EndDate: "2025-04-01", Days: days(31)}},
		{dateMathIn{Operation: "between", Date: "0001-01-01", EndDate: "9999-12-31"},
			dateMathOut{EndDate: "9999-12-31", Days: days(3652058)}},
		{dateMathIn{Operation: "weekday", Date: "2000-01-01"},
			dateMathOut{Weekday: "Saturday", ISOWeek: 52, DayOfYear: 1}},
		{dateMathIn{Operation: "Weekday", Date: "2025-06-15T08:00:00+02:00"},
			dateMathOut{Weekday: "Sunday", ISOWeek: 24, DayOfYear: 166}},
	}
	for _, tt := range tests {
		t.Run(tt.in.Operation+" "+tt.in.Date, func(t *testing.T) {
			got, err := dateMath(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Result != tt.want.Result || got.Weekday != tt.want.Weekday || got.EndDate != tt.want.EndDate ||
				got.ISOWeek != tt.want.ISOWeek || got.DayOfYear != tt.want.DayOfYear ||
				(got.Days == nil) != (tt.want.Days == nil) || (got.Days != nil && *got.Days != *tt.want.Days) {
				t.Errorf("dateMath(%+v) = %+v, want %+v", tt.in, got, tt.want)
			}
			if got.Text == "" {
				t.Error("no text")
			}
		})
	}
}

func TestDateMathErrors(t *testing.T) {
	n := func(v int) *int { return &v }
	tests := []struct {
		in   dateMathIn
		want []string
	}{
		{dateMathIn{Operation: "add", Date: "2025-13-01", Amount: n(1)}, []string{`date "2025-13-01"`, "month out of range"}},
		{dateMathIn{Operation: "add", Date: "2025-02-30", Amount: n(1)}, []string{"day out of range"}},
		{dateMathIn{Operation: "add", Date: "15/01/2025", Amount: n(1)}, []string{"YYYY-MM-DD"}},
		{dateMathIn{Operation: "add", Date: "", Amount: n(1)}, []string{"date is empty"}},
		{dateMathIn{Operation: "add", Date: "2025-01-01"}, []string{"add needs amount"}},
		{dateMathIn{Operation: "add", Date: "2025-01-01", Amount: n(1), Unit: "fortnights"}, []string{`unknown unit "fortnights"`}},
		{dateMathIn{Operation: "add", Date: "9999-12-31", Amount: n(1)}, []string{"outside the years"}},
		{dateMathIn{Operation: "subtract", Date: "0001-01-01", Amount: n(1), Unit: "years"}, []string{"outside the years"}},
		{dateMathIn{Operation: "add", Date: "2025-01-01", Amount: n(maxDateAmount + 1)}, []string{"out of range"}},
		{dateMathIn{Operation: "between", Date: "2025-01-01"}, []string{"between needs end_date"}},
		{dateMathIn{Operation: "between", Date: "2025-01-01", EndDate: "soon"}, []string{`end_date "soon"`}},
		{dateMathIn{Operation: "multiply", Date: "2025-01-01"}, []string{`unknown operation "multiply"`}},
	}
	for _, tt := range tests {
		t.Run(tt.in.Operation+" "+tt.in.Date, func(t *testing.T) {
			_, err := dateMath(tt.in)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

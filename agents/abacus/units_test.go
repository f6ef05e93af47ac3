package abacus

import (
	"math"
	"strings"
	"testing"
)

func TestConvert(t *testing.T) {
	tests := []struct {
		value    float64
		from, to string
		want     float64
		wantFrom string
		wantTo   string
	}{
		{5, "km", "mi", 3.10685596118667, "km", "mi"},
		{1, "mi", "ft", 5280, "mi", "ft"},
		{12, "in", "cm", 30.48, "in", "cm"},
		{1, "nmi", "m", 1852, "nmi", "m"},
		{2, "NM", "km", 3.704, "nmi", "km"},
		{100, "kilometers", "Miles", 62.1371192237334, "km", "mi"},
		{1, "kg", "lb", 2.20462262184878, "kg", "lb"},
		{16, "oz", "lb", 1, "oz", "lb"},
		{1, "st", "lb", 14, "st", "lb"},
		{100, "°C", "°F", 212, "°C", "°F"},
		{32, "F", "C", 0, "°F", "°C"},
		{-40, "celsius", "fahrenheit", -40, "°C", "°F"},
		{0, "K", "°C", -273.15, "K", "°C"},
		{98.6, "degrees Fahrenheit", "degC", 37, "°F", "°C"},
		{90, "min", "h", 1.5, "min", "h"},
		{2, "weeks", "days", 14, "wk", "d"},
		{1, "day", "s", 86400, "d", "s"},
		{1, "KiB", "B", 1024, "KiB", "B"},
		{1, "GB", "MB", 1000, "GB", "MB"},
		{1, "GiB", "MB", 1073.741824, "GiB", "MB"},
		{8, "bit", "B", 1, "bit", "B"},
		{100, "Mb", "MB", 12.5, "Mbit", "MB"}, // case matters: megabit
		{1, "mb", "kb", 1000, "MB", "kB"},     // lower case means bytes
		{1, "gal", "L", 3.785411784, "gal", "L"},
		{1, "cup", "mL", 236.5882365, "cup", "mL"},
		{100, "km/h", "mph", 62.1371192237334, "km/h", "mph"},
		{10, "m/s", "km/h", 36, "m/s", "km/h"},
		{1, "acre", "m2", 4046.8564224, "ac", "m²"},
		{1, "ha", "sq ft", 107639.104167097, "ha", "ft²"},
		{3, "in.", "mm", 76.2, "in", "mm"},
	}
	for _, tt := range tests {
		t.Run(tt.from+"→"+tt.to, func(t *testing.T) {
			c, err := convert(tt.value, tt.from, tt.to)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(c.Result-tt.want) > 1e-9*math.Max(1, math.Abs(tt.want)) {
				t.Errorf("convert(%v %s → %s) = %v, want %v", tt.value, tt.from, tt.to, c.Result, tt.want)
			}
			if c.From.symbol != tt.wantFrom || c.To.symbol != tt.wantTo {
				t.Errorf("units = %s → %s, want %s → %s", c.From.symbol, c.To.symbol, tt.wantFrom, tt.wantTo)
			}
		})
	}
}

func TestConvertErrors(t *testing.T) {
	tests := []struct {
		value    float64
		from, to string
		want     []string
	}{
		{1, "kg", "m", []string{"cannot convert", "mass", "length"}},
		{1, "furlong", "m", []string{"from", `unknown unit "furlong"`, "known units", "length (nm"}},
		{1, "m", "parsec", []string{"to", `unknown unit "parsec"`}},
		{1, "", "m", []string{"no unit"}},
		{-500, "°F", "°C", []string{"below absolute zero"}},
		{-1, "K", "°C", []string{"below absolute zero"}},
		{math.Inf(1), "m", "km", []string{"finite"}},
	}
	for _, tt := range tests {
		t.Run(tt.from+"→"+tt.to, func(t *testing.T) {
			_, err := convert(tt.value, tt.from, tt.to)
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

// Every unit converts to itself and round-trips through its category's
// base unit, and every listed spelling finds its own unit.
func TestUnitTable(t *testing.T) {
	for _, u := range units {
		for _, s := range u.spellings() {
			got, err := lookupUnit(s)
			if err != nil || got != u {
				t.Errorf("lookupUnit(%q) = %v, %v; want %s", s, got, err, u.symbol)
			}
		}
		c, err := convert(300, u.symbol, u.symbol)
		if err != nil || math.Abs(c.Result-300) > 1e-9 {
			t.Errorf("convert(300 %s → itself) = %v, %v", u.symbol, c.Result, err)
		}
	}
}

package abacus

import (
	"fmt"
	"math"
	"strings"
	"unicode"
)

// This file is the unit converter. Every unit is a linear map to its
// category's base unit (base = value*factor + offset); the offset is only
// nonzero for temperatures, which is why temperatures convert correctly
// (0 °C = 32 °F, not 0 °F).
//
// Unit symbols are matched case-sensitively first, because case carries
// meaning in them (Mb is a megabit, MB a megabyte; b a bit, B a byte), and
// then case-insensitively over symbols and names, so "KM", "Miles" and
// "degrees fahrenheit" work. In the case-insensitive pass the unit listed
// first wins, which is why bytes are listed before bits: "mb" means MB.

// A unit is one unit of measure.
type unit struct {
	symbol   string   // canonical, as shown in results
	name     string   // singular, for reading
	category string   // units convert only within a category
	factor   float64  // base units per one of this unit
	offset   float64  // base value of zero of this unit (temperatures)
	aliases  []string // other accepted spellings (symbol and name are accepted too)
}

const (
	catLength      = "length"
	catMass        = "mass"
	catTemperature = "temperature"
	catTime        = "time"
	catData        = "data size"
	catVolume      = "volume"
	catSpeed       = "speed"
	catArea        = "area"
)

// Exact factors where a definition exists (the international inch, pound
// and gallon are defined in metric units).
const (
	inch    = 0.0254
	foot    = 12 * inch
	yard    = 3 * foot
	mile    = 1760 * yard
	pound   = 0.45359237
	day     = 86400.0
	gallon  = 3.785411784e-3 // US liquid gallon in m³
	flOunce = gallon / 128
)

var units = []*unit{
	// length, base metre
	{symbol: "nm", name: "nanometre", category: catLength, factor: 1e-9, aliases: []string{"nanometer"}},
	{symbol: "µm", name: "micrometre", category: catLength, factor: 1e-6, aliases: []string{"um", "μm", "micrometer", "micron"}},
	{symbol: "mm", name: "millimetre", category: catLength, factor: 1e-3, aliases: []string{"millimeter"}},
	{symbol: "cm", name: "centimetre", category: catLength, factor: 1e-2, aliases: []string{"centimeter"}},
	{symbol: "m", name: "metre", category: catLength, factor: 1, aliases: []string{"meter"}},
	{symbol: "km", name: "kilometre", category: catLength, factor: 1e3, aliases: []string{"kilometer", "kms"}},
	{symbol: "in", name: "inch", category: catLength, factor: inch, aliases: []string{"inches", "\""}},
	{symbol: "ft", name: "foot", category: catLength, factor: foot, aliases: []string{"feet", "'"}},
	{symbol: "yd", name: "yard", category: catLength, factor: yard},
	{symbol: "mi", name: "mile", category: catLength, factor: mile},
	{symbol: "nmi", name: "nautical mile", category: catLength, factor: 1852, aliases: []string{"NM"}},
	{symbol: "au", name: "astronomical unit", category: catLength, factor: 149597870700},
	{symbol: "ly", name: "light-year", category: catLength, factor: 9460730472580800, aliases: []string{"light year", "lightyear"}},

	// mass, base kilogram
	{symbol: "mg", name: "milligram", category: catMass, factor: 1e-6, aliases: []string{"milligramme"}},
	{symbol: "g", name: "gram", category: catMass, factor: 1e-3, aliases: []string{"gramme"}},
	{symbol: "kg", name: "kilogram", category: catMass, factor: 1, aliases: []string{"kilogramme", "kilo", "kgs"}},
	{symbol: "t", name: "tonne", category: catMass, factor: 1000, aliases: []string{"metric ton", "metric tonne"}},
	{symbol: "oz", name: "ounce", category: catMass, factor: pound / 16},
	{symbol: "lb", name: "pound", category: catMass, factor: pound, aliases: []string{"lbs"}},
	{symbol: "st", name: "stone", category: catMass, factor: 14 * pound, aliases: []string{"stones"}},
	{symbol: "short ton", name: "short ton", category: catMass, factor: 2000 * pound, aliases: []string{"ton", "us ton"}},
	{symbol: "long ton", name: "long ton", category: catMass, factor: 2240 * pound, aliases: []string{"imperial ton", "uk ton"}},

	// temperature, base kelvin
	{symbol: "K", name: "kelvin", category: catTemperature, factor: 1, aliases: []string{"kelvins", "°K"}},
	{symbol: "°C", name: "degree Celsius", category: catTemperature, factor: 1, offset: 273.15,
		aliases: []string{"C", "celsius", "centigrade", "degC", "deg C", "degrees celsius", "degree C", "degrees C"}},
	{symbol: "°F", name: "degree Fahrenheit", category: catTemperature, factor: 5.0 / 9, offset: 273.15 - 32*5.0/9,
		aliases: []string{"F", "fahrenheit", "degF", "deg F", "degrees fahrenheit", "degree F", "degrees F"}},
	{symbol: "°R", name: "degree Rankine", category: catTemperature, factor: 5.0 / 9, aliases: []string{"R", "rankine"}},

	// time, base second
	{symbol: "ns", name: "nanosecond", category: catTime, factor: 1e-9},
	{symbol: "µs", name: "microsecond", category: catTime, factor: 1e-6, aliases: []string{"us", "μs"}},
	{symbol: "ms", name: "millisecond", category: catTime, factor: 1e-3, aliases: []string{"msec"}},
	{symbol: "s", name: "second", category: catTime, factor: 1, aliases: []string{"sec", "secs"}},
	{symbol: "min", name: "minute", category: catTime, factor: 60, aliases: []string{"mins"}},
	{symbol: "h", name: "hour", category: catTime, factor: 3600, aliases: []string{"hr", "hrs"}},
	{symbol: "d", name: "day", category: catTime, factor: day},
	{symbol: "wk", name: "week", category: catTime, factor: 7 * day, aliases: []string{"w"}},
	// Months and years are the Gregorian averages; for calendar dates use
	// date_math instead.
	{symbol: "mo", name: "month", category: catTime, factor: 365.2425 / 12 * day},
	{symbol: "yr", name: "year", category: catTime, factor: 365.2425 * day, aliases: []string{"y"}},

	// data size, base byte. KB, MB, ... are decimal (SI, as disk and network
	// vendors use them); KiB, MiB, ... are binary.
	{symbol: "B", name: "byte", category: catData, factor: 1},
	{symbol: "kB", name: "kilobyte", category: catData, factor: 1e3, aliases: []string{"KB"}},
	{symbol: "MB", name: "megabyte", category: catData, factor: 1e6},
	{symbol: "GB", name: "gigabyte", category: catData, factor: 1e9},
	{symbol: "TB", name: "terabyte", category: catData, factor: 1e12},
	{symbol: "PB", name: "petabyte", category: catData, factor: 1e15},
	{symbol: "KiB", name: "kibibyte", category: catData, factor: 1 << 10},
	{symbol: "MiB", name: "mebibyte", category: catData, factor: 1 << 20},
	{symbol: "GiB", name: "gibibyte", category: catData, factor: 1 << 30},
	{symbol: "TiB", name: "tebibyte", category: catData, factor: 1 << 40},
	{symbol: "PiB", name: "pebibyte", category: catData, factor: 1 << 50},
	{symbol: "bit", name: "bit", category: catData, factor: 1.0 / 8, aliases: []string{"b"}},
	{symbol: "kbit", name: "kilobit", category: catData, factor: 1e3 / 8, aliases: []string{"Kb"}},
	{symbol: "Mbit", name: "megabit", category: catData, factor: 1e6 / 8, aliases: []string{"Mb"}},
	{symbol: "Gbit", name: "gigabit", category: catData, factor: 1e9 / 8, aliases: []string{"Gb"}},
	{symbol: "Tbit", name: "terabit", category: catData, factor: 1e12 / 8, aliases: []string{"Tb"}},

	// volume, base cubic metre; US customary units
	{symbol: "mL", name: "millilitre", category: catVolume, factor: 1e-6, aliases: []string{"ml", "milliliter", "cm³", "cm3", "cc"}},
	{symbol: "L", name: "litre", category: catVolume, factor: 1e-3, aliases: []string{"l", "liter"}},
	{symbol: "m³", name: "cubic metre", category: catVolume, factor: 1, aliases: []string{"m3", "cubic meter"}},
	{symbol: "tsp", name: "teaspoon", category: catVolume, factor: flOunce / 6},
	{symbol: "tbsp", name: "tablespoon", category: catVolume, factor: flOunce / 2},
	{symbol: "fl oz", name: "fluid ounce", category: catVolume, factor: flOunce, aliases: []string{"floz", "fl. oz"}},
	{symbol: "cup", name: "cup", category: catVolume, factor: 8 * flOunce},
	{symbol: "pt", name: "pint", category: catVolume, factor: gallon / 8},
	{symbol: "qt", name: "quart", category: catVolume, factor: gallon / 4},
	{symbol: "gal", name: "gallon", category: catVolume, factor: gallon, aliases: []string{"us gallon"}},
	{symbol: "imp gal", name: "imperial gallon", category: catVolume, factor: 4.54609e-3, aliases: []string{"uk gallon"}},

	// speed, base metre per second
	{symbol: "m/s", name: "metre per second", category: catSpeed, factor: 1, aliases: []string{"meter per second", "metres per second", "meters per second", "mps"}},
	{symbol: "km/h", name: "kilometre per hour", category: catSpeed, factor: 1 / 3.6, aliases: []string{"kph", "kmh", "km/hr", "kilometer per hour", "kilometres per hour", "kilometers per hour"}},
	{symbol: "mph", name: "mile per hour", category: catSpeed, factor: mile / 3600, aliases: []string{"mi/h", "miles per hour"}},
	{symbol: "ft/s", name: "foot per second", category: catSpeed, factor: foot, aliases: []string{"fps", "feet per second"}},
	{symbol: "kn", name: "knot", category: catSpeed, factor: 1852.0 / 3600, aliases: []string{"kt", "kts"}},

	// area, base square metre
	{symbol: "cm²", name: "square centimetre", category: catArea, factor: 1e-4, aliases: []string{"cm2", "sq cm", "square centimeter"}},
	{symbol: "m²", name: "square metre", category: catArea, factor: 1, aliases: []string{"m2", "sq m", "square meter"}},
	{symbol: "ha", name: "hectare", category: catArea, factor: 1e4},
	{symbol: "km²", name: "square kilometre", category: catArea, factor: 1e6, aliases: []string{"km2", "sq km", "square kilometer"}},
	{symbol: "in²", name: "square inch", category: catArea, factor: inch * inch, aliases: []string{"in2", "sq in", "square inches"}},
	{symbol: "ft²", name: "square foot", category: catArea, factor: foot * foot, aliases: []string{"ft2", "sq ft", "square feet"}},
	{symbol: "yd²", name: "square yard", category: catArea, factor: yard * yard, aliases: []string{"yd2", "sq yd"}},
	{symbol: "ac", name: "acre", category: catArea, factor: 4840 * yard * yard},
	{symbol: "mi²", name: "square mile", category: catArea, factor: mile * mile, aliases: []string{"mi2", "sq mi"}},
}

// absoluteZero is the lowest temperature, in kelvin.
const absoluteZero = 0.0

var (
	unitsExact = map[string]*unit{} // symbol and aliases, as written
	unitsFold  = map[string]*unit{} // every spelling lower-cased; first unit wins
)

func init() {
	for _, u := range units {
		for _, s := range u.spellings() {
			if prev, dup := unitsExact[s]; dup && prev != u {
				panic(fmt.Sprintf("abacus: unit spelling %q defined twice", s))
			}
			unitsExact[s] = u
		}
	}
	// A second pass, so that an exact spelling of one unit is never
	// shadowed by a folded spelling of another listed earlier.
	for _, u := range units {
		for _, s := range u.spellings() {
			if k := strings.ToLower(s); unitsFold[k] == nil {
				unitsFold[k] = u
			}
		}
	}
}

// spellings are all the ways u may be written: symbol, name, aliases, and
// the plurals of the name and of the aliases that are words.
func (u *unit) spellings() []string {
	sp := []string{u.symbol, u.name, plural(u.name)}
	for _, a := range u.aliases {
		sp = append(sp, a)
		if len(a) > 3 && strings.IndexFunc(a, func(r rune) bool { return !unicode.IsLetter(r) && r != ' ' }) < 0 {
			sp = append(sp, plural(a))
		}
	}
	return sp
}

// plural is the regular English plural of a unit name; irregular ones
// (feet, inches) are listed as aliases.
func plural(name string) string {
	switch {
	case strings.HasSuffix(name, "inch"):
		return name + "es"
	case strings.HasSuffix(name, "foot"):
		return strings.TrimSuffix(name, "foot") + "feet"
	case strings.Contains(name, " per "): // "metre per second" → "metres per second"
		first, rest, _ := strings.Cut(name, " per ")
		return plural(first) + " per " + rest
	case strings.HasPrefix(name, "degree "):
		return "degrees " + strings.TrimPrefix(name, "degree ")
	case strings.HasSuffix(name, "s") || name == "kelvin":
		return name
	default:
		return name + "s"
	}
}

// lookupUnit finds the unit spelled s.
func lookupUnit(s string) (*unit, error) {
	k := strings.Join(strings.Fields(s), " ") // "  sq   ft " → "sq ft"
	k = strings.TrimSuffix(k, ".")            // "in." → "in"
	if k == "" {
		return nil, fmt.Errorf("no unit given")
	}
	if u, ok := unitsExact[k]; ok {
		return u, nil
	}
	if u, ok := unitsFold[strings.ToLower(k)]; ok {
		return u, nil
	}
	if u, ok := unitsFold[strings.ToLower(strings.TrimPrefix(k, "°"))]; ok {
		return u, nil
	}
	return nil, fmt.Errorf("unknown unit %q; known units: %s", s, unitList())
}

// unitList names the units by category, for error messages and the tool
// description.
func unitList() string {
	var cats []string
	byCat := map[string][]string{}
	for _, u := range units {
		if _, ok := byCat[u.category]; !ok {
			cats = append(cats, u.category)
		}
		byCat[u.category] = append(byCat[u.category], u.symbol)
	}
	var parts []string
	for _, c := range cats {
		parts = append(parts, c+" ("+strings.Join(byCat[c], ", ")+")")
	}
	return strings.Join(parts, "; ")
}

// A conversion is the result of convert.
type conversion struct {
	From, To *unit
	Value    float64
	Result   float64
}

// convert converts value from one unit to another of the same category.
func convert(value float64, from, to string) (conversion, error) {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return conversion{}, fmt.Errorf("value must be a finite number")
	}
	fu, err := lookupUnit(from)
	if err != nil {
		return conversion{}, fmt.Errorf("from: %w", err)
	}
	tu, err := lookupUnit(to)
	if err != nil {
		return conversion{}, fmt.Errorf("to: %w", err)
	}
	if fu.category != tu.category {
		return conversion{}, fmt.Errorf("cannot convert %s (%s) to %s (%s): a %s is not a %s",
			fu.symbol, fu.category, tu.symbol, tu.category, fu.category, tu.category)
	}
	base := value*fu.factor + fu.offset
	if fu.category == catTemperature && base < absoluteZero-1e-9 {
		return conversion{}, fmt.Errorf("%s %s is below absolute zero", formatNumber(value), fu.symbol)
	}
	res := (base - tu.offset) / tu.factor
	if math.IsInf(res, 0) {
		return conversion{}, fmt.Errorf("result is too large")
	}
	return conversion{From: fu, To: tu, Value: value, Result: roundSignificant(res)}, nil
}

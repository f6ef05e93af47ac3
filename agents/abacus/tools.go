package abacus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/switchboard-run/switchboard/agents/internal/toolschema"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file declares the tools. Their names, descriptions and argument
// schemas are what a coordinating model chooses by, so they name the
// operations in the words a task would use. Every failure the caller can
// cause is a tool error (CallToolResult.IsError) whose text says what to fix;
// results are a sentence for the reader plus structured content.

type calculateIn struct {
	Expression string `json:"expression" jsonschema:"The arithmetic expression to evaluate, e.g. \"(3 + 4) * 2^3 / 7\" or \"round(sqrt(2), 3)\". Operators: + - * / % (remainder) ^ (power); parentheses; unary minus; constants pi and e; functions sqrt, abs, round(x) or round(x, digits), floor, ceil, min(a, b, ...), max(a, b, ...), ln, log10, exp. No variables and no implicit multiplication (write 2*pi, not 2pi)."`
}

type calculateOut struct {
	Expression string  `json:"expression" jsonschema:"The expression as given."`
	Result     float64 `json:"result" jsonschema:"The value, rounded to 15 significant digits."`
	Text       string  `json:"text" jsonschema:"The result as shown to a reader."`
}

type convertIn struct {
	Value float64 `json:"value" jsonschema:"The quantity to convert, e.g. 5."`
	From  string  `json:"from" jsonschema:"The unit the value is in, e.g. \"km\", \"lb\", \"°F\", \"GiB\", \"hours\"."`
	To    string  `json:"to" jsonschema:"The unit to convert to, of the same kind, e.g. \"mi\", \"kg\", \"°C\", \"MB\", \"minutes\"."`
}

type convertOut struct {
	Value    float64 `json:"value" jsonschema:"The quantity converted."`
	From     string  `json:"from" jsonschema:"The from unit's symbol."`
	To       string  `json:"to" jsonschema:"The to unit's symbol."`
	Category string  `json:"category" jsonschema:"The kind of quantity: length, mass, temperature, time, data size, volume, speed or area."`
	Result   float64 `json:"result" jsonschema:"The converted quantity, rounded to 15 significant digits."`
	Text     string  `json:"text" jsonschema:"The conversion as shown to a reader."`
}

type dateMathIn struct {
	Operation string `json:"operation" jsonschema:"What to compute: \"add\" or \"subtract\" amount units to/from date; \"between\" for the number of days from date to end_date; \"weekday\" for the day of the week of date."`
	Date      string `json:"date" jsonschema:"The date, as YYYY-MM-DD (ISO 8601), or \"today\"."`
	Amount    *int   `json:"amount,omitempty" jsonschema:"For add and subtract: how many units (may be negative)."`
	Unit      string `json:"unit,omitempty" jsonschema:"For add and subtract: days, weeks, months or years. Months and years keep the day of the month, clamped to the month's last day (Jan 31 + 1 month = Feb 28 or 29)."`
	EndDate   string `json:"end_date,omitempty" jsonschema:"For between: the second date, as YYYY-MM-DD or \"today\"."`
}

type dateMathOut struct {
	Operation string `json:"operation" jsonschema:"The operation performed."`
	Date      string `json:"date" jsonschema:"The input date, YYYY-MM-DD."`
	Result    string `json:"result,omitempty" jsonschema:"add, subtract: the resulting date, YYYY-MM-DD."`
	EndDate   string `json:"end_date,omitempty" jsonschema:"between: the second date, YYYY-MM-DD."`
	Days      *int   `json:"days,omitempty" jsonschema:"between: days from date to end_date (negative if end_date is earlier)."`
	Weekday   string `json:"weekday,omitempty" jsonschema:"add, subtract: the result's day of the week; weekday: the date's day of the week."`
	ISOWeek   int    `json:"iso_week,omitempty" jsonschema:"weekday: the ISO 8601 week number of the date."`
	DayOfYear int    `json:"day_of_year,omitempty" jsonschema:"weekday: the day of the year, 1 to 366."`
	Text      string `json:"text" jsonschema:"The answer as shown to a reader."`
}

func addTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name:  "calculate",
		Title: "Calculate",
		Description: "Evaluate an arithmetic expression and return its numeric value (compute, calculate, do math: " +
			"sums, differences, products, quotients, powers, square roots, averages, rounding). " +
			"Supports + - * / % (remainder) ^ (power), parentheses, unary minus, pi, e, and sqrt, abs, round, floor, ceil, min, max, ln, log10, exp. " +
			"% is the remainder, not percent: write 15% of 80 as 15/100*80. " +
			"Errors name the character position of the problem.",
		InputSchema: toolschema.For[calculateIn](func(p map[string]*jsonschema.Schema) {
			p["expression"].MinLength, p["expression"].MaxLength = toolschema.Ptr(1), toolschema.Ptr(maxExprRunes)
			p["expression"].Examples = []any{"2 + 3 * 4", "(1 + 0.05)^10 * 1000", "max(3, sqrt(17))"}
		}),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: toolschema.Ptr(false)},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in calculateIn) (*mcp.CallToolResult, calculateOut, error) {
		v, err := Evaluate(in.Expression)
		if err != nil {
			return nil, calculateOut{}, explainExprError(in.Expression, err)
		}
		text := fmt.Sprintf("%s = %s", strings.TrimSpace(in.Expression), formatNumber(v))
		return textResult(text), calculateOut{Expression: in.Expression, Result: roundSignificant(v), Text: text}, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:  "convert_units",
		Title: "Convert units",
		Description: "Convert a quantity from one unit of measure to another of the same kind (unit conversion), e.g. 5 km to mi, " +
			"100 °F to °C, 3 GiB to MB, 90 min to h. Knows " + unitList() + ". " +
			"KB, MB, GB are decimal (1000); KiB, MiB, GiB are binary (1024). Full names and plurals work too (\"miles\", \"degrees Celsius\").",
		InputSchema: toolschema.For[convertIn](func(p map[string]*jsonschema.Schema) {
			p["from"].MinLength, p["to"].MinLength = toolschema.Ptr(1), toolschema.Ptr(1)
		}),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: toolschema.Ptr(false)},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in convertIn) (*mcp.CallToolResult, convertOut, error) {
		c, err := convert(in.Value, in.From, in.To)
		if err != nil {
			return nil, convertOut{}, err
		}
		text := fmt.Sprintf("%s %s = %s %s", formatNumber(c.Value), c.From.symbol, formatNumber(c.Result), c.To.symbol)
		return textResult(text), convertOut{
			Value: c.Value, From: c.From.symbol, To: c.To.symbol, Category: c.From.category,
			Result: c.Result, Text: text,
		}, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:  "date_math",
		Title: "Date arithmetic",
		Description: "Calendar arithmetic on dates (YYYY-MM-DD or \"today\"): add or subtract days, weeks, months or years " +
			"(what date is 90 days after 2025-01-15?); count the days between two dates (how many days until ...?); " +
			"or tell the day of the week of a date (what weekday is ...?).",
		InputSchema: toolschema.For[dateMathIn](func(p map[string]*jsonschema.Schema) {
			p["operation"].Enum = []any{opAdd, opSubtract, opBetween, opWeekday}
			p["unit"].Enum = []any{unitDays, unitWeeks, unitMonths, unitYears}
			p["unit"].Default = toolschema.RawJSON(unitDays)
			p["amount"].Minimum, p["amount"].Maximum = toolschema.Ptr(float64(-maxDateAmount)), toolschema.Ptr(float64(maxDateAmount))
		}),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: toolschema.Ptr(false)},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in dateMathIn) (*mcp.CallToolResult, dateMathOut, error) {
		out, err := dateMath(in)
		if err != nil {
			return nil, dateMathOut{}, err
		}
		return textResult(out.Text), out, nil
	})
}

// dateMath performs one date_math call.
func dateMath(in dateMathIn) (dateMathOut, error) {
	op := strings.ToLower(strings.TrimSpace(in.Operation))
	d, err := parseDate("date", in.Date)
	if err != nil {
		return dateMathOut{}, err
	}
	out := dateMathOut{Operation: op, Date: d.Format(isoDate)}
	switch op {
	case opAdd, opSubtract:
		if in.Amount == nil {
			return dateMathOut{}, fmt.Errorf("%s needs amount (and unit, default days)", op)
		}
		n := *in.Amount
		if op == opSubtract {
			n = -n
		}
		unit := strings.ToLower(strings.TrimSpace(in.Unit))
		r, err := addDate(d, n, unit)
		if err != nil {
			return dateMathOut{}, err
		}
		if unit == "" {
			unit = unitDays
		}
		out.Result, out.Weekday = r.Format(isoDate), r.Weekday().String()
		sign := "+"
		if op == opSubtract {
			sign = "-"
		}
		out.Text = fmt.Sprintf("%s %s %d %s = %s (%s)", out.Date, sign, *in.Amount, unit, out.Result, out.Weekday)
	case opBetween:
		if strings.TrimSpace(in.EndDate) == "" {
			return dateMathOut{}, errors.New("between needs end_date (YYYY-MM-DD or \"today\")")
		}
		e, err := parseDate("end_date", in.EndDate)
		if err != nil {
			return dateMathOut{}, err
		}
		days := daysBetween(d, e)
		out.EndDate, out.Days = e.Format(isoDate), &days
		out.Text = fmt.Sprintf("From %s to %s is %d day%s", out.Date, out.EndDate, days, pluralS(days))
		if w := abs(days) / 7; w > 0 {
			out.Text += fmt.Sprintf(" (%d week%s", w, pluralS(w))
			if r := abs(days) % 7; r > 0 {
				out.Text += fmt.Sprintf(" and %d day%s", r, pluralS(r))
			}
			out.Text += ")"
		}
		out.Text += "."
	case opWeekday:
		_, week := d.ISOWeek()
		out.Weekday, out.ISOWeek, out.DayOfYear = d.Weekday().String(), week, d.YearDay()
		out.Text = fmt.Sprintf("%s is a %s (ISO week %d, day %d of the year).", out.Date, out.Weekday, week, out.DayOfYear)
	default:
		return dateMathOut{}, fmt.Errorf("unknown operation %q: use add, subtract, between or weekday", in.Operation)
	}
	return out, nil
}

func pluralS(n int) string {
	if n == 1 || n == -1 {
		return ""
	}
	return "s"
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// explainExprError adds the expression with a caret under the position to
// an *ExprError, so a reader (or model) sees at a glance where it is.
func explainExprError(expr string, err error) error {
	var ee *ExprError
	if !errors.As(err, &ee) || strings.ContainsAny(expr, "\n\r") {
		return err
	}
	return fmt.Errorf("%w\n  %s\n  %s^", err, expr, strings.Repeat(" ", max(ee.Pos-1, 0)))
}

// Command benchratio reads `go test -bench` output on stdin and prints, for
// each benchmark group and case, every variant's median and spread, and its
// ratio to a baseline variant measured in the same run. Shared, noisy
// machines make absolute figures meaningless from one run to the next;
// ratios within a run hold up, provided the variants were interleaved, so
// that drift of the machine lands on all of them alike rather than on
// whichever ran during it.
//
// A benchmark name Benchmark<Group>/<variant>/<case> is grouped by <Group>
// and <case> (the case may be empty). Each variant's N samples give a median
// and a spread (min–max). Ratios to the baseline are paired: a benchmark
// line that follows a "round: R" line (as the rounds driver in
// ./internal/benchratio/rounds prints; benchfmt calls such lines
// configuration) belongs to round R, and the ratio of round R is the
// variant's figure over the baseline's figure of that same round. Without
// round lines the k-th sample of each variant is paired with the baseline's
// k-th. The ratio printed is the median of the paired ratios, with their
// min–max.
//
// Every unit on the line is kept: ns/op, B/op, allocs/op and the custom
// ones a benchmark reports with b.ReportMetric (req/op, p99-ms, ...), which
// are printed after the standard columns with their own median and spread.
//
//	go run ./internal/benchratio/rounds -n 9 -pkg ./pool -bench CallTool -variants pooled,raw-session,connect-per-call |
//		go run ./internal/benchratio -baseline raw-session
//
// -baseline takes a comma-separated list: each group and case is compared
// with the first of them it has (so one run can cover BenchmarkCallTool
// against raw-session and BenchmarkKeys against k1). A group that has none of
// them is printed without ratios.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// benchLine matches "BenchmarkX/variant/case-8   1000   1234 ns/op   1.0 req/op   56 B/op ...":
// the name, the iteration count, and the value/unit pairs after them.
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)((?:\s+[-\d.eE+]+\s+\S+)+)\s*$`)

// roundLine is a benchfmt configuration line naming the round the
// benchmark lines after it belong to.
var roundLine = regexp.MustCompile(`^round:\s*(\d+)\s*$`)

// Standard units, printed in their own columns; every other unit is a
// custom metric.
const (
	unitNs     = "ns/op"
	unitBytes  = "B/op"
	unitAllocs = "allocs/op"
)

// id names one series: a variant of a group's case.
type id struct{ group, cas, variant string }

// point is one benchmark line: its round (0 when the input has no round
// lines) and its metrics by unit.
type point struct {
	round  int
	values map[string]float64
}

type series struct {
	points []point
	units  []string // custom units, in the order first seen
}

func main() {
	baseline := flag.String("baseline", "", "comma-separated variants to compare the others with; per group and case the first present is used")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *baseline); err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer, baseline string) error {
	var baselines []string
	for b := range strings.SplitSeq(baseline, ",") {
		if b = strings.TrimSpace(b); b != "" {
			baselines = append(baselines, b)
		}
	}
	all := map[id]*series{}
	var order []id
	round := 0
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if m := roundLine.FindStringSubmatch(text); m != nil {
			round, _ = strconv.Atoi(m[1])
			continue
		}
		m := benchLine.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		parts := strings.SplitN(m[1], "/", 3)
		if len(parts) < 2 {
			continue // a benchmark without variants has nothing to compare
		}
		k := id{group: strings.TrimPrefix(parts[0], "Benchmark"), variant: parts[1]}
		if len(parts) == 3 {
			k.cas = parts[2]
		}
		values, units, err := parseValues(m[3])
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		s, ok := all[k]
		if !ok {
			s = &series{}
			all[k] = s
			order = append(order, k)
		}
		for _, u := range units {
			if !isStandard(u) && !slices.Contains(s.units, u) {
				s.units = append(s.units, u)
			}
		}
		s.points = append(s.points, point{round: round, values: values})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading input: %w", err)
	}
	if len(order) == 0 {
		return fmt.Errorf("no benchmark lines (Benchmark<Group>/<variant>[/<case>]) on stdin")
	}
	if len(baselines) > 0 && !slices.ContainsFunc(order, func(k id) bool { return slices.Contains(baselines, k.variant) }) {
		return fmt.Errorf("baseline %q: no benchmark has such a variant", baseline)
	}

	// Print group by group, case by case, variants in the order first seen.
	var cases []id
	for _, k := range order {
		c := id{group: k.group, cas: k.cas}
		if !slices.Contains(cases, c) {
			cases = append(cases, c)
		}
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "group\tcase\tvariant\tn\tns/op median [min–max]\tx time [min–max]\tB/op\tallocs/op\tx allocs\tother metrics, median [min–max]")
	for _, c := range cases {
		var base *series
		for _, b := range baselines {
			if s, ok := all[id{c.group, c.cas, b}]; ok {
				base = s
				break
			}
		}
		for _, k := range order {
			if k.group != c.group || k.cas != c.cas {
				continue
			}
			s := all[k]
			ns := s.column(unitNs)
			timeRatio, allocRatio := "-", "-"
			if base != nil {
				if r := pairedRatios(s, base, unitNs); len(r) > 0 {
					timeRatio = fmt.Sprintf("%.2fx [%.2f–%.2f]", median(r), slices.Min(r), slices.Max(r))
				}
				if a, b := median(s.column(unitAllocs)), median(base.column(unitAllocs)); b > 0 {
					allocRatio = fmt.Sprintf("%.2fx", a/b)
				}
			}
			var extra []string
			for _, u := range s.units {
				v := s.column(u)
				extra = append(extra, fmt.Sprintf("%s %s [%s–%s]", u, format(median(v)), format(slices.Min(v)), format(slices.Max(v))))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", k.group, k.cas, k.variant, len(s.points),
				spread(ns), timeRatio, whole(s.column(unitBytes)), whole(s.column(unitAllocs)), allocRatio, strings.Join(extra, "; "))
		}
	}
	return tw.Flush()
}

// parseValues reads the "value unit" pairs of a benchmark line.
func parseValues(s string) (map[string]float64, []string, error) {
	f := strings.Fields(s)
	values := map[string]float64{}
	var units []string
	for i := 0; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return nil, nil, fmt.Errorf("value %q of unit %q: %w", f[i], f[i+1], err)
		}
		values[f[i+1]] = v
		units = append(units, f[i+1])
	}
	return values, units, nil
}

func isStandard(u string) bool { return u == unitNs || u == unitBytes || u == unitAllocs }

// column is the series' values of one unit, in input order (a line without
// the unit contributes nothing).
func (s *series) column(unit string) []float64 {
	var v []float64
	for _, p := range s.points {
		if x, ok := p.values[unit]; ok {
			v = append(v, x)
		}
	}
	return v
}

// pairedRatios divides each of s's values of unit by the baseline's value of
// the same round; without rounds, the k-th by the k-th. A round one of them
// lacks is left out rather than paired with another round's figure.
func pairedRatios(s, base *series, unit string) []float64 {
	var r []float64
	if slices.ContainsFunc(s.points, func(p point) bool { return p.round != 0 }) {
		byRound := map[int]float64{}
		for _, p := range base.points {
			if v, ok := p.values[unit]; ok && p.round != 0 {
				byRound[p.round] = v
			}
		}
		for _, p := range s.points {
			if b, ok := byRound[p.round]; ok && b > 0 && p.round != 0 {
				if v, ok := p.values[unit]; ok {
					r = append(r, v/b)
				}
			}
		}
		return r
	}
	a, b := s.column(unit), base.column(unit)
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	return r
}

// whole is the median of a count (B/op, allocs/op), or "-" without one.
func whole(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	return strconv.FormatFloat(median(v), 'f', 0, 64)
}

func spread(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s [%s–%s]", format(median(v)), format(slices.Min(v)), format(slices.Max(v)))
}

// format prints large figures as integers and small ones with enough digits
// to be read (1.00 req/op, 0.0312 ms).
func format(f float64) string {
	switch a := max(f, -f); {
	case a >= 100:
		return strconv.FormatFloat(f, 'f', 0, 64)
	case a >= 1 || a == 0:
		return strconv.FormatFloat(f, 'f', 2, 64)
	default:
		return strconv.FormatFloat(f, 'g', 3, 64)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Sorted(slices.Values(v))
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

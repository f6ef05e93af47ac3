// Command benchratio reads `go test -bench` output on stdin and prints, for
// each benchmark group, the ratio of every variant to a baseline variant
// measured in the same run. Shared, noisy machines make absolute figures
// meaningless from one run to the next; ratios within a run hold up.
//
// A benchmark name Benchmark<Group>/<variant>/<case> is grouped by <Group>
// and <case>; the baseline is the variant named by -baseline. With -count N
// the median of the N runs is used.
//
//	go test -run '^$' -bench BenchmarkCallTool -benchmem -count 5 ./pool | go run ./internal/benchratio -baseline raw-session
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
)

// line matches "BenchmarkX/variant/case-8   1000   1234 ns/op   56 B/op   7 allocs/op".
var line = regexp.MustCompile(`^(Benchmark[^/\s]+)/([^/\s]+)/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+([\d.]+) B/op)?(?:\s+([\d.]+) allocs/op)?`)

type sample struct{ ns, bytes, allocs []float64 }

func main() {
	baseline := flag.String("baseline", "", "variant the others are compared with")
	flag.Parse()
	if *baseline == "" {
		fmt.Fprintln(os.Stderr, "benchratio: -baseline is required")
		os.Exit(2)
	}
	if err := run(os.Stdin, os.Stdout, *baseline); err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer, baseline string) error {
	samples := map[[3]string]*sample{}
	var order [][3]string
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		k := [3]string{m[1], m[3], m[2]} // group, case, variant
		s, ok := samples[k]
		if !ok {
			s = &sample{}
			samples[k] = s
			order = append(order, k)
		}
		s.ns = append(s.ns, num(m[4]))
		s.bytes = append(s.bytes, num(m[5]))
		s.allocs = append(s.allocs, num(m[6]))
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(order) == 0 {
		return fmt.Errorf("no benchmark lines on stdin")
	}
	fmt.Fprintf(out, "%-22s %-10s %-18s %12s %10s %10s %12s\n", "group", "case", "variant", "ns/op", "x time", "allocs/op", "x allocs")
	for _, k := range order {
		base, ok := samples[[3]string{k[0], k[1], baseline}]
		if !ok {
			return fmt.Errorf("%s %s: no %q variant to compare with", k[0], k[1], baseline)
		}
		s := samples[k]
		fmt.Fprintf(out, "%-22s %-10s %-18s %12.0f %9.2fx %10.0f %11.2fx\n", strings.TrimPrefix(k[0], "Benchmark"), k[1], k[2],
			median(s.ns), median(s.ns)/median(base.ns), median(s.allocs), ratio(median(s.allocs), median(base.allocs)))
	}
	return nil
}

func num(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

func median(v []float64) float64 {
	v = slices.Sorted(slices.Values(v))
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

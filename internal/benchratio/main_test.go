package main

import (
	"strings"
	"testing"
)

// row returns the output line of one group, case and variant, failing if
// there is not exactly one.
func row(t *testing.T, out, group, cas, variant string) []string {
	t.Helper()
	var found []string
	for l := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == group && f[1] == cas && f[2] == variant {
			if found != nil {
				t.Fatalf("two rows for %s %s %s:\n%s", group, cas, variant, out)
			}
			found = f
		}
	}
	if found == nil {
		t.Fatalf("no row for %s %s %s:\n%s", group, cas, variant, out)
	}
	return found
}

func TestRatiosAgainstBaselineMedian(t *testing.T) {
	in := `goos: linux
BenchmarkCallTool/pooled/c1-2         	    1000	      2000 ns/op	     100 B/op	      10 allocs/op
BenchmarkCallTool/pooled/c1-2         	    1000	      4000 ns/op	     100 B/op	      10 allocs/op
BenchmarkCallTool/pooled/c1-2         	    1000	      3000 ns/op	     100 B/op	      10 allocs/op
BenchmarkCallTool/raw-session/c1-2    	    1000	      1000 ns/op	      50 B/op	       5 allocs/op
BenchmarkCallTool/raw-session/c1-2    	    1000	      1500 ns/op	      50 B/op	       5 allocs/op
BenchmarkCallTool/raw-session/c1-2    	    1000	      2000 ns/op	      50 B/op	       5 allocs/op
PASS
`
	var out strings.Builder
	if err := run(strings.NewReader(in), &out, "raw-session"); err != nil {
		t.Fatal(err)
	}
	r := row(t, out.String(), "CallTool", "c1", "pooled")
	// Without round lines the k-th samples are paired: 2000/1000, 4000/1500,
	// 3000/2000 = 2.00, 2.67, 1.50; the median is 2.00.
	if got := strings.Join(r[3:11], " "); got != "3 3000 [2000–4000] 2.00x [1.50–2.67] 100 10 2.00x" {
		t.Fatalf("pooled row = %q:\n%s", got, out.String())
	}
	if err := run(strings.NewReader(in), &out, "missing"); err == nil {
		t.Fatal("want an error for a baseline that is not in the input")
	}
	if err := run(strings.NewReader("nothing"), &out, "x"); err == nil {
		t.Fatal("want an error for input without benchmarks")
	}
}

// TestRatiosPairedByRound: the rounds driver interleaves variants, and a
// slow round slows every variant in it. Pairing by round cancels that; the
// ratio of the medians would not (here it would say 1.50x).
func TestRatiosPairedByRound(t *testing.T) {
	in := `round: 1
BenchmarkCallTool/raw-session/c1-2   1000   1000 ns/op
BenchmarkCallTool/pooled/c1-2        1000   1100 ns/op
round: 2
BenchmarkCallTool/pooled/c1-2        1000   3300 ns/op
BenchmarkCallTool/raw-session/c1-2   1000   3000 ns/op
round: 3
BenchmarkCallTool/raw-session/c1-2   1000   2000 ns/op
round: 4
BenchmarkCallTool/pooled/c1-2        1000   2400 ns/op
BenchmarkCallTool/raw-session/c1-2   1000   2000 ns/op
`
	var out strings.Builder
	if err := run(strings.NewReader(in), &out, "raw-session"); err != nil {
		t.Fatal(err)
	}
	r := row(t, out.String(), "CallTool", "c1", "pooled")
	// Rounds 1, 2, 4: 1.10, 1.10, 1.20; round 3 has no pooled figure and is
	// left out rather than paired with another round's.
	if got := strings.Join(r[3:8], " "); got != "3 2400 [1100–3300] 1.10x [1.10–1.20]" {
		t.Fatalf("pooled row = %q:\n%s", got, out.String())
	}
}

// TestCustomMetricsAndSeveralBaselines: units from b.ReportMetric are kept
// with their own median and spread, each group is compared with the first
// listed baseline it has, and a group with none is printed without ratios.
func TestCustomMetricsAndSeveralBaselines(t *testing.T) {
	in := `BenchmarkRequestsPerCall/pooled/c1-2            100   900 ns/op   1.000 req/op   10 B/op   1 allocs/op
BenchmarkRequestsPerCall/pooled/c1-2            100   800 ns/op   1.020 req/op   10 B/op   1 allocs/op
BenchmarkRequestsPerCall/connect-per-call/c1-2  100  2000 ns/op   4.000 req/op   40 B/op   4 allocs/op
BenchmarkRequestsPerCall/connect-per-call/c1-2  100  2400 ns/op   4.000 req/op   40 B/op   4 allocs/op
BenchmarkKeys/k1/c16-2      100   1000 ns/op   28000 heap-B/session
BenchmarkKeys/k1000/c16-2   100   1500 ns/op   30000 heap-B/session
BenchmarkForgottenSession/pooled/c64-2   10   5000000 ns/op   1.000 reinits/op   0.250 extra-ms
`
	var out strings.Builder
	if err := run(strings.NewReader(in), &out, "connect-per-call, k1"); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	pooled := strings.Join(row(t, s, "RequestsPerCall", "c1", "pooled")[3:], " ")
	if want := "2 850 [800–900] 0.39x [0.33–0.45] 10 1 0.25x req/op 1.01 [1.00–1.02]"; pooled != want {
		t.Fatalf("pooled row = %q, want %q:\n%s", pooled, want, s)
	}
	if got := row(t, s, "Keys", "c16", "k1000")[6]; got != "1.50x" {
		t.Fatalf("k1000 time ratio = %q, want 1.50x against k1:\n%s", got, s)
	}
	fs := row(t, s, "ForgottenSession", "c64", "pooled")
	if fs[6] != "-" || !strings.Contains(strings.Join(fs, " "), "reinits/op 1.00 [1.00–1.00]; extra-ms 0.25 [0.25–0.25]") {
		t.Fatalf("a group without a baseline: want no ratio and its metrics, got %q:\n%s", fs, s)
	}
	if err := run(strings.NewReader("BenchmarkX/a/b-2 10 12x ns/op\n"), &out, ""); err == nil {
		t.Fatal("want an error for a value that is not a number")
	}
}

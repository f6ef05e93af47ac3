package main

import (
	"strings"
	"testing"
)

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
	if !strings.Contains(out.String(), "2.00x") { // median 3000 / median 1500
		t.Fatalf("want a 2.00x time ratio:\n%s", out.String())
	}
	if err := run(strings.NewReader(in), &out, "missing"); err == nil {
		t.Fatal("want an error for a baseline that is not in the input")
	}
	if err := run(strings.NewReader("nothing"), &out, "x"); err == nil {
		t.Fatal("want an error for input without benchmarks")
	}
}

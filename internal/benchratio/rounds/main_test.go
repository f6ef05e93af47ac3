package main

import (
	"context"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOrderRotates(t *testing.T) {
	v := []string{"a", "b", "c"}
	var got [][]string
	for r := range 4 {
		got = append(got, order(v, r))
	}
	want := [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("orders = %v, want %v", got, want)
	}
}

// TestRunInterleaves builds a real test binary (testdata/fake) and runs it:
// each round runs every variant once, rotated, after a "round: R" line.
func TestRunInterleaves(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a test binary")
	}
	c := &config{n: 3, dir: ".", pkg: "./testdata/fake", bench: "Fake", variants: []string{"a", "b", "c"}, benchtime: "10x", timeout: time.Minute}
	var out strings.Builder
	if err := c.run(context.Background(), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var seq []string
	line := regexp.MustCompile(`^(round: \d+|BenchmarkFake/(\w)/x)`)
	for l := range strings.SplitSeq(out.String(), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			if m[2] != "" {
				seq = append(seq, m[2])
			} else {
				seq = append(seq, m[1])
			}
		}
	}
	want := []string{"round: 1", "a", "b", "c", "round: 2", "b", "c", "a", "round: 3", "c", "a", "b"}
	if !slices.Equal(seq, want) {
		t.Fatalf("sequence = %v, want %v\n%s", seq, want, out.String())
	}

	c.variants = []string{"a", "nosuch"}
	if err := c.run(context.Background(), io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("a variant that matches no benchmark: want an error naming it, got %v", err)
	}
}

func TestCheckNamesTheBadFlag(t *testing.T) {
	for _, c := range []config{
		{n: 0, pkg: "./p", bench: "X", variants: []string{"a"}},
		{n: 1, bench: "X", variants: []string{"a"}},
		{n: 1, pkg: "./p", bench: "X/y", variants: []string{"a"}},
		{n: 1, pkg: "./p", bench: "X"},
		{n: 1, pkg: "./p", bench: "X", variants: []string{"a/b"}},
	} {
		if err := c.check(); err == nil {
			t.Errorf("check(%+v) = nil, want an error", c)
		}
	}
	if err := (&config{n: 1, pkg: "./p", bench: "X", variants: []string{"a"}}).check(); err != nil {
		t.Fatal(err)
	}
}

// Command rounds runs a benchmark's variants interleaved: N rounds, each
// running every variant once (-test.count 1) in its own process, the order
// rotated by one each round, so that whatever else the machine is doing
// lands on every variant alike instead of on the one that happened to run
// 8 times in a row during it. It prints the benchmark output with a
// "round: R" line before each round, for ../benchratio to pair each
// variant with the baseline of its own round:
//
//	go run ./internal/benchratio/rounds -n 9 -pkg ./pool -bench CallTool \
//		-variants pooled,raw-session,connect-per-call | go run ./internal/benchratio -baseline raw-session
//
// The test binary is built once (go test -c) and run from the package's
// directory, as go test does. A variant that fails stops the run: a
// median over the rounds that happened to pass would not be the figure
// asked for.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

type config struct {
	n         int
	dir       string // module directory the package is in (for a module other than this one)
	pkg       string
	bench     string   // Benchmark<bench>
	variants  []string // second level of the benchmark's name
	benchtime string
	timeout   time.Duration
	extra     []string // more test binary flags, after --
}

func main() {
	var c config
	var variants string
	flag.IntVar(&c.n, "n", 9, "rounds; each runs every variant once")
	flag.StringVar(&c.dir, "C", ".", "directory to build in (the module the package belongs to)")
	flag.StringVar(&c.pkg, "pkg", "", "package holding the benchmark, e.g. ./pool")
	flag.StringVar(&c.bench, "bench", "", "benchmark name without the Benchmark prefix, e.g. CallTool")
	flag.StringVar(&variants, "variants", "", "comma-separated variants: the second element of the benchmark's sub-benchmark names")
	flag.StringVar(&c.benchtime, "benchtime", "1s", "-test.benchtime of each run")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Minute, "bound on each run")
	flag.Parse()
	c.extra = flag.Args()
	for v := range strings.SplitSeq(variants, ",") {
		if v = strings.TrimSpace(v); v != "" {
			c.variants = append(c.variants, v)
		}
	}
	if err := c.check(); err != nil {
		fmt.Fprintln(os.Stderr, "rounds:", err)
		flag.Usage()
		os.Exit(2)
	}
	if err := c.run(context.Background(), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "rounds:", err)
		os.Exit(1)
	}
}

func (c *config) check() error {
	switch {
	case c.n < 1:
		return fmt.Errorf("-n %d: want at least one round", c.n)
	case c.pkg == "":
		return errors.New("-pkg is required")
	case c.bench == "" || strings.ContainsAny(c.bench, "/ "):
		return fmt.Errorf("-bench %q: want one top-level benchmark name, e.g. CallTool", c.bench)
	case len(c.variants) == 0:
		return errors.New("-variants is required")
	}
	for _, v := range c.variants {
		if strings.ContainsAny(v, "/ ") {
			return fmt.Errorf("-variants: %q is not one element of a benchmark name", v)
		}
	}
	return nil
}

// order is the variants of round r (from 0): rotated by r, so that over
// len(variants) rounds each variant runs once in every position.
func order(variants []string, r int) []string {
	out := make([]string, len(variants))
	for i := range variants {
		out[i] = variants[(r+i)%len(variants)]
	}
	return out
}

func (c *config) run(ctx context.Context, out, log io.Writer) error {
	tmp, err := os.MkdirTemp("", "rounds")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bench.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, c.pkg)
	build.Dir, build.Stdout, build.Stderr = c.dir, log, log
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the test binary of %s: %w", c.pkg, err)
	}
	list := exec.CommandContext(ctx, "go", "list", "-f", "{{.Dir}}", c.pkg)
	list.Dir, list.Stderr = c.dir, log
	pkgDir, err := list.Output()
	if err != nil {
		return fmt.Errorf("finding the directory of %s: %w", c.pkg, err)
	}

	for r := range c.n {
		fmt.Fprintf(out, "round: %d\n", r+1)
		for _, v := range order(c.variants, r) {
			fmt.Fprintf(log, "rounds: round %d/%d: %s/%s\n", r+1, c.n, c.bench, v)
			args := append([]string{
				"-test.run", "^$",
				"-test.bench", "^Benchmark" + regexp.QuoteMeta(c.bench) + "$/^" + regexp.QuoteMeta(v) + "$",
				"-test.count", "1",
				"-test.benchmem",
				"-test.benchtime", c.benchtime,
				"-test.timeout", c.timeout.String(),
			}, c.extra...)
			var res bytes.Buffer
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Dir, cmd.Stdout, cmd.Stderr = strings.TrimSpace(string(pkgDir)), io.MultiWriter(out, &res), log
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("round %d, variant %s: %w", r+1, v, err)
			}
			if !bytes.Contains(res.Bytes(), []byte("\nBenchmark")) && !bytes.HasPrefix(res.Bytes(), []byte("Benchmark")) {
				return fmt.Errorf("round %d, variant %s: no benchmark ran (is Benchmark%s/%s/... spelled right?)", r+1, v, c.bench, v)
			}
		}
	}
	return nil
}

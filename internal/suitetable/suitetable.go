// Package suitetable runs a test suite that records its results as a JSON
// table (the fault suite, the hostile-load suite) and hands that table to
// the command that prints it for docs/, so that every figure in a document
// comes from the same tests CI runs.
package suitetable

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// A Suite is one test suite that writes its table when given -PREFIX.table
// and runs its full profile with -PREFIX.full.
type Suite struct {
	Package string // the package, from the module root: "./internal/faultsuite"
	Run     string // the tests, as go test's -run
	Prefix  string // the suite's flag prefix: "faults"
	Verbose bool   // pass -v (the hostile suite logs each attack as it goes)
}

// Flags are the command-line flags every table command takes.
type Flags struct {
	Short, Race, JSON bool
}

// ParseFlags defines and parses the flags every table command takes.
func ParseFlags() Flags {
	var f Flags
	flag.BoolVar(&f.Short, "short", false, "run the short CI profile instead of the full one")
	flag.BoolVar(&f.Race, "race", false, "run the suite with the race detector")
	flag.BoolVar(&f.JSON, "json", false, "print the rows as JSON instead of Markdown")
	flag.Parse()
	return f
}

// Table runs the suite with go test from the module root (its output on
// stderr) and returns the table it wrote.
func (s Suite) Table(f Flags) ([]byte, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return nil, fmt.Errorf("run this inside the switchboard module: go env GOMOD: %v", err)
	}
	tmp, err := os.MkdirTemp("", "suitetable-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	table := filepath.Join(tmp, "table.json")

	args := []string{"test", "-count=1", "-timeout=30m", "-run=" + s.Run}
	if s.Verbose {
		args = append(args, "-v")
	}
	if f.Race {
		args = append(args, "-race")
	}
	args = append(args, s.Package, "-args", "-"+s.Prefix+".table="+table)
	if !f.Short {
		args = append(args, "-"+s.Prefix+".full")
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Dir(gomod)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	fmt.Fprintf(os.Stderr, "go %s\n", strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSuiteFailed, err)
	}
	data, err := os.ReadFile(table)
	if err != nil {
		return nil, fmt.Errorf("the suite wrote no table: %w", err)
	}
	return data, nil
}

// ErrSuiteFailed: go test reported a failure (for the hostile suite, a
// ceiling was crossed), so there is no table to print.
var ErrSuiteFailed = errors.New("the suite failed")

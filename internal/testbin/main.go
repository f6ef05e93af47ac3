package testbin

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main is the TestMain of a package whose tests run the switchboard binary,
// in one place so that every such package fails its run the same way: on a
// goroutine the tests leaked (goleak), and on a data race that a
// race-checked child reported (CheckRaces), which the child's own answers
// never show.
//
//	func TestMain(m *testing.M) {
//		testbin.Main{Bin: &switchboardBin, Root: &moduleRoot}.Run(m)
//	}
type Main struct {
	// Bin, when not nil, is set to the binary's path before the tests run
	// (Switchboard, or SwitchboardUnraced with Unraced); a failed build
	// fails the run before any test.
	Bin     *string
	Unraced bool
	// NoBuildShort leaves *Bin empty under -short, whose runs have no
	// end-to-end test that needs it.
	NoBuildShort bool
	// Root, when not nil, is set to the module's root directory.
	Root *string
	// After, when not nil, runs last with the run's exit code so far (for
	// work such as writing a table from a passing run); its error fails
	// the run.
	After func(code int) error
}

// Run parses the flags, sets up what mn asks for, runs the tests and the
// checks after them, and exits with the code of the whole.
func (mn Main) Run(m *testing.M) { os.Exit(mn.run(m)) }

func (mn Main) run(m *testing.M) int {
	flag.Parse()
	if err := mn.setUp(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	// As goleak.VerifyTestMain does: a failed run's goroutines are often
	// its failing tests' own, and would bury the failure.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on a successful test run: %v\n", err)
			code = 1
		}
	}
	if err := CheckRaces(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if mn.After != nil {
		if err := mn.After(code); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}

func (mn Main) setUp() error {
	if mn.Root != nil {
		root, err := ModuleRoot()
		if err != nil {
			return err
		}
		*mn.Root = root
	}
	if mn.Bin == nil || (mn.NoBuildShort && testing.Short()) {
		return nil
	}
	build := Switchboard
	if mn.Unraced {
		build = SwitchboardUnraced
	}
	bin, err := build()
	if err != nil {
		return fmt.Errorf("building switchboard for the tests: %w", err)
	}
	*mn.Bin = bin
	return nil
}

package mcphttptest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-run/switchboard/internal/testbin"
)

// ModuleRoot returns the directory of the main module, from `go env GOMOD`.
func ModuleRoot() (string, error) { return testbin.ModuleRoot() }

// BuildSwitchboard returns the switchboard binary shared by every test
// package of this run (see [testbin.Switchboard]); dir is unused and kept
// for callers that still pass one.
func BuildSwitchboard(dir string) (string, error) { return testbin.Switchboard() }

// RunTests is the whole TestMain of a package whose tests run the real
// binary: it sets *bin (see [testbin.Switchboard]) and *root (the module
// root), runs the tests under goleak and exits with the tests' code.
func RunTests(m *testing.M, bin, root *string) {
	var err error
	if *root, err = ModuleRoot(); err == nil {
		*bin, err = testbin.Switchboard()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if err := testbin.CheckRaces(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		// A Cleanup replaces goleak's own os.Exit: without this, a leak
		// goleak found would not fail the run.
		os.Exit(code)
	}))
}

package askcmd

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// switchboardBin is the switchboard binary built for the end-to-end tests
// (empty under -short, where they are skipped).
var switchboardBin string

// TestMain builds the binary once for the end-to-end tests, which run it as
// real processes: the studio's agents, and `switchboard ask` itself.
func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	flag.Parse() // for testing.Short
	if !testing.Short() {
		dir, err := os.MkdirTemp("", "switchboard-e2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		switchboardBin = filepath.Join(dir, "switchboard")
		cmd := exec.Command("go", "build", "-o", switchboardBin, "github.com/switchboard-run/switchboard/cmd/switchboard")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building switchboard for the end-to-end tests:", err)
			return 1
		}
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// needBinary skips an end-to-end test under -short.
func needBinary(t *testing.T) string {
	t.Helper()
	if switchboardBin == "" {
		t.Skip("end-to-end: skipped with -short")
	}
	return switchboardBin
}

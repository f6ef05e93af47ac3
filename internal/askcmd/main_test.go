package askcmd

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-run/switchboard/internal/testbin"
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
		bin, err := testbin.Switchboard()
		if err != nil {
			fmt.Fprintln(os.Stderr, "building switchboard for the end-to-end tests:", err)
			return 1
		}
		switchboardBin = bin
	}
	code := m.Run()
	if err := testbin.CheckRaces(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
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

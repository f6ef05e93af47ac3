package faultsuite

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/internal/testbin"
)

var (
	full      = flag.Bool("faults.full", os.Getenv("SWITCHBOARD_FAULTS") == "full", "run the full profile (the figures in docs/FAULTS.md); default: the short CI profile")
	tableFile = flag.String("faults.table", "", "write the fault table here as JSON (see cmd/faulttable)")
)

// switchboardBin is the real binary, built once: calls go through
// `switchboard client`, and the studio runs agents as children of it.
var (
	switchboardBin string
	moduleRoot     string
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "faultsuite-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if moduleRoot, err = mcphttptest.ModuleRoot(); err == nil {
		switchboardBin, err = mcphttptest.BuildSwitchboard(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		if err := testbin.CheckRaces(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if code == 0 && *tableFile != "" {
			if err := writeTable(*tableFile); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		// A Cleanup replaces goleak's own os.Exit: without this, a leak
		// goleak found would not fail the run.
		os.Exit(code)
	}))
}

// The rows, in the order the subtests of TestFaults and TestLimits record
// them.
var (
	rowsMu sync.Mutex
	rows   []Row
	limits []Limit
)

func record(r Row) {
	rowsMu.Lock()
	rows = append(rows, r)
	rowsMu.Unlock()
}

func recordLimit(l Limit) {
	rowsMu.Lock()
	limits = append(limits, l)
	rowsMu.Unlock()
}

func writeTable(path string) error {
	rowsMu.Lock()
	data, err := json.MarshalIndent(struct {
		Profile string  `json:"profile"`
		Rows    []Row   `json:"rows"`
		Limits  []Limit `json:"limits"`
	}{profileName(), rows, limits}, "", "  ")
	rowsMu.Unlock()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Clean(path), data, 0o644)
}

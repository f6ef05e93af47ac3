package faultsuite

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"

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
	testbin.Main{Bin: &switchboardBin, Root: &moduleRoot, After: writeTableIfAsked}.Run(m)
}

// writeTableIfAsked writes the table of a passing run to -faults.table.
func writeTableIfAsked(code int) error {
	if code != 0 || *tableFile == "" {
		return nil
	}
	return writeTable(*tableFile)
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

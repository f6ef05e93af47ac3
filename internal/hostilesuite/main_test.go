package hostilesuite

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
	full      = flag.Bool("hostile.full", os.Getenv("SWITCHBOARD_HOSTILE") == "full", "run the full profile (the figures in docs/SECURITY.md); default: the short CI profile")
	tableFile = flag.String("hostile.table", "", "write the rows here as JSON (see cmd/hostiletable)")
)

// switchboardBin is the real binary, built once: the suite runs `switchboard
// up`, which runs the agents as children of it.
var switchboardBin string

func TestMain(m *testing.M) {
	if url := os.Getenv(envProber); url != "" {
		os.Exit(runProber(url))
	}
	// Unraced even under -race: the suite's ceilings are on the processes
	// it starts, and a race-checked process costs several times the memory
	// and CPU (the suite itself, the attacker, is still race-checked).
	testbin.Main{Bin: &switchboardBin, Unraced: true, After: writeTableIfAsked}.Run(m)
}

// writeTableIfAsked writes the rows of a passing run to -hostile.table.
func writeTableIfAsked(code int) error {
	if code != 0 || *tableFile == "" {
		return nil
	}
	return writeTable(*tableFile)
}

var (
	rowsMu sync.Mutex
	rows   []Row
)

func record(r Row) {
	rowsMu.Lock()
	rows = append(rows, r)
	rowsMu.Unlock()
}

func writeTable(path string) error {
	rowsMu.Lock()
	data, err := json.MarshalIndent(struct {
		Profile string `json:"profile"`
		Rows    []Row  `json:"rows"`
	}{profile().name, rows}, "", "  ")
	rowsMu.Unlock()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Clean(path), data, 0o644)
}

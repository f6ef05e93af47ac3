package hostilesuite

import (
	"flag"
	"os"
	"testing"

	"github.com/switchboard-run/switchboard/internal/suitetable"
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

var rows suitetable.Rows[Row]

func record(r Row) { rows.Add(r) }

func writeTable(path string) error {
	return suitetable.WriteFile(path, struct {
		Profile string `json:"profile"`
		Rows    []Row  `json:"rows"`
	}{profile().name, rows.All()})
}

package faultsuite

import (
	"flag"
	"os"
	"testing"

	"github.com/switchboard-run/switchboard/internal/suitetable"
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
	rows      suitetable.Rows[Row]
	limits    suitetable.Rows[Limit]
	modelRows suitetable.Rows[ModelRow]
)

func record(r Row)           { rows.Add(r) }
func recordLimit(l Limit)    { limits.Add(l) }
func recordModel(r ModelRow) { modelRows.Add(r) }

func writeTable(path string) error {
	return suitetable.WriteFile(path, struct {
		Profile   string     `json:"profile"`
		Rows      []Row      `json:"rows"`
		Limits    []Limit    `json:"limits"`
		ModelRows []ModelRow `json:"model_rows"`
	}{profileName(), rows.All(), limits.All(), modelRows.All()})
}

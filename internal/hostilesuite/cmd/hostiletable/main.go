// Command hostiletable runs the hostile-load suite and prints its table in
// Markdown, the table of docs/SECURITY.md:
//
//	go run ./internal/hostilesuite/cmd/hostiletable          # the full profile
//	go run ./internal/hostilesuite/cmd/hostiletable -short   # the CI profile
//
// It runs `go test -run '^TestHostile$' ./internal/hostilesuite` with the
// suite's -hostile.full and -hostile.table flags, so the figures come from
// the same test CI runs, which fails when a ceiling is crossed; go test's own
// output goes to stderr.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/switchboard-run/switchboard/internal/hostilesuite"
	"github.com/switchboard-run/switchboard/internal/suitetable"
)

func main() {
	f := suitetable.ParseFlags()
	data, err := suitetable.Suite{Package: "./internal/hostilesuite", Run: "^TestHostile$", Prefix: "hostile", Verbose: true}.Table(f)
	if err != nil {
		fail("%v", err)
	}
	var t struct {
		Profile string             `json:"profile"`
		Rows    []hostilesuite.Row `json:"rows"`
	}
	if err := json.Unmarshal(data, &t); err != nil {
		fail("reading the table: %v", err)
	}
	if f.JSON {
		os.Stdout.Write(data)
		return
	}
	fmt.Printf("Profile: %s.\n\n", t.Profile)
	hostilesuite.WriteMarkdown(os.Stdout, t.Rows)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "hostiletable: "+format+"\n", args...)
	os.Exit(1)
}

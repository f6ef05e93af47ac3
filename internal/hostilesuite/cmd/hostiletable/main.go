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
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/switchboard-run/switchboard/internal/hostilesuite"
)

func main() {
	short := flag.Bool("short", false, "run the short CI profile instead of the full one")
	race := flag.Bool("race", false, "run the suite with the race detector")
	asJSON := flag.Bool("json", false, "print the rows as JSON instead of Markdown")
	flag.Parse()

	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		fail("run this inside the switchboard module: go env GOMOD: %v", err)
	}
	tmp, err := os.MkdirTemp("", "hostiletable-")
	if err != nil {
		fail("%v", err)
	}
	defer os.RemoveAll(tmp)
	table := filepath.Join(tmp, "table.json")

	args := []string{"test", "-count=1", "-timeout=30m", "-v", "-run=^TestHostile$"}
	if *race {
		args = append(args, "-race")
	}
	args = append(args, "./internal/hostilesuite", "-args", "-hostile.table="+table)
	if !*short {
		args = append(args, "-hostile.full")
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Dir(gomod)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	fmt.Fprintf(os.Stderr, "go %s\n", strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		fail("the hostile-load suite failed (a ceiling was crossed, or an attack broke something): %v", err)
	}

	data, err := os.ReadFile(table)
	if err != nil {
		fail("the suite wrote no table: %v", err)
	}
	var t struct {
		Profile string             `json:"profile"`
		Rows    []hostilesuite.Row `json:"rows"`
	}
	if err := json.Unmarshal(data, &t); err != nil {
		fail("reading the table: %v", err)
	}
	if *asJSON {
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

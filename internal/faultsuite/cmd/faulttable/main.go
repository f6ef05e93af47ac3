// Command faulttable runs the fault suite and prints its table in Markdown,
// the table of docs/FAULTS.md:
//
//	go run ./internal/faultsuite/cmd/faulttable          # the full profile
//	go run ./internal/faultsuite/cmd/faulttable -short   # the CI profile
//
// It runs `go test -run '^(TestFaults|TestLimits|TestIdempotency|TestIdempotencyBehindNginx)$' ./internal/faultsuite`
// with the suite's -faults.full and -faults.table flags, so the figures come
// from the same tests CI runs; go test's own output goes to stderr.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/switchboard-run/switchboard/internal/faultsuite"
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
	tmp, err := os.MkdirTemp("", "faulttable-")
	if err != nil {
		fail("%v", err)
	}
	defer os.RemoveAll(tmp)
	table := filepath.Join(tmp, "table.json")

	args := []string{"test", "-count=1", "-timeout=30m", "-run=^(TestFaults|TestLimits|TestIdempotency|TestIdempotencyBehindNginx)$"}
	if *race {
		args = append(args, "-race")
	}
	args = append(args, "./internal/faultsuite", "-args", "-faults.table="+table)
	if !*short {
		args = append(args, "-faults.full")
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Dir(gomod)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	fmt.Fprintf(os.Stderr, "go %s\n", strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		fail("the fault suite failed: %v", err)
	}

	data, err := os.ReadFile(table)
	if err != nil {
		fail("the suite wrote no table: %v", err)
	}
	var t struct {
		Profile string             `json:"profile"`
		Rows    []faultsuite.Row   `json:"rows"`
		Limits  []faultsuite.Limit `json:"limits"`
	}
	if err := json.Unmarshal(data, &t); err != nil {
		fail("reading the table: %v", err)
	}
	if *asJSON {
		os.Stdout.Write(data)
		return
	}
	fmt.Printf("Profile: %s.\n\n", t.Profile)
	faultsuite.WriteMarkdown(os.Stdout, t.Rows)
	fmt.Println()
	faultsuite.WriteLimitsMarkdown(os.Stdout, t.Limits)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "faulttable: "+format+"\n", args...)
	os.Exit(1)
}

// Command faulttable runs the fault suite and prints its table in Markdown,
// the table of docs/FAULTS.md:
//
//	go run ./internal/faultsuite/cmd/faulttable          # the full profile
//	go run ./internal/faultsuite/cmd/faulttable -short   # the CI profile
//
// It runs `go test -run '^(TestFaults|TestLimits|TestIdempotency|TestIdempotencyBehindNginx|TestModelFaults|TestReplicaHosts)$' ./internal/faultsuite`
// with the suite's -faults.full and -faults.table flags, so the figures come
// from the same tests CI runs; go test's own output goes to stderr.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/switchboard-run/switchboard/internal/faultsuite"
	"github.com/switchboard-run/switchboard/internal/suitetable"
)

func main() {
	f := suitetable.ParseFlags()
	data, err := suitetable.Suite{Package: "./internal/faultsuite", Run: "^(TestFaults|TestLimits|TestIdempotency|TestIdempotencyBehindNginx|TestModelFaults|TestReplicaHosts)$", Prefix: "faults"}.Table(f)
	if err != nil {
		fail("%v", err)
	}
	var t struct {
		Profile   string                `json:"profile"`
		Rows      []faultsuite.Row      `json:"rows"`
		Limits    []faultsuite.Limit    `json:"limits"`
		ModelRows []faultsuite.ModelRow `json:"model_rows"`
	}
	if err := json.Unmarshal(data, &t); err != nil {
		fail("reading the table: %v", err)
	}
	if f.JSON {
		os.Stdout.Write(data)
		return
	}
	fmt.Printf("Profile: %s.\n\n", t.Profile)
	faultsuite.WriteMarkdown(os.Stdout, t.Rows)
	fmt.Println()
	faultsuite.WriteLimitsMarkdown(os.Stdout, t.Limits)
	fmt.Println()
	faultsuite.WriteModelMarkdown(os.Stdout, t.ModelRows)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "faulttable: "+format+"\n", args...)
	os.Exit(1)
}

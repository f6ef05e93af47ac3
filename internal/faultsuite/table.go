// Package faultsuite is the fault suite: it drives real traffic through the
// real `switchboard client` binary (and through the studio), injects one
// fault per row (restarts, expired sessions, misbehaving intermediaries,
// connection resets, hung and absent servers, a SIGKILLed agent) and counts
// what every call ended as. Two figures must be 0 in every row: calls
// executed more than once, as counted by the server, and calls that got
// neither a result nor an error.
//
// The suite is a Go test (faults_test.go). Under plain `go test` it runs a
// short profile, the one CI runs; the full profile, and the table in
// docs/FAULTS.md, come from
//
//	go run ./internal/faultsuite/cmd/faulttable
//
// which runs the same test with -faults.full and prints the table. This file
// holds the tables' rows and their rendering, shared by the test and the
// command.
package faultsuite

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// A Row is what one fault did to the calls made under it.
type Row struct {
	Fault string `json:"fault"` // what was injected
	Via   string `json:"via"`   // the path the calls took

	Attempted int `json:"attempted"`
	// FirstTime succeeded without the pool sending the request again.
	FirstTime int `json:"first_time"`
	// Recovered succeeded after the pool re-initialized the session and
	// sent the request once more.
	Recovered int `json:"recovered"`
	// Errors counts the calls answered with a typed error, by kind
	// (session_expired, outcome_unknown, transport, rpc).
	Errors map[string]int `json:"errors"`
	// Causes counts the errors by kind and cause ("outcome_unknown: EOF").
	Causes map[string]int `json:"causes"`
	// RetriedErrors is how many of Errors came after a retry.
	RetriedErrors int `json:"retried_errors"`

	// MaxExecutions is the most times the server ran any one call.
	MaxExecutions int64 `json:"max_executions"`
	// Duplicates counts calls the server ran more than once. Must be 0.
	Duplicates int `json:"duplicates"`
	// Lost counts calls answered with neither a result nor an error (or
	// answered twice). Must be 0.
	Lost int `json:"lost"`
	// Misreported counts calls whose answer contradicts the server's count:
	// a result for a call that never ran, or a "nothing ran" error
	// (transport) for one that did. Must be 0.
	Misreported int `json:"misreported"`

	// Did says plainly what the runtime did.
	Did string `json:"did"`
}

// ErrorSummary renders Errors as "kind n (cause n, cause n); kind n", or
// "0".
func (r *Row) ErrorSummary() string {
	if len(r.Errors) == 0 {
		return "0"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
		var causes []string
		for _, c := range slices.Sorted(maps.Keys(r.Causes)) {
			if cause, ok := strings.CutPrefix(c, k+": "); ok {
				causes = append(causes, fmt.Sprintf("%s %d", cause, r.Causes[c]))
			}
		}
		part := fmt.Sprintf("%s %d", k, r.Errors[k])
		if len(causes) > 0 {
			part += " (" + strings.Join(causes, ", ") + ")"
		}
		parts = append(parts, part)
	}
	s := strings.Join(parts, "; ")
	if r.RetriedErrors > 0 {
		s += fmt.Sprintf(" (%d after a retry)", r.RetriedErrors)
	}
	return s
}

// Answered is the number of calls that got a result or a typed error.
func (r *Row) Answered() int {
	n := r.FirstTime + r.Recovered
	for _, v := range r.Errors {
		n += v
	}
	return n
}

// WriteMarkdown writes rows as the Markdown table of docs/FAULTS.md.
func WriteMarkdown(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| fault | via | attempted | ok first time | recovered by one retry | typed errors | max executions per call | executed twice | neither result nor error | what the runtime did |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---|---:|---:|---:|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %s | %d | %d | %d | %s |\n",
			cell(r.Fault), cell(r.Via), r.Attempted, r.FirstTime, r.Recovered, cell(r.ErrorSummary()),
			r.MaxExecutions, r.Duplicates, r.Lost, cell(r.Did))
	}
}

// A Limit is one limit that must hold under load, and what it did.
type Limit struct {
	Check  string `json:"check"`
	Result string `json:"result"`
}

// WriteLimitsMarkdown writes limits as the limits table of docs/FAULTS.md.
func WriteLimitsMarkdown(w io.Writer, limits []Limit) {
	fmt.Fprintln(w, "| limit under load | result |")
	fmt.Fprintln(w, "|---|---|")
	for _, l := range limits {
		fmt.Fprintf(w, "| %s | %s |\n", cell(l.Check), cell(l.Result))
	}
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// causes are the substrings of an error message that name its cause, most
// specific first, with the name the table gives each.
var causes = []struct{ match, name string }{
	// The status an intermediary answered comes first: the studio's 502
	// carries, in its own words, why the agent did not answer ("connection
	// reset"), which is the agent's failure as the studio saw it.
	{"it may have run, and its outcome is unknown", "outcome unknown from the studio"},
	{"[HTTP 502", "502 from the studio"},
	{"[HTTP 503", "503 from the studio"},
	{"connection refused", "connection refused"},
	{"connect: connection reset", "connection reset at connect"},
	{"connection reset", "connection reset"},
	{"unexpected EOF", "answer cut off"},
	{"terminated without response", "answer cut off"},
	{"EOF", "EOF before any answer"},
	{"Service Unavailable", "503 from the studio"},
	{"Bad Gateway", "502 from the studio"},
	{"deadline exceeded", "deadline"},
	{"Session has been terminated", "session terminated"},
	{"session not found", "another call's 404"},
}

// Cause names the cause of an error message, or "other".
func Cause(message string) string {
	for _, c := range causes {
		if strings.Contains(message, c.match) {
			return c.name
		}
	}
	return "other"
}

// Package hostilesuite is the hostile-load suite: a real `switchboard up`
// with its real agent processes on loopback, and one local client that
// attacks them, one attack per row, each bounded in count and time. For
// every attack it measures the studio and the attacked agent from /proc
// (peak RSS, CPU, descriptors held), the latency of a legitimate tools/call
// made during the attack against the same call without it, and what the
// attacker got back; and it greps every log, API answer and result for the
// planted secrets.
//
// The suite fails when a ceiling is crossed (see Ceilings), so the table in
// docs/SECURITY.md cannot show a figure the test did not accept. Under
// plain `go test` it runs a short profile, the one CI runs; the full
// profile and the table come from
//
//	go run ./internal/hostilesuite/cmd/hostiletable
//
// This file holds the rows and their rendering, shared by the test and the
// command.
package hostilesuite

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// The ceilings every attack must stay under.
const (
	// RSSFactor and RSSSlackMB: peak RSS ≤ RSSFactor × idle RSS + RSSSlackMB.
	RSSFactor  = 2
	RSSSlackMB = 64
	// CPUPerRequest is the most CPU (studio and agent together) one hostile
	// request may cost.
	CPUPerRequest = 10 * time.Millisecond
	// CPUPerRequestCI is CPUPerRequest for the CI profile of go test. Its
	// rows make a tenth of the requests, so each attack's fixed cost weighs
	// more on each, and it runs on machines of any load: the fan-out row
	// measured 11.8 ms at load 17 where the full profile measures 2.27 ms.
	// Generous, and still far below what an unbounded request cost before
	// the budgets (26 s of CPU).
	CPUPerRequestCI = 50 * time.Millisecond
	// LatencyFactor: a legitimate call's p99 during an attack ≤
	// LatencyFactor × its p99 without, where "without" is floored at
	// LatencyFloor: on a shared two-core machine a sub-millisecond p99 is
	// scheduling noise, not a baseline.
	LatencyFactor = 3
	LatencyFloor  = 10 * time.Millisecond
)

// A Row is what one attack did.
type Row struct {
	Attack   string `json:"attack"`
	Requests int    `json:"requests"` // hostile requests (or connections) sent

	StudioIdleMB float64 `json:"studio_idle_mb"`
	StudioPeakMB float64 `json:"studio_peak_mb"`
	AgentIdleMB  float64 `json:"agent_idle_mb"`
	AgentPeakMB  float64 `json:"agent_peak_mb"`
	// CPU is the studio's and the agent's CPU time over CPURequests hostile
	// requests made with the legitimate caller paused (one more round of
	// the attack, alone).
	CPU         time.Duration `json:"cpu"`
	CPURequests int           `json:"cpu_requests"`
	// FDs is the most descriptors the studio and the agent held at once
	// (studio+agent), and FDsIdle before the attack.
	StudioFDs     int `json:"studio_fds"`
	AgentFDs      int `json:"agent_fds"`
	StudioFDsIdle int `json:"studio_fds_idle"`
	AgentFDsIdle  int `json:"agent_fds_idle"`

	LegitP50    time.Duration `json:"legit_p50"`
	LegitP99    time.Duration `json:"legit_p99"`
	BaseP50     time.Duration `json:"base_p50"`
	BaseP99     time.Duration `json:"base_p99"`
	LegitCalls  int           `json:"legit_calls"`
	LegitFailed int           `json:"legit_failed"`
	Secrets     int           `json:"secrets"`
	AttackerGot string        `json:"attacker_got"`
	// NewSessions counts the sessions a legitimate client opened during
	// the attack, each on a connection of its own (initialize, a
	// tools/call, DELETE), and NewSessionsFailed those that failed: an
	// attack on the budgets must not lock a newcomer out.
	NewSessions       int `json:"new_sessions,omitempty"`
	NewSessionsFailed int `json:"new_sessions_failed,omitempty"`
}

// CPUPerHostile is the CPU one hostile request cost.
func (r *Row) CPUPerHostile() time.Duration {
	if r.CPURequests == 0 {
		return 0
	}
	return max(0, r.CPU) / time.Duration(r.CPURequests)
}

// Violations lists the ceilings r crosses, empty when none, with cpu the
// ceiling on CPU per hostile request (CPUPerRequest, or CPUPerRequestCI).
func (r *Row) Violations(cpu time.Duration) []string {
	var v []string
	rss := func(who string, idle, peak float64) {
		if limit := RSSFactor*idle + RSSSlackMB; peak > limit {
			v = append(v, fmt.Sprintf("%s peak RSS %.0f MB > %d × %.0f + %d MB", who, peak, RSSFactor, idle, RSSSlackMB))
		}
	}
	rss("studio", r.StudioIdleMB, r.StudioPeakMB)
	rss("agent", r.AgentIdleMB, r.AgentPeakMB)
	if c := r.CPUPerHostile(); c > cpu {
		v = append(v, fmt.Sprintf("CPU per hostile request %v > %v", c, cpu))
	}
	if lv := r.latencyViolation(); lv != "" {
		v = append(v, lv)
	}
	if r.LegitFailed > 0 {
		v = append(v, fmt.Sprintf("%d of %d legitimate calls failed", r.LegitFailed, r.LegitCalls))
	}
	if r.Secrets > 0 {
		v = append(v, fmt.Sprintf("%d planted secrets in the output", r.Secrets))
	}
	if r.NewSessionsFailed > 0 {
		v = append(v, fmt.Sprintf("%d of %d new sessions of a legitimate client failed", r.NewSessionsFailed, r.NewSessions))
	}
	return v
}

// latencyViolation says how r crosses the latency ceiling, or "".
func (r *Row) latencyViolation() string {
	if limit := LatencyFactor * max(r.BaseP99, LatencyFloor); r.LegitP99 > limit {
		return fmt.Sprintf("legitimate p99 %v > %d × max(%v, %v)", r.LegitP99, LatencyFactor, r.BaseP99, LatencyFloor)
	}
	return ""
}

// onlyLatency reports whether the latency ceiling is the only one r
// crosses (the legitimate calls all succeeded).
func (r *Row) onlyLatency(cpu time.Duration) bool {
	saved := r.LegitP99
	r.LegitP99 = 0
	defer func() { r.LegitP99 = saved }()
	return len(r.Violations(cpu)) == 0
}

// WriteMarkdown writes rows as the table of docs/SECURITY.md.
func WriteMarkdown(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| attack | hostile requests | studio RSS idle → peak | agent RSS idle → peak | CPU per hostile request | descriptors idle → peak (studio, agent) | legit tools/call p50 / p99 without | during | secrets found | what the attacker got |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %.0f → %.0f MB | %.0f → %.0f MB | %s | %d → %d, %d → %d | %s / %s | %s / %s | %d | %s |\n",
			cell(r.Attack), r.Requests, r.StudioIdleMB, r.StudioPeakMB, r.AgentIdleMB, r.AgentPeakMB,
			cpuCell(r), r.StudioFDsIdle, r.StudioFDs, r.AgentFDsIdle, r.AgentFDs,
			dur(r.BaseP50), dur(r.BaseP99), dur(r.LegitP50), dur(r.LegitP99), r.Secrets, cell(got(r)))
	}
}

// cpuCell renders the CPU per hostile request; an attack whose CPU is
// measured alongside the legitimate calls (one that lasts by itself, the
// trickle) can come out below their share, which is noise, not a figure.
func cpuCell(r Row) string {
	if r.CPU <= 0 {
		return "≈ 0 (below the noise)"
	}
	return dur(r.CPUPerHostile())
}

func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
}

// got is what the attacker got, and for an attack on the budgets what a
// newcomer got during it.
func got(r Row) string {
	if r.NewSessions == 0 {
		return r.AttackerGot
	}
	return fmt.Sprintf("%s; a legitimate client's new sessions during it: %d of %d opened and served", r.AttackerGot, r.NewSessions-r.NewSessionsFailed, r.NewSessions)
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

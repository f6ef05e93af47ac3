// Package runscmd is `switchboard runs`: the runs a running studio's
// agents have journaled (docs/DURABILITY.md §3), above all the ones that
// may be resumed (interrupted, failed), each with its id, agent, state,
// task, what its journal holds, its age and why it ended; resume one with
// `switchboard ask --agent AGENT --resume RUN` or the console's Resume
// button. It reads the studio's GET /api/agents and GET
// /api/agents/<name>/runs, which the studio reads from each agent: a
// journal belongs to the agent's process.
package runscmd

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchboard-run/switchboard/internal/cli"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// requestTimeout bounds each request to the studio.
const requestTimeout = 10 * time.Second

// recentEnded is how many ended runs (done, broken) per agent are listed
// without --all: the last few answers, for a person checking what ran.
const recentEnded = 5

const usage = `usage: switchboard runs [--studio URL] [--agent NAME] [--all | --state S[,S]] [--limit N] [--json]

Lists the runs the studio's agents have journaled: every run that may be
resumed (interrupted: its process ended while it ran; failed: ended by
something outside it, such as the model down past its retries, a
--timeout or Ctrl-C), every run running now, and the %d most recent that
ended (done, broken) per agent. --all lists every run; --state only those
in the states named (running, interrupted, failed, done, broken). Each
run: its id, agent, state, the model steps and delegations its journal
holds, its attempts, how long ago it last moved, its task (shortened and
redacted as logs are) and why it ended.

Resume one with: switchboard ask --agent AGENT --resume RUN (or the
Resume button on the agent's page in the console). An agent lists only
the runs started with the credential this command sends ($%s).

--json prints one JSON object per line: a run (studioapi.JournalRun), or,
for an agent whose journal cannot be read now, {"agent": ..., "error": ...}.

exit status: 0 listed; 1 the studio, or an agent's journal, cannot be read
(what could be read is still printed); 2 usage.

flags:
`

// Main runs the command with args (after its own name) and returns the
// exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("switchboard runs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	studio := fs.String("studio", "", "the studio's URL (default $"+studioapi.EnvStudioURL+", else http://"+studioapi.DefaultListen+")")
	agent := fs.String("agent", "", "only this agent's runs")
	all := fs.Bool("all", false, "every run the journals hold, not only those that may be resumed and the recent ones")
	states := fs.String("state", "", "only runs in these states, comma-separated: running, interrupted, failed, done, broken")
	limit := fs.Int("limit", 100, fmt.Sprintf("at most this many runs per agent (1 to %d)", studioapi.MaxJournalRuns))
	asJSON := fs.Bool("json", false, "one JSON object per line")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), usage, recentEnded, studioapi.EnvToken)
		fs.PrintDefaults()
	}
	if code, ok := cli.Parse(fs, args, stdout, false); !ok {
		return code
	}
	switch {
	case *all && *states != "":
		return usageError(stderr, "--all and --state together: --all lists every state")
	case *limit < 1 || *limit > studioapi.MaxJournalRuns:
		return usageError(stderr, fmt.Sprintf("--limit %d: want 1 to %d", *limit, studioapi.MaxJournalRuns))
	}
	for s := range strings.SplitSeq(*states, ",") {
		switch strings.TrimSpace(s) {
		case "", studioapi.JournalRunning, studioapi.JournalInterrupted, studioapi.JournalFailed, studioapi.JournalDone, studioapi.JournalBroken:
		default:
			return usageError(stderr, fmt.Sprintf("--state %q: want running, interrupted, failed, done or broken (comma-separated)", s))
		}
	}
	base := strings.TrimSuffix(cmp.Or(*studio, os.Getenv(studioapi.EnvStudioURL), "http://"+studioapi.DefaultListen), "/")
	c := &client{base: base, token: os.Getenv(studioapi.EnvToken), http: &http.Client{Timeout: requestTimeout}}

	var agents []studioapi.AgentInfo
	if err := c.get(ctx, "/api/agents", &agents); err != nil {
		fmt.Fprintf(stderr, "switchboard runs: %v\n", err)
		return 1
	}
	var names []string
	for _, a := range agents {
		if *agent == "" || a.Name == *agent {
			names = append(names, a.Name)
		}
	}
	if *agent != "" && len(names) == 0 {
		known := make([]string, 0, len(agents))
		for _, a := range agents {
			known = append(known, a.Name)
		}
		return usageError(stderr, fmt.Sprintf("--agent %q: the studio at %s has no such agent (it has: %s)", *agent, base, strings.Join(known, ", ")))
	}

	var (
		runs   []studioapi.JournalRun
		failed []agentError
	)
	for _, name := range names {
		got, err := c.agentRuns(ctx, name, *all, *states, *limit)
		if err != nil {
			failed = append(failed, agentError{Agent: name, Error: err.Error()})
			continue
		}
		runs = append(runs, got...)
	}
	slices.SortStableFunc(runs, func(a, b studioapi.JournalRun) int { return b.Updated.Compare(a.Updated) })

	var err error
	if *asJSON {
		err = writeJSON(stdout, runs, failed)
	} else {
		err = writeText(stdout, runs, failed, time.Now())
	}
	if err != nil {
		fmt.Fprintf(stderr, "switchboard runs: writing the list: %v\n", err)
		return 1
	}
	for _, f := range failed {
		fmt.Fprintf(stderr, "switchboard runs: agent %s: %s\n", f.Agent, f.Error)
	}
	if len(failed) > 0 {
		return 1
	}
	return 0
}

func usageError(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "switchboard runs: %s\n", msg)
	return 2
}

// agentError is an agent whose journal could not be read, as --json
// prints it.
type agentError struct {
	Agent string `json:"agent"`
	Error string `json:"error"`
}

type client struct {
	base, token string
	http        *http.Client
}

// A statusError is the studio's answer other than 200.
type statusError struct {
	path, status, msg string
}

func (e *statusError) Error() string { return fmt.Sprintf("GET %s: %s: %s", e.path, e.status, e.msg) }

func (c *client) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("no studio at %s: %w (start one with `switchboard up`)", c.base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("reading GET %s%s: %w", c.base, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var msg struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Error == "" {
			msg.Error = strings.TrimSpace(string(body[:min(len(body), 300)]))
		}
		return &statusError{path: c.base + path, status: resp.Status, msg: msg.Error}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("reading GET %s%s: %w", c.base, path, err)
	}
	return nil
}

// agentRuns is what the listing shows of agent name: with --all or
// --state what they select; else every run not ended, and the most
// recent ended ones.
func (c *client) agentRuns(ctx context.Context, name string, all bool, states string, limit int) ([]studioapi.JournalRun, error) {
	path := "/api/agents/" + url.PathEscape(name) + "/runs"
	q := func(state string, n int) string {
		v := url.Values{"limit": {fmt.Sprint(n)}}
		if state != "" {
			v.Set("state", state)
		}
		return path + "?" + v.Encode()
	}
	var open, ended studioapi.JournalRuns
	if all || states != "" {
		err := c.get(ctx, q(strings.ReplaceAll(states, " ", ""), limit), &open)
		return open.Runs, err
	}
	if err := c.get(ctx, q("running,interrupted,failed", limit), &open); err != nil {
		return nil, err
	}
	if err := c.get(ctx, q("done,broken", min(recentEnded, limit)), &ended); err != nil {
		return nil, err
	}
	return append(open.Runs, ended.Runs...), nil
}

func writeJSON(w io.Writer, runs []studioapi.JournalRun, failed []agentError) error {
	enc := json.NewEncoder(w)
	for _, r := range runs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	for _, f := range failed {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return nil
}

func writeText(w io.Writer, runs []studioapi.JournalRun, failed []agentError, now time.Time) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "no journaled runs")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tRUN\tSTATE\tSTEPS\tDELEGATIONS\tATTEMPTS\tAGE\tTASK\tWHY")
	resumable := 0
	for _, r := range runs {
		if r.Resumable {
			resumable++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", r.Agent, r.ID, r.State, r.Steps, r.Delegations, r.Attempts, age(now.Sub(r.Updated)), oneLine(r.Task), oneLine(r.Why))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if resumable > 0 {
		for _, r := range runs {
			if r.Resumable {
				_, err := fmt.Fprintf(w, "\n%d may be resumed: switchboard ask --agent %s --resume %s (the newest)\n", resumable, r.Agent, r.ID)
				return err
			}
		}
	}
	return nil
}

// age is d as a person reads it: 45s, 12m, 3h, 2d.
func age(d time.Duration) string {
	switch d = max(d, 0); {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// oneLine keeps a table cell on its line, and tabs out of the columns.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

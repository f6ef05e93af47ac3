// Package statuscmd is `switchboard status`: the state of a running studio
// at a glance, on a terminal. It reads what any other client can: the
// studio's /api/overview (agents, tools, pools, recent delegations) and its
// /metrics (call counts, errors and latency per agent, and the requests
// and tokens of each agent's model), parsed with the
// Prometheus text parser, so what it prints is what a Prometheus server
// would scrape, and its /api/auth (the sign-in state of the agents' OAuth
// servers).
package statuscmd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/switchboard-run/switchboard/internal/authstate"
	"github.com/switchboard-run/switchboard/internal/cli"
	"github.com/switchboard-run/switchboard/internal/observe"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// requestTimeout bounds each request to the studio.
const requestTimeout = 10 * time.Second

// recent is how many delegations the text output lists.
const recent = 10

// Main runs the command with args (after its own name) and returns the exit
// code: 0, 1 when the studio cannot be read, 2 on a usage error.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("switchboard status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("studio", "", "the studio's URL (default $"+studioapi.EnvStudioURL+", else http://"+studioapi.DefaultListen+")")
	asJSON := fs.Bool("json", false, "print one JSON object: the overview and the per-agent call summary")
	authOnly := fs.Bool("auth", false, "print the OAuth sign-in state of the HTTP servers in --config instead (no studio needed; never a token)")
	config := fs.String("config", "tools/mcp.json", "with --auth: the mcp.json whose servers are shown")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: switchboard status [--studio URL] [--json]\n       switchboard status --auth [--config tools/mcp.json] [--json]\n\nPrints a running studio's agents, pools, call counts and recent delegations;\nwith --auth, the sign-in state of each HTTP server (switchboard login).\nSends $"+studioapi.EnvToken+" as the bearer token when it is set.\n\nflags:")
		fs.PrintDefaults()
	}
	if code, ok := cli.Parse(fs, args, stdout, false); !ok {
		return code
	}
	if *authOnly {
		return authStatus(*config, *asJSON, stdout, stderr)
	}
	base := cmp.Or(*url, os.Getenv(studioapi.EnvStudioURL), "http://"+studioapi.DefaultListen)
	c := &client{base: strings.TrimSuffix(base, "/"), token: os.Getenv(studioapi.EnvToken), http: &http.Client{Timeout: requestTimeout}}
	st, err := c.status(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard status: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			// A script reading --json must not take a failed write for an
			// answer.
			fmt.Fprintf(stderr, "switchboard status: writing the status: %v\n", err)
			return 1
		}
		return 0
	}
	st.print(stdout)
	return 0
}

// Status is what the command shows (its --json form).
type Status struct {
	studioapi.Overview
	// Calls summarizes the tools/calls through the proxy, per agent.
	Calls []AgentCalls `json:"calls"`
	// Auth is the sign-in state of the agents' OAuth servers (GET
	// /api/auth); never a token.
	Auth authstate.Report `json:"auth"`
	// AuthMissing: the studio has no /api/auth (it predates it), so Auth
	// says nothing.
	AuthMissing bool `json:"auth_missing,omitempty"`
}

// AgentCalls is one agent's tools/calls through the studio's proxy.
type AgentCalls struct {
	Agent  string `json:"agent"`
	Calls  int64  `json:"calls"`
	Errors int64  `json:"errors"`
	// P50MS and P95MS are estimated from the latency histogram, as
	// Prometheus's histogram_quantile does; zero without calls.
	P50MS float64 `json:"p50_ms"`
	P95MS float64 `json:"p95_ms"`
	// What the agent's own model turns made and cost, from its federated
	// counters (switchboard_model_*, process=<agent>): since the agent's
	// process started, so a restart begins them again.
	ModelRequests    int64   `json:"model_requests"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CostUSD          float64 `json:"cost_usd,omitempty"`
	// ResumableRuns counts the agent's journaled runs that may be resumed
	// (interrupted, failed; docs/DURABILITY.md §3), of the credential
	// status sends; nil when its journal cannot be read now, and
	// ResumableError says why.
	ResumableRuns  *int   `json:"resumable_runs,omitempty"`
	ResumableError string `json:"resumable_error,omitempty"`
}

type client struct {
	base  string
	token string
	http  *http.Client
}

func (c *client) get(ctx context.Context, path, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no studio at %s: %w (start one with `switchboard up`)", c.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, &statusError{url: c.base + path, status: resp.Status, code: resp.StatusCode, body: strings.TrimSpace(string(body))}
	}
	return resp, nil
}

// A statusError is a studio's answer other than 200 to one of our GETs.
type statusError struct {
	url, status, body string
	code              int
}

func (e *statusError) Error() string { return fmt.Sprintf("GET %s: %s: %s", e.url, e.status, e.body) }

func (c *client) status(ctx context.Context) (*Status, error) {
	resp, err := c.get(ctx, "/api/overview", "application/json")
	if err != nil {
		return nil, err
	}
	st := &Status{}
	err = json.NewDecoder(resp.Body).Decode(&st.Overview)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading %s/api/overview: %w", c.base, err)
	}

	// A studio older than the sign-in state has no /api/auth: the rest of
	// its status is still worth showing, with the section said missing.
	var se *statusError
	switch resp, err = c.get(ctx, "/api/auth", "application/json"); {
	case errors.As(err, &se) && se.code == http.StatusNotFound:
		st.AuthMissing = true
	case err != nil:
		return nil, err
	default:
		err = json.NewDecoder(resp.Body).Decode(&st.Auth)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s/api/auth: %w", c.base, err)
		}
	}

	resp, err = c.get(ctx, "/metrics", "text/plain;version=0.0.4")
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading %s/metrics: %w", c.base, err)
	}
	st.Calls = summarize(st.Agents, fams)
	for i := range st.Calls {
		a := &st.Calls[i]
		n, err := a.resumable(ctx, c)
		if err != nil {
			a.ResumableError = err.Error()
			continue
		}
		a.ResumableRuns = &n
	}
	return st, nil
}

// resumable reads how many of the agent's journaled runs may be resumed.
func (a *AgentCalls) resumable(ctx context.Context, c *client) (int, error) {
	resp, err := c.get(ctx, "/api/agents/"+url.PathEscape(a.Agent)+"/runs?limit=1", "application/json")
	if err != nil {
		var se *statusError
		if errors.As(err, &se) {
			var msg struct {
				Error string `json:"error"`
			}
			if json.Unmarshal([]byte(se.body), &msg) == nil && msg.Error != "" {
				return 0, errors.New(msg.Error)
			}
		}
		return 0, err
	}
	defer resp.Body.Close()
	var list studioapi.JournalRuns
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return 0, fmt.Errorf("reading agent %s's runs: %w", a.Agent, err)
	}
	return list.Resumable, nil
}

// summarize reads tool call counts, errors and latency per agent from the
// studio's metric families.
func summarize(agents []studioapi.AgentInfo, fams map[string]*dto.MetricFamily) []AgentCalls {
	byAgent := map[string]*AgentCalls{}
	hists := map[string][]*dto.Histogram{}
	for _, a := range agents {
		byAgent[a.Name] = &AgentCalls{Agent: a.Name}
	}
	at := func(name string) *AgentCalls {
		if byAgent[name] == nil {
			byAgent[name] = &AgentCalls{Agent: name}
		}
		return byAgent[name]
	}
	if mf := fams[studioapi.MetricToolCalls]; mf != nil {
		for _, m := range mf.GetMetric() {
			ac := at(label(m, "agent"))
			n := int64(m.GetCounter().GetValue())
			ac.Calls += n
			if label(m, "outcome") != "ok" {
				ac.Errors += n
			}
		}
	}
	if mf := fams[studioapi.MetricToolDuration]; mf != nil {
		for _, m := range mf.GetMetric() {
			a := label(m, "agent")
			hists[a] = append(hists[a], m.GetHistogram())
		}
	}
	if mf := fams[studioapi.MetricModelRequests]; mf != nil {
		for _, m := range mf.GetMetric() {
			at(label(m, "process")).ModelRequests += int64(m.GetCounter().GetValue())
		}
	}
	if mf := fams[studioapi.MetricModelTokens]; mf != nil {
		for _, m := range mf.GetMetric() {
			ac, n := at(label(m, "process")), int64(m.GetCounter().GetValue())
			switch label(m, "kind") {
			case studioapi.TokenKindPrompt:
				ac.PromptTokens += n
			case studioapi.TokenKindCompletion:
				ac.CompletionTokens += n
			}
		}
	}
	if mf := fams[studioapi.MetricModelCost]; mf != nil {
		for _, m := range mf.GetMetric() {
			at(label(m, "process")).CostUSD += m.GetCounter().GetValue()
		}
	}
	var out []AgentCalls
	for name, ac := range byAgent {
		if h := hists[name]; len(h) > 0 {
			ac.P50MS = quantile(0.5, h) * 1000
			ac.P95MS = quantile(0.95, h) * 1000
		}
		out = append(out, *ac)
	}
	slices.SortFunc(out, func(a, b AgentCalls) int { return strings.Compare(a.Agent, b.Agent) })
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// quantile estimates the q-quantile of the sum of hs (same buckets) by
// linear interpolation within the bucket it falls in, as PromQL's
// histogram_quantile does. It returns 0 for no observations.
func quantile(q float64, hs []*dto.Histogram) float64 {
	type bucket struct{ upper, count float64 }
	sum := map[float64]float64{}
	var total float64
	for _, h := range hs {
		total += float64(h.GetSampleCount())
		for _, b := range h.GetBucket() {
			sum[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		}
	}
	if total == 0 {
		return 0
	}
	var bs []bucket
	for u, c := range sum {
		bs = append(bs, bucket{u, c})
	}
	bs = append(bs, bucket{math.Inf(1), total})
	slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.upper, b.upper) })
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range bs {
		if b.count >= rank {
			if math.IsInf(b.upper, 1) {
				return lower // beyond the last bucket: its bound is all we know
			}
			if b.count == below {
				return b.upper
			}
			return lower + (b.upper-lower)*(rank-below)/(b.count-below)
		}
		lower, below = b.upper, b.count
	}
	return lower
}

func (st *Status) print(w io.Writer) {
	running, remote := 0, 0
	for _, a := range st.Agents {
		switch a.State {
		case studioapi.StateRunning:
			running++
		case studioapi.StateRemote:
			remote++
		}
	}
	fmt.Fprintf(w, "studio %s: %d agents, %d running", st.URL, len(st.Agents), running)
	if remote > 0 {
		fmt.Fprintf(w, ", %d on other hosts", remote)
	}
	fmt.Fprint(w, "\n\n")

	calls := map[string]AgentCalls{}
	for _, c := range st.Calls {
		calls[c.Agent] = c
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSTATE\tRESTARTS\tCALLS\tERRORS\tP50\tP95\tMODEL REQS\tTOKENS\tTOOLS")
	for _, a := range st.Agents {
		c := calls[a.Name]
		tools := strings.Join(a.Tools, ", ")
		if a.ToolsError != "" {
			tools = "(" + a.ToolsError + ")"
		}
		reqs, toks := "-", "-"
		if c.ModelRequests > 0 {
			reqs, toks = thousands(c.ModelRequests), tokens(c)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", a.Name, stateText(a), a.Restarts, c.Calls, c.Errors, ms(c.P50MS), ms(c.P95MS), reqs, toks, tools)
	}
	tw.Flush()
	for _, a := range st.Agents {
		switch {
		case a.LastError != "" && a.LastErrorAt != nil:
			fmt.Fprintf(w, "  %s exited at %s: %s\n", a.Name, a.LastErrorAt.Local().Format(time.TimeOnly), a.LastError)
		case a.LastError != "":
			fmt.Fprintf(w, "  %s exited: %s\n", a.Name, a.LastError)
		case a.Remote != nil:
			line := fmt.Sprintf("  %s runs at %s", a.Name, a.Remote.URL)
			if a.Remote.Error != "" {
				line += ": " + a.Remote.Error
			}
			if a.Remote.Metrics == studioapi.MetricsNone {
				line += " (serves no /metrics)"
			}
			fmt.Fprintln(w, line)
		}
	}

	st.printResumable(w)

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tOPEN\tIN USE\tIDLE\tDIALS\tREINITS\tRETRIES\tINVALIDATIONS")
	for _, p := range st.Pools {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", p.Process, p.Open, p.InUse, p.Idle, p.Dials, p.Reinitializations, p.Retries, p.Invalidations)
	}
	tw.Flush()

	switch {
	case st.AuthMissing:
		fmt.Fprintln(w, "\nSIGN-IN\nnot reported: this studio has no /api/auth (it is older than this switchboard)")
	case len(st.Auth.Servers) > 0:
		fmt.Fprintln(w, "\nSIGN-IN")
		authstate.Write(w, st.Auth)
	}

	fmt.Fprintln(w)
	if len(st.Delegations) == 0 {
		fmt.Fprintln(w, "no delegations yet")
		return
	}
	fmt.Fprintln(w, "RECENT DELEGATIONS")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, d := range st.Delegations[:min(recent, len(st.Delegations))] {
		from := cmp.Or(d.From, "client")
		dur := "…"
		if d.Outcome != studioapi.OutcomeRunning {
			dur = ms(d.DurationMS)
		}
		// The page's words for how it ended (a refusal is not a failure,
		// an ask not answered says so); a recovery has its own column.
		word := d.Outcome
		if d.Recovery == "" {
			word, _ = observe.Badge(d)
		}
		// What servers said is printed on a terminal: no escapes of theirs.
		p := observe.Printable
		line := fmt.Sprintf("%s\t%s → %s.%s\t%s\t%s", d.Start.Local().Format(time.TimeOnly), p(from), p(d.Agent), p(d.Tool), word, dur)
		if d.Recovery != "" {
			line += "\t" + d.Recovery
		}
		if d.Message != "" {
			line += "\t" + p(d.Message)
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// stateText is an agent's state with what a person waiting on it wants to
// know: when a restarting agent tries again, after how many failures one
// was given up.
func stateText(a studioapi.AgentInfo) string {
	switch {
	case a.State == studioapi.StateRestarting && a.RetryAt != nil:
		left := max(time.Until(*a.RetryAt), 0).Round(100 * time.Millisecond)
		return fmt.Sprintf("restarting (retry in %v, failure %d of %d)", left, a.ConsecutiveFailures, studioapi.GiveUpAfter)
	case a.State == studioapi.StateGivenUp:
		return fmt.Sprintf("given_up (after %d failures in a row)", a.ConsecutiveFailures)
	case a.State == studioapi.StateRemote && a.Remote != nil:
		switch {
		case a.Remote.Reachable:
			return "remote (reachable)"
		case a.Remote.CheckedAt == nil:
			return "remote (not checked yet)"
		}
		return "remote (unreachable)"
	}
	return string(a.State)
}

// tokens renders an agent's tokens, prompt and completion, with their
// cost when the agent prices its model: "1,664", "1,664 $0.0012".
func tokens(c AgentCalls) string {
	s := thousands(c.PromptTokens + c.CompletionTokens)
	switch {
	case c.CostUSD >= 1:
		s += fmt.Sprintf(" $%.2f", c.CostUSD)
	case c.CostUSD > 0:
		s += fmt.Sprintf(" $%.4f", c.CostUSD)
	}
	return s
}

// thousands renders n with thousands separators.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// ms renders a latency in milliseconds; zero (no observations) is "-".
func ms(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v >= 1000:
		return fmt.Sprintf("%.2fs", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0fms", v)
	}
	return fmt.Sprintf("%.1fms", v)
}

// printResumable prints, per agent, how many journaled runs may be
// resumed, and how.
func (st *Status) printResumable(w io.Writer) {
	fmt.Fprintln(w, "\nRESUMABLE RUNS")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range st.Calls {
		switch {
		case c.ResumableRuns == nil:
			fmt.Fprintf(tw, "%s\t-\t(%s)\n", c.Agent, strings.Join(strings.Fields(c.ResumableError), " "))
		case *c.ResumableRuns > 0:
			fmt.Fprintf(tw, "%s\t%d\t(switchboard runs --agent %s; resume one with switchboard ask --agent %s --resume RUN)\n", c.Agent, *c.ResumableRuns, c.Agent, c.Agent)
		default:
			fmt.Fprintf(tw, "%s\t0\t\n", c.Agent)
		}
	}
	tw.Flush()
}

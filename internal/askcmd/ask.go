package askcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/version"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime"
)

// output is the --json object.
type output struct {
	Answer string `json:"answer"`
	Agent  string `json:"agent"`
	// Status is the turn's (runtime.Status), or "failed" when there was no
	// turn to speak of; ExitCode is what the command exits with.
	Status      string             `json:"status"`
	ExitCode    int                `json:"exit_code"`
	Reason      string             `json:"reason,omitempty"`
	Unavailable []string           `json:"unavailable,omitempty"`
	Delegations []delegation.Event `json:"delegations"`
	DurationMS  int64              `json:"duration_ms"`
	Error       string             `json:"error,omitempty"`
	durable                        // the run, and whether it was resumed from its journal
	turnCost                       // usage.go
}

// durable is what the agent's run journal did for the task
// (docs/DURABILITY.md): the run's id (for --resume), and whether it went on
// from the journal after a crash or by hand.
type durable struct {
	RunID               string `json:"run_id,omitempty"`
	Resumed             bool   `json:"resumed,omitempty"`
	ReplayedSteps       int    `json:"replayed_steps,omitempty"`
	ReplayedDelegations int    `json:"replayed_delegations,omitempty"`
	Steps               int    `json:"steps,omitempty"`
}

// askResult is the part of the ask tool's structured result
// (runtime.Result) this command reads, when the agent sends one: its
// delegations are complete, where the progress notifications may have been
// overtaken by the response.
type askResult struct {
	Answer      string             `json:"answer"`
	Status      runtime.Status     `json:"status"`
	Reason      string             `json:"reason"`
	Unavailable []string           `json:"unavailable"`
	Delegations []delegation.Event `json:"delegations"`
	durable
	turnCost // usage.go
}

// scrubbed returns o with the credentials in its text redacted, as shown
// does for the terminal: the agent's text quotes errors, and an error can
// quote a configured URL. Its other characters are left to the JSON
// encoder, which escapes every C0 control.
func (o output) scrubbed() output {
	o.Answer, o.Reason, o.Error = logging.Scrub(o.Answer), logging.Scrub(o.Reason), logging.Scrub(o.Error)
	o.Unavailable = slices.Clone(o.Unavailable)
	for i, u := range o.Unavailable {
		o.Unavailable[i] = logging.Scrub(u)
	}
	o.Delegations = slices.Clone(o.Delegations)
	for i := range o.Delegations {
		o.Delegations[i].Message = logging.Scrub(o.Delegations[i].Message)
	}
	return o
}

// exitFor maps a turn's status to the command's exit code (see usage).
func exitFor(s runtime.Status) int {
	switch s {
	case runtime.StatusAnswered:
		return exitOK
	case runtime.StatusNotAnswered:
		return exitNotAnswered
	case runtime.StatusDelegationFailed:
		return exitDelegationFailed
	case runtime.StatusUnavailable:
		return exitUnavailable
	}
	return exitFailed
}

func run(ctx context.Context, cfg *config, stdout, stderr io.Writer) int {
	start := time.Now()
	// The signal context (ctx) and the --timeout deadline end the call
	// differently: the first is an interruption, the second a timeout.
	callCtx, cancel := ctx, context.CancelFunc(func() {})
	if cfg.timeout > 0 {
		callCtx, cancel = context.WithTimeoutCause(ctx, cfg.timeout, errTimeout)
	}
	defer cancel()
	callCtx, span := startAskSpan(callCtx, cfg)
	defer span.End()
	out := output{Agent: cfg.agent, Status: string(runtime.StatusFailed), Delegations: []delegation.Event{}}
	pr := newPrinter(stderr)
	stream, streamErr := streamAnswer(stdout, os.Getenv(EnvAskStream))
	if stream && !cfg.json {
		pr.answer = stdout
	}
	// The run's id, from its first delegation event, for --json when the
	// call fails (its result, which names it, is then lost): what --resume
	// takes.
	var runMu sync.Mutex // guards seenRun
	seenRun := ""
	fail := func(code int, err error) int {
		pr.endAnswer()
		runMu.Lock()
		if out.RunID == "" {
			out.RunID = seenRun
		}
		runMu.Unlock()
		failSpan(span, err)
		out.DurationMS = time.Since(start).Milliseconds()
		out.ExitCode = code
		if cfg.json {
			out.Error = err.Error()
			writeJSON(stdout, out.scrubbed())
		}
		// The error may carry what a server wrote (a tool's error, the
		// agent's refusal): inert on the terminal, as every such text.
		fmt.Fprintf(stderr, "switchboard ask: %s\n", shown(err.Error()))
		if out.RunID != "" && code != exitUsage {
			// The run is in the agent's journal (docs/DURABILITY.md): say
			// how to go on with it, since without --json its id is shown
			// nowhere else. A run that cannot go on, --resume says why.
			fmt.Fprintf(stderr, "switchboard ask: run %s stopped before its answer; to go on from where it was: switchboard ask --agent %s --resume %s\n",
				shown(out.RunID), cfg.agent, shown(out.RunID))
		}
		if !cfg.json {
			printUsage(stderr, out.turnCost) // what the turn cost before it failed
		}
		return code
	}
	if streamErr != nil {
		return fail(exitUsage, streamErr)
	}
	ended := func() (int, error, bool) {
		switch {
		case ctx.Err() != nil:
			return exitCancelled, fmt.Errorf("interrupted: cancelled; the agent was told to stop: %w", ctx.Err()), true
		case callCtx.Err() != nil:
			return exitTimeout, fmt.Errorf("no answer within --timeout %v; the agent was told to stop: %w", cfg.timeout, context.Cause(callCtx)), true
		}
		return 0, nil, false
	}

	st, err := reachStudio(callCtx, cfg, stderr)
	if err != nil {
		if code, err, ok := ended(); ok {
			return fail(code, err)
		}
		if errors.Is(err, errUnknownAgent) || errors.Is(err, errModelMismatch) {
			return fail(exitUsage, err)
		}
		return fail(exitFailed, err)
	}
	defer st.close()

	// A server the agent delegates to may ask the person (elicitation,
	// forwarded by agents whose agent.json says "elicit"): on a terminal
	// ask asks; with nobody there it declines.
	elicit := declineAll(cfg.agent, stderr)
	if !cfg.noInput && cfg.stdin != nil && (cfg.elicitStdin || isTerminal(cfg.stdin)) {
		elicit = newElicitor(cfg.agent, cfg.stdin, stderr).elicit
	}
	p := pool.New(&pool.Options{
		ClientInfo: &mcp.Implementation{Name: "switchboard-ask", Version: version.String()},
		Elicit:     elicit,
	})
	// Close before the studio closes: its DELETE must reach the agent, and
	// after an interrupt the pool first delivers go-sdk's
	// notifications/cancelled, so the agent stops delegating for a user who
	// has gone.
	defer p.Close()

	held := newHeldWatcher()
	pr.onEvent = func(ev delegation.Event) {
		held.event(ev)
		runMu.Lock()
		if seenRun == "" && ev.Depth <= 1 {
			seenRun = ev.RunID
		}
		runMu.Unlock()
	}
	watchCtx, stopWatch := context.WithCancel(callCtx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		held.watch(watchCtx, st.url, cfg.token, pr.note)
	}()
	// The session era, pinned: ask answers the person's side of an
	// elicitation (elicit.go), which reaches it as a server-to-client
	// request during the call, and go-sdk v1.8.0 forbids those in the
	// sessionless era (mcp.ServerSession.Elicit on a 2026-07-28 request:
	// "return an InputRequests map instead"). An agent asked on 2026-07-28
	// declines such an elicitation (agentserver/ask.go).
	srv := &pool.Server{Name: cfg.agent, URL: st.url + "/api/agents/" + url.PathEscape(cfg.agent) + "/mcp", ProtocolVersion: pool.Protocol20251125}
	if cfg.token != "" {
		// A studio with a token wants it on every /api/ request.
		srv.Headers = map[string]string{"Authorization": "Bearer " + cfg.token}
	}
	args := map[string]any{"task": cfg.task}
	if cfg.resume != "" {
		args = map[string]any{"task": "", "resume": cfg.resume}
	}
	res, err := p.CallTool(pool.WithProgress(callCtx, pr.progress), srv, &mcp.CallToolParams{
		Name:      "ask",
		Arguments: args,
	})
	stopWatch()
	<-watched
	var final askResult
	if err == nil {
		final = structured(res)
		out.turnCost, out.durable = final.turnCost, final.durable
	}
	out.Delegations = append(out.Delegations, pr.stop(final)...)
	if code, err, ok := ended(); ok {
		return fail(code, err)
	}
	if err != nil {
		return fail(exitFailed, fmt.Errorf("asking agent %s at %s: %w", cfg.agent, st.url, err))
	}
	if final.Status == "" {
		// No turn result: the agent refused the call itself (an empty task,
		// a refused delegation chain) or is not a switchboard agent.
		if res.IsError {
			return fail(exitFailed, errors.New(agentSays(cfg.agent, delegation.ResultText(res))))
		}
		final.Status = runtime.StatusAnswered
		final.Answer = delegation.ResultText(res)
	}
	if final.Status == runtime.StatusFailed {
		out.Reason, out.Unavailable = final.Reason, final.Unavailable
		return fail(exitFailed, errors.New(agentSays(cfg.agent, delegation.ResultText(res))))
	}

	code := exitFor(final.Status)
	out.Answer, out.Status, out.Reason, out.Unavailable = final.Answer, string(final.Status), final.Reason, final.Unavailable
	out.DurationMS = time.Since(start).Milliseconds()
	out.ExitCode = code
	if code != exitOK {
		failSpan(span, errors.New(final.Reason))
	}
	if cfg.json {
		writeJSON(stdout, out.scrubbed())
	} else {
		// The answer is the model's, made of what servers returned: inert,
		// its lines and tabs kept. --json leaves it as it is (the encoder
		// escapes every C0 control; a program reads it, not a terminal).
		answer := strings.TrimRight(shown(out.Answer), "\n")
		pr.printAnswer(stdout, stderr, answer)
		printUsage(stderr, out.turnCost)
	}
	if code != exitOK {
		fmt.Fprintf(stderr, "switchboard ask: %s (exit %d)\n", shown(out.Reason), code)
	}
	return code
}

// EnvAskStream names the variable that says whether ask prints the
// answer as the model writes it: "1" even when stdout is no terminal (a
// pipe to tee, a test), "0" never. Unset, it does on a terminal only, and
// never with --json. Either way the answer is printed once (printAnswer).
const EnvAskStream = "SWITCHBOARD_ASK_STREAM"

// streamAnswer decides, from stdout and $SWITCHBOARD_ASK_STREAM, whether
// the answer is printed as it comes.
func streamAnswer(stdout io.Writer, env string) (bool, error) {
	switch env {
	case "1":
		return true, nil
	case "0":
		return false, nil
	case "":
		f, ok := stdout.(*os.File)
		return ok && f != nil && isTerminalFd(f.Fd()), nil
	}
	return false, fmt.Errorf("$%s=%q: want 1 (print the answer as it comes) or 0 (print it at the end)", EnvAskStream, env)
}

// agentSays is the agent's error text with its name in front, once:
// switchboard agents already start theirs with "agent NAME:".
func agentSays(name, text string) string {
	if strings.HasPrefix(text, "agent "+name+":") {
		return text
	}
	return "agent " + name + ": " + text
}

// structured reads what it can of the ask tool's structured result: the
// zero askResult when there is none.
func structured(res *mcp.CallToolResult) askResult {
	var r askResult
	if res.StructuredContent == nil {
		return r
	}
	if b, err := json.Marshal(res.StructuredContent); err == nil {
		_ = json.Unmarshal(b, &r) // a field of the wrong type is left zero
	}
	return r
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only an unmarshalable value gets here; all of output marshals.
		panic(errors.Join(errors.New("askcmd: encoding the output"), err))
	}
}

// Package askcmd is `switchboard ask`: give a task to an agent (the oracle
// by default) through a studio, show each delegation live as the agent
// makes it, and print the answer.
//
// The task travels as one tools/call of the agent's ask tool, through the
// pool, carrying a progress token: the agent's turn reports each delegation
// as a progress notification whose message is a one-line JSON
// delegation.Event, printed here as it arrives. When no studio is
// listening, ask starts one in-process with the bundled agents and the
// builtin model, so the command works on a fresh checkout with no
// configuration. Cancelling the command's context (SIGINT) cancels the call,
// and go-sdk's notifications/cancelled carries that to the agent, which
// cancels its own delegations in turn.
package askcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-run/switchboard/internal/cli"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime"
)

const usage = `usage: switchboard ask [flags] "TASK"
       switchboard ask [flags] -        (or no TASK: the task is read from stdin)
       switchboard ask [flags] --resume RUN

Give TASK to an agent (the oracle by default) and print its answer on
stdout. Each delegation the agent makes is shown on stderr as it happens,
and so is each sibling the agent could not reach.

Where the task goes: the studio at --studio, else $SWITCHBOARD_STUDIO_URL,
else http://127.0.0.1:54321 (or $SWITCHBOARD_DEFAULT_STUDIO_URL, for a
studio usually run elsewhere). Only in the last case, when nothing answers
there, does ask start a studio of its own, in-process, with the agents
under --dir and their own model settings (the builtin model for the
bundled ones); its log goes to .switchboard/ask-studio-<time>-<pid>.log
(the newest 10 are kept).
A --studio or $SWITCHBOARD_STUDIO_URL that does not answer is an error.

The model: --model (else $OPENAI_MODEL) names it and $OPENAI_BASE_URL
says where it is served ("builtin" for the builtin model); a studio ask
starts runs them. A running studio keeps the model it was started with:
when the agent asked runs another name or endpoint there, ask exits 2
before asking, saying what runs there and how to run the one asked for.
($OPENAI_API_KEY is not compared: no studio shows it.)

A server the agent delegates to may ask the person something (MCP
elicitation, e.g. packrat's delete_notes asks before deleting several
notes), forwarded by every agent on the way whose agent.json says
"elicit": true. On a terminal ask prints the question and asks for each
field, one line each (an empty line takes the field's default; Ctrl-D
cancels). With nobody to ask (stdin is not a terminal, or --no-input) it
declines, and the server does nothing it wanted confirmed (packrat's
delete_notes, declined or cancelled, deletes nothing and says so as a
tool error: the task was not done, and ask exits 4).

Every run is journaled by the agent (docs/DURABILITY.md): when the agent's
process dies while it works, the studio restarts it and the task goes on
from where it was (the answer says "resumed"). A run that failed (the
model down past its retries, --timeout, Ctrl-C) goes on with --resume RUN,
RUN being the run id --json and the agent's first progress line name.

exit status:
  0    the task was done, and every delegation it made succeeded
  1    the runtime failed: no studio, the agent or its model endpoint
       failed or timed out (--model-timeout), an internal error
  2    usage: a bad flag, no task, an unknown --agent, or a running
       studio whose agent runs another model than --model,
       $OPENAI_MODEL or $OPENAI_BASE_URL ask for (nothing was asked)
  3    not answered: the agent said it could not do the task, or it
       stopped at max_steps without an answer; what it did before, if
       anything, is named in the reason ("done before it stopped") and
       in --json "delegations", and is not undone
  4    a delegation failed: a tool the agent called reported an error or
       could not be reached, or did not do what it was asked because
       the person declined or cancelled its question (elicitation) or
       could not be asked; the answer, if any, is partial
  5    a sibling was unavailable (named on stderr and in --json
       "unavailable") and nothing was done: not one delegation
       succeeded, so the task can be asked again once it is back
  124  --timeout passed before the answer; the agent was told to stop
  130  interrupted (SIGINT, SIGTERM); the agent was told to stop

flags:
`

// DefaultStudioURL is where ask looks for a running studio.
const DefaultStudioURL = "http://127.0.0.1:54321"

// EnvStudioURL names the variable that overrides DefaultStudioURL: the
// studio there must answer.
const EnvStudioURL = "SWITCHBOARD_STUDIO_URL"

// EnvDefaultStudioURL names the variable that moves DefaultStudioURL: ask
// looks for a studio there and, as at the default, starts its own when
// none answers. A user whose studio runs on another port sets it; so do
// the tests of that path, which must not depend on what listens on the
// default port.
const EnvDefaultStudioURL = "SWITCHBOARD_DEFAULT_STUDIO_URL"

// Exit codes: the table in usage, and in README.md.
const (
	exitOK               = 0
	exitFailed           = 1
	exitUsage            = 2
	exitNotAnswered      = 3
	exitDelegationFailed = 4
	exitUnavailable      = 5
	exitTimeout          = 124 // as timeout(1) reports a command it stopped
	exitCancelled        = 130 // as a shell reports a command ended by SIGINT
)

// maxTaskBytes bounds a task read from stdin: far more than any prompt,
// and below what the agent server accepts in one request body.
const maxTaskBytes = 1 << 20

// errTimeout is the cause of a call ended by --timeout.
var errTimeout = errors.New("--timeout reached")

// config is the parsed command line.
type config struct {
	agent        string
	json         bool
	studioURL    string
	explicit     bool // studioURL came from --studio or the environment: do not start one
	dir          string
	model        string
	envModel     string // $OPENAI_MODEL: the model name when --model is not given
	envBaseURL   string // $OPENAI_BASE_URL: where the model is served ("builtin" or a base URL)
	defaultURL   string // where ask looks for a studio when none is named: DefaultStudioURL or $SWITCHBOARD_DEFAULT_STUDIO_URL
	task         string
	logFormat    string        // of a studio ask starts: its log file's format
	token        string        // $SWITCHBOARD_TOKEN, sent to the studio
	timeout      time.Duration // the whole ask; 0: none
	modelTimeout time.Duration // each model request of a studio ask starts; 0: the agents' default
	resume       string        // --resume: the run to resume instead of a task
	noInput      bool          // --no-input: decline every elicitation
	elicitStdin  bool          // answer elicitations from stdin even when it is not a terminal
	stdin        io.Reader     // where the person's answers come from
}

// Main runs the command with args (after its own name) and returns the exit
// code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseArgs(args, os.Getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err == nil && cfg.resume == "" && (cfg.task == "" || cfg.task == "-") {
		cfg.task, err = readTask(stdin, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "switchboard ask: %v\n", err)
		return exitUsage
	}
	cfg.stdin = stdin
	defer setupTracing(ctx, stderr)()
	return run(ctx, cfg, stdout, stderr)
}

// readTask reads the task from stdin, up to maxTaskBytes.
func readTask(stdin io.Reader, stderr io.Writer) (string, error) {
	if isTerminal(stdin) {
		fmt.Fprintln(stderr, "· reading the task from the terminal; end it with Ctrl-D")
	}
	b, err := io.ReadAll(io.LimitReader(stdin, maxTaskBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading the task from stdin: %w", err)
	}
	if len(b) > maxTaskBytes {
		return "", fmt.Errorf("the task on stdin is longer than %d bytes", maxTaskBytes)
	}
	task := strings.TrimSpace(string(b))
	if task == "" {
		return "", errors.New(`no task: give it as an argument ("TASK"), or on stdin`)
	}
	return task, nil
}

// parseArgs accepts flags before and after the task's words, so that
// `ask "TASK" --json` works as well as `ask --json "TASK"`; everything after
// "--" is the task.
//
// An empty task (none given, or "-") is left for Main to read from stdin.
// --help prints the usage on stdout and returns flag.ErrHelp.
func parseArgs(args []string, getenv func(string) string, stdout, stderr io.Writer) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("ask", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.agent, "agent", "oracle", "the agent to ask")
	fs.BoolVar(&cfg.json, "json", false, "print one JSON object {answer, agent, status, exit_code, reason, unavailable, delegations, duration_ms, error}")
	fs.StringVar(&cfg.studioURL, "studio", "", "the studio's URL (default $"+EnvStudioURL+", else "+DefaultStudioURL+")")
	fs.StringVar(&cfg.dir, "dir", ".", "the project directory holding agents/, for a studio ask starts")
	fs.StringVar(&cfg.model, "model", "", "the model name (default $OPENAI_MODEL, else each agent's agent.json): a studio ask starts runs it; a running studio's agent must already run it, or ask exits 2")
	fs.StringVar(&cfg.logFormat, "log-format", "", "log format of a studio ask starts (its log file, agents included): "+logging.Formats+" (default text)")
	fs.DurationVar(&cfg.timeout, "timeout", 0, "give up (exit 124) when no answer came within this long, e.g. 30s (default: no limit)")
	fs.StringVar(&cfg.resume, "resume", "", "resume run RUN of the agent from its journal instead of asking a new task (a run that failed: the model down, --timeout, Ctrl-C); a run that is over prints its answer again")
	fs.BoolVar(&cfg.noInput, "no-input", false, "never ask the person: decline every elicitation (a server's request for confirmation or input)")
	fs.BoolVar(&cfg.elicitStdin, "answer-elicitations-from-stdin", false, "answer elicitations from stdin, one line per field, even when it is not a terminal (for scripts and tests; also $"+EnvElicitStdin+"=1)")
	fs.DurationVar(&cfg.modelTimeout, "model-timeout", 0, "deadline of each model request, for a studio ask starts (default $"+runtime.EnvModelTimeout+", else "+runtime.DefaultModelTimeout.String()+")")
	if cli.HelpRequested(args) {
		fs.SetOutput(stdout)
		fs.Usage()
		return nil, flag.ErrHelp
	}

	var words, tail []string
	rest := args
	if i := slices.Index(args, "--"); i >= 0 {
		rest, tail = args[:i], args[i+1:]
	}
	for {
		if err := fs.Parse(rest); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		words = append(words, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	words = append(words, tail...)
	cfg.task = strings.TrimSpace(strings.Join(words, " "))
	if cfg.resume != "" && cfg.task != "" {
		return nil, fmt.Errorf("--resume %s takes no task (the run has its own), got %q", cfg.resume, cfg.task)
	}
	if cfg.agent == "" {
		return nil, errors.New("--agent is empty")
	}
	if cfg.timeout < 0 || cfg.modelTimeout < 0 {
		return nil, errors.New("--timeout and --model-timeout want a positive duration")
	}
	if _, err := logging.New(io.Discard, cfg.logFormat, slog.LevelInfo); err != nil {
		return nil, fmt.Errorf("--log-format: %w", err)
	}
	cfg.defaultURL = DefaultStudioURL
	if u := getenv(EnvDefaultStudioURL); u != "" {
		cfg.defaultURL = strings.TrimSuffix(u, "/")
	}
	if cfg.studioURL != "" {
		cfg.explicit = true
	} else if u := getenv(EnvStudioURL); u != "" {
		cfg.studioURL, cfg.explicit = u, true
	} else {
		cfg.studioURL = cfg.defaultURL
	}
	cfg.studioURL = strings.TrimSuffix(cfg.studioURL, "/")
	// What a studio ask starts would run, and what a running one must.
	cfg.envModel, cfg.envBaseURL = getenv("OPENAI_MODEL"), getenv("OPENAI_BASE_URL")
	cfg.token = getenv(studioapi.EnvToken)
	if getenv(EnvElicitStdin) == "1" {
		cfg.elicitStdin = true
	}
	return cfg, nil
}

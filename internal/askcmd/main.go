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

	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/studio"
)

const usage = `usage: switchboard ask [flags] "TASK"

Give TASK to an agent and print its answer. Each delegation the agent makes
is shown as it happens (on stderr). When no studio is listening at --studio,
one is started in-process with the bundled agents and the builtin model.

flags:
`

// DefaultStudioURL is where ask looks for a running studio.
const DefaultStudioURL = "http://127.0.0.1:54321"

// EnvStudioURL names the variable that overrides DefaultStudioURL.
const EnvStudioURL = "SWITCHBOARD_STUDIO_URL"

// Exit codes.
const (
	exitOK        = 0
	exitFailed    = 1
	exitUsage     = 2
	exitCancelled = 130 // as a shell reports a command ended by SIGINT
)

// config is the parsed command line.
type config struct {
	agent     string
	json      bool
	studioURL string
	explicit  bool // studioURL came from --studio or the environment: do not start one
	dir       string
	model     string
	task      string
	logFormat string // of a studio ask starts: its log file's format
	token     string // $SWITCHBOARD_TOKEN, sent to the studio
}

// Main runs the command with args (after its own name) and returns the exit
// code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseArgs(args, os.Getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "switchboard ask: %v\n", err)
		return exitUsage
	}
	defer setupTracing(ctx, stderr)()
	return run(ctx, cfg, stdout, stderr)
}

// parseArgs accepts flags before and after the task's words, so that
// `ask "TASK" --json` works as well as `ask --json "TASK"`; everything after
// "--" is the task.
func parseArgs(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("ask", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.agent, "agent", "oracle", "the agent to ask")
	fs.BoolVar(&cfg.json, "json", false, "print one JSON object {answer, agent, delegations, duration_ms}")
	fs.StringVar(&cfg.studioURL, "studio", "", "the studio's URL (default $"+EnvStudioURL+", else "+DefaultStudioURL+")")
	fs.StringVar(&cfg.dir, "dir", ".", "the project directory holding agents/, for a studio ask starts")
	fs.StringVar(&cfg.model, "model", "", "the model name, for a studio ask starts (default: each agent's agent.json)")
	fs.StringVar(&cfg.logFormat, "log-format", "", "log format of a studio ask starts (its log file, agents included): "+logging.Formats+" (default text)")

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
	if cfg.task == "" {
		fs.Usage()
		return nil, errors.New("no task given")
	}
	if cfg.agent == "" {
		return nil, errors.New("--agent is empty")
	}
	if _, err := logging.New(io.Discard, cfg.logFormat, slog.LevelInfo); err != nil {
		return nil, fmt.Errorf("--log-format: %w", err)
	}
	if cfg.studioURL != "" {
		cfg.explicit = true
	} else if u := getenv(EnvStudioURL); u != "" {
		cfg.studioURL, cfg.explicit = u, true
	} else {
		cfg.studioURL = DefaultStudioURL
	}
	cfg.studioURL = strings.TrimSuffix(cfg.studioURL, "/")
	cfg.token = getenv(studio.EnvToken)
	return cfg, nil
}

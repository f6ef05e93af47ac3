// Package upcmd is `switchboard up`: its flags, help and exit codes. It
// starts the studio (package studio) with an options struct, prints the
// ready line once the agents have had their first chance to start, and
// stops the studio on SIGINT or SIGTERM (the cancellation of ctx).
package upcmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/switchboard-run/switchboard/internal/cli"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/pgdb"
	"github.com/switchboard-run/switchboard/internal/studio"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/telemetry"
)

const upUsage = `usage: switchboard up [flags]

Run the studio: every agent under --dir/agents as a child process (its own
` + "`agent serve`" + `), supervised and restarted with backoff, behind one proxy at
/api/agents/NAME/mcp, with the page at / and /metrics. Prints
"switchboard studio listening on URL" once the agents have had their first
chance to start; SIGINT or SIGTERM stops the agents and the studio.
$SWITCHBOARD_TOKEN, when set, is the bearer token every /api/ request must
carry (required to listen beyond loopback). With --database (default
$SWITCHBOARD_DATABASE_URL), a postgres:// URL, every agent keeps its
idempotency ledger and packrat its notes in that PostgreSQL database
(each agent in a schema of its own, shared by its replicas).

flags:
`

// ReadyFormat is the line `switchboard up` prints on stdout once it serves;
// the argument is the studio's base URL.
const ReadyFormat = "switchboard studio listening on %s\n"

// Main runs the command with args (after its own name) and returns the exit
// code: 0 after a clean shutdown, 1 when the studio cannot start or stop
// cleanly, 2 on a usage error.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("switchboard up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".", "project directory holding agents/")
	listen := fs.String("listen", studioapi.DefaultListen, "address to listen on; beyond loopback requires "+studioapi.EnvToken)
	logFormat := fs.String("log-format", "text", "log format on stderr (the studio's and the agents'): "+logging.Formats)
	database := fs.String("database", "", "PostgreSQL URL (postgres://...) for every agent's ledger and store; default $"+pgdb.EnvURL+"; empty: SQLite per agent")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), upUsage)
		fs.PrintDefaults()
	}
	if code, ok := cli.Parse(fs, args, stdout, false); !ok {
		return code
	}
	if *database == "" {
		*database = os.Getenv(pgdb.EnvURL)
	}
	var agentEnv []string
	if *database != "" {
		if err := pgdb.CheckURL(*database); err != nil {
			fmt.Fprintf(stderr, "switchboard up: --database: %v\n", err)
			fs.Usage()
			return 2
		}
		// Through the environment, not the agents' command lines, where
		// any local user could read a password in it.
		agentEnv = []string{pgdb.EnvURL + "=" + *database}
	}
	logger, err := logging.New(stderr, *logFormat, slog.LevelInfo)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard up: %v\n", err)
		return 2
	}
	if *database != "" {
		// A database that cannot be reached fails the studio at start,
		// not each agent in a restart loop.
		if err := pgdb.Ping(ctx, *database); err != nil {
			fmt.Fprintf(stderr, "switchboard up: %v\n", err)
			return 1
		}
	}
	// Traces go to OTEL_EXPORTER_OTLP_ENDPOINT when it is set; the agents
	// read the same variable from the environment they inherit.
	defer telemetry.Start(ctx, "switchboard-studio", func(msg string, err error) { logger.Warn(msg, "err", err) })()
	s, err := studio.Start(ctx, &studio.Options{
		Dir:         *dir,
		Listen:      *listen,
		Token:       os.Getenv(studioapi.EnvToken),
		Logger:      logger,
		AgentOutput: stderr,
		LogFormat:   *logFormat,
		Env:         agentEnv,
		DatabaseURL: *database,
	})
	if err != nil {
		fmt.Fprintf(stderr, "switchboard up: %v\n", err)
		return 1
	}
	// Say "listening" once every agent has had its first chance to start,
	// so that whoever waits for the line finds the agents up; one that
	// failed is reported and keeps being retried.
	wctx, cancel := context.WithTimeout(ctx, studio.DefaultStartTimeout+5*time.Second)
	if err := s.WaitReady(wctx); err != nil && ctx.Err() == nil {
		logger.Warn("studio started with agents down", "err", err)
	}
	cancel()
	if ctx.Err() == nil {
		fmt.Fprintf(stdout, ReadyFormat, s.URL())
	}
	<-ctx.Done()
	logger.Info("shutting down the studio")
	if err := s.Close(); err != nil {
		logger.Error("shutdown", "err", err)
		return 1
	}
	return 0
}

package agentcmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/switchboard-run/switchboard/internal/agentserver"
	"github.com/switchboard-run/switchboard/internal/cli"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/pgdb"
	"github.com/switchboard-run/switchboard/runtime"
)

const serveUsage = `usage: switchboard agent serve --agent agents/NAME [flags]

Run one agent as an MCP server over Streamable HTTP at /mcp: the native
toolsets its agent.json names, and ask, which runs the agent's own model
turn with those tools and its tools/mcp.json siblings. Once it listens it
prints one line on stdout: "switchboard agent NAME listening on URL".
The studio (switchboard up) runs every agent this way.

With --database (default $SWITCHBOARD_DATABASE_URL), a postgres:// URL,
the idempotency ledger, the run journal and packrat's notes live in that
PostgreSQL database, shared by every replica of the agent; without it,
SQLite files in the data directory. --journal-sync power makes the run
journal's SQLite commits survive a power loss (docs/DURABILITY.md).
--journal-log append (default $SWITCHBOARD_JOURNAL_LOG, else tables)
commits them as appends to a segment file next to the journal, folded
into its tables later: opt-in, for SQLite only (docs/DURABILITY.md §5).

SSE streams are resumable (Last-Event-ID; events kept in memory, 4 MiB):
set SWITCHBOARD_RESUMABLE_STREAMS=0 to turn that off.

A 2025-11-25 client keeps its session across the agent's restart, and with
--database on any replica: what set each session up (its initialize's
params, never a header or a token) is kept in continuity.db in the data
directory, or in the database. Set SWITCHBOARD_SESSION_CONTINUITY=0 to
turn that off (the studio does, for the agents it runs: it keeps their
sessions itself).

With --token-env VAR, every MCP request and /metrics must carry
"Authorization: Bearer <the value of VAR>" (401 otherwise); the probes need
none.

GET /healthz answers 200 while the process serves; GET /readyz 200 while it
takes new work. On SIGTERM or SIGINT it drains: /readyz answers 503, new
sessions and tools/calls get 503 with Retry-After, the calls in flight run
for at most --shutdown-grace (then they are cancelled), and it exits 0. A
second signal stops it at once (exit 1).

flags:
`

// serve is `switchboard agent serve` with args (after serve): 0 after a
// clean shutdown, 1 when the agent cannot start or stop cleanly, 2 on a
// usage error.
func serve(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("switchboard agent serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveUsage)
		fs.PrintDefaults()
	}
	agentDir := fs.String("agent", "", "the agent's folder, e.g. agents/packrat (required)")
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	dataDir := fs.String("data-dir", "", "the agent's data directory (default .switchboard/data/<name>)")
	sessionTimeout := fs.Duration("session-timeout", agentserver.DefaultSessionTimeout, "close sessions idle this long (0: never)")
	logFormat := fs.String("log-format", "text", "log format on stderr: "+logging.Formats)
	maxConcurrent := fs.Int("max-concurrent", 0, "tools/call requests run at once; more wait, each until its caller's deadline (0: no cap)")
	modelTimeout := fs.Duration("model-timeout", 0, "deadline of each model request (default $"+runtime.EnvModelTimeout+", else "+runtime.DefaultModelTimeout.String()+")")
	graceDefault, graceErr := shutdownGraceFromEnv()
	shutdownGrace := fs.Duration("shutdown-grace", graceDefault, "on SIGTERM, how long the calls in flight may run before they are cancelled (default $"+agentserver.EnvShutdownGrace+", else "+agentserver.DefaultShutdownGrace.String()+")")
	tokenEnv := fs.String("token-env", "", "the environment variable whose value is the bearer token every MCP request and /metrics must carry (Authorization: Bearer ...); a Kubernetes Secret goes there. Empty: no token (warned when listening beyond loopback)")
	database := fs.String("database", "", "PostgreSQL URL (postgres://...) the agent's replicas share; default $"+pgdb.EnvURL+"; empty: SQLite in the data directory")
	journalSync := fs.String("journal-sync", os.Getenv(agentserver.EnvJournalSync), "what a committed run journal entry survives: process (its death, the default) or power (a power loss too: an fsync per commit); default $"+agentserver.EnvJournalSync)
	journalLog := fs.String("journal-log", os.Getenv(agentserver.EnvJournalLog), "how the SQLite run journal commits: tables (a transaction on its tables, the default) or append (an append to a segment file, folded into the tables later); default $"+agentserver.EnvJournalLog)
	if code, ok := cli.Parse(fs, args, stdout, true); !ok {
		return code
	}
	if *database == "" {
		*database = os.Getenv(pgdb.EnvURL)
	}
	var bad string
	switch {
	case *database != "" && pgdb.CheckURL(*database) != nil:
		bad = "--database: " + pgdb.CheckURL(*database).Error()
	case *agentDir == "":
		bad = "--agent is required"
	case fs.NArg() > 0:
		bad = fmt.Sprintf("unexpected argument %q", fs.Arg(0))
	case *maxConcurrent < 0:
		bad = fmt.Sprintf("--max-concurrent %d: want 0 or more", *maxConcurrent)
	case *modelTimeout < 0:
		bad = fmt.Sprintf("--model-timeout %v: want a positive duration", *modelTimeout)
	case graceErr != nil:
		bad = graceErr.Error()
	case *shutdownGrace <= 0:
		bad = fmt.Sprintf("--shutdown-grace %v: want a positive duration", *shutdownGrace)
	}
	// The token itself is never a flag: a command line is readable by
	// every user of the host (ps, /proc/PID/cmdline).
	var token string
	if bad == "" && *tokenEnv != "" {
		token = os.Getenv(*tokenEnv)
		if token == "" {
			bad = fmt.Sprintf("--token-env %s: the environment variable %s is not set, or empty; set it to the bearer token, or leave --token-env out to serve without one", *tokenEnv, *tokenEnv)
		}
	}
	noResumable, err := agentserver.NoResumableFromEnv()
	if bad == "" && err != nil {
		bad = err.Error()
	}
	journalOpts, err := agentserver.JournalOptions(*journalSync)
	if bad == "" && err != nil {
		bad = "--journal-sync: " + err.Error()
	}
	if bad == "" {
		if journalOpts, err = agentserver.WithJournalLog(journalOpts, *journalLog); err != nil {
			bad = "--journal-log: " + err.Error()
		}
	}
	noContinuity, err := agentserver.NoContinuityFromEnv()
	if bad == "" && err != nil {
		bad = err.Error()
	}
	if bad != "" {
		fmt.Fprintf(stderr, "switchboard agent serve: %s\n", bad)
		fs.Usage()
		return 2
	}
	logger, err := logging.New(stderr, *logFormat, slog.LevelInfo)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard agent serve: %v\n", err)
		return 2
	}
	timeout := *sessionTimeout
	if timeout == 0 {
		timeout = -1 // Options: negative means never
	}
	ctx, abort, stop := drainSignals(ctx)
	defer stop()
	err = agentserver.Serve(ctx, &agentserver.ServeOptions{
		AgentDir:      *agentDir,
		Listen:        *listen,
		Ready:         stdout,
		ShutdownGrace: *shutdownGrace,
		Abort:         abort,
		Options: agentserver.Options{
			DataDir: *dataDir, SessionTimeout: timeout, MaxConcurrentCalls: *maxConcurrent,
			ModelTimeout: *modelTimeout, Logger: logger, NoResumableStreams: noResumable,
			DatabaseURL: *database, Journal: journalOpts, NoContinuity: noContinuity, Token: token,
		},
	})
	if err != nil {
		// Plainly, not through the logger: this is the line a person (or
		// the studio's "last log line") needs to read.
		fmt.Fprintf(stderr, "switchboard agent serve: %v\n", err)
		return 1
	}
	return 0
}

// shutdownGraceFromEnv is --shutdown-grace's default: $SWITCHBOARD_SHUTDOWN_GRACE
// when set, else agentserver.DefaultShutdownGrace. A value that is not a
// positive duration is an error naming the variable.
func shutdownGraceFromEnv() (time.Duration, error) {
	v, ok := os.LookupEnv(agentserver.EnvShutdownGrace)
	if !ok || v == "" {
		return agentserver.DefaultShutdownGrace, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return agentserver.DefaultShutdownGrace, fmt.Errorf("%s=%q: want a positive duration such as 25s", agentserver.EnvShutdownGrace, v)
	}
	return d, nil
}

// drainSignals returns a context that ends on the first SIGTERM or SIGINT
// (or when parent ends: the command's own signal handling), and a channel
// closed on the second one, which ends the drain at once. The command's
// parent context ends on the first signal too, but it cannot count them.
func drainSignals(parent context.Context) (ctx context.Context, abort <-chan struct{}, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	parentErr := parent.Err()
	aborted := make(chan struct{})
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		// Every signal reaches both this channel and the parent's handler,
		// so only signals are counted here; one that came before Notify
		// ended the parent only, and counts as the first.
		first := parentErr == nil
		for {
			select {
			case <-sigs:
				if !first {
					close(aborted)
					return
				}
				first = false
				cancel()
			case <-done:
				return
			}
		}
	}()
	return ctx, aborted, func() {
		signal.Stop(sigs)
		close(done)
		<-exited
		cancel()
	}
}

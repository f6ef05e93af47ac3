package agentcmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/switchboard-run/switchboard/internal/agentserver"
	"github.com/switchboard-run/switchboard/internal/cli"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/runtime"
)

const serveUsage = `usage: switchboard agent serve --agent agents/NAME [flags]

Run one agent as an MCP server over Streamable HTTP at /mcp: the native
toolsets its agent.json names, and ask, which runs the agent's own model
turn with those tools and its tools/mcp.json siblings. Once it listens it
prints one line on stdout: "switchboard agent NAME listening on URL".
The studio (switchboard up) runs every agent this way.

SSE streams are resumable (Last-Event-ID; events kept in memory, 4 MiB):
set SWITCHBOARD_RESUMABLE_STREAMS=0 to turn that off.

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
	if code, ok := cli.Parse(fs, args, stdout, true); !ok {
		return code
	}
	var bad string
	switch {
	case *agentDir == "":
		bad = "--agent is required"
	case fs.NArg() > 0:
		bad = fmt.Sprintf("unexpected argument %q", fs.Arg(0))
	case *maxConcurrent < 0:
		bad = fmt.Sprintf("--max-concurrent %d: want 0 or more", *maxConcurrent)
	case *modelTimeout < 0:
		bad = fmt.Sprintf("--model-timeout %v: want a positive duration", *modelTimeout)
	}
	noResumable, err := agentserver.NoResumableFromEnv()
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
	err = agentserver.Serve(ctx, &agentserver.ServeOptions{
		AgentDir: *agentDir,
		Listen:   *listen,
		Ready:    stdout,
		Options: agentserver.Options{
			DataDir: *dataDir, SessionTimeout: timeout, MaxConcurrentCalls: *maxConcurrent,
			ModelTimeout: *modelTimeout, Logger: logger, NoResumableStreams: noResumable,
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

// Package clientcmd is `switchboard client`: a scripting front door to the
// pool. It reads one JSON request per line on stdin, runs the requests
// concurrently through one pool.Pool, and writes one JSON answer per request
// on stdout in completion order. At EOF it waits for the requests in flight,
// closes the pool (DELETE on live sessions) and exits 0. On SIGINT or
// SIGTERM it stops reading, answers every line it has read (cancelling the
// calls in flight), closes the pool and exits 130.
package clientcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/switchboard-run/switchboard/internal/cli"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

// exitInterrupted is the exit code after SIGINT or SIGTERM, as a shell
// reports a command ended by SIGINT.
const exitInterrupted = 130

// Main runs the command with args (after its own name) and returns the exit
// code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("switchboard client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "tools/mcp.json", "mcp.json naming the servers requests may use")
	timeout := fs.Duration("timeout", 2*time.Minute, "deadline of each request (0: none)")
	inFlight := fs.Int("max-in-flight", 256, "requests run at once; reading stdin waits beyond this")
	logFormat := fs.String("log-format", "text", "log format on stderr: text or json")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: switchboard client [--config tools/mcp.json]

Reads JSON requests, one per line, on stdin:
  {"id":1,"server":"NAME","method":"tools/list"}
  {"id":2,"server":"NAME","method":"tools/call","params":{"name":"TOOL","arguments":{...}}}
  {"id":3,"method":"pool/stats"}
and answers each with one line on stdout, in completion order:
  {"id":1,"result":{...}}  or  {"id":1,"error":{"code":N,"message":"...","kind":"K"}}
where K is session_expired, outcome_unknown, transport, rpc, config or input.

exit status:
  0    stdin ended and every request was answered
  1    the configuration or stdin could not be read
  2    usage: a bad flag or argument
  130  interrupted (SIGINT, SIGTERM): reading stopped, nothing new was sent,
       and every line read was answered: a call in flight was cancelled
       (outcome_unknown if its request went out, transport if it did not),
       a line not yet sent is transport ("not sent")

`)
		fs.PrintDefaults()
	}
	if code, ok := cli.Parse(fs, args, stdout, false); !ok {
		return code
	}
	if *inFlight < 1 {
		fmt.Fprintf(stderr, "switchboard client: --max-in-flight must be at least 1, got %d\n", *inFlight)
		return 2
	}
	logger, err := logging.New(stderr, *logFormat, slog.LevelInfo)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard client: --log-format: %v\n", err)
		return 2
	}
	cfg, err := mcpconfig.Load(*config)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard client: %v\n", err)
		return 1
	}
	for _, note := range cfg.Ignored {
		logger.Info(note)
	}
	p := pool.New(&pool.Options{Logger: logger})
	c := &client{cfg: cfg, pool: p, timeout: *timeout, maxInFlight: *inFlight, out: newWriter(stdout)}
	err = c.serve(ctx, stdin)
	p.Close()
	switch {
	case errors.Is(err, errInterrupted):
		fmt.Fprintf(stderr, "switchboard client: interrupted: every line read was answered\n")
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "switchboard client: %v\n", err)
		return 1
	}
	return 0
}

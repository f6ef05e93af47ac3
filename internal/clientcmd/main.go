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
  {"id":3,"server":"NAME","method":"resources/list"}          (also resources/templates/list,
  {"id":4,"server":"NAME","method":"resources/read","params":{"uri":"URI"}}   prompts/list)
  {"id":5,"server":"NAME","method":"prompts/get","params":{"name":"P","arguments":{...}}}
  {"id":6,"server":"NAME","method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"P"},"argument":{"name":"A","value":"PREFIX"}}}
  {"id":7,"method":"pool/stats"}
  {"id":8,"server":"NAME","method":"resources/subscribe","params":{"uri":"URI"}}
  {"id":9,"server":"NAME","method":"resources/unsubscribe","params":{"uri":"URI"}}
and answers each with one line on stdout, in completion order:
  {"id":1,"result":{...}}  or  {"id":1,"error":{"code":N,"message":"...","kind":"K"}}
A subscription answers {"id":8,"result":{}}, then writes a line for each
update until resources/unsubscribe, the end of stdin or a signal:
  {"notification":"resources/updated","subscription":8,"server":"NAME","uri":"URI"}
where K is outcome_unknown (N -32060: it may have run), interrupted (-32073:
a keyed call cut by the server's death; it may have run, never resent),
refused (-32061), session_expired (-32062), transport (-32063: nothing ran),
rpc (the server's own code), config or input (JSON-RPC's -326xx, -32700).
A list answers every page at once.

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
	// Notifications: an HTTP server sends notifications/resources/updated
	// on the session's standalone GET stream, which the pool opens only
	// with it (pool.ErrSubscribeNeedsNotifications); it also makes
	// tools/list_changed drop the tool cache at once.
	p := pool.New(&pool.Options{Logger: logger, Notifications: true})
	c := &client{cfg: cfg, pool: p, timeout: *timeout, maxInFlight: *inFlight, out: newWriter(stdout), log: logger}
	err = c.serve(ctx, stdin)
	// At the end of stdin each server is told (resources/unsubscribe);
	// after a signal nothing new is sent, and Close ends the sessions.
	c.endSubscriptions(err == nil)
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

// Package agentcmd is `switchboard agent`: its subcommands' flags, help
// and exit codes. `agent serve` runs one agent as an MCP server
// (agentserver.Serve), as the studio runs every agent.
package agentcmd

import (
	"context"
	"fmt"
	"io"

	"github.com/switchboard-run/switchboard/internal/cli"
)

const usage = `usage: switchboard agent serve --agent agents/NAME [flags]

subcommands:
  serve   run one agent as an MCP server (switchboard agent serve --help)
`

// Main runs `switchboard agent` with args (after its own name) and returns
// the exit code; 2 without a known subcommand.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "serve" {
		return serve(ctx, args[1:], stdin, stdout, stderr)
	}
	if cli.HelpRequested(args) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if len(args) == 0 {
		fmt.Fprintf(stderr, "switchboard agent: want a subcommand\n%s", usage)
	} else {
		fmt.Fprintf(stderr, "switchboard agent: unknown subcommand %q\n%s", args[0], usage)
	}
	return 2
}

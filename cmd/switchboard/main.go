// Command switchboard is the multi-agent orchestration runtime: the studio,
// agent servers, the coordinator's ask, and a scripting client for the pool.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchboard-run/switchboard/internal/agentserver"
	"github.com/switchboard-run/switchboard/internal/askcmd"
	"github.com/switchboard-run/switchboard/internal/clientcmd"
	"github.com/switchboard-run/switchboard/internal/statuscmd"
	"github.com/switchboard-run/switchboard/internal/studio"
)

const usage = `usage: switchboard <command> [flags]

commands:
  ask [--agent oracle] [--json] "TASK"   give a task to an agent (starts a studio when none runs)
  up [--dir .] [--listen 127.0.0.1:54321] run the studio: every agent under agents/, behind one proxy
  agent serve --agent agents/NAME         run one agent as an MCP server
  client [--config tools/mcp.json]        JSON lines on stdin -> pooled MCP calls -> JSON lines on stdout
  status [--studio URL] [--json]          a running studio's agents, pools, calls and recent delegations
`

type command func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	commands := map[string]command{
		"ask":    askcmd.Main,
		"up":     studio.Main,
		"client": clientcmd.Main,
		"status": statuscmd.Main,
	}
	name, rest := args[0], args[1:]
	if name == "agent" {
		if len(rest) == 0 || rest[0] != "serve" {
			fmt.Fprintf(stderr, "switchboard agent: want the subcommand serve\n%s", usage)
			return 2
		}
		return agentserver.Main(ctx, rest[1:], stdin, stdout, stderr)
	}
	if name == "help" || name == "-h" || name == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "switchboard: unknown command %q\n%s", name, usage)
		return 2
	}
	return cmd(ctx, rest, stdin, stdout, stderr)
}

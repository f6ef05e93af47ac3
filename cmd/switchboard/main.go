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

	"github.com/switchboard-run/switchboard/internal/agentcmd"
	"github.com/switchboard-run/switchboard/internal/askcmd"
	"github.com/switchboard-run/switchboard/internal/clientcmd"
	"github.com/switchboard-run/switchboard/internal/logincmd"
	"github.com/switchboard-run/switchboard/internal/runscmd"
	"github.com/switchboard-run/switchboard/internal/statuscmd"
	"github.com/switchboard-run/switchboard/internal/upcmd"
	"github.com/switchboard-run/switchboard/internal/versioncmd"
)

const usage = `usage: switchboard <command> [flags]

commands:
  ask [--agent oracle] [--json] "TASK"   give a task to an agent and print its answer (TASK or - reads stdin)
  up [--dir .] [--listen 127.0.0.1:54321] run the studio: every agent under agents/, behind one proxy
  agent serve --agent agents/NAME         run one agent as an MCP server
  client [--config tools/mcp.json]        JSON lines on stdin -> pooled MCP calls -> JSON lines on stdout
  status [--studio URL] [--json]          a running studio's agents, pools, calls and recent delegations
  runs [--agent NAME] [--all] [--json]    the agents' journaled runs: those that may be resumed (ask --resume RUN)
  login [--config tools/mcp.json] SERVER  sign in to an OAuth-protected MCP server (prints a URL to open)
  logout [--config tools/mcp.json] SERVER revoke and forget the stored token
  version                                 print the version
  help [COMMAND]                          print this, or a command's usage

Every command takes --help. Exit status 2 is a usage error; see each
command's --help for the rest (ask's are in README.md too).
`

type command func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

var commands = map[string]command{
	"ask":     askcmd.Main,
	"up":      upcmd.Main,
	"client":  clientcmd.Main,
	"status":  statuscmd.Main,
	"runs":    runscmd.Main,
	"login":   logincmd.Login,
	"logout":  logincmd.Logout,
	"agent":   agentcmd.Main,
	"version": versioncmd.Main,
}

// isHelpFlag reports whether arg asks for help, as the flag package reads it.
func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "--h":
		return true
	}
	return false
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 && name == "help" && !isHelpFlag(rest[0]) {
			// `switchboard help ask` is `switchboard ask --help`; `switchboard
			// help --help` is this usage, as every command's --help is its own.
			if cmd, ok := commands[rest[0]]; ok {
				return cmd(ctx, append(rest[1:], "--help"), stdin, stdout, stderr)
			}
			fmt.Fprintf(stderr, "switchboard help: unknown command %q\n%s", rest[0], usage)
			return 2
		}
		fmt.Fprint(stdout, usage)
		return 0
	case "-v", "-version", "--version":
		name = "version"
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "switchboard: unknown command %q\n%s", name, usage)
		return 2
	}
	return cmd(ctx, rest, stdin, stdout, stderr)
}

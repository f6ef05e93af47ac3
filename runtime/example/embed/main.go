// Command embed runs one model turn of an agent from a Go program of its
// own, with Switchboard's public packages only: it lives in a module of its
// own (example.com/switchboard-embed), so the go command would refuse it
// anything under switchboard's internal/.
//
//	go run . -agent scribe "the launch moved to Friday"
//
// The model is the one the agent folder and the environment name
// ($OPENAI_BASE_URL, $OPENAI_MODEL, $OPENAI_API_KEY; none: the builtin
// model), and the siblings are those of its tools/mcp.json.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

func main() {
	dir := flag.String("agent", "scribe", "the agent folder (agent.json and tools/mcp.json)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *dir, strings.Join(flag.Args(), " "), nil); err != nil {
		log.Fatal(err)
	}
}

// run loads the agent in dir and runs one turn on task, writing what the
// turn did to w. opts, when not nil, overrides the model settings.
func run(ctx context.Context, w io.Writer, dir, task string, opts *runtime.Options) error {
	// A bad agent.json or tools/mcp.json is a *mcpconfig.ConfigError that
	// names the file, the field and the value.
	def, err := agentdef.Load(dir)
	if err != nil {
		return err
	}
	// The pool is the MCP client of every delegation: sessions are reused,
	// re-initialized when a sibling forgets them, and closed here.
	p := pool.New(nil)
	defer p.Close()
	agent, err := runtime.New(def, p, opts)
	if err != nil {
		return err
	}
	chain, err := delegation.Chain{}.Enter(def.Name, def.MaxDepth)
	if err != nil {
		return err
	}
	res, err := agent.Run(ctx, task, chain)
	if err != nil {
		// res still says what the turn did before it failed.
		return fmt.Errorf("%s: %w (after %d delegations)", def.Name, err, len(res.Delegations))
	}
	for _, u := range res.Unavailable {
		fmt.Fprintln(w, "unavailable:", u)
	}
	for _, d := range res.Delegations {
		fmt.Fprintf(w, "delegated to %s.%s: %s\n", d.Agent, d.Tool, d.Outcome)
	}
	fmt.Fprintf(w, "%s (%s): %s\n", res.Status, res.Agent, res.Answer)
	return nil
}

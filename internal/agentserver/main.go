package agentserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/switchboard-run/switchboard/internal/cli"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/telemetry"
	"github.com/switchboard-run/switchboard/runtime"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// ReadyFormat is the one line `agent serve` prints on stdout once it
// accepts connections; the studio parses it. The arguments are the agent's
// name and the listener's host:port.
const ReadyFormat = "switchboard agent %s listening on http://%s/mcp\n"

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

// shutdownTimeout bounds how long a shutdown waits for requests in flight.
const shutdownTimeout = 10 * time.Second

// Main runs the command with args (after its own name) and returns the exit
// code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("switchboard agent serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveUsage)
		fs.PrintDefaults()
	}
	agentDir := fs.String("agent", "", "the agent's folder, e.g. agents/packrat (required)")
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	dataDir := fs.String("data-dir", "", "the agent's data directory (default .switchboard/data/<name>)")
	sessionTimeout := fs.Duration("session-timeout", DefaultSessionTimeout, "close sessions idle this long (0: never)")
	logFormat := fs.String("log-format", "text", "log format on stderr: "+logging.Formats)
	maxConcurrent := fs.Int("max-concurrent", 0, "tools/call requests run at once; more wait, each until its caller's deadline (0: no cap)")
	modelTimeout := fs.Duration("model-timeout", 0, "deadline of each model request (default $"+runtime.EnvModelTimeout+", else "+runtime.DefaultModelTimeout.String()+")")
	if cli.HelpRequested(args) {
		fs.SetOutput(stdout)
		fs.Usage()
		return 0
	}
	if err := fs.Parse(args); err != nil {
		return 2
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
	noResumable, err := noResumableFromEnv()
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
	if err := serve(ctx, *agentDir, *listen, &Options{DataDir: *dataDir, SessionTimeout: timeout, MaxConcurrentCalls: *maxConcurrent, ModelTimeout: *modelTimeout, Logger: logger, NoResumableStreams: noResumable}, stdout, logger); err != nil {
		// Plainly, not through the logger: this is the line a person (or
		// the studio's "last log line") needs to read.
		fmt.Fprintf(stderr, "switchboard agent serve: %v\n", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, agentDir, listen string, opts *Options, stdout io.Writer, logger *slog.Logger) error {
	def, err := agentdef.Load(agentDir)
	if err != nil {
		return err
	}
	// Traces (when OTEL_EXPORTER_OTLP_ENDPOINT is set) are flushed after
	// the server has stopped, so the last calls' spans are not lost.
	defer telemetry.Start(ctx, def.Name, func(msg string, err error) { logger.Warn(msg, "err", err) })()
	if def.MCP != nil {
		for _, note := range def.MCP.Ignored {
			logger.Info(note)
		}
	}
	s, err := New(def, opts)
	if err != nil {
		return err
	}
	defer s.Close()

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("agent %s: %w", def.Name, err)
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !mcphttp.IsLoopback(host) && opts.Token == "" {
		logger.Warn("listening beyond loopback without a token; anyone who can reach this address can use the agent", "addr", ln.Addr().String())
	}

	mux := http.NewServeMux()
	mux.Handle("/mcp", s.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	// The studio scrapes this and serves it as part of its own /metrics.
	var metrics http.Handler = s.MetricsHandler()
	if opts.Token != "" {
		metrics = mcphttp.RequireBearer(opts.Token, metrics)
	}
	mux.Handle("GET /metrics", metrics)
	srv := &http.Server{
		// The budget sets each request's body deadline (not ReadTimeout,
		// which would also end SSE streams) and caps connections.
		Handler:           s.Budget().Handler(mux),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(s.Budget().Listener(ln)) }()

	fmt.Fprintf(stdout, ReadyFormat, def.Name, ln.Addr().String())
	logger.Info("agent serving", "agent", def.Name, "addr", ln.Addr().String(), "data_dir", s.DataDir(), "tools", def.Tools)

	select {
	case err := <-served:
		return fmt.Errorf("agent %s: serving: %w", def.Name, err)
	case <-ctx.Done():
	}

	logger.Info("shutting down", "agent", def.Name)
	// Sessions first: their SSE streams would otherwise hold Shutdown for
	// its whole timeout.
	s.CloseSessions()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("requests still running at the shutdown deadline; closing them", "err", err)
		srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("serve ended", "err", err)
	}
	return s.Close()
}

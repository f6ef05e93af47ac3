package agentserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/telemetry"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// ReadyFormat is the one line `agent serve` prints on stdout once it
// accepts connections; the studio parses it. The arguments are the agent's
// name and the listener's host:port.
const ReadyFormat = "switchboard agent %s listening on http://%s/mcp\n"

// shutdownTimeout bounds how long a shutdown waits for requests in flight.
const shutdownTimeout = 10 * time.Second

// ServeOptions configure Serve.
type ServeOptions struct {
	Options
	// AgentDir is the agent's folder, e.g. agents/packrat (required).
	AgentDir string
	// Listen is the address to listen on; default 127.0.0.1:0.
	Listen string
	// Ready gets the ReadyFormat line once the server accepts connections
	// (the studio reads it from the agent's stdout); default: discard.
	Ready io.Writer
}

// Serve loads the agent, listens and serves it at /mcp (with /healthz and
// /metrics) until ctx is done, then shuts down: sessions first, then the
// requests still running, within shutdownTimeout. It returns why it could
// not start, or an error closing the agent's toolsets.
func Serve(ctx context.Context, so *ServeOptions) error {
	opts := so.Options
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	listen, stdout, logger := so.Listen, so.Ready, opts.Logger
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	if stdout == nil {
		stdout = io.Discard
	}
	def, err := agentdef.Load(so.AgentDir)
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
	s, err := New(def, &opts)
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

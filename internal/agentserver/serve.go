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
	// ShutdownGrace is how long the calls in flight may run once ctx is
	// done (drain.go); default DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// Abort, when closed while Serve drains, ends the drain at once: the
	// calls still running are cancelled and Serve returns ErrAborted (a
	// second SIGTERM). Optional.
	Abort <-chan struct{}
}

// Serve loads the agent, listens and serves it at /mcp (with /healthz,
// /readyz and /metrics) until ctx is done, then drains (drain.go): /readyz
// fails, new sessions and calls are refused, and the calls in flight run
// for at most ShutdownGrace before they are cancelled. Then it shuts down:
// sessions first, then the requests still open, within shutdownTimeout. It
// returns why it could not start, ErrAborted when Abort ended the drain, or
// an error closing the agent's toolsets.
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
	// Probes, outside the MCP middleware: no token, no Host or Origin
	// check. They say nothing secret, and a kubelet sends the pod's IP as
	// Host and no token. /healthz: the process serves (liveness); /readyz:
	// it takes new work (readiness), failing from the moment it drains.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", s.serveReadyz)
	// The run journal, for a person (runs.go): behind the checks of /mcp.
	mux.Handle("/runs", s.RunsHandler())
	mux.Handle("/runs/", s.RunsHandler())
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

	grace := so.ShutdownGrace
	if grace <= 0 {
		grace = DefaultShutdownGrace
	}
	aborted := drainCalls(ctx, s, grace, so.Abort, logger)

	// Sessions first: their SSE streams would otherwise hold Shutdown for
	// its whole timeout.
	s.CloseSessions()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if aborted != nil {
		srv.Close()
	} else if err := s.Budget().Shutdown(sctx, srv); err != nil {
		logger.Warn("requests still running at the shutdown deadline; closing them", "err", err)
		srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("serve ended", "err", err)
	}
	return errors.Join(aborted, s.Close())
}

// drainCalls drains s and waits for its calls in flight, at most grace;
// then it cancels those still running and waits (at most cutAnswerTimeout)
// for their callers to be answered. A close of abort ends either wait at
// once: it returns ErrAborted then. Each step is one log line.
func drainCalls(ctx context.Context, s *Server, grace time.Duration, abort <-chan struct{}, logger *slog.Logger) error {
	began := time.Now()
	n := s.Drain()
	logger.Info("draining: not ready, refusing new sessions and calls; waiting for the calls in flight",
		"agent", s.def.Name, "calls_in_flight", n, "grace", grace)
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := s.drain.wait(gctx, abort)
	if err == nil {
		logger.Info("drained: every call in flight finished", "agent", s.def.Name, "calls", n, "took", time.Since(began).Round(time.Millisecond))
		return nil
	}
	left := s.CallsInFlight()
	if errors.Is(err, ErrAborted) {
		cut := s.drain.cut(ErrAborted, "a second signal stopped it before its shutdown grace ended")
		logger.Warn("drain aborted by a second signal: cancelled the calls still running", "agent", s.def.Name, "calls_in_flight", left, "cancelled", cut)
		return fmt.Errorf("agent %s: %w (%d calls cancelled)", s.def.Name, ErrAborted, cut)
	}
	cut := s.drain.cut(ErrGraceEnded, fmt.Sprintf("its shutdown grace (%v) ended", grace))
	logger.Warn("shutdown grace ended: cancelled the calls still running", "agent", s.def.Name, "calls_in_flight", left, "cancelled", cut, "grace", grace)
	actx, cancelAnswers := context.WithTimeout(context.WithoutCancel(ctx), cutAnswerTimeout)
	defer cancelAnswers()
	if err := s.drain.wait(actx, abort); err != nil {
		logger.Warn("calls still unanswered after they were cancelled; closing their connections", "agent", s.def.Name, "calls_in_flight", s.CallsInFlight(), "err", err)
		if errors.Is(err, ErrAborted) {
			return fmt.Errorf("agent %s: %w", s.def.Name, ErrAborted)
		}
		return nil
	}
	logger.Info("drained: the cancelled calls were answered", "agent", s.def.Name, "cancelled", cut, "took", time.Since(began).Round(time.Millisecond))
	return nil
}

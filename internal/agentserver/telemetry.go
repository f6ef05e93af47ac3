package agentserver

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/telemetry"
	"github.com/switchboard-run/switchboard/pool"
)

// Telemetry of one agent server.
//
// Traces: every tools/call is a server span ("tools/call TOOL"), a child of
// the caller's span when the request's _meta carries a W3C traceparent (MCP
// SEP-414; the pool puts it there). Everything the call causes (the ask
// tool's model calls and delegations, the pool's dials) nests under it.
//
// Metrics: the agent's own registry, served at /metrics of `agent serve`:
// its pool's stats (the pool that carries its delegations) and its
// delegations by sibling, tool and outcome, every family labelled
// process=<agent>. The studio scrapes it and serves it under its own
// /metrics: delegations happen in the agent's process, where the studio's
// proxy sees only HTTP.

// MetricAsks and MetricAskDuration count the ask tool's turns;
// MetricSessions is the MCP sessions the agent has open (what a client that
// never DELETEs, or a proxy that forgets, leaves behind).
const (
	MetricAsks        = "switchboard_asks_total"
	MetricAskDuration = "switchboard_ask_duration_seconds"
	MetricSessions    = "switchboard_agent_sessions"
)

// registerSessions adds the open-sessions gauge, read from count at scrape
// time.
func (m *serverMetrics) registerSessions(agent string, count func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: MetricSessions, Help: "MCP sessions the agent has open.",
		ConstLabels: prometheus.Labels{telemetry.LabelProcess: agent},
	}, func() float64 { return float64(count()) }))
}

// serverMetrics is an agent server's registry and the instruments on it.
type serverMetrics struct {
	reg         *prometheus.Registry
	delegations *telemetry.DelegationMetrics
	asks        *prometheus.CounterVec
	askDuration prometheus.Histogram
}

func newServerMetrics(agent string, poolStats func() pool.Stats) *serverMetrics {
	reg := prometheus.NewRegistry()
	labels := prometheus.Labels{telemetry.LabelProcess: agent}
	wrapped := prometheus.WrapRegistererWith(labels, reg)
	wrapped.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(telemetry.NewPoolCollector(agent, poolStats))
	m := &serverMetrics{
		reg:         reg,
		delegations: telemetry.NewDelegationMetrics(reg, agent),
		asks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricAsks, Help: "Tasks given to the agent's ask tool, by outcome (ok, error).", ConstLabels: labels,
		}, []string{"outcome"}),
		askDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: MetricAskDuration, Help: "Time the ask tool took for a task: the agent's whole model turn.", ConstLabels: labels, Buckets: telemetry.DurationBuckets,
		}),
	}
	reg.MustRegister(m.asks, m.askDuration)
	return m
}

func (m *serverMetrics) observeAsk(d time.Duration, failed bool) {
	outcome := "ok"
	if failed {
		outcome = "error"
	}
	m.asks.WithLabelValues(outcome).Inc()
	m.askDuration.Observe(d.Seconds())
}

// MetricsHandler serves the agent's metrics in the Prometheus exposition
// formats; `agent serve` mounts it at /metrics.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// traceMiddleware starts the server span of each tools/call under the
// caller's trace context from _meta. It is installed outside the chain
// middleware, so that a refused call is a span too.
func traceMiddleware(agent string) mcp.Middleware {
	tracer := telemetry.Tracer(nil)
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			params := req.GetParams()
			if params != nil {
				ctx = telemetry.ExtractMeta(ctx, params.GetMeta())
			}
			tool := toolName(params)
			ctx, span := tracer.Start(ctx, "tools/call "+tool, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
				attribute.String("mcp.method.name", method),
				attribute.String("gen_ai.tool.name", tool),
				attribute.String("switchboard.agent", agent),
			))
			defer span.End()
			res, err := next(ctx, method, req)
			switch {
			case err != nil:
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			default:
				if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
					span.SetStatus(codes.Error, "the tool reported an error")
				}
			}
			return res, err
		}
	}
}

// withRun puts the delegation chain's run id on every line logged with ctx
// (a line a delegation causes names its run) and on the call's span.
func withRun(ctx context.Context, runID string) context.Context {
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("switchboard.run_id", runID))
	return logging.WithAttrs(ctx, "run", runID)
}

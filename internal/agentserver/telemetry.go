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
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/telemetry"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime"
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
//
// Its model requests too (modelMetrics): every attempt of every step of its
// turns, by model and outcome, with their latency, the tokens the endpoint
// reported and what they cost, as the OpenTelemetry GenAI client metrics
// mean them (gen_ai.client.operation.duration, gen_ai.client.token.usage)
// but as Prometheus counters, which is what a bill is summed from. The
// model label is bounded by configuration, not by input: an agent runs the
// one model its agent.json, --model or $OPENAI_MODEL names (a restart can
// change it), so each agent's families have a handful of series.

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
	model       *modelMetrics
}

// modelMetrics counts an agent's model requests (runtime.ModelRequest).
type modelMetrics struct {
	requests *prometheus.CounterVec   // model, outcome
	duration *prometheus.HistogramVec // model
	tokens   *prometheus.CounterVec   // model, kind
	cost     *prometheus.CounterVec   // model
}

// modelDurationBuckets are the explicit bucket boundaries the GenAI
// conventions give gen_ai.client.operation.duration: a completion takes
// from tens of milliseconds (a cached local model) to minutes (a reasoning
// model), past which +Inf holds it.
var modelDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}

func newModelMetrics(reg prometheus.Registerer, labels prometheus.Labels) *modelMetrics {
	m := &modelMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: studioapi.MetricModelRequests, ConstLabels: labels,
			Help: "Chat requests to the agent's model, each attempt counted, by model and outcome (ok, retried, failed, canceled).",
		}, []string{"model", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: studioapi.MetricModelRequestDuration, ConstLabels: labels, Buckets: modelDurationBuckets,
			Help: "Time of each chat request attempt, from sending it to its answer or failure, by model.",
		}, []string{"model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: studioapi.MetricModelTokens, ConstLabels: labels,
			Help: "Tokens the model endpoint reported, by model and kind: prompt, completion, and the parts of them it itemized, cached (of prompt) and reasoning (of completion).",
		}, []string{"model", "kind"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: studioapi.MetricModelCost, ConstLabels: labels,
			Help: "What the model's tokens cost in US dollars by the agent's price table, by model; absent for a model without a price.",
		}, []string{"model"}),
	}
	reg.MustRegister(m.requests, m.duration, m.tokens, m.cost)
	return m
}

// observe records one model request attempt. It is the runtime's
// Options.OnModelRequest, called on the turn's goroutine.
func (m *modelMetrics) observe(mr runtime.ModelRequest) {
	m.requests.WithLabelValues(mr.Model, mr.Outcome).Inc()
	m.duration.WithLabelValues(mr.Model).Observe(mr.Duration.Seconds())
	if mr.Outcome != runtime.OutcomeOK {
		return // only an answer reports usage
	}
	u := mr.Usage
	m.tokens.WithLabelValues(mr.Model, studioapi.TokenKindPrompt).Add(float64(u.PromptTokens))
	m.tokens.WithLabelValues(mr.Model, studioapi.TokenKindCompletion).Add(float64(u.CompletionTokens))
	m.tokens.WithLabelValues(mr.Model, studioapi.TokenKindCached).Add(float64(u.CachedTokens))
	m.tokens.WithLabelValues(mr.Model, studioapi.TokenKindReasoning).Add(float64(u.ReasoningTokens))
	if u.CostUSD > 0 {
		// Only a priced request makes the series: a cost of zero would
		// read as free, when it is unknown.
		m.cost.WithLabelValues(mr.Model).Add(u.CostUSD)
	}
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
	m.model = newModelMetrics(reg, labels)
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

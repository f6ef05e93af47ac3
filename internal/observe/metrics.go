package observe

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/telemetry"
)

// Metrics are the counters and histograms of what the proxy sees: every
// request to an agent passes through it, and so does every delegation,
// since agents reach their siblings through the studio. Calls by agent and
// JSON-RPC method, their latency, errors by kind, tool calls by outcome.
type Metrics struct {
	tools        *Tools
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	errors       *prometheus.CounterVec
	toolCalls    *prometheus.CounterVec
	toolDuration *prometheus.HistogramVec
}

// NewMetrics registers the proxy's instruments on reg (never the global
// registry: tests run several studios in a process); tools names the tool
// label.
func NewMetrics(reg prometheus.Registerer, tools *Tools) *Metrics {
	m := &Metrics{
		tools: tools,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: studioapi.MetricRequests,
			Help: "Requests proxied to an agent, by agent and JSON-RPC method (GET and DELETE for the stream and session end, response for a client's answer to a server request).",
		}, []string{"agent", "method"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    studioapi.MetricRequestDuration,
			Help:    "Time from a POST reaching the proxy to the end of its response (the SSE stream of a tools/call included).",
			Buckets: telemetry.DurationBuckets,
		}, []string{"agent", "method"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: studioapi.MetricRequestErrors,
			Help: "Proxied requests that failed, by agent, method and kind: session_not_found, agent_unavailable, upstream_error, http_<status>, rpc_error, tool_error, canceled.",
		}, []string{"agent", "method", "kind"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: studioapi.MetricToolCalls,
			Help: "tools/call requests proxied to an agent, by agent, tool and outcome (ok or an error kind).",
		}, []string{"agent", "tool", "outcome"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    studioapi.MetricToolDuration,
			Help:    "Time of a tools/call through the proxy, by agent and tool.",
			Buckets: telemetry.DurationBuckets,
		}, []string{"agent", "tool"}),
	}
	reg.MustRegister(m.requests, m.duration, m.errors, m.toolCalls, m.toolDuration)
	return m
}

// observe records one proxied request in the metrics, with labels from
// bounded sets only (labels.go): the agent is a known one (the route
// refuses others), the method one of MCP's, the tool one the agent lists,
// the kind one of observe.go's.
func (m *Metrics) observe(ctx context.Context, o *observation) {
	method := methodLabel(o.method)
	m.requests.WithLabelValues(o.agent, method).Inc()
	if o.timed {
		m.duration.WithLabelValues(o.agent, method).Observe(o.duration.Seconds())
	}
	if o.kind != "" {
		m.errors.WithLabelValues(o.agent, method, o.kind).Inc()
	}
	if o.method == "tools/call" {
		tool := m.tools.Label(ctx, o.agent, o.tool)
		m.toolCalls.WithLabelValues(o.agent, tool, o.outcome()).Inc()
		m.toolDuration.WithLabelValues(o.agent, tool).Observe(o.duration.Seconds())
	}
}

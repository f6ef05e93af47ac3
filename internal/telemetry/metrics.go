package telemetry

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/pool"
)

// Metric names shared by the studio and the agent servers. Each of these
// families carries a "process" label (the studio, or the agent's name): the
// studio serves its own metrics and each running agent's under one
// /metrics, and a family gathered from several processes must have the same
// label names in each.
const (
	LabelProcess = "process"

	MetricPoolSessionsOpen      = "switchboard_pool_sessions_open"
	MetricPoolSessionsInUse     = "switchboard_pool_sessions_in_use"
	MetricPoolSessionsIdle      = "switchboard_pool_sessions_idle"
	MetricPoolSessionsProtocol  = "switchboard_pool_sessions_by_protocol"
	MetricPoolDials             = "switchboard_pool_dials_total"
	MetricPoolDialFailures      = "switchboard_pool_dial_failures_total"
	MetricPoolReinitializations = "switchboard_pool_reinitializations_total"
	MetricPoolRetries           = "switchboard_pool_retries_total"
	MetricPoolWaits             = "switchboard_pool_waits_total"
	MetricPoolIdempotency       = "switchboard_pool_idempotency_total"
	MetricPoolInvalidations     = "switchboard_pool_invalidations_total"
	MetricPoolCloses            = "switchboard_pool_closes_total"

	MetricDelegations        = "switchboard_delegations_total"
	MetricDelegationDuration = "switchboard_delegation_duration_seconds"
	MetricDelegationRetries  = "switchboard_delegation_retries_total"
)

// DurationBuckets are the histogram buckets of every switchboard latency,
// in seconds: a tool call on loopback takes milliseconds, a delegation that
// asks another agent's model can take minutes.
var DurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// PoolCollector exposes a pool's Stats as Prometheus metrics. It reads Stats
// at scrape time rather than counting alongside the pool, so the numbers are
// the pool's own and cannot drift from them.
type PoolCollector struct {
	stats func() pool.Stats

	open, inUse, idle, byProtocol                *prometheus.Desc
	dials, dialFailures, reinits, retries, waits *prometheus.Desc
	invalidations, closes                        *prometheus.Desc
	idempotency                                  *prometheus.Desc
}

// NewPoolCollector returns a collector of stats(), labelled process.
// stats may return the zero Stats while the pool does not exist yet.
func NewPoolCollector(process string, stats func() pool.Stats) *PoolCollector {
	l := prometheus.Labels{LabelProcess: process}
	d := func(name, help string, vars ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, vars, l)
	}
	return &PoolCollector{
		stats:         stats,
		open:          d(MetricPoolSessionsOpen, "MCP sessions open in the pool: live plus draining."),
		inUse:         d(MetricPoolSessionsInUse, "MCP sessions with requests in flight."),
		idle:          d(MetricPoolSessionsIdle, "Live MCP sessions without requests in flight."),
		byProtocol:    d(MetricPoolSessionsProtocol, "Live MCP sessions by the protocol version each negotiated: 2025-11-25 has sessions, 2026-07-28 is sessionless.", "protocol"),
		dials:         d(MetricPoolDials, "Session dials (connect and initialize) attempted."),
		dialFailures:  d(MetricPoolDialFailures, "Session dials that failed."),
		reinits:       d(MetricPoolReinitializations, "Sessions established to replace an expired or dead one."),
		retries:       d(MetricPoolRetries, "Requests sent again on a new session after the server provably did not run them."),
		waits:         d(MetricPoolWaits, "Requests that waited for a per-server concurrency slot."),
		invalidations: d(MetricPoolInvalidations, "Sessions dropped as unusable, by reason.", "reason"),
		closes:        d(MetricPoolCloses, "Sessions closed, by reason.", "reason"),
		idempotency: d(MetricPoolIdempotency, "Keyed tools/call to servers that advertise idempotency (docs/IDEMPOTENCY.md), by event: "+
			"keyed_call, keyed_retry (sent again with its key), replay (answered from the server's record), conflict, interrupted, key_expired.", "event"),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.open, c.inUse, c.idle, c.byProtocol, c.dials, c.dialFailures, c.reinits, c.retries, c.waits, c.invalidations, c.closes, c.idempotency} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(c.open, s.Open)
	gauge(c.inUse, s.InUse)
	gauge(c.idle, s.Idle)
	for _, v := range slices.Sorted(maps.Keys(s.Protocols)) {
		ch <- prometheus.MustNewConstMetric(c.byProtocol, prometheus.GaugeValue, float64(s.Protocols[v]), v)
	}
	counter(c.dials, s.Dials)
	counter(c.dialFailures, s.DialFailures)
	counter(c.reinits, s.Reinitializations)
	counter(c.retries, s.Retries)
	counter(c.waits, s.WaitCount)
	for _, r := range slices.Sorted(maps.Keys(s.InvalidationsByReason)) {
		counter(c.invalidations, s.InvalidationsByReason[r], r)
	}
	for _, r := range slices.Sorted(maps.Keys(s.ClosesByReason)) {
		counter(c.closes, s.ClosesByReason[r], r)
	}
	counter(c.idempotency, s.KeyedCalls, "keyed_call")
	counter(c.idempotency, s.KeyedRetries, "keyed_retry")
	counter(c.idempotency, s.Replays, "replay")
	counter(c.idempotency, s.Conflicts, "conflict")
	counter(c.idempotency, s.Interrupted, "interrupted")
	counter(c.idempotency, s.KeysExpired, "key_expired")
}

// DelegationMetrics counts the delegations an agent's turns make, from the
// delegation events the turn loop reports (runtime.Options.OnEvent).
type DelegationMetrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	retries  *prometheus.CounterVec
}

// NewDelegationMetrics registers the delegation metrics of process on reg.
func NewDelegationMetrics(reg prometheus.Registerer, process string) *DelegationMetrics {
	l := prometheus.Labels{LabelProcess: process}
	m := &DelegationMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricDelegations, Help: "Delegations (tools/call to a sibling agent) finished, by sibling, tool and outcome.", ConstLabels: l,
		}, []string{"agent", "tool", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: MetricDelegationDuration, Help: "Time from sending a delegation to its result, including any retry.", ConstLabels: l, Buckets: DurationBuckets,
		}, []string{"agent", "tool"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricDelegationRetries, Help: "Delegations the pool sent again on a re-initialized session, by whether that recovered them.", ConstLabels: l,
		}, []string{"agent", "recovered"}),
	}
	reg.MustRegister(m.calls, m.duration, m.retries)
	return m
}

// Observe records a finished delegation; start events are ignored.
func (m *DelegationMetrics) Observe(ev delegation.Event) {
	if ev.Phase != delegation.PhaseFinish {
		return
	}
	m.calls.WithLabelValues(ev.Agent, ev.Tool, string(ev.Outcome)).Inc()
	m.duration.WithLabelValues(ev.Agent, ev.Tool).Observe(ev.Duration().Seconds())
	if ev.Retried {
		rec := "false"
		if ev.Recovered || ev.Outcome == delegation.OutcomeOK {
			rec = "true"
		}
		m.retries.WithLabelValues(ev.Agent, rec).Inc()
	}
}

package studio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/telemetry"
)

// The studio's /metrics is the whole fleet's, in one scrape:
//
//   - What the studio sees itself. Every request to an agent passes through
//     its proxy, and so does every delegation, since agents reach their
//     siblings through the studio: calls by agent and JSON-RPC method, their
//     latency, errors by kind, tool calls by outcome (observe.go). Then the
//     agents' state and restarts from the supervisor, and the studio's own
//     pool (the one that lists tools for /api/agents).
//   - What only an agent can see: the pool inside the agent process that
//     carries its delegations (re-initializations and retries happen there,
//     invisible to a proxy), its delegations by outcome, its asks. Each agent
//     server serves these at its own /metrics on its loopback listener; the
//     studio scrapes every running agent at the moment it is scraped itself
//     and serves the union. Each agent labels its families process=<agent>,
//     the studio's own pool and runtime metrics carry process="studio", so
//     the union is consistent and one Prometheus job covers the fleet. An
//     agent that could not be scraped shows as
//     switchboard_agent_metrics_up{agent} 0, not as a failed scrape.
//
// Federating at scrape time, rather than having agents push to the studio,
// keeps the agents free of any knowledge of the studio, and keeps the
// numbers the agents' own: the studio holds no copy that could drift.

// processStudio labels the studio's own families that agents also have.
const processStudio = "studio"

// scrapeTimeout bounds the scrape of one agent's /metrics.
const scrapeTimeout = 2 * time.Second

// studioMetrics are the instruments the proxy updates, on the studio's own
// registry (never the global one: tests run several studios in a process).
type studioMetrics struct {
	s            *Studio
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	errors       *prometheus.CounterVec
	toolCalls    *prometheus.CounterVec
	toolDuration *prometheus.HistogramVec
}

func newStudioMetrics(s *Studio) *studioMetrics {
	reg := prometheus.NewRegistry()
	m := &studioMetrics{
		s:   s,
		reg: reg,
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
	reg.MustRegister(&agentCollector{s: s})
	reg.MustRegister(telemetry.NewPoolCollector(processStudio, s.pool.Stats))
	prometheus.WrapRegistererWith(prometheus.Labels{telemetry.LabelProcess: processStudio}, reg).MustRegister(
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// agentCollector reports the supervisor's view of each agent at scrape time.
type agentCollector struct{ s *Studio }

var (
	descAgentUp       = prometheus.NewDesc(studioapi.MetricAgentUp, "1 when the agent is running and the proxy routes to it.", []string{"agent"}, nil)
	descAgentState    = prometheus.NewDesc(studioapi.MetricAgentState, "1 for the agent's current state (starting, running, restarting, failed, stopped), 0 for the others.", []string{"agent", "state"}, nil)
	descAgentRestarts = prometheus.NewDesc(studioapi.MetricAgentRestarts, "Times the agent's process exited and was started again.", []string{"agent"}, nil)
	descProxySessions = prometheus.NewDesc(studioapi.MetricProxySessions, "MCP sessions the proxy has bound to a credential for the agent.", []string{"agent"}, nil)
	allStates         = []studioapi.State{studioapi.StateStarting, studioapi.StateRunning, studioapi.StateRestarting, studioapi.StateGivenUp, studioapi.StateStopped}
)

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descAgentUp
	ch <- descAgentState
	ch <- descAgentRestarts
	ch <- descProxySessions
}

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	for _, name := range c.s.names {
		m := c.s.agents[name]
		st := m.proc.Status()
		up := 0.0
		if st.State == studioapi.StateRunning {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(descAgentUp, prometheus.GaugeValue, up, name)
		for _, state := range allStates {
			v := 0.0
			if state == st.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descAgentState, prometheus.GaugeValue, v, name, string(state))
		}
		ch <- prometheus.MustNewConstMetric(descAgentRestarts, prometheus.CounterValue, float64(st.Restarts), name)
		ch <- prometheus.MustNewConstMetric(descProxySessions, prometheus.GaugeValue, float64(m.proxy.Sessions()), name)
	}
}

// observe records one proxied request in the metrics, with labels from
// bounded sets only (labels.go): the agent is a known one (the route
// refuses others), the method one of MCP's, the tool one the agent lists,
// the kind one of observe.go's.
func (m *studioMetrics) observe(ctx context.Context, o *observation) {
	method := methodLabel(o.method)
	m.requests.WithLabelValues(o.agent, method).Inc()
	if o.timed {
		m.duration.WithLabelValues(o.agent, method).Observe(o.duration.Seconds())
	}
	if o.kind != "" {
		m.errors.WithLabelValues(o.agent, method, o.kind).Inc()
	}
	if o.method == "tools/call" {
		tool := m.s.toolLabel(ctx, o.agent, o.tool)
		m.toolCalls.WithLabelValues(o.agent, tool, o.outcome()).Inc()
		m.toolDuration.WithLabelValues(o.agent, tool).Observe(o.duration.Seconds())
	}
}

// serveMetrics serves the studio's and every running agent's metrics.
func (s *Studio) serveMetrics(w http.ResponseWriter, r *http.Request) {
	g := prometheus.Gatherers{s.metrics.reg, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return s.gatherAgents(r.Context()), nil
	})}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// gatherAgents scrapes every running agent's /metrics concurrently, and adds
// switchboard_agent_metrics_up for each agent.
func (s *Studio) gatherAgents(ctx context.Context) []*dto.MetricFamily {
	scraped := s.scrapeAgents(ctx)
	up := &dto.MetricFamily{
		Name: proto.String(studioapi.MetricAgentMetricsUp),
		Help: proto.String("1 when the studio could read the agent's own /metrics in this scrape."),
		Type: dto.MetricType_GAUGE.Enum(),
	}
	var out []*dto.MetricFamily
	for _, name := range s.names {
		v := 0.0
		if res, ok := scraped[name]; ok && res.err == nil {
			v = 1
			out = append(out, res.families...)
		}
		up.Metric = append(up.Metric, &dto.Metric{
			Label: []*dto.LabelPair{{Name: proto.String("agent"), Value: proto.String(name)}},
			Gauge: &dto.Gauge{Value: proto.Float64(v)},
		})
	}
	return append(out, up)
}

type scrapeResult struct {
	families []*dto.MetricFamily
	err      error
}

// scrapeAgents reads each running agent's /metrics; an agent that is not
// running is absent from the result.
func (s *Studio) scrapeAgents(ctx context.Context) map[string]scrapeResult {
	var (
		mu  sync.Mutex
		out = make(map[string]scrapeResult, len(s.names))
		wg  sync.WaitGroup
	)
	for _, name := range s.names {
		st := s.agents[name].proc.Status()
		if st.State != studioapi.StateRunning || st.Upstream == nil {
			continue
		}
		u := *st.Upstream
		u.Path, u.RawPath, u.RawQuery = "/metrics", "", ""
		wg.Go(func() {
			fams, err := s.scrape(ctx, u.String())
			if err != nil {
				s.logger.Debug("scraping an agent's metrics", "agent", name, "err", err)
			}
			mu.Lock()
			out[name] = scrapeResult{fams, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func (s *Studio) scrape(ctx context.Context, url string) ([]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := s.transport.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	var fams []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err != nil {
			if errors.Is(err, io.EOF) {
				return fams, nil
			}
			return fams, fmt.Errorf("GET %s: decoding: %w", url, err)
		}
		fams = append(fams, mf)
	}
}

// Pools returns the studio's pool and each running agent's, read from the
// agents' /metrics.
func (s *Studio) Pools(ctx context.Context) []studioapi.PoolInfo {
	st := s.pool.Stats()
	out := []studioapi.PoolInfo{{
		Process: processStudio, Open: int64(st.Open), InUse: int64(st.InUse), Idle: int64(st.Idle),
		Dials: st.Dials, Reinitializations: st.Reinitializations, Retries: st.Retries, Invalidations: st.Invalidations,
		Replays: st.Replays, Conflicts: st.Conflicts, Interrupted: st.Interrupted,
	}}
	scraped := s.scrapeAgents(ctx)
	for _, name := range s.names {
		res, ok := scraped[name]
		if !ok || res.err != nil {
			continue
		}
		out = append(out, poolFromFamilies(name, res.families))
	}
	return out
}

// poolFromFamilies reads the pool gauges and counters out of an agent's
// metric families (summing over reasons).
func poolFromFamilies(process string, fams []*dto.MetricFamily) studioapi.PoolInfo {
	p := studioapi.PoolInfo{Process: process}
	fields := map[string]*int64{
		telemetry.MetricPoolSessionsOpen:      &p.Open,
		telemetry.MetricPoolSessionsInUse:     &p.InUse,
		telemetry.MetricPoolSessionsIdle:      &p.Idle,
		telemetry.MetricPoolDials:             &p.Dials,
		telemetry.MetricPoolReinitializations: &p.Reinitializations,
		telemetry.MetricPoolRetries:           &p.Retries,
		telemetry.MetricPoolInvalidations:     &p.Invalidations,
	}
	// The idempotency counter is one family with an event label.
	byEvent := map[string]*int64{"replay": &p.Replays, "conflict": &p.Conflicts, "interrupted": &p.Interrupted}
	for _, mf := range fams {
		if mf.GetName() == telemetry.MetricPoolIdempotency {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if dst, ok := byEvent[l.GetValue()]; ok && l.GetName() == "event" && m.Counter != nil {
						*dst += int64(m.GetCounter().GetValue())
					}
				}
			}
			continue
		}
		dst, ok := fields[mf.GetName()]
		if !ok {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Gauge != nil:
				*dst += int64(m.GetGauge().GetValue())
			case m.Counter != nil:
				*dst += int64(m.GetCounter().GetValue())
			case m.Untyped != nil:
				*dst += int64(m.GetUntyped().GetValue())
			}
		}
	}
	return p
}

// statusLabel renders an HTTP status for an error kind.
func statusLabel(code int) string { return "http_" + strconv.Itoa(code) }

// Package fleetmetrics is the studio's /metrics: the whole fleet's, in one
// scrape:
//
//   - What the studio sees itself. Every request to an agent passes through
//     its proxy, and so does every delegation, since agents reach their
//     siblings through the studio: calls by agent and JSON-RPC method, their
//     latency, errors by kind, tool calls by outcome (package observe). Then the
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
//   - An agent on another host (studioapi.StateRemote) is scraped the same
//     way, at the /metrics beside its MCP endpoint, with its own transport
//     (which carries its bearer token). One that has no /metrics (a 404:
//     not every MCP server is a switchboard agent) is not asked again for
//     noMetricsRecheck; it shows as metrics_up 0 and, on its listing, as
//     having none, never as a failure repeated every scrape.
//
// Federating at scrape time, rather than having agents push to the studio,
// keeps the agents free of any knowledge of the studio, and keeps the
// numbers the agents' own: the studio holds no copy that could drift.
package fleetmetrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/supervisor"
	"github.com/switchboard-run/switchboard/internal/telemetry"
	"github.com/switchboard-run/switchboard/pool"
)

// processStudio labels the studio's own families that agents also have.
const processStudio = "studio"

// scrapeTimeout bounds the scrape of one agent's /metrics.
const scrapeTimeout = 2 * time.Second

// noMetricsRecheck is how long an agent whose /metrics answered 404 is
// not scraped again: it serves none, and asking on every scrape would only
// repeat that.
const noMetricsRecheck = 5 * time.Minute

// ErrNoMetrics is matched (errors.Is) by a scrape of an agent that
// answered 404 for its /metrics: it serves none.
var ErrNoMetrics = errors.New("the agent serves no /metrics")

// Agent is one agent the studio runs or proxies to, as the metrics read it.
type Agent struct {
	Name string
	Proc supervisor.Member
	// Sessions counts the MCP sessions the proxy has bound for it.
	Sessions func() int
	// Transport, optional, reaches this agent's /metrics instead of
	// Options.Transport (a remote agent's carries its token).
	Transport http.RoundTripper
	// Scraped, optional, is told how each scrape of the agent's /metrics
	// went: studioapi.MetricsServed, MetricsNone or MetricsFailed.
	Scraped func(outcome string)
}

// Options configure New.
type Options struct {
	// Agents, sorted by name, fixed.
	Agents []Agent
	// Transport reaches the agents' own /metrics.
	Transport http.RoundTripper
	// PoolStats reads the studio's own pool.
	PoolStats func() pool.Stats
	Logger    *slog.Logger
}

// Fleet serves the fleet's metrics and reads the agents' pools. Its
// registry is the studio's own (never the global one: tests run several
// studios in a process).
type Fleet struct {
	o   Options
	reg *prometheus.Registry

	mu        sync.Mutex           // protects following fields
	noMetrics map[string]time.Time // agents that answered 404 for /metrics, until when they are not asked again
}

// New returns the fleet's metrics, with the agents' state, the studio's
// pool and the studio process's runtime already registered.
func New(opts *Options) *Fleet {
	f := &Fleet{o: *opts, reg: prometheus.NewRegistry(), noMetrics: make(map[string]time.Time)}
	if f.o.Logger == nil {
		f.o.Logger = slog.New(slog.DiscardHandler)
	}
	f.reg.MustRegister(&agentCollector{agents: f.o.Agents})
	f.reg.MustRegister(telemetry.NewPoolCollector(processStudio, f.o.PoolStats))
	prometheus.WrapRegistererWith(prometheus.Labels{telemetry.LabelProcess: processStudio}, f.reg).MustRegister(
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return f
}

// Registerer is where the studio's other instruments (the proxy's) go.
func (f *Fleet) Registerer() prometheus.Registerer { return f.reg }

// agentCollector reports the supervisor's view of each agent at scrape time.
type agentCollector struct{ agents []Agent }

var (
	descAgentUp       = prometheus.NewDesc(studioapi.MetricAgentUp, "1 when the agent is running (on another host: answered its last health check) and the proxy routes to it.", []string{"agent"}, nil)
	descAgentState    = prometheus.NewDesc(studioapi.MetricAgentState, "1 for the agent's current state (starting, running, restarting, given_up, stopped, remote), 0 for the others.", []string{"agent", "state"}, nil)
	descAgentRestarts = prometheus.NewDesc(studioapi.MetricAgentRestarts, "Times the agent's process exited and was started again.", []string{"agent"}, nil)
	descProxySessions = prometheus.NewDesc(studioapi.MetricProxySessions, "MCP sessions the proxy has bound to a credential for the agent.", []string{"agent"}, nil)
	allStates         = []studioapi.State{studioapi.StateStarting, studioapi.StateRunning, studioapi.StateRestarting, studioapi.StateGivenUp, studioapi.StateStopped, studioapi.StateRemote}
)

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descAgentUp
	ch <- descAgentState
	ch <- descAgentRestarts
	ch <- descProxySessions
}

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	for _, a := range c.agents {
		name := a.Name
		st := a.Proc.Status()
		up := 0.0
		if st.Routable() && (st.Remote == nil || st.Remote.Reachable) {
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
		ch <- prometheus.MustNewConstMetric(descProxySessions, prometheus.GaugeValue, float64(a.Sessions()), name)
	}
}

// ServeHTTP serves the studio's and every running agent's metrics.
func (f *Fleet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g := prometheus.Gatherers{f.reg, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return f.gatherAgents(r.Context()), nil
	})}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// gatherAgents scrapes every running agent's /metrics concurrently, and adds
// switchboard_agent_metrics_up for each agent.
func (f *Fleet) gatherAgents(ctx context.Context) []*dto.MetricFamily {
	scraped := f.scrapeAgents(ctx)
	up := &dto.MetricFamily{
		Name: proto.String(studioapi.MetricAgentMetricsUp),
		Help: proto.String("1 when the studio could read the agent's own /metrics in this scrape."),
		Type: dto.MetricType_GAUGE.Enum(),
	}
	var out []*dto.MetricFamily
	for _, a := range f.o.Agents {
		name := a.Name
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

// scrapeAgents reads each routable agent's /metrics; an agent that is not
// routable, or said it has no /metrics less than noMetricsRecheck ago, is
// absent from the result.
func (f *Fleet) scrapeAgents(ctx context.Context) map[string]scrapeResult {
	var (
		mu  sync.Mutex
		out = make(map[string]scrapeResult, len(f.o.Agents))
		wg  sync.WaitGroup
	)
	now := time.Now()
	for _, a := range f.o.Agents {
		name := a.Name
		st := a.Proc.Status()
		if !st.Routable() {
			continue
		}
		f.mu.Lock()
		skip := now.Before(f.noMetrics[name])
		f.mu.Unlock()
		if skip {
			continue
		}
		u := MetricsURL(st.Upstream)
		rt := a.Transport
		if rt == nil {
			rt = f.o.Transport
		}
		wg.Go(func() {
			fams, err := f.scrape(ctx, rt, u.String())
			outcome := studioapi.MetricsServed
			switch {
			case errors.Is(err, ErrNoMetrics):
				outcome = studioapi.MetricsNone
				f.mu.Lock()
				f.noMetrics[name] = time.Now().Add(noMetricsRecheck)
				f.mu.Unlock()
			case err != nil:
				outcome = studioapi.MetricsFailed
			}
			if err != nil {
				f.o.Logger.Debug("scraping an agent's metrics", "agent", name, "err", err)
			}
			if a.Scraped != nil {
				a.Scraped(outcome)
			}
			mu.Lock()
			out[name] = scrapeResult{fams, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// MetricsURL is where the agent whose MCP endpoint is mcp serves its
// metrics: /metrics beside the endpoint (http://h:8080/mcp has
// http://h:8080/metrics; http://gw/agents/packrat/mcp has
// http://gw/agents/packrat/metrics), without mcp's query.
func MetricsURL(mcp *url.URL) *url.URL { return Beside(mcp, "metrics") }

// Beside is the URL of name in the same folder as endpoint's path, without
// its query and fragment.
func Beside(endpoint *url.URL, name string) *url.URL {
	u := *endpoint
	u.User = nil
	u.Path, u.RawPath = path.Join(path.Dir(cleanPath(u.Path)), name), ""
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	return &u
}

func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

func (f *Fleet) scrape(ctx context.Context, rt http.RoundTripper, url string) ([]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("GET %s: %s: %w", url, resp.Status, ErrNoMetrics)
	}
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
func (f *Fleet) Pools(ctx context.Context) []studioapi.PoolInfo {
	st := f.o.PoolStats()
	out := []studioapi.PoolInfo{{
		Process: processStudio, Open: int64(st.Open), InUse: int64(st.InUse), Idle: int64(st.Idle),
		Dials: st.Dials, Reinitializations: st.Reinitializations, Retries: st.Retries, Invalidations: st.Invalidations,
		Replays: st.Replays, Conflicts: st.Conflicts, Interrupted: st.Interrupted,
	}}
	for v, n := range st.Protocols {
		if out[0].Protocols == nil {
			out[0].Protocols = make(map[string]int64)
		}
		out[0].Protocols[v] = int64(n)
	}
	scraped := f.scrapeAgents(ctx)
	for _, a := range f.o.Agents {
		name := a.Name
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
		if mf.GetName() == telemetry.MetricPoolSessionsProtocol {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "protocol" && m.Gauge != nil {
						if p.Protocols == nil {
							p.Protocols = make(map[string]int64)
						}
						p.Protocols[l.GetValue()] += int64(m.GetGauge().GetValue())
					}
				}
			}
			continue
		}
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

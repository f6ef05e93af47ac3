package observe

import (
	"math"
	"sync"
	"time"

	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// The agent page's charts: per agent, one bucket per minute for the last
// hour, of what the proxy saw: tools/calls, their errors, their latency (a
// fixed log-scale histogram, from which percentiles are read), initialize
// requests (new sessions, re-initializations included) and 404s for a
// session the agent no longer knew (what makes a caller re-initialize).
// Memory is fixed: 60 buckets per agent, and the agents are fixed at start.

// SeriesMinutes is how many minutes an agent's charts show.
const SeriesMinutes = 60

// latencyBounds are the histogram's upper bounds in milliseconds; the last
// bucket is everything above.
var latencyBounds = func() []float64 {
	var b []float64
	for v := 1.0; v <= 120000; v *= 1.5 {
		b = append(b, v)
	}
	return b
}()

type minuteBucket struct {
	minute      int64 // unix minute
	calls       int
	errors      int
	initializes int
	expired     int
	latency     []int // len(latencyBounds)+1
}

type agentSeries struct {
	buckets [SeriesMinutes]minuteBucket
}

// Series is every agent's last hour of calls, by minute; make it with
// NewSeries.
type Series struct {
	now func() time.Time

	mu     sync.Mutex // protects agents
	agents map[string]*agentSeries
}

// NewSeries keeps the series of the agents names.
func NewSeries(names []string) *Series {
	l := &Series{now: time.Now, agents: make(map[string]*agentSeries, len(names))}
	for _, n := range names {
		l.agents[n] = &agentSeries{}
	}
	return l
}

func (l *Series) observe(o *observation) {
	minute := o.start.Unix() / 60
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.agents[o.agent]
	if a == nil {
		return
	}
	b := &a.buckets[minute%SeriesMinutes]
	if b.minute > minute {
		return // older than the hour the slot holds now
	}
	if b.minute != minute {
		*b = minuteBucket{minute: minute}
	}
	switch o.method {
	case "initialize":
		b.initializes++
	case "tools/call":
		b.calls++
		if o.kind != "" {
			b.errors++
		}
		if b.latency == nil {
			b.latency = make([]int, len(latencyBounds)+1)
		}
		ms := float64(o.duration) / float64(time.Millisecond)
		i := 0
		for i < len(latencyBounds) && ms > latencyBounds[i] {
			i++
		}
		b.latency[i]++
	}
	if o.kind == "session_not_found" {
		b.expired++
	}
}

// Minutes returns agent's last hour, oldest minute first, every minute
// present (zeros where nothing happened).
func (l *Series) Minutes(agent string) []studioapi.Minute {
	now := l.now().Unix() / 60
	out := make([]studioapi.Minute, 0, SeriesMinutes)
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.agents[agent]
	for m := now - SeriesMinutes + 1; m <= now; m++ {
		p := studioapi.Minute{Time: time.Unix(m*60, 0)}
		if a != nil {
			if b := &a.buckets[m%SeriesMinutes]; b.minute == m {
				p.Calls, p.Errors, p.Initializes, p.Expired = b.calls, b.errors, b.initializes, b.expired
				p.P50MS, p.P95MS, p.P99MS = percentile(b.latency, 0.50), percentile(b.latency, 0.95), percentile(b.latency, 0.99)
			}
		}
		out = append(out, p)
	}
	return out
}

func percentile(h []int, q float64) float64 {
	total := 0
	for _, n := range h {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(total)))
	seen := 0
	for i, n := range h {
		seen += n
		if seen >= rank {
			if i < len(latencyBounds) {
				return latencyBounds[i]
			}
			return latencyBounds[len(latencyBounds)-1] * 1.5 // above the last bound
		}
	}
	return 0
}

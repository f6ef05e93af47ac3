package askcmd

// While a delegation of the task takes a while, ask asks the studio how
// the agent it went to is doing. The studio holds a call for an agent that
// is restarting until the new process listens (at most its RestartWait,
// 10 s by default), and the call cannot say so itself: the answer the
// caller then gets must stay the new process's own (a 404 for the old
// session, which the caller's pool recovers from), so nothing can be
// written on it before. The studio's /api/overview says it instead, and
// ask prints it once per agent and state:
//
//	· packrat is restarting (retry in 1.8s, failure 1 of 8; it exited: signal: killed); the studio holds calls to it until it listens

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// slowAfter is how long a delegation runs before ask asks about its agent;
// also how often it asks again.
const slowAfter = 250 * time.Millisecond

// heldWatcher tracks the delegations in flight, for watch.
type heldWatcher struct {
	mu       sync.Mutex          // guards following fields
	inFlight map[string]inFlight // by call id
	said     map[string]bool     // "agent state" lines printed
}

type inFlight struct {
	agent string
	since time.Time
}

func newHeldWatcher() *heldWatcher {
	return &heldWatcher{inFlight: map[string]inFlight{}, said: map[string]bool{}}
}

// event is told of every delegation event the printer sees.
func (h *heldWatcher) event(ev delegation.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch ev.Phase {
	case delegation.PhaseStart:
		h.inFlight[ev.CallID] = inFlight{agent: ev.Agent, since: time.Now()}
	case delegation.PhaseFinish:
		delete(h.inFlight, ev.CallID)
	}
}

// slow returns the agents of delegations running longer than slowAfter.
func (h *heldWatcher) slow(now time.Time) map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	agents := map[string]bool{}
	for _, f := range h.inFlight {
		if now.Sub(f.since) >= slowAfter {
			agents[f.agent] = true
		}
	}
	return agents
}

// watch polls the studio at base while ctx lasts and reports, through
// note, each slow delegation's agent that is not running.
func (h *heldWatcher) watch(ctx context.Context, base, token string, note func(string)) {
	tick := time.NewTicker(slowAfter)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			agents := h.slow(now)
			if len(agents) == 0 {
				continue
			}
			infos, err := overviewAgents(ctx, base, token)
			if err != nil {
				continue // the call itself will say what is wrong
			}
			for _, a := range infos {
				if !agents[a.Name] || a.State == studioapi.StateRunning {
					continue
				}
				key := a.Name + " " + string(a.State)
				h.mu.Lock()
				said := h.said[key]
				h.said[key] = true
				h.mu.Unlock()
				if !said {
					note(heldLine(a))
				}
			}
		}
	}
}

// heldLine says what the studio is doing with calls to a that is not
// running.
func heldLine(a studioapi.AgentInfo) string {
	why := ""
	if a.LastError != "" {
		why = "; it exited: " + a.LastError
	}
	switch a.State {
	case studioapi.StateRestarting:
		left := ""
		if a.RetryAt != nil {
			left = fmt.Sprintf("retry in %v, ", max(time.Until(*a.RetryAt), 0).Round(100*time.Millisecond))
		}
		return fmt.Sprintf("%s is restarting (%sfailure %d of %d%s); the studio holds calls to it until it listens", a.Name, left, a.ConsecutiveFailures, studioapi.GiveUpAfter, why)
	case studioapi.StateStarting:
		return fmt.Sprintf("%s is starting; the studio holds calls to it until it listens", a.Name)
	case studioapi.StateGivenUp:
		return fmt.Sprintf("%s was given up after %d failures in a row%s; calls to it fail", a.Name, a.ConsecutiveFailures, why)
	}
	return fmt.Sprintf("%s is %s%s", a.Name, a.State, why)
}

func overviewAgents(ctx context.Context, base, token string) ([]studioapi.AgentInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/overview", nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/overview: %s", resp.Status)
	}
	var ov struct {
		Agents []studioapi.AgentInfo `json:"agents"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&ov); err != nil {
		return nil, err
	}
	return ov.Agents, nil
}

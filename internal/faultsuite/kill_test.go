package faultsuite

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/pool"
)

// agentSIGKILL: store_note calls stream through the studio to packrat, a
// real agent process, which is killed with SIGKILL several times under that
// load. Packrat's archive (SQLite, on disk) is the execution count: each call
// stores one note tagged with its call id, and the notes under each tag are
// counted afterwards.
func agentSIGKILL(t *testing.T, p profile) Row {
	s := startStudio(t, projecttest.New(t, "packrat"), 30*time.Second, nil)
	config := writeConfig(t, map[string]string{"packrat": s.AgentURL("packrat")})
	c := startClient(t, config)
	ty := newTally(t, c, fmt.Sprintf("agent process killed with SIGKILL under load (%d store_note calls, one per %v, up to %d in flight, %d kills)", p.killCalls, p.killPace, p.killConcurrency, p.kills), "switchboard client → studio → agent process")

	store := func(i int) call {
		id := fmt.Sprintf("k%d", i)
		return c.callArgs("packrat", "store_note", id, map[string]any{"text": "fault suite note " + id, "tags": []string{id}})
	}
	running := func(notPID int) studioapi.AgentInfo { return runningAgent(t, s, "packrat", notPID, 30*time.Second) }
	// A steady load: one call every killPace, at most killConcurrency in
	// flight, in segments. The first and the last segment run undisturbed;
	// each one between kills the agent a third of the way in and keeps
	// sending at the same pace while the studio restarts it and after.
	segments := p.kills + 2
	perSegment := p.killCalls / segments
	pace := time.NewTicker(p.killPace)
	defer pace.Stop()
	var window []call
	lastPID, n := 0, 0
	for seg := range segments {
		info := running(lastPID)
		for i := range perSegment {
			<-pace.C
			if len(window) == p.killConcurrency {
				ty.wait(window[0])
				window = window[1:]
			}
			window = append(window, store(n))
			n++
			if seg > 0 && seg <= p.kills && i == perSegment/3 {
				if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				lastPID = info.PID
			}
		}
	}
	ty.wait(window...)
	running(lastPID)

	// Count the notes under each call's tag with a separate client, so that
	// the row's pool stats are the load's alone.
	counts := map[string]int64{}
	cc := startClient(t, config)
	for _, o := range ty.calls {
		a := cc.callArgs("packrat", "list_notes", o.callID, map[string]any{"tag": o.callID, "limit": 100}).wait()
		var res struct {
			StructuredContent struct {
				Count int64 `json:"count"`
			} `json:"structuredContent"`
		}
		if a.lost || a.Error != nil || json.Unmarshal(a.Result, &res) != nil {
			t.Fatalf("counting the notes of %s: %+v", o.callID, a)
		}
		counts[o.callID] = res.StructuredContent.Count
	}
	cc.finish()
	restarts := s.Agents()[0].Restarts
	return ty.finish(func(id string) int64 { return counts[id] }, func(r *Row, st pool.Stats) string {
		c502, c503 := "502 from the studio", "503 from the studio"
		cut := r.cause("outcome_unknown", c502) + r.cause("outcome_unknown", "outcome unknown from the studio")
		sibling := r.cause("outcome_unknown", "another call's 404")
		redial := r.cause("transport", c503) + r.cause("session_expired", c503)
		if other := r.Answered() - r.FirstTime - r.Recovered - cut - r.cause("outcome_unknown", c503) - sibling - redial; other != 0 {
			t.Errorf("%d errors other than the studio's 502 and 503 and calls retired by another call's 404: %v", other, r.Causes)
		}
		did := fmt.Sprintf("the studio restarted packrat after each kill (%d restarts). ", restarts)
		if st.KeyedCalls > 0 {
			// packrat advertises idempotency (docs/IDEMPOTENCY.md).
			did += fmt.Sprintf("Packrat advertises idempotency, so every call carried a key, and the calls cut off at a kill (the studio's 502) were sent again with it (%d keyed resends): %d were answered from the record packrat had committed with the note, the others ran for the first time; %d came back outcome_unknown",
				st.KeyedRetries, st.Replays, cut)
		} else {
			did += fmt.Sprintf("The calls in flight at a kill came back outcome_unknown (%d cut off, the studio's 502), never replayed", cut)
		}
		did += ". The calls sent after a kill were held by the studio (a refused connect proves nothing was sent; a restarting agent is waited for) and forwarded to the new process"
		if n := r.cause("outcome_unknown", c503); n > 0 {
			did += fmt.Sprintf("; %d waited longer than the studio holds a request and got its 503, outcome_unknown: go-sdk drops the 503's JSON-RPC body and the pool does not take a 503 as proof that nothing ran", n)
		}
		if redial > 0 {
			did += fmt.Sprintf("; %d more met the 503 while re-initializing (transport or session_expired: nothing ran)", redial)
		}
		if st.Reinitializations == 0 && r.Recovered == 0 {
			// internal/proxy/continuity.go: the studio meets the new
			// process's 404 and re-establishes the session itself.
			did += ". Once the new process ran, the studio re-established the pool's session on it (session continuity): the pool never saw the restart, no re-initialization, no retry"
		} else {
			did += fmt.Sprintf(". Once the new process ran, the stale session's 404 led to a re-initialization (%d in all) and %d calls were recovered on the new session", st.Reinitializations, r.Recovered)
		}
		if sibling > 0 {
			did += fmt.Sprintf("; %s in flight when another call's 404 ended the session came back outcome_unknown", plural(sibling, "call", "calls"))
		}
		return did + fmt.Sprintf(". The other %d calls worked first time; no note was stored twice", r.FirstTime)
	})
}

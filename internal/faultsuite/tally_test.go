package faultsuite

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/pool"
)

// profile sizes the rows. The CI profile keeps the whole package within
// about a minute on two cores under -race; the full one produces the
// figures in docs/FAULTS.md.
type profile struct {
	name                    string
	restartCalls, restarts  int // calls spread over restarts between calls
	inflightRounds          int // restarts with calls in flight
	inflightBlocked         int // calls held running on the server at each
	inflightLoose           int // more calls sent as the restart happens
	expiryRounds            int // idle expiries, each followed by a batch
	expiryBatch             int
	deleteRounds            int           // DELETE by another party, then a call
	deleteProcesses         int           // client processes the rounds are spread over (each ends with its own DELETE)
	intermediaryRounds      int           // per intermediary variant
	getCalls                int           // per standalone GET variant
	resetCalls              int           // half of them reset mid-response
	hangCalls               int           // per hang variant
	downCalls               int           // while the server is down (and as many after)
	killCalls, kills        int           // store_note calls through the studio, SIGKILLs among them
	killConcurrency         int           // calls in flight at most
	killPace                time.Duration // one call sent per this, as a steady load
	poolCapCalls, poolCap   int           // limits: calls against a per-server cap
	memoryKeys              int           // limits: pooled keys for the heap ceiling
	agentCapCalls, agentCap int           // limits: calls against the agent server's cap
	modelAsks               int           // asks per model endpoint row
	modelOutage             time.Duration // the short 503 outage (the 30 s one is the full profile's alone)
	modelLongStorm          int           // full profile: 429s before the 200 with 10 retries
}

var (
	ciProfile = profile{
		name:         "ci",
		restartCalls: 1000, restarts: 20,
		inflightRounds: 3, inflightBlocked: 3, inflightLoose: 10,
		expiryRounds: 4, expiryBatch: 5,
		deleteRounds: 10, deleteProcesses: 2,
		intermediaryRounds: 10,
		getCalls:           40,
		resetCalls:         10,
		hangCalls:          3,
		downCalls:          20,
		killCalls:          400, kills: 2, killConcurrency: 8, killPace: 2 * time.Millisecond,
		poolCapCalls: 40, poolCap: 4,
		memoryKeys:    1000,
		agentCapCalls: 24, agentCap: 3,
		modelAsks: 1, modelOutage: 3 * time.Second,
	}
	fullProfile = profile{
		name:         "full",
		restartCalls: 1000, restarts: 20,
		inflightRounds: 10, inflightBlocked: 4, inflightLoose: 20,
		expiryRounds: 20, expiryBatch: 5,
		deleteRounds: 50, deleteProcesses: 5,
		intermediaryRounds: 50,
		getCalls:           200,
		resetCalls:         50,
		hangCalls:          10,
		downCalls:          100,
		killCalls:          1600, kills: 6, killConcurrency: 16, killPace: 2 * time.Millisecond,
		poolCapCalls: 400, poolCap: 8,
		memoryKeys:    10000,
		agentCapCalls: 120, agentCap: 4,
		modelAsks: 3, modelOutage: 3 * time.Second, modelLongStorm: 6,
	}
)

func currentProfile() profile {
	if *full {
		return fullProfile
	}
	return ciProfile
}

func profileName() string { return currentProfile().name }

// A tally counts what the calls of one row ended as, through one client
// process.
type tally struct {
	t     *testing.T
	c     *client
	row   Row
	ok    int
	calls []outcome
}

type outcome struct {
	callID string
	a      answer
}

func newTally(t *testing.T, c *client, fault, via string) *tally {
	return &tally{t: t, c: c, row: Row{Fault: fault, Via: via, Errors: map[string]int{}, Causes: map[string]int{}}}
}

// wait waits for each call's answer and counts it.
func (ty *tally) wait(calls ...call) []answer {
	ty.t.Helper()
	out := make([]answer, len(calls))
	for i, cl := range calls {
		a := cl.wait()
		out[i] = a
		ty.row.Attempted++
		ty.calls = append(ty.calls, outcome{cl.callID, a})
		switch {
		case a.lost:
			ty.t.Errorf("call %s: no answer within %v; client stderr:\n%s", cl.callID, answerTimeout, ty.c.stderr)
		case a.Error != nil:
			ty.row.Errors[a.Error.Kind]++
			ty.row.Causes[a.Error.Kind+": "+Cause(a.Error.Message)]++
			if a.Error.Retried {
				ty.row.RetriedErrors++
			}
			if testing.Verbose() {
				ty.t.Logf("call %s: %s: %s", cl.callID, a.Error.Kind, a.Error.Message)
			}
		case a.Result != nil:
			ty.ok++
		default:
			ty.t.Errorf("call %s: an answer with neither result nor error", cl.callID)
		}
	}
	return out
}

// finish reads the pool's stats, ends the client, takes each call's
// execution count from execs, and returns the row with did as its summary.
// It fails the test on a duplicate execution, a lost call or a misreport.
func (ty *tally) finish(execs func(callID string) int64, did func(r *Row, st pool.Stats) string) Row {
	ty.t.Helper()
	st := ty.c.stats()
	ty.row.Lost = ty.c.finish()
	// Every retried request either succeeded (recovered) or ended in an
	// error marked retried.
	ty.row.Recovered = int(st.Retries) - ty.row.RetriedErrors
	ty.row.FirstTime = ty.ok - ty.row.Recovered
	for _, o := range ty.calls {
		n := execs(o.callID)
		ty.row.MaxExecutions = max(ty.row.MaxExecutions, n)
		if n > 1 {
			ty.row.Duplicates++
			ty.t.Errorf("call %s ran %d times", o.callID, n)
		}
		switch {
		case o.a.lost:
		case o.a.Error == nil && n == 0:
			ty.row.Misreported++
			ty.t.Errorf("call %s: a result, but the server never ran it", o.callID)
		case o.a.Error != nil && o.a.Error.Kind == pool.KindTransport.String() && n > 0:
			ty.row.Misreported++
			ty.t.Errorf("call %s: a transport error (nothing ran), but the server ran it %d times: %s", o.callID, n, o.a.Error.Message)
		}
	}
	if ty.row.Lost != 0 {
		ty.t.Errorf("%d calls got neither a result nor an error", ty.row.Lost)
	}
	if ty.row.Recovered < 0 || ty.row.FirstTime < 0 {
		ty.t.Errorf("inconsistent counts: %d ok, %d retries, %d errors after a retry", ty.ok, st.Retries, ty.row.RetriedErrors)
	}
	if did != nil {
		ty.row.Did = did(&ty.row, st)
	}
	ty.t.Logf("%s: attempted %d, first time %d, recovered %d, errors %s, max executions %d; stats %+v",
		ty.row.Fault, ty.row.Attempted, ty.row.FirstTime, ty.row.Recovered, ty.row.ErrorSummary(), ty.row.MaxExecutions, st)
	return ty.row
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// cause is how many errors of kind had cause (see Cause).
func (r *Row) cause(kind, cause string) int { return r.Causes[kind+": "+cause] }

package faultsuite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/pooltest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studio"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/waittest"
	"github.com/switchboard-run/switchboard/pool"
)

// The idempotency rows (docs/IDEMPOTENCY.md): Switchboard on both ends.
// Real agent processes under the real studio, and a pool in this process
// (so each call's CallInfo says whether its answer was a replay). Between
// the pool and the studio sits killProxy, which kills the agent process at
// a chosen instant of a chosen call: once the agent has answered (its
// effect done, its answer not yet delivered), or as the request is written.
// Execution counts come from the agents' own records: packrat's archive
// (one note per call, tagged with the call's id) and the testkit tool's
// log of starts and effects.

// TestIdempotency runs the rows one after another on one studio.
func TestIdempotency(t *testing.T) {
	p := currentProfile()
	rig := newIdemRig(t)
	run := func(name string, f func(*testing.T, *idemRig, profile) Row) {
		t.Run(name, func(t *testing.T) {
			r := f(t, rig, p)
			if r.Duplicates != 0 || r.Lost != 0 || r.Misreported != 0 {
				t.Errorf("row %q: %d duplicate executions, %d lost, %d misreported; all must be 0", r.Fault, r.Duplicates, r.Lost, r.Misreported)
			}
			if n := r.Errors[pool.KindOutcomeUnknown.String()]; n != 0 {
				t.Errorf("row %q: %d outcome_unknown; must be 0 with idempotency on both ends", r.Fault, n)
			}
			record(r)
		})
	}
	run("idem-kill-after-effect", func(t *testing.T, rig *idemRig, p profile) Row { return rig.killInsideSlowTool(t, true) })
	run("idem-kill-before-effect", func(t *testing.T, rig *idemRig, p profile) Row { return rig.killInsideSlowTool(t, false) })
	run("idem-kill-after-commit", idemKillAfterCommit)
	run("idem-kill-at-request", idemKillAtRequest)
	run("idem-reset-mid-response", idemResetMidResponse)
	run("idem-sigkill-under-load", idemSIGKILLUnderLoad)
	run("idem-restart-in-flight", func(t *testing.T, _ *idemRig, p profile) Row { return idemRestartInFlight(t, p) })
	run("idem-reset-mid-response-client", func(t *testing.T, _ *idemRig, p profile) Row { return idemResetMidResponseClient(t, p) })
}

// guardSwap is the idempotency guard of an mcptest server's current
// generation. A restart of the server opens the ledger anew, as the next
// process on the same data directory would: calls the old generation left
// running are interrupted.
type guardSwap struct {
	t    *testing.T
	path string

	mu     sync.Mutex // protects following
	l      *ledger.Ledger
	g      *ledger.Guard
	closed bool
}

func newGuardSwap(t *testing.T) *guardSwap {
	gs := &guardSwap{t: t, path: filepath.Join(t.TempDir(), "ledger.db")}
	gs.reopen()
	return gs
}

func (gs *guardSwap) reopen() {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.closed {
		return
	}
	if gs.l != nil {
		gs.l.Close()
	}
	l, err := ledger.Open(gs.path, nil)
	if err != nil {
		gs.t.Error(err)
		return
	}
	gs.l, gs.g = l, ledger.NewGuard(l, nil)
}

func (gs *guardSwap) close() {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.closed = true
	gs.l.Close()
}

func (gs *guardSwap) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		gs.mu.Lock()
		g := gs.g
		gs.mu.Unlock()
		return g.Middleware(next)(ctx, method, req)
	}
}

// guardedServer starts an mcptest server behind a guardSwap.
func guardedServer(t *testing.T) *mcptest.Server {
	gs := newGuardSwap(t)
	ts := mcptest.Start(t, &mcptest.Options{Middleware: gs.middleware})
	ts.OnStop(gs.reopen)
	t.Cleanup(gs.close) // before the server's own cleanup: no reopen after it
	return ts
}

const viaGuarded = "switchboard client → server with the idempotency guard"

// idemRestartInFlight is restart-in-flight with the guard: calls running
// on the server and calls arriving while it restarts.
func idemRestartInFlight(t *testing.T, p profile) Row {
	ts := guardedServer(t)
	c := startClient(t, writeConfig(t, map[string]string{"s": ts.URL()}))
	ty := newTally(t, c, fmt.Sprintf("agent restarted with calls in flight (%d restarts, %d calls running and %d arriving at each)", p.inflightRounds, p.inflightBlocked, p.inflightLoose), viaGuarded)
	interrupted, cutOff := 0, 0
	for r := range p.inflightRounds {
		var blocked, loose []call
		for i := range p.inflightBlocked {
			blocked = append(blocked, c.call("s", "block", fmt.Sprintf("r%d-block%d", r, i)))
		}
		for _, cl := range blocked {
			ts.WaitEntered(cl.callID)
		}
		for i := range p.inflightLoose {
			loose = append(loose, c.call("s", "echo", fmt.Sprintf("r%d-echo%d", r, i)))
		}
		ts.Restart()
		for _, a := range ty.wait(blocked...) {
			switch {
			case a.Error != nil && a.Error.Code == idempotency.CodeInterrupted:
				interrupted++
			case a.Error == nil:
				cutOff++ // the tool finished (cut off by the restart) before its result was recorded
			default:
				t.Errorf("a call running when the server restarted: %+v, want interrupted or its recorded result", a.Error)
			}
		}
		ty.wait(loose...)
	}
	return ty.finish(ts.Executions, func(r *Row, st pool.Stats) string {
		if n := r.Errors[pool.KindOutcomeUnknown.String()]; n != 0 {
			t.Errorf("%d outcome_unknown with the guard on the server", n)
		}
		return fmt.Sprintf("the calls running when the server went away were sent again with their keys once it was back: %d were interrupted (-32073, rpc: the server restarted while their tool ran; not run again), %d got the result their tool recorded as it was cut off (a tool error, replayed); the calls arriving during the restart were sent again with their keys until the server answered; no outcome_unknown", interrupted, cutOff)
	})
}

// idemResetMidResponseClient is reset-mid-response with the guard.
func idemResetMidResponseClient(t *testing.T, p profile) Row {
	ts := guardedServer(t)
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.Method != "tools/call" || !strings.HasSuffix(rpc.CallID, "-reset") || ts.Executions(rpc.CallID) > 0 {
			return false
		}
		ts.ResetMidResponse(w, r)
		return true
	})
	c := startClient(t, writeConfig(t, map[string]string{"s": ts.URL()}))
	ty := newTally(t, c, fmt.Sprintf("connection reset in the middle of the response (%d of %d calls)", p.resetCalls/2, p.resetCalls), viaGuarded)
	for i := range p.resetCalls {
		id := fmt.Sprintf("c%d", i)
		if i%2 == 1 {
			id += "-reset"
		}
		if a := ty.wait(c.call("s", "echo", id))[0]; a.Error != nil {
			t.Errorf("call %s: %+v, want its result", id, a.Error)
		}
	}
	return ty.finish(ts.Executions, func(r *Row, st pool.Stats) string {
		return fmt.Sprintf("each call whose answer was cut off was sent again with its key (%d keyed resends) and answered from the server's record, marked as a replay (%d): every call got its result, and ran once", st.KeyedRetries, st.Replays)
	})
}

type idemRig struct {
	t     *testing.T
	s     *studio.Studio
	dir   string
	proxy *killProxy
	url   string // the proxy's base URL
}

const slowAgent = "slowpoke"

func newIdemRig(t *testing.T) *idemRig {
	dir := projecttest.New(t, "packrat")
	agentDir := filepath.Join(dir, "agents", slowAgent)
	if err := os.MkdirAll(filepath.Join(agentDir, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	def := `{"name": "` + slowAgent + `", "description": "test agent with a slow tool", "tools": ["testkit"]}`
	if err := os.WriteFile(filepath.Join(agentDir, "agent.json"), []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agentDir, "tools", "mcp.json"), []byte(`{"mcpServers": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startStudio(t, dir, 60*time.Second, func(o *studio.Options) {
		// The rows kill the agents many times in a row, each time on
		// purpose: a run of any length is a healthy one, so the studio
		// never gives them up.
		o.HealthyAfter = time.Millisecond
	})
	u, err := url.Parse(s.AgentURL("packrat"))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = ""
	kp := newKillProxy(t, u, s)
	ts := httptest.NewServer(kp)
	t.Cleanup(func() {
		ts.Close()
		kp.tr.CloseIdleConnections()
	})
	return &idemRig{t: t, s: s, dir: dir, proxy: kp, url: ts.URL}
}

func (rig *idemRig) server(agent string) *pool.Server {
	return &pool.Server{Name: agent, URL: rig.url + "/api/agents/" + agent + "/mcp", ProtocolVersion: pool.Protocol20251125}
}

func (rig *idemRig) newPool(t *testing.T) *pool.Pool {
	return pooltest.New(t, &pool.Options{IdleTimeout: -1})
}

// agent returns the running agent's info, waiting until it runs with a pid
// other than notPID.
func (rig *idemRig) agent(t *testing.T, name string, notPID int) studioapi.AgentInfo {
	return runningAgent(t, rig.s, name, notPID, 60*time.Second)
}

// slowLog counts the testkit log's lines of kind ("start", "effect") for id.
func (rig *idemRig) slowLog(kind, id string) int64 {
	f, err := os.Open(filepath.Join(rig.dir, ".switchboard", "data", slowAgent, "testkit.log"))
	if err != nil {
		return 0
	}
	defer f.Close()
	var n int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() == kind+" "+id {
			n++
		}
	}
	return n
}

// notes counts packrat's notes tagged tag.
func (rig *idemRig) notes(t *testing.T, p *pool.Pool, tag string) int64 {
	return countNotes(t, p, rig.server("packrat"), tag)
}

// countNotes counts the notes tagged tag in the packrat at srv, through p:
// the rows tag each call's note with the call's id, so this is how many
// times the call ran.
func countNotes(t *testing.T, p *pool.Pool, srv *pool.Server, tag string) int64 {
	t.Helper()
	res, err := p.CallTool(ctxTimeout(t, 60*time.Second), srv, &mcp.CallToolParams{
		Name: "list_notes", Arguments: map[string]any{"tag": tag, "limit": 100}})
	if err != nil || res.IsError {
		t.Fatalf("counting the notes of %s: %v %+v", tag, err, res)
	}
	var out struct {
		Count int64 `json:"count"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out.Count
}

// idemTally counts the answers of a row's calls.
type idemTally struct {
	row               Row
	replays, interrup int
}

func newIdemTally(fault, via string) *idemTally {
	return &idemTally{row: Row{Fault: fault, Via: via, Errors: map[string]int{}, Causes: map[string]int{}}}
}

const viaIdem = "pool → kill proxy → studio → agent process (idempotency on both ends)"

// add counts one call's answer and its execution count as the server
// recorded it.
func (ty *idemTally) add(t *testing.T, id string, res *mcp.CallToolResult, info *pool.CallInfo, err error, execs int64) {
	ty.row.Attempted++
	ty.row.MaxExecutions = max(ty.row.MaxExecutions, execs)
	if execs > 1 {
		ty.row.Duplicates++
		t.Errorf("call %s ran %d times", id, execs)
	}
	var pe *pool.Error
	switch {
	case err == nil && res == nil:
		ty.row.Lost++
	case err == nil:
		if execs == 0 {
			ty.row.Misreported++
			t.Errorf("call %s: a result, but the server never ran it", id)
		}
		if info.Replayed {
			ty.replays++
			ty.row.Recovered++
		} else if info.KeyedAttempts > 1 || info.Retried {
			ty.row.Recovered++
		} else {
			ty.row.FirstTime++
		}
	case errors.Is(err, pool.ErrInterrupted):
		ty.interrup++
		ty.row.Errors["interrupted"]++
		ty.row.Causes["interrupted: the agent crashed inside the tool"]++
	case errors.As(err, &pe):
		ty.row.Errors[pe.Kind.String()]++
		ty.row.Causes[pe.Kind.String()+": "+Cause(err.Error())]++
		if pe.Kind == pool.KindTransport && execs > 0 {
			ty.row.Misreported++
			t.Errorf("call %s: a transport error (nothing ran), but the server ran it: %v", id, err)
		}
		t.Logf("call %s: %v", id, err)
	default:
		t.Errorf("call %s: error %v is not a *pool.Error", id, err)
	}
}

func (ty *idemTally) finish(t *testing.T, st pool.Stats, did string) Row {
	ty.row.Did = did
	t.Logf("%s: attempted %d, first time %d, recovered %d (%d replays), errors %s; stats %+v",
		ty.row.Fault, ty.row.Attempted, ty.row.FirstTime, ty.row.Recovered, ty.replays, ty.row.ErrorSummary(), st)
	return ty.row
}

// killInsideSlowTool: slow_effect (testkit, not transactional) runs; the
// agent process is SIGKILLed after the tool's effect and before its answer
// (afterEffect), or after it started and before its effect. The pool sends
// the call again with its key to the restarted agent, whose ledger says the
// call was cut off: interrupted, the tool not run again.
func (rig *idemRig) killInsideSlowTool(t *testing.T, afterEffect bool) Row {
	p := rig.newPool(t)
	srv := rig.server(slowAgent)
	what, args := "before its effect", map[string]any{"before_ms": 60_000}
	if afterEffect {
		what, args = "after its effect, before its answer", map[string]any{"after_ms": 60_000}
	}
	ty := newIdemTally("agent process SIGKILLed inside a slow non-transactional tool, "+what, viaIdem)
	rounds := 3
	for i := range rounds {
		id := fmt.Sprintf("slow-%t-%d", afterEffect, i)
		args["id"] = id
		info0 := rig.agent(t, slowAgent, 0)
		var info pool.CallInfo
		type out struct {
			res *mcp.CallToolResult
			err error
		}
		done := make(chan out, 1)
		go func() {
			res, err := p.CallTool(pool.WithCallInfo(ctxTimeout(t, 60*time.Second), &info), srv, &mcp.CallToolParams{Name: "slow_effect", Arguments: args})
			done <- out{res, err}
		}()
		mark := "start"
		if afterEffect {
			mark = "effect"
		}
		waittest.Until(t, 30*time.Second, "slow_effect's "+mark, func() bool { return rig.slowLog(mark, id) > 0 })
		if err := syscall.Kill(info0.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		o := <-done
		if !errors.Is(o.err, pool.ErrInterrupted) {
			t.Errorf("call %s: got %v %+v, want interrupted", id, o.err, o.res)
		}
		if n := rig.slowLog("start", id); n != 1 {
			t.Errorf("call %s started %d times, want 1", id, n)
		}
		ty.add(t, id, o.res, &info, o.err, rig.slowLog("effect", id))
		rig.agent(t, slowAgent, info0.PID)
	}
	return ty.finish(t, p.Stats(), fmt.Sprintf("the call in flight was cut off by the kill (the studio's 502); the pool sent it again with the same key once the studio had restarted the agent, and the new process's ledger, which had recorded the call as running before the tool started, answered interrupted (-32073) without running the tool again: %d of %d, the honest outcome_unknown, for the one kind of call that earns it", ty.interrup, rounds))
}

// idemKillAfterCommit: store_note commits note and record in one
// transaction and answers; the proxy kills the agent once the answer has
// left it and drops the connection, so the answer is lost. The pool's
// resend gets the recorded result from the new process, marked a replay.
func idemKillAfterCommit(t *testing.T, rig *idemRig, _ profile) Row {
	p := rig.newPool(t)
	ty := newIdemTally("agent process SIGKILLed inside store_note (transactional), after its commit, before its answer arrived", viaIdem)
	rounds := 3
	for i := range rounds {
		id := fmt.Sprintf("commit-%d", i)
		info0 := rig.agent(t, "packrat", 0)
		rig.proxy.plan(id, killAfterResponse)
		var info pool.CallInfo
		res, err := p.CallTool(pool.WithCallInfo(ctxTimeout(t, 60*time.Second), &info), rig.server("packrat"),
			&mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": "note " + id, "tags": []string{id}}})
		rig.agent(t, "packrat", info0.PID)
		if err == nil && !info.Replayed {
			t.Errorf("call %s: a result, not marked as a replay", id)
		}
		ty.add(t, id, res, &info, err, rig.notes(t, p, id))
	}
	return ty.finish(t, p.Stats(), fmt.Sprintf("the answer was lost with the process; the pool sent the call again with the same key, the studio held it until the agent was back, and the new process found the call's record, committed with the note, and returned the recorded result marked as a replay (%d of %d): one note per call", ty.replays, rounds))
}

// idemKillAtRequest: the agent is killed the moment the store_note request
// has been written to the studio, so the kill lands before, during or after
// the transaction; either way exactly one note, and an answer.
func idemKillAtRequest(t *testing.T, rig *idemRig, _ profile) Row {
	p := rig.newPool(t)
	ty := newIdemTally("agent process SIGKILLed as a store_note request (transactional) arrives", viaIdem)
	rounds := 4
	for i := range rounds {
		id := fmt.Sprintf("atreq-%d", i)
		info0 := rig.agent(t, "packrat", 0)
		rig.proxy.plan(id, killAtRequest)
		var info pool.CallInfo
		res, err := p.CallTool(pool.WithCallInfo(ctxTimeout(t, 60*time.Second), &info), rig.server("packrat"),
			&mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": "note " + id, "tags": []string{id}}})
		rig.agent(t, "packrat", info0.PID)
		ty.add(t, id, res, &info, err, rig.notes(t, p, id))
	}
	return ty.finish(t, p.Stats(), fmt.Sprintf("wherever the kill landed, the transaction either committed note and record together (the resend was a replay: %d) or neither (the resend ran it for the first time): exactly one note per call, no interrupted", ty.replays))
}

// idemResetMidResponse: the connection is reset after the agent answered,
// half of the calls, to packrat's store_note and testkit's slow_effect
// (recorded in the ledger, not transactional).
func idemResetMidResponse(t *testing.T, rig *idemRig, p profile) Row {
	pl := rig.newPool(t)
	ty := newIdemTally("connection reset after the answer left the agent (no crash)", viaIdem)
	for i := range p.resetCalls {
		id := fmt.Sprintf("reset-%d", i)
		if i%2 == 0 {
			rig.proxy.plan(id, resetAfterResponse)
		}
		var info pool.CallInfo
		ctx := pool.WithCallInfo(ctxTimeout(t, 60*time.Second), &info)
		if i%4 < 2 {
			res, err := pl.CallTool(ctx, rig.server("packrat"),
				&mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": "note " + id, "tags": []string{id}}})
			ty.add(t, id, res, &info, err, rig.notes(t, pl, id))
		} else {
			res, err := pl.CallTool(ctx, rig.server(slowAgent), &mcp.CallToolParams{Name: "slow_effect", Arguments: map[string]any{"id": id}})
			ty.add(t, id, res, &info, err, rig.slowLog("effect", id))
		}
	}
	return ty.finish(t, pl.Stats(), fmt.Sprintf("every reset call was sent again with its key and answered from the agent's record (%d replays); the tools ran once", ty.replays))
}

// idemSIGKILLUnderLoad: the agent-sigkill row with idempotency on both
// ends: keyed store_note calls at a steady pace, up to killConcurrency in
// flight, packrat killed several times.
func idemSIGKILLUnderLoad(t *testing.T, rig *idemRig, p profile) Row {
	pl := rig.newPool(t)
	calls := p.killCalls / 2
	ty := newIdemTally(fmt.Sprintf("agent process killed with SIGKILL under load (%d store_note calls, up to %d in flight, %d kills)", calls, p.killConcurrency, p.kills), viaIdem)
	lastPID := 0
	results := storeNotesUnderFaults(t, pl, rig.server("packrat"), "load", calls, p.killConcurrency, p.kills, func() {
		info := rig.agent(t, "packrat", lastPID)
		if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		lastPID = info.PID
	})
	rig.agent(t, "packrat", lastPID)
	for _, r := range results {
		ty.add(t, r.id, r.res, r.info, r.err, rig.notes(t, pl, r.id))
	}
	st := pl.Stats()
	return ty.finish(t, st, fmt.Sprintf("the calls cut off by each kill were sent again with their keys (%d keyed resends) once the studio had restarted packrat; %s of a note already committed, the others ran for the first time; no outcome_unknown, one note per call", st.KeyedRetries, plural(ty.replays, "came back as a replay", "came back as replays")))
}

// A burstCall is one store_note call of storeNotesUnderFaults: its tag,
// what the pool returned, and how it got there.
type burstCall struct {
	id   string
	res  *mcp.CallToolResult
	info *pool.CallInfo
	err  error
}

// storeNotesUnderFaults sends calls store_note calls to srv through pl, at
// most conc in flight, call i tagged prefix-i, and runs fault before the
// calls at faults evenly spaced points of the burst, so that each fault
// lands with calls in flight. It returns when every call has returned.
func storeNotesUnderFaults(t *testing.T, pl *pool.Pool, srv *pool.Server, prefix string, calls, conc, faults int, fault func()) []burstCall {
	faultAt := map[int]bool{}
	for k := 1; k <= faults; k++ {
		faultAt[k*calls/(faults+1)] = true
	}
	results := make([]burstCall, calls)
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i := range calls {
		if faultAt[i] {
			fault()
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			id := fmt.Sprintf("%s-%d", prefix, i)
			info := &pool.CallInfo{}
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			res, err := pl.CallTool(pool.WithCallInfo(ctx, info), srv,
				&mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": "note " + id, "tags": []string{id}}})
			results[i] = burstCall{id, res, info, err}
		})
	}
	wg.Wait()
	return results
}

// killProxy forwards to the studio, and for a planned call (matched by a
// substring of its tools/call body, once) kills the agent or resets the
// connection at the planned instant.
type killProxy struct {
	t      *testing.T
	target *url.URL
	s      *studio.Studio
	rp     *httputil.ReverseProxy
	tr     *http.Transport

	mu    sync.Mutex // protects plans
	plans map[string]killMode
}

type killMode int

const (
	killAfterResponse  killMode = iota + 1 // read the agent's answer, kill the agent, reset the client
	killAtRequest                          // kill the agent once the request is written to the studio
	resetAfterResponse                     // read the agent's answer, reset the client
)

func newKillProxy(t *testing.T, target *url.URL, s *studio.Studio) *killProxy {
	tr := &http.Transport{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = tr
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0) // cut-off streams are the point here
	return &killProxy{t: t, target: target, s: s, rp: rp, tr: tr, plans: map[string]killMode{}}
}

func (kp *killProxy) plan(match string, m killMode) {
	kp.mu.Lock()
	kp.plans[`"`+match+`"`] = m
	kp.mu.Unlock()
}

func (kp *killProxy) take(body []byte) killMode {
	if !bytes.Contains(body, []byte(`"tools/call"`)) {
		return 0
	}
	kp.mu.Lock()
	defer kp.mu.Unlock()
	for m, mode := range kp.plans {
		if bytes.Contains(body, []byte(m)) {
			delete(kp.plans, m)
			return mode
		}
	}
	return 0
}

func (kp *killProxy) killAgentOf(path string) {
	parts := strings.Split(path, "/") // /api/agents/NAME/mcp
	if len(parts) < 4 {
		return
	}
	for _, a := range kp.s.Agents() {
		if a.Name == parts[3] && a.PID != 0 {
			syscall.Kill(a.PID, syscall.SIGKILL)
		}
	}
}

func (kp *killProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		kp.rp.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	mode := kp.take(body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if mode == 0 {
		kp.rp.ServeHTTP(w, r)
		return
	}
	u := *kp.target
	u.Path = r.URL.Path
	ctx := r.Context()
	if mode == killAtRequest {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { kp.killAgentOf(r.URL.Path) }})
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := kp.tr.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if mode == killAtRequest {
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(answer)
		return
	}
	if mode == killAfterResponse {
		kp.killAgentOf(r.URL.Path)
	}
	// The answer was produced and is now lost: reset the connection.
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		kp.t.Errorf("hijack: %v", err)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

package faultsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/proxy"
	"github.com/switchboard-run/switchboard/internal/waittest"
	"github.com/switchboard-run/switchboard/pool"
)

// TestFaults runs one subtest per fault; each records a row of the table.
// The subtests run one after another: they share two cores with -race.
func TestFaults(t *testing.T) {
	p := currentProfile()
	t.Logf("profile %s", p.name)
	run := func(name string, f func(*testing.T, profile) Row) {
		t.Run(name, func(t *testing.T) {
			r := f(t, p)
			if r.Duplicates != 0 || r.Lost != 0 || r.Misreported != 0 {
				t.Errorf("row %q: %d duplicate executions, %d lost, %d misreported; all must be 0", r.Fault, r.Duplicates, r.Lost, r.Misreported)
			}
			if r.Answered()+r.Lost != r.Attempted {
				t.Errorf("row %q: %d answered + %d lost != %d attempted", r.Fault, r.Answered(), r.Lost, r.Attempted)
			}
			record(r)
		})
	}
	run("restart-between-calls", func(t *testing.T, p profile) Row { return restartBetweenCalls(t, p, false) })
	run("restart-between-calls-via-proxy", func(t *testing.T, p profile) Row { return restartBetweenCalls(t, p, true) })
	run("restart-in-flight", restartInFlight)
	run("idle-expiry", idleExpiry)
	run("delete-reconnect", deleteReconnect)
	run("intermediary-400", func(t *testing.T, p profile) Row { return intermediary(t, p, answer400) })
	run("intermediary-404-null-id", func(t *testing.T, p profile) Row { return intermediary(t, p, answer404Null) })
	run("intermediary-404-with-id", func(t *testing.T, p profile) Row { return intermediary(t, p, answer404ID) })
	run("get-404", func(t *testing.T, p profile) Row { return standaloneGET(t, p, http.StatusNotFound) })
	run("get-405", func(t *testing.T, p profile) Row { return standaloneGET(t, p, http.StatusMethodNotAllowed) })
	run("reset-mid-response", resetMidResponse)
	run("tool-never-returns", toolNeverReturns)
	run("server-never-answers", serverNeverAnswers)
	run("server-down", serverDown)
	run("agent-sigkill", agentSIGKILL)
}

const viaClient = "switchboard client → server"

// serverURL returns ts's endpoint, or, with viaProxy, the endpoint of a
// studio proxy (proxy.New, the mcphttp middleware included) in front
// of it.
func serverURL(t *testing.T, ts *mcptest.Server, viaProxy bool) (string, string) {
	t.Helper()
	if !viaProxy {
		return ts.URL(), viaClient
	}
	u, err := url.Parse(ts.URL())
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	ps := httptest.NewServer(proxy.New(u, &proxy.Options{Transport: tr}))
	t.Cleanup(func() {
		ps.Close()
		tr.CloseIdleConnections()
	})
	return ps.URL + "/mcp", "switchboard client → studio proxy → server"
}

// restartBetweenCalls: batches of concurrent calls with a restart of the
// server (every session forgotten, every connection closed) between them.
func restartBetweenCalls(t *testing.T, p profile, viaProxy bool) Row {
	ts := mcptest.Start(t, nil)
	u, via := serverURL(t, ts, viaProxy)
	c := startClient(t, writeConfig(t, map[string]string{"s": u}))
	ty := newTally(t, c, fmt.Sprintf("agent restarted between calls (%d calls, %d restarts)", p.restartCalls, p.restarts), via)
	batches := p.restarts + 1
	n := 0
	for b := range batches {
		if b > 0 {
			ts.Restart()
		}
		size := p.restartCalls / batches
		if b < p.restartCalls%batches {
			size++
		}
		calls := make([]call, size)
		for i := range calls {
			calls[i] = c.call("s", "echo", fmt.Sprintf("b%d-%d", b, n))
			n++
		}
		ty.wait(calls...)
	}
	return ty.finish(ts.Executions, func(r *Row, st pool.Stats) string {
		if n := r.Answered() - r.FirstTime - r.Recovered; n != r.Errors["outcome_unknown"] {
			t.Errorf("errors %v, want outcome_unknown only", r.Errors)
		}
		did := fmt.Sprintf("each restart: the stale session's 404 led to one shared re-initialization (%d for %d restarts), and the %d calls caught on the stale session were sent once more on the new one",
			st.Reinitializations, p.restarts, r.Recovered)
		return did + unknowns(r)
	})
}

// hasOtherErrors reports whether r has errors other than calls that another
// call's 404 retired (see unknowns): a session that dies with calls in
// flight may always do that to them.
func hasOtherErrors(r *Row) bool {
	return r.Answered()-r.FirstTime-r.Recovered != r.cause("outcome_unknown", "another call's 404")
}

// unknowns explains a row's outcome_unknown errors by cause.
func unknowns(r *Row) string {
	explain := []struct{ cause, text string }{
		{stale, "sent on a keep-alive connection the old process had just closed got EOF before any answer"},
		{"502 from the studio", "met the proxy's own keep-alive connection to the old process breaking as the proxy forwarded the request (502)"},
		{"another call's 404", "in flight on the stale session when another call's 404 ended it got that 404 from go-sdk before their own POST was answered"},
	}
	var parts []string
	for _, e := range explain {
		if n := r.cause("outcome_unknown", e.cause); n > 0 {
			parts = append(parts, plural(n, "call", "calls")+" "+e.text)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; outcome_unknown, not replayed, because the pool cannot prove such a request never ran: " + strings.Join(parts, "; ")
}

// stale is the cause of an error on a keep-alive connection the server
// closed as the request was written.
var stale = Cause("EOF")

// restartInFlight: calls are running on the server (held by the block tool)
// and more are on their way when the server restarts.
func restartInFlight(t *testing.T, p profile) Row {
	ts := mcptest.Start(t, nil)
	c := startClient(t, writeConfig(t, map[string]string{"s": ts.URL()}))
	ty := newTally(t, c, fmt.Sprintf("agent restarted with calls in flight (%d restarts, %d calls running and %d arriving at each)", p.inflightRounds, p.inflightBlocked, p.inflightLoose), viaClient)
	blockedErrors, afterOK := 0, 0
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
			if a.Error != nil {
				blockedErrors++
			}
			if a.Error == nil || a.Error.Kind != pool.KindOutcomeUnknown.String() || a.Error.Retried {
				t.Errorf("a call running when the server restarted: %+v, want outcome_unknown, not retried", a.Error)
			}
		}
		ty.wait(loose...)
		if a := ty.wait(c.call("s", "echo", fmt.Sprintf("r%d-after", r)))[0]; a.Error == nil {
			afterOK++
		}
	}
	return ty.finish(ts.Executions, func(r *Row, st pool.Stats) string {
		if n := r.cause("transport", "connection refused") + r.cause("transport", "connection reset at connect"); n != r.Errors["transport"] {
			t.Errorf("transport errors %v: want each refused or reset at connect", r.Causes)
		}
		return fmt.Sprintf("the %d calls running on the server when it went away had run once and came back outcome_unknown, never replayed; of the calls arriving during the restart, %d failed fast at connect, refused or reset (transport: nothing ran), %d came back outcome_unknown (in flight as the server went, or retired by another call's 404), the others succeeded, %d of them after one retry on the new session; the next call worked in %d of %d rounds",
			blockedErrors, r.Errors["transport"], r.Errors["outcome_unknown"]-blockedErrors, r.Recovered, afterOK, p.inflightRounds)
	})
}

// idleExpiry: the server closes sessions idle for a short time; after each
// expiry a batch of calls arrives on the expired session.
func idleExpiry(t *testing.T, p profile) Row {
	const timeout = 100 * time.Millisecond
	ts := mcptest.Start(t, &mcptest.Options{SessionTimeout: timeout})
	c := startClient(t, writeConfig(t, map[string]string{"s": ts.URL()}))
	ty := newTally(t, c, fmt.Sprintf("session expired by the server's idle timeout (%v, %d expiries)", timeout, p.expiryRounds), viaClient)
	ty.wait(c.call("s", "echo", "warm"))
	for r := range p.expiryRounds {
		waittest.Until(t, 10*time.Second, "the server to expire the idle session", func() bool { return ts.Sessions() == 0 })
		calls := make([]call, p.expiryBatch)
		for i := range calls {
			calls[i] = c.call("s", "echo", fmt.Sprintf("x%d-%d", r, i))
		}
		ty.wait(calls...)
	}
	return ty.finish(ts.Executions, func(r *Row, st pool.Stats) string {
		if hasOtherErrors(r) {
			t.Errorf("errors %v, want none but calls retired by another call's 404", r.Causes)
		}
		return fmt.Sprintf("after each expiry the pool met the 404 on the expired session, re-initialized once (%d for %d expiries) and sent the %d calls caught on it once more",
			st.Reinitializations, p.expiryRounds, r.Recovered) + unknowns(r)
	})
}

// deleteReconnect: another party ends the client's session with DELETE
// (as an operator or a gateway does), then the client calls again; every
// few rounds the client process itself ends (pool.Close sends DELETE) and a
// new one reconnects.
func deleteReconnect(t *testing.T, p profile) Row {
	ts := mcptest.Start(t, nil)
	config := writeConfig(t, map[string]string{"s": ts.URL()})
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	raw := &mcphttptest.Client{URL: ts.URL(), HTTP: hc}

	row := Row{Fault: fmt.Sprintf("DELETE, then reconnect, in a loop (%d DELETEs by another party, %d client processes each ending with its own DELETE)", p.deleteRounds, p.deleteProcesses), Via: viaClient, Errors: map[string]int{}, Causes: map[string]int{}}
	var reinits, deletes int64
	perProcess := p.deleteRounds / p.deleteProcesses
	for proc := range p.deleteProcesses {
		c := startClient(t, config)
		ty := newTally(t, c, row.Fault, row.Via)
		ty.wait(c.call("s", "echo", fmt.Sprintf("p%d-first", proc)))
		for r := range perProcess {
			sid := lastSession(ts, "tools/call")
			resp, err := raw.Delete(t.Context(), sid)
			if err != nil || resp.Status/100 != 2 {
				t.Fatalf("DELETE %s: %v %v", sid, resp, err)
			}
			deletes++
			ty.wait(c.call("s", "echo", fmt.Sprintf("p%d-%d", proc, r)))
		}
		r := ty.finish(ts.Executions, func(r *Row, st pool.Stats) string { reinits += st.Reinitializations; return "" })
		row.Attempted += r.Attempted
		row.FirstTime += r.FirstTime
		row.Recovered += r.Recovered
		for k, v := range r.Errors {
			row.Errors[k] += v
		}
		for k, v := range r.Causes {
			row.Causes[k] += v
		}
		row.RetriedErrors += r.RetriedErrors
		row.MaxExecutions = max(row.MaxExecutions, r.MaxExecutions)
		row.Duplicates += r.Duplicates
		row.Lost += r.Lost
		row.Misreported += r.Misreported
	}
	var inits, staleInits, ownDeletes int
	for _, rec := range ts.Recorded() {
		switch {
		case rec.RPC == "initialize":
			inits++
			if rec.SessionID != "" {
				staleInits++
			}
		case rec.Method == http.MethodDelete:
			ownDeletes++
		}
	}
	ownDeletes -= int(deletes)
	if hasOtherErrors(&row) {
		t.Errorf("errors %v, want none but calls retired by another call's 404", row.Causes)
	}
	if staleInits != 0 {
		t.Errorf("%d of %d initialize requests carried an Mcp-Session-Id", staleInits, inits)
	}
	if ownDeletes < p.deleteProcesses {
		t.Errorf("the client processes sent %d DELETEs at exit, want at least %d", ownDeletes, p.deleteProcesses)
	}
	row.Did = fmt.Sprintf("after each DELETE the pool dropped the dead session and re-initialized (%d times); %d of %d initialize requests carried a session id; each client process sent DELETE for its live session at exit (%d in all) and the next one started clean",
		reinits, staleInits, inits, ownDeletes) + unknowns(&row)
	return row
}

// lastSession returns the session id of the last request of rpc method the
// server recorded.
func lastSession(ts *mcptest.Server, method string) string {
	recs := ts.Recorded()
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].RPC == method && recs[i].SessionID != "" {
			return recs[i].SessionID
		}
	}
	return ""
}

// An intermediary variant: how a gateway in front of the server answers a
// request on a session it has terminated.
type intermediaryAnswer struct {
	name   string
	answer func(w http.ResponseWriter, rpc mcptest.RPCInfo)
	retry  bool // the pool is expected to re-initialize and resend
	did    string
}

var (
	answer400 = intermediaryAnswer{
		name: `400 with a JSON-RPC "Session has been terminated" body`,
		answer: func(w http.ResponseWriter, rpc mcptest.RPCInfo) {
			id := rpc.ID
			if len(id) == 0 {
				id = json.RawMessage("null")
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":"Session has been terminated"}}`, id)
		},
		did: "the pool dropped the refused session and returned session_expired without a retry: a 400 does not prove that the request never reached a server, so it is not replayed (decision: kept, see below); the server's count confirms none of them ran; the next call re-initialized and worked",
	}
	answer404Null = intermediaryAnswer{
		name:   "404 with a JSON-RPC body, null id",
		answer: func(w http.ResponseWriter, rpc mcptest.RPCInfo) { mcptest.Answer404WithRPCBody(w, nil) },
		retry:  true,
		did:    "a 404 to a request carrying a session id proves it never ran: the pool re-initialized and sent it once more, whatever the body said",
	}
	answer404ID = intermediaryAnswer{
		name:   "404 with a JSON-RPC body, the request's id",
		answer: func(w http.ResponseWriter, rpc mcptest.RPCInfo) { mcptest.Answer404WithRPCBody(w, rpc.ID) },
		retry:  true,
		did:    "classified from the HTTP status of the call's own POST, not from the body (go-sdk reports this one as a JSON-RPC error and keeps the session): re-initialized and sent once more",
	}
)

// intermediary: a gateway in front of the server terminates the client's
// session; the next call on it is answered by the gateway, never forwarded.
func intermediary(t *testing.T, p profile, v intermediaryAnswer) Row {
	ts := mcptest.Start(t, nil)
	var mu sync.Mutex
	terminated := map[string]bool{}
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		sid := r.Header.Get("Mcp-Session-Id")
		mu.Lock()
		refuse := r.Method == http.MethodPost && terminated[sid]
		mu.Unlock()
		if refuse {
			v.answer(w, rpc)
		}
		return refuse
	})
	c := startClient(t, writeConfig(t, map[string]string{"s": ts.URL()}))
	ty := newTally(t, c, fmt.Sprintf("intermediary answers a terminated session with %s (%d terminations)", v.name, p.intermediaryRounds), viaClient)
	for r := range p.intermediaryRounds {
		ty.wait(c.call("s", "echo", fmt.Sprintf("t%d-before", r)))
		mu.Lock()
		terminated[lastSession(ts, "tools/call")] = true
		mu.Unlock()
		ty.wait(c.call("s", "echo", fmt.Sprintf("t%d-refused", r)))
		ty.wait(c.call("s", "echo", fmt.Sprintf("t%d-after", r)))
	}
	return ty.finish(ts.Executions, func(r *Row, st pool.Stats) string {
		refused := 0
		for _, o := range ty.calls {
			if !v.retry && strings.HasSuffix(o.callID, "-refused") && ts.Executions(o.callID) != 0 {
				t.Errorf("call %s ran, but the intermediary never forwarded it", o.callID)
			}
			if o.a.Error != nil {
				refused++
			}
		}
		if v.retry && (r.Recovered != p.intermediaryRounds || refused != 0) {
			t.Errorf("%d recovered and %d errors, want every refused call recovered", r.Recovered, refused)
		}
		if !v.retry && (r.Errors["session_expired"] != p.intermediaryRounds || r.Recovered != 0 || refused != p.intermediaryRounds) {
			t.Errorf("errors %v, %d recovered; want one session_expired per termination and no retry", r.Errors, r.Recovered)
		}
		return v.did
	})
}

// standaloneGET: the server (or a gateway) answers every standalone GET
// stream with status.
func standaloneGET(t *testing.T, p profile, status int) Row {
	ts := mcptest.Start(t, nil)
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if r.Method != http.MethodGet {
			return false
		}
		http.Error(w, http.StatusText(status), status)
		return true
	})
	c := startClient(t, writeConfig(t, map[string]string{"s": ts.URL()}))
	ty := newTally(t, c, fmt.Sprintf("standalone GET stream answered %d (%d calls)", status, p.getCalls), viaClient)
	const batch = 10
	for i := 0; i < p.getCalls; i += batch {
		var calls []call
		for j := i; j < min(i+batch, p.getCalls); j++ {
			calls = append(calls, c.call("s", "echo", fmt.Sprintf("g%d", j)))
		}
		ty.wait(calls...)
	}
	return ty.finish(ts.Executions, func(r *Row, st pool.Stats) string {
		if len(r.Errors) != 0 || st.Dials != 1 {
			t.Errorf("errors %v, %d dials; want no errors on one session", r.Errors, st.Dials)
		}
		return fmt.Sprintf("go-sdk took the %d to the first standalone GET as \"no stream offered\" and kept the session: every call worked on %s, %d re-initializations",
			status, plural(int(st.Dials), "session", "sessions"), st.Reinitializations)
	})
}

// resetMidResponse: every other call runs on the server, then the
// connection is reset halfway through its answer.
func resetMidResponse(t *testing.T, p profile) Row {
	ts := mcptest.Start(t, nil)
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.Method != "tools/call" || !strings.HasSuffix(rpc.CallID, "-reset") {
			return false
		}
		ts.ResetMidResponse(w, r)
		return true
	})
	c := startClient(t, writeConfig(t, map[string]string{"s": ts.URL()}))
	ty := newTally(t, c, fmt.Sprintf("connection reset in the middle of the response (%d of %d calls)", p.resetCalls/2, p.resetCalls), viaClient)
	resets := 0
	for i := range p.resetCalls {
		id := fmt.Sprintf("c%d", i)
		reset := i%2 == 1
		if reset {
			id += "-reset"
		}
		a := ty.wait(c.call("s", "echo", id))[0]
		if reset {
			if a.Error == nil || a.Error.Kind != pool.KindOutcomeUnknown.String() || a.Error.Retried {
				t.Errorf("call reset mid-response: %+v, want outcome_unknown, not retried", a.Error)
			} else {
				resets++
			}
		}
	}
	return ty.finish(ts.Executions, func(r *Row, st pool.Stats) string {
		return fmt.Sprintf("each call whose answer was cut off had run once and came back outcome_unknown (%d), never replayed; the session survived: the calls between them worked, on %s in all",
			resets, plural(int(st.Dials), "session", "sessions"))
	})
}

// toolNeverReturns: the server accepts the call and its tool never
// finishes; the client's --timeout must hold and the tool must see the
// cancellation.
func toolNeverReturns(t *testing.T, p profile) Row {
	const timeout = 300 * time.Millisecond
	ts := mcptest.Start(t, nil)
	c := startClient(t, writeConfig(t, map[string]string{"s": ts.URL()}), "--timeout", timeout.String())
	ty := newTally(t, c, fmt.Sprintf("tool accepts the call and never returns (client --timeout %v, %d calls)", timeout, p.hangCalls), viaClient)
	var slowest time.Duration
	cancelled := 0
	for i := range p.hangCalls {
		id := fmt.Sprintf("h%d", i)
		start := time.Now()
		a := ty.wait(c.call("s", "block", id))[0]
		slowest = max(slowest, time.Since(start))
		if a.Error == nil || a.Error.Kind != pool.KindOutcomeUnknown.String() || !strings.Contains(a.Error.Message, "deadline") {
			t.Errorf("hung call: %+v, want outcome_unknown with the deadline", a.Error)
		}
		waittest.Until(t, 10*time.Second, "the tool to see the cancellation", func() bool { return ts.WasCancelled(id) })
		cancelled++
		ty.wait(c.call("s", "echo", fmt.Sprintf("h%d-after", i)))
	}
	if slowest > timeout+2*time.Second {
		t.Errorf("the slowest hung call took %v with --timeout %v", slowest, timeout)
	}
	return ty.finish(ts.Executions, func(r *Row, st pool.Stats) string {
		return fmt.Sprintf("the deadline held (slowest answer %v for a %v timeout): outcome_unknown, not replayed; go-sdk sent notifications/cancelled and the tool saw its context cancelled (%d of %d); the session stayed usable for the next call",
			slowest.Round(time.Millisecond), timeout, cancelled, p.hangCalls)
	})
}

// serverNeverAnswers: the HTTP server accepts the POST and never writes a
// byte; the deadline must hold and the server must see the request go away.
func serverNeverAnswers(t *testing.T, p profile) Row {
	const timeout = 300 * time.Millisecond
	ts := mcptest.Start(t, nil)
	var mu sync.Mutex
	gone := map[string]bool{}
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.Method != "tools/call" || !strings.HasSuffix(rpc.CallID, "-hang") {
			return false
		}
		<-r.Context().Done()
		mu.Lock()
		gone[rpc.CallID] = true
		mu.Unlock()
		return true
	})
	c := startClient(t, writeConfig(t, map[string]string{"s": ts.URL()}), "--timeout", timeout.String())
	ty := newTally(t, c, fmt.Sprintf("server accepts the request and never answers (client --timeout %v, %d calls)", timeout, p.hangCalls), viaClient)
	var slowest time.Duration
	for i := range p.hangCalls {
		id := fmt.Sprintf("n%d-hang", i)
		start := time.Now()
		a := ty.wait(c.call("s", "echo", id))[0]
		slowest = max(slowest, time.Since(start))
		if a.Error == nil || a.Error.Kind != pool.KindOutcomeUnknown.String() || a.Error.Retried {
			t.Errorf("unanswered call: %+v, want outcome_unknown, not retried", a.Error)
		}
		waittest.Until(t, 10*time.Second, "the server to see the request cancelled", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return gone[id]
		})
		ty.wait(c.call("s", "echo", fmt.Sprintf("n%d-after", i)))
	}
	if slowest > timeout+2*time.Second {
		t.Errorf("the slowest unanswered call took %v with --timeout %v", slowest, timeout)
	}
	return ty.finish(ts.Executions, func(r *Row, st pool.Stats) string {
		return fmt.Sprintf("the deadline held (slowest answer %v for a %v timeout): outcome_unknown, since the request was sent; the server saw each request's context cancelled when the client gave up (%d of %d); the next call worked",
			slowest.Round(time.Millisecond), timeout, len(gone), p.hangCalls)
	})
}

// serverDown: the server is gone for a while, then back on the same
// address; the same client process keeps calling throughout.
func serverDown(t *testing.T, p profile) Row {
	ts := mcptest.Start(t, nil)
	c := startClient(t, writeConfig(t, map[string]string{"s": ts.URL()}))
	ty := newTally(t, c, fmt.Sprintf("server down for a while (%d calls while down, %d after)", p.downCalls, p.downCalls), viaClient)
	ty.wait(c.call("s", "echo", "before"))
	ts.Stop()
	var slowest time.Duration
	for i := range p.downCalls {
		start := time.Now()
		a := ty.wait(c.call("s", "echo", fmt.Sprintf("down%d", i)))[0]
		slowest = max(slowest, time.Since(start))
		switch {
		case a.Error == nil:
			t.Errorf("call while the server is down succeeded")
		case a.Error.Kind == "transport" && Cause(a.Error.Message) == "connection refused":
		case a.Error.Kind == "outcome_unknown" && Cause(a.Error.Message) == stale:
			// The first call may meet a keep-alive connection the server
			// closed as it went down.
		default:
			t.Errorf("call while the server is down: %s: %s, want transport: connection refused", a.Error.Kind, a.Error.Message)
		}
	}
	ts.Restart()
	for i := range p.downCalls {
		if a := ty.wait(c.call("s", "echo", fmt.Sprintf("up%d", i)))[0]; a.Error != nil {
			t.Errorf("call after the server came back: %s: %s", a.Error.Kind, a.Error.Message)
		}
	}
	if slowest > time.Second {
		t.Errorf("the slowest call while the server was down took %v", slowest)
	}
	return ty.finish(ts.Executions, func(r *Row, st pool.Stats) string {
		did := fmt.Sprintf("while the server was down every call failed fast (slowest %v) with a transport error saying connection refused: nothing ran",
			slowest.Round(time.Millisecond))
		if n := r.cause("outcome_unknown", stale); n > 0 {
			did += fmt.Sprintf(" (%d sent on a keep-alive connection the server closed as it went down: outcome_unknown)", n)
		}
		return did + fmt.Sprintf("; when it came back the same client process re-initialized (%d) and every call worked", st.Reinitializations)
	})
}

// ctxTimeout is a context for a test step.
func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

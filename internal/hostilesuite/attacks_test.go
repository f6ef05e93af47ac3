package hostilesuite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
)

// profileCounts are one profile's attack sizes.
type profileCounts struct {
	name          string
	baseline      int // legitimate calls measured without an attack
	minLegit      int // legitimate calls wanted during one
	rounds        int // windows without and with the attack, alternated
	labelCalls    int // bogus-session tools/calls with distinct names
	labelBytes    int // each name's size
	liveNames     int // distinct unknown tool names on a live session
	chainCalls    int // 1.1 MB chains
	trickleConns  int
	headerConns   int           // connections that trickle their headers, reopened when closed
	headerHold    time.Duration // how long they do
	newcomers     int           // new sessions a legitimate client opens meanwhile
	bigRounds     int           // rounds of 64 concurrent 4 MiB bodies
	sessionFlood  int           // initializes at the agent directly
	studioSession int           // initializes through the studio
	floodWorkers  int           // concurrent initializes of a session flood
	fanOuts       int           // asks with a task that plans thousands of calls
	echoAsks      int           // asks answered by a model that echoes the key
}

func profile() profileCounts {
	if *full {
		return profileCounts{name: "full", baseline: 600, minLegit: 600, rounds: 6, labelCalls: 400, labelBytes: 1 << 20, liveNames: 2000,
			chainCalls: 60, trickleConns: 1000, headerConns: 1100, headerHold: 15 * time.Second, newcomers: 40, bigRounds: 4, sessionFlood: 3000, studioSession: 3000, floodWorkers: 4, fanOuts: 4, echoAsks: 100}
	}
	return profileCounts{name: "short (CI)", baseline: 60, minLegit: 60, rounds: 2, labelCalls: 30, labelBytes: 256 << 10, liveNames: 120,
		chainCalls: 8, trickleConns: 150, headerConns: 1100, headerHold: 4 * time.Second, newcomers: 8, bigRounds: 1, sessionFlood: 300, studioSession: 300, floodWorkers: 2, fanOuts: 1, echoAsks: 12}
}

// outcome tallies what the attacker got back, by status and a short reason.
type outcome struct {
	mu  sync.Mutex
	by  map[string]int
	out bytes.Buffer // a bounded sample of what came back, for the secrets grep
}

func (o *outcome) add(what string, body []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.by == nil {
		o.by = make(map[string]int)
	}
	o.by[what]++
	if o.out.Len() < 4<<20 {
		o.out.Write(body[:min(len(body), 4096)])
	}
}

func (o *outcome) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(o.by)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, o.by[k]))
	}
	return strings.Join(parts, "; ")
}

// post sends one raw POST and tallies its answer as "<status> <message>".
func post(ctx context.Context, hc *http.Client, u, sid string, body []byte, o *outcome) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		o.add("error "+err.Error(), nil)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	res, err := hc.Do(req)
	if err != nil {
		o.add("connection error", nil)
		return
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	o.add(fmt.Sprintf("%d %s", res.StatusCode, summary(data)), data)
}

// summary is the gist of an answer: its JSON-RPC error message, or whether
// a result was a tool error.
func summary(data []byte) string {
	var m struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	line := data
	if i := bytes.Index(data, []byte("data: ")); i >= 0 {
		line = data[i+6:]
		if j := bytes.IndexByte(line, '\n'); j >= 0 {
			line = line[:j]
		}
	}
	if json.Unmarshal(line, &m) != nil {
		return ""
	}
	gist := func(s string) string {
		if rest, ok := strings.CutPrefix(s, "server overloaded: "); ok {
			// Which budget: the reason up to its figures.
			if i := strings.IndexAny(rest, "(;"); i > 0 {
				rest = rest[:i]
			}
			return "server overloaded: " + strings.TrimSpace(rest)
		}
		// The reason, not the client's own strings echoed back.
		for _, cut := range []string{": ", " \""} {
			if i := strings.Index(s, cut); i > 0 && i < 80 {
				s = s[:i]
			}
		}
		if len(s) > 80 {
			s = s[:80] + "…"
		}
		return s
	}
	switch {
	case m.Error != nil:
		return "\"" + gist(m.Error.Message) + "\""
	case m.Result != nil && m.Result.IsError:
		text := ""
		if len(m.Result.Content) > 0 {
			text = m.Result.Content[0].Text
		}
		if i := strings.Index(text, "refused the call"); i >= 0 {
			text = "refused: " + strings.TrimSpace(text[strings.LastIndex(text, ":")+1:])
		}
		note := ""
		if strings.Contains(text, "[REDACTED]") {
			note = " (the key shown as [REDACTED])"
		}
		return "tool error \"" + gist(text) + "\"" + note
	case m.Result != nil:
		return "result"
	}
	return ""
}

// attack is one row: run sends the hostile traffic and returns how many
// requests (or connections) it made; check looks at the fleet afterwards.
type attack struct {
	name  string
	agent string
	// once: run is not repeated to gather legitimate samples (it lasts
	// long enough by itself).
	once  bool
	run   func(t *testing.T, ctx context.Context, f *fleet, o *outcome) int
	check func(t *testing.T, ctx context.Context, f *fleet)
	// env, when set, is added to the fleet's environment (a fake model
	// endpoint, say); it may start what it needs, closed at cleanup.
	env func(t *testing.T) []string
	// token, when set, runs the studio in token mode; the legitimate
	// caller presents it, the attacker does not.
	token string
	// newcomers, when set, runs during the attack: a legitimate client
	// opening new sessions, whose results go into the row.
	newcomers bool
	// latencyReported, when set, says why this row's latency ceiling is
	// reported and not enforced, in both profiles.
	latencyReported string
}

func TestHostile(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips the hostile-traffic table (floods, trickles, huge bodies against real processes); run it with go test -run '^TestHostile$' ./internal/hostilesuite")
	}
	p := profile()
	for _, a := range attacks(p) {
		t.Run(a.name, func(t *testing.T) {
			cpu := CPUPerRequestCI
			if *full {
				cpu = CPUPerRequest
			}
			row := runAttack(t, p, a)
			if v := row.Violations(cpu); *full && a.latencyReported == "" && len(v) > 0 && row.onlyLatency(cpu) {
				// Latency on a shared machine is the one noisy figure: a
				// ceiling crossed once is measured again, on a fresh fleet,
				// and fails only if it is crossed again.
				t.Logf("measuring again: %v", v)
				row = runAttack(t, p, a)
			}
			lv := row.latencyViolation()
			for _, v := range row.Violations(cpu) {
				if v == lv && a.latencyReported != "" {
					t.Logf("latency ceiling crossed (reported, not enforced, for this row: %s): %s", a.latencyReported, v)
					continue
				}
				if v == lv && !*full {
					// The CI profile runs on machines of any load, where a
					// latency ratio measures the neighbours (it failed
					// there with every call answered): reported, not
					// failed. The full profile, the measurement behind
					// docs/SECURITY.md, enforces it.
					t.Logf("latency ceiling crossed (enforced in the full profile only): %s", v)
					continue
				}
				t.Errorf("ceiling crossed: %s", v)
			}
			t.Logf("%s: %d requests; studio %.0f→%.0f MB, agent %.0f→%.0f MB; CPU/request %v; fds %d→%d, %d→%d; legit p50/p99 %v/%v without, %v/%v during (%d calls); new sessions %d, failed %d; got: %s",
				a.name, row.Requests, row.StudioIdleMB, row.StudioPeakMB, row.AgentIdleMB, row.AgentPeakMB, row.CPUPerHostile(),
				row.StudioFDsIdle, row.StudioFDs, row.AgentFDsIdle, row.AgentFDs, row.BaseP50, row.BaseP99, row.LegitP50, row.LegitP99, row.LegitCalls, row.NewSessions, row.NewSessionsFailed, row.AttackerGot)
			record(row)
		})
	}
}

func runAttack(t *testing.T, p profileCounts, a attack) Row {
	var env []string
	if a.env != nil {
		env = a.env(t)
	}
	f := startFleet(t, a.agent, a.token, env...)
	ctx := t.Context()
	pr := startProber(t, f.agentURL(), a.token)
	pr.waitCalls(t, time.Time{}, 20) // warm-up
	studio, agent := f.studioPID(), f.agentPID
	row := Row{Attack: a.name,
		StudioIdleMB: rssMB(studio), AgentIdleMB: rssMB(agent), StudioFDsIdle: fds(studio), AgentFDsIdle: fds(agent)}

	// Windows without and with the attack alternate, so that both see the
	// same background load of a shared machine (the benchmarks' baselines
	// are measured the same way: interleaved, in one run).
	rounds := p.rounds
	if a.once {
		rounds = 1
	}
	s := startSampler(studio, agent)
	var base, during []time.Duration
	var legitCPU, duringCPU time.Duration
	var o outcome
	for range rounds {
		b0, c0 := time.Now(), cpu(studio)+cpu(agent)
		pr.waitCalls(t, b0, p.baseline/rounds)
		b1, c1 := time.Now(), cpu(studio)+cpu(agent)
		legitCPU += c1 - c0
		lat, failed := pr.window(b0, b1)
		if failed > 0 {
			t.Fatalf("baseline: %d legitimate calls failed: %s", failed, pr.errors())
		}
		base = append(base, lat...)

		// Repeat the attack until the legitimate caller has made enough
		// calls under it (bounded in rounds and time).
		for rep := 0; ; rep++ {
			if a.newcomers {
				nctx, stop := context.WithCancel(ctx)
				tally := make(chan [2]int, 1)
				go func() { tally <- newcomers(nctx, f, p.newcomers) }()
				row.Requests += a.run(t, ctx, f, &o)
				stop()
				n := <-tally
				row.NewSessions += n[0]
				row.NewSessionsFailed += n[1]
			} else {
				row.Requests += a.run(t, ctx, f, &o)
			}
			if a.once || pr.count(b1) >= p.minLegit/rounds || rep+1 >= maxRounds || time.Since(b1) > maxAttackTime {
				break
			}
		}
		a1 := time.Now()
		duringCPU += cpu(studio) + cpu(agent) - c1
		// Once a call has started after the attack, every call that
		// started during it has been reported.
		pr.waitCalls(t, a1, 1)
		lat, failed = pr.window(b1, a1)
		during = append(during, lat...)
		row.LegitCalls += len(lat) + failed
		row.LegitFailed += failed
	}
	if a.once {
		// An attack that lasts by itself (seconds): its CPU is that of
		// its window, less the legitimate calls' at their baseline rate.
		row.CPU = duringCPU - legitCPU/time.Duration(max(1, len(base)))*time.Duration(len(during))
		row.CPURequests = row.Requests
	} else {
		// One more round of the attack alone, the legitimate caller
		// paused, so that nothing needs subtracting.
		pr.pause(t)
		c0 := cpu(studio) + cpu(agent)
		alone := a.run(t, ctx, f, &o)
		row.CPU = cpu(studio) + cpu(agent) - c0
		row.CPURequests = alone
		row.Requests += alone
		pr.resume()
	}
	peaks, fdPeaks := s.finish()
	row.StudioPeakMB, row.AgentPeakMB = peaks[0], peaks[1]
	row.StudioFDs, row.AgentFDs = fdPeaks[0], fdPeaks[1]
	row.BaseP50, row.BaseP99 = percentile(base, 0.5), percentile(base, 0.99)
	row.LegitP50, row.LegitP99 = percentile(during, 0.5), percentile(during, 0.99)
	row.AttackerGot = o.String()

	if a.check != nil {
		a.check(t, ctx, f)
	}
	// The processes are the ones that started: nothing was knocked over.
	if pid := f.agentPIDNow(ctx); pid != agent {
		t.Errorf("the agent's PID is %d after the attack, was %d (restarted or down)", pid, agent)
	}
	row.Secrets = secretsIn(o.out.String() + f.outputs(ctx))
	return row
}

// Bounds on repeating one attack.
const (
	maxRounds     = 20
	maxAttackTime = 15 * time.Second
)

func attacks(p profileCounts) []attack {
	return []attack{
		{
			name:  fmt.Sprintf("tools/call with distinct %d KiB tool names, bogus session", p.labelBytes>>10),
			agent: "abacus",
			run: func(t *testing.T, ctx context.Context, f *fleet, o *outcome) int {
				hc := f.client("").HTTP
				parallel(p.labelCalls, 2, func(int) {
					i := nameSeq.Add(1)
					name := fmt.Sprintf("hostile-name-%d-", i) + strings.Repeat("x", p.labelBytes)
					body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": map[string]any{"name": name, "arguments": map[string]any{}}})
					post(ctx, hc, f.agentURL(), "bogus-session-"+fmt.Sprint(i), body, o)
				})
				return p.labelCalls
			},
			check: checkMetrics,
		},
		{
			name:  "tools/call of distinct unknown tools on a live session",
			agent: "abacus",
			run: func(t *testing.T, ctx context.Context, f *fleet, o *outcome) int {
				c := f.client(f.agentURL())
				sid, err := c.Open(ctx)
				if err != nil {
					t.Fatal(err)
				}
				parallel(p.liveNames, 2, func(int) {
					i := nameSeq.Add(1)
					body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": map[string]any{"name": fmt.Sprintf("hostile-name-%d-%s", i, strings.Repeat("y", 1024)), "arguments": map[string]any{}}})
					post(ctx, c.HTTP, f.agentURL(), sid, body, o)
				})
				return p.liveNames
			},
			check: checkMetrics,
		},
		{
			name:  "1.1 MB delegation chain of 100,000 names (half on a bogus session, half on a live one)",
			agent: "abacus",
			run: func(t *testing.T, ctx context.Context, f *fleet, o *outcome) int {
				c := f.client(f.agentURL())
				sid, err := c.Open(ctx)
				if err != nil {
					t.Fatal(err)
				}
				names := make([]string, 100000)
				for i := range names {
					names[i] = fmt.Sprintf("a%05d", i)
				}
				body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "ID", "method": "tools/call", "params": map[string]any{
					"name": "calculate", "arguments": map[string]any{"expression": "1+1"},
					"_meta": map[string]any{"run.switchboard/chain": map[string]any{"run_id": "forged", "agents": names, "depth": 0}},
				}})
				parallel(p.chainCalls, 2, func(i int) {
					s := "bogus-session"
					if i%2 == 1 {
						s = sid
					}
					b := bytes.Replace(body, []byte(`"id":"ID"`), fmt.Appendf(nil, `"id":"c%d"`, i), 1)
					post(ctx, c.HTTP, f.agentURL(), s, b, o)
				})
				return p.chainCalls
			},
		},
		{
			name:  "connections that trickle a body, one byte a second",
			agent: "abacus",
			once:  true,
			run: func(t *testing.T, ctx context.Context, f *fleet, o *outcome) int {
				return trickle(t, ctx, f, p.trickleConns, o)
			},
		},
		{
			name:      fmt.Sprintf("%d connections that trickle their headers, each reopened when closed, no token", p.headerConns),
			agent:     "abacus",
			once:      true,
			newcomers: true,
			run: func(t *testing.T, ctx context.Context, f *fleet, o *outcome) int {
				return headerFlood(ctx, f, p.headerConns, p.headerHold, o)
			},
			latencyReported: headerFloodLatency,
		},
		{
			name:      fmt.Sprintf("%d connections that trickle their headers, each reopened when closed, token mode (the attacker has none)", p.headerConns),
			agent:     "abacus",
			once:      true,
			newcomers: true,
			token:     "hostile-suite-token-0123456789",
			run: func(t *testing.T, ctx context.Context, f *fleet, o *outcome) int {
				return headerFlood(ctx, f, p.headerConns, p.headerHold, o)
			},
			latencyReported: headerFloodLatency,
		},
		{
			name:  "64 concurrent 4 MiB bodies, bogus session",
			agent: "abacus",
			run: func(t *testing.T, ctx context.Context, f *fleet, o *outcome) int {
				hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
				defer hc.CloseIdleConnections()
				pad := strings.Repeat("z", 4<<20-200)
				body := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calculate","arguments":{"expression":%q}}}`, pad))
				for range p.bigRounds {
					parallel(64, 64, func(i int) { post(ctx, hc, f.agentURL(), "bogus-session", body, o) })
				}
				return 64 * p.bigRounds
			},
		},
		{
			name:  fmt.Sprintf("ask with a %d kB task of calculate clauses (fan-out)", len(fanOutTask)>>10),
			agent: "abacus",
			run: func(t *testing.T, ctx context.Context, f *fleet, o *outcome) int {
				return fanOut(t, ctx, f, p.fanOuts, o)
			},
		},
		{
			name:  "ask while the model endpoint echoes the key in its error",
			agent: "abacus",
			env:   echoingModel,
			run: func(t *testing.T, ctx context.Context, f *fleet, o *outcome) int {
				c := f.client(f.url + "/api/agents/oracle/mcp")
				sid, err := c.Open(ctx)
				if err != nil {
					t.Fatal(err)
				}
				parallel(p.echoAsks, 2, func(i int) {
					body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": map[string]any{"name": "ask", "arguments": map[string]any{"task": "what is 2+2"}}})
					post(ctx, c.HTTP, c.URL, sid, body, o)
				})
				return p.echoAsks
			},
		},
		{
			name:  "initialize flood at the agent's own listener",
			agent: "abacus",
			run: func(t *testing.T, ctx context.Context, f *fleet, o *outcome) int {
				return sessionFlood(t, ctx, f, f.direct, p.sessionFlood, p.floodWorkers, o)
			},
		},
		{
			name:  "initialize flood through the studio",
			agent: "abacus",
			run: func(t *testing.T, ctx context.Context, f *fleet, o *outcome) int {
				return sessionFlood(t, ctx, f, f.agentURL(), p.studioSession, p.floodWorkers, o)
			},
		},
	}
}

// nameSeq numbers the attacker's invented tool names, so that every one is
// distinct across rounds too.
var nameSeq atomic.Int64

// parallel runs fn(0..n-1) on workers goroutines.
func parallel(n, workers int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// checkMetrics: the attacker's names are nowhere in /metrics, which stays
// small and quick to scrape.
func checkMetrics(t *testing.T, ctx context.Context, f *fleet) {
	start := time.Now()
	body, status, err := f.get(ctx, "/metrics")
	if err != nil || status != http.StatusOK {
		t.Fatalf("/metrics: %d %v", status, err)
	}
	if bytes.Contains(body, []byte("hostile-name-")) {
		t.Errorf("/metrics carries a client-chosen tool name")
	}
	if len(body) > 1<<20 {
		t.Errorf("/metrics is %d bytes after the attack", len(body))
	}
	t.Logf("/metrics after the attack: %d bytes in %v", len(body), time.Since(start).Round(time.Millisecond))
}

// trickle opens n connections that send a request head announcing a 4 kB
// body, then one byte a second; it returns when the server has answered or
// closed every one of them (the body deadline), or after 30 s.
func trickle(t *testing.T, ctx context.Context, f *fleet, n int, o *outcome) int {
	u, _ := url.Parse(f.agentURL())
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			o.add("dial error", nil)
			continue
		}
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 4096\r\n\r\n{", u.Path, u.Host)
		conns = append(conns, c)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				o.add("closed without an answer", nil)
				return
			}
			data, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
			res.Body.Close()
			o.add(fmt.Sprintf("%d %s", res.StatusCode, summary(data)), data)
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return len(conns)
		case <-ctx.Done():
			<-done
			return len(conns)
		case <-tick.C:
			for _, c := range conns {
				c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
				c.Write([]byte(" "))
			}
		}
	}
}

// headerFloodLatency is why the header floods' latency is reported, not
// enforced: the row is about a newcomer getting in at all (its sessions
// are enforced), and about 1,000 connections a second opened, evicted and
// opened again cost the studio 0.09 to 0.19 ms of CPU each and the
// attacker's own process as much, on the two cores the legitimate caller
// shares with them (and with other work on the machine).
const headerFloodLatency = "the churn of 1,000 connections a second competes for the shared cores; the newcomers' sessions are the ceiling here"

// headerFlood keeps n connections to the studio trickling a request head,
// one header byte a second, for hold: each one the server closes (its
// header deadline, or the connection budget making room) is opened again
// on its next second, the pace of the trickle (reopened in a tight loop,
// 1,100 goroutines burn the shared machine's two cores on the attacker's
// side, and the legitimate caller's latency measures the attacker's own
// process: docs/SECURITY.md's known limits). It returns how many
// connections it opened. Issue 27: 1,100 such
// connections made 33 of 42 legitimate calls on new connections fail, and
// in token mode 8 of 8 of the token holder's new initializes.
func headerFlood(ctx context.Context, f *fleet, n int, hold time.Duration, o *outcome) int {
	u, _ := url.Parse(f.agentURL())
	ctx, cancel := context.WithTimeout(ctx, hold)
	defer cancel()
	var opened atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			pace := time.NewTicker(time.Second)
			defer pace.Stop()
			for ctx.Err() == nil {
				c, err := net.Dial("tcp", u.Host)
				if err != nil {
					o.add("dial error", nil)
					return
				}
				opened.Add(1)
				o.add(trickleHead(ctx, c, u), nil)
				c.Close()
				select {
				case <-ctx.Done():
				case <-pace.C:
				}
			}
		})
	}
	wg.Wait()
	return int(opened.Load())
}

// trickleHead sends a request head on c a byte a second until the server
// answers or closes c, or ctx ends, and says which.
func trickleHead(ctx context.Context, c net.Conn, u *url.URL) string {
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nX-Trickle: ", u.Path, u.Host)
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 64)
	for {
		c.SetReadDeadline(time.Now().Add(time.Second))
		k, err := c.Read(buf)
		if k > 0 {
			if res, _, ok := strings.Cut(string(buf[:k]), "\r\n"); ok {
				return "answered " + res
			}
			return "answered"
		}
		var ne net.Error
		switch {
		case ctx.Err() != nil:
			return "open at the end"
		case errors.As(err, &ne) && ne.Timeout():
			c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			c.Write([]byte("a"))
		default:
			return "closed by the server"
		}
	}
}

// newcomers is a legitimate client opening sessions one after another
// until ctx ends (at most max), each on a connection of its own, as a new
// client does: initialize, notifications/initialized, a tools/call, DELETE,
// the session's requests on that connection, kept alive between them as
// every HTTP client keeps it. (With keep-alives off, each of the four
// requests was a new connection, four times the window in which a flood
// that reopens as fast as the machine accepts can take its place before
// its request is read: 1 of 8 sessions failed so on the project's CI.)
// It returns how many it tried and how many failed.
func newcomers(ctx context.Context, f *fleet, max int) [2]int {
	var tried, failed int
	for tried < max && ctx.Err() == nil {
		c := f.client(f.agentURL())
		tried++
		if !newcomer(ctx, c) && ctx.Err() == nil {
			failed++
			f.t.Logf("newcomer session %d failed", tried)
		}
		c.HTTP.CloseIdleConnections()
	}
	return [2]int{tried, failed}
}

func newcomer(ctx context.Context, c *mcphttptest.Client) bool {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	sid, err := c.Open(cctx)
	if err != nil {
		return false
	}
	r, err := c.Call(cctx, sid, 2, "tools/call", map[string]any{"name": "calculate", "arguments": map[string]any{"expression": "6*7"}})
	ok := err == nil && r.Status == http.StatusOK && strings.Contains(fmt.Sprint(r.Result()["content"]), "42")
	if d, err := c.Delete(cctx, sid); err != nil || d.Status/100 != 2 {
		ok = false
	}
	return ok
}

// sessionFlood sends n initializes to u, then DELETEs every session it got.
func sessionFlood(t *testing.T, ctx context.Context, f *fleet, u string, n, workers int, o *outcome) int {
	c := f.client(u)
	var mu sync.Mutex
	var ids []string
	parallel(n, workers, func(i int) {
		r, err := c.Initialize(ctx, "")
		if err != nil {
			o.add("connection error", nil)
			return
		}
		o.add(fmt.Sprintf("%d %s", r.Status, summary(r.Body)), r.Body)
		if r.SessionID != "" {
			mu.Lock()
			ids = append(ids, r.SessionID)
			mu.Unlock()
		}
	})
	// What the attacker opened it can close, and that gives the room back.
	var deleted atomic.Int64
	parallel(len(ids), workers, func(i int) {
		if r, err := c.Delete(ctx, ids[i]); err == nil && r.Status/100 == 2 {
			deleted.Add(1)
		}
	})
	if int(deleted.Load()) != len(ids) {
		t.Errorf("DELETE ended %d of the flood's %d sessions", deleted.Load(), len(ids))
	}
	// A new client gets a session as soon as the rate allows again.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Open(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("no new session within 10 s of the flood: %v", err)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return n + len(ids)
}

// fanOutTask asks for 800 calculations in one task; a model (the builtin
// makes one call a step) must not turn it into 800 delegations. It is
// 16,000 bytes: the builtin reads tasks of at most 16 KiB and refuses a
// longer one whole, which bounds nothing the turn's caps are here to show.
var fanOutTask = strings.Repeat("calculate 12*(3+4); ", 800)

// fanOut sends n asks of fanOutTask to oracle and checks, from the studio's
// record of delegations, that each made no more than the turn's cap. It
// returns the requests the fleet served: the asks and their delegations.
func fanOut(t *testing.T, ctx context.Context, f *fleet, n int, o *outcome) int {
	c := f.client(f.url + "/api/agents/oracle/mcp")
	sid, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := oracleDelegations(ctx, f)
	served := 0
	for i := range n {
		r, err := c.Call(ctx, sid, i+1, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{"task": fanOutTask}})
		if err != nil {
			t.Fatal(err)
		}
		o.add(fmt.Sprintf("%d %s", r.Status, summary(r.Body)), r.Body)
		served++
	}
	made := oracleDelegations(ctx, f) - before
	if made == 0 || made > 64*n {
		t.Errorf("%d asks made %d delegations, want 1 to %d (max_calls_per_turn)", n, made, 64*n)
	}
	// The studio saw those hops and knows they came from oracle itself
	// (it presented its key), not only from what the chain claims.
	body, _, _ := f.get(ctx, "/api/delegations?limit=200")
	var recs []struct {
		Agent      string `json:"agent"`
		From       string `json:"from"`
		FromSource string `json:"from_source"`
	}
	json.Unmarshal(body, &recs)
	for _, d := range recs {
		if d.From != "" && (d.From != "oracle" || d.FromSource != "agent") {
			t.Errorf("a delegation shows from %q (%s), want oracle (agent)", d.From, d.FromSource)
		}
	}
	o.add(fmt.Sprintf("%d asks made %d delegations", n, made), nil)
	served += made
	return served
}

// oracleDelegations is what oracle itself counted of its delegations (its
// own /metrics, through the studio's).
func oracleDelegations(ctx context.Context, f *fleet) int {
	body, _, _ := f.get(ctx, "/metrics")
	made := 0
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "switchboard_delegations_total{") && strings.Contains(line, `process="oracle"`) {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			made += int(v)
		}
	}
	return made
}

// echoingModel starts a model endpoint that answers every request 401 with
// the Authorization header it got in the message, as real endpoints do
// ("Incorrect API key provided: ..."), and points the fleet at it.
func echoingModel(t *testing.T) []string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		msg, _ := json.Marshal("Incorrect API key provided: " + r.Header.Get("Authorization") + " (key " + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + ")")
		fmt.Fprintf(w, `{"error":{"message":%s,"type":"invalid_request_error","code":"invalid_api_key"}}`, msg)
	}))
	t.Cleanup(srv.Close)
	return []string{"OPENAI_BASE_URL=" + srv.URL + "/v1", "OPENAI_MODEL=gpt-test"}
}

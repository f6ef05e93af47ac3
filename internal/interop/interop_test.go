// Package interop runs real third-party MCP clients, installed from npm
// and pinned in testdata/peers, against a real `switchboard up`, with the
// agent behind it killed by SIGKILL between calls and during a burst of
// calls. What it shows is that an agent's restart is invisible to clients
// that do not recover a lost session by themselves (the studio keeps their
// session, internal/proxy/continuity.go), and that nothing runs twice:
// each call stores one note in packrat's archive (SQLite, on disk) under
// its own tag, and the notes under each tag are counted afterwards.
//
// The clients run in Node (testdata/peers/drive.mjs), driven from here
// one JSON line at a time. Install them with
//
//	npm ci --prefix internal/interop/testdata/peers
//
// Without them the tests skip, or fail when CI is set.
package interop

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/peertest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/testbin"
)

var (
	switchboardBin string
	moduleRoot     string
)

func TestMain(m *testing.M) { testbin.Main{Bin: &switchboardBin, Root: &moduleRoot}.Run(m) }

// The clients, by the name drive.mjs knows them by, the package each
// needs, and the era each speaks with our agents: the TypeScript SDK
// 1.32.2 initializes a session (2025-11-25); @openai/agents 0.20.0 asks
// server/discover first and, since our agents answer both eras, speaks
// 2026-07-28 without a session.
var clients = []struct {
	name, pkg   string
	sessionless bool
}{
	{"ts-sdk", "@modelcontextprotocol/sdk", false},
	{"openai-agents", "@openai/agents", true},
}

func peersDir() string { return filepath.Join(moduleRoot, "internal", "interop", "testdata", "peers") }

// needPeer skips (fails with CI set) when node or the package is missing.
func needPeer(t *testing.T, pkg string) string {
	t.Helper()
	node := peertest.Node(t)
	peertest.Module(t, peersDir(), pkg)
	return node
}

// driver is one client process of drive.mjs.
type driver struct {
	t      *testing.T
	stdin  io.WriteCloser
	lines  chan map[string]any
	stderr *proctest.SyncBuffer
}

func startDriver(t *testing.T, node, kind, url string) (*driver, string) {
	t.Helper()
	cmd := exec.Command(node, filepath.Join(peersDir(), "drive.mjs"), kind, url)
	cmd.Dir = peersDir()
	d := &driver{t: t, lines: make(chan map[string]any, 256), stderr: &proctest.SyncBuffer{}}
	cmd.Stderr = d.stderr
	var err error
	if d.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(d.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				d.lines <- m
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		d.stdin.Close()
		cmd.Process.Kill()
		for range d.lines {
		}
		<-read
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", kind, d.stderr)
		}
	})
	ready := d.next()
	if ready["op"] != "ready" || ready["error"] != nil {
		t.Fatalf("%s did not connect: %v\nstderr:\n%s", kind, ready, d.stderr)
	}
	session, _ := ready["session"].(string)
	return d, session
}

func (d *driver) send(cmd map[string]any) {
	d.t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := d.stdin.Write(append(b, '\n')); err != nil {
		d.t.Fatalf("writing to the client: %v", err)
	}
}

func (d *driver) next() map[string]any {
	d.t.Helper()
	timer := time.NewTimer(90 * time.Second)
	defer timer.Stop()
	select {
	case m, ok := <-d.lines:
		if !ok {
			d.t.Fatalf("the client exited\nstderr:\n%s", d.stderr)
		}
		return m
	case <-timer.C:
		d.t.Fatalf("no answer from the client within 90s\nstderr:\n%s", d.stderr)
	}
	return nil
}

// outcome is how one store_note call ended, as its client saw it.
type outcome struct {
	ok  bool
	err string
}

// calls sends one call per id, paced, and returns their outcomes;
// afterResults, when not nil, runs once that many results have come.
func (d *driver) calls(prefix string, n int, pace time.Duration, after int, afterResults func()) (map[string]outcome, string) {
	d.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	d.send(map[string]any{"op": "call", "ids": ids, "pace_ms": pace.Milliseconds()})
	got := map[string]outcome{}
	for {
		m := d.next()
		switch m["op"] {
		case "result":
			e, _ := m["error"].(string)
			got[m["id"].(string)] = outcome{ok: m["ok"] == true, err: e}
			if afterResults != nil && len(got) == after {
				afterResults()
			}
		case "done":
			s, _ := m["session"].(string)
			return got, s
		default:
			d.t.Fatalf("unexpected line %v", m)
		}
	}
}

// up is a running `switchboard up` with packrat.
type up struct {
	t    *testing.T
	base string
	proc *proctest.Process
}

func startUp(t *testing.T, env []string) *up {
	dir := projecttest.New(t, "packrat")
	p := proctest.StartProcess(t, dir, env, 60*time.Second, "switchboard studio listening on ", switchboardBin, "up", "--dir", dir, "--listen", "127.0.0.1:0")
	u := &up{t: t, base: p.Ready, proc: p}
	t.Cleanup(func() {
		p.Signal(syscall.SIGTERM)
		if code, err := p.Wait(30 * time.Second); err != nil || code != 0 {
			t.Errorf("switchboard up after SIGTERM: exit %d, %v\n%s", code, err, p.Stderr())
		}
		if t.Failed() {
			t.Logf("switchboard up stderr:\n%s", p.Stderr())
		}
	})
	return u
}

func (u *up) url() string { return u.base + "/api/agents/packrat/mcp" }

// packrat returns packrat's state once cond holds (at most 30 s).
func (u *up) packrat(cond func(studioapi.AgentInfo) bool) studioapi.AgentInfo {
	u.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := loopback.Get(u.base + "/api/agents")
		if err == nil {
			var list []studioapi.AgentInfo
			err = json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
			for _, a := range list {
				if err == nil && a.Name == "packrat" && cond(a) {
					return a
				}
			}
		}
		if time.Now().After(deadline) {
			u.t.Fatalf("packrat did not reach the expected state within 30s (last error %v)", err)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

func (u *up) kill() studioapi.AgentInfo {
	u.t.Helper()
	a := u.packrat(func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning && a.PID != 0 })
	if err := syscall.Kill(a.PID, syscall.SIGKILL); err != nil {
		u.t.Fatal(err)
	}
	return a
}

func (u *up) runningAgain(killed studioapi.AgentInfo) {
	u.t.Helper()
	u.packrat(func(a studioapi.AgentInfo) bool {
		return a.State == studioapi.StateRunning && a.PID != 0 && a.PID != killed.PID
	})
}

// notes counts the notes stored under each id's tag, with a go-sdk client
// of its own.
func (u *up) notes(ids []string) map[string]int {
	u.t.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "interop-count", Version: "0"}, nil)
	cs, err := cl.Connect(u.t.Context(), &mcp.StreamableClientTransport{Endpoint: u.url(), HTTPClient: loopback}, nil)
	if err != nil {
		u.t.Fatal(err)
	}
	defer cs.Close()
	counts := map[string]int{}
	for _, id := range ids {
		res, err := cs.CallTool(u.t.Context(), &mcp.CallToolParams{Name: "list_notes", Arguments: map[string]any{"tag": id, "limit": 100}})
		if err != nil || res.IsError {
			u.t.Fatalf("counting the notes of %s: %v %+v", id, err, res)
		}
		var sc struct {
			Count int `json:"count"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &sc); err != nil {
			u.t.Fatalf("list_notes %s: %v: %s", id, err, b)
		}
		counts[id] = sc.Count
	}
	return counts
}

// phase is one group of calls and what became of them.
type phase struct {
	name     string
	outcomes map[string]outcome
}

// TestRestartInvisibleToThirdPartyClients: for each client, one session
// through `switchboard up` to packrat:
//
//  1. calls before any fault;
//  2. packrat SIGKILLed between calls; once it runs again, calls on the
//     same session (every one must land);
//  3. a burst of paced calls with packrat SIGKILLed after the first
//     results came back; the calls in flight at the kill may fail (their
//     outcome is unknown), the ones sent after it are held by the studio;
//  4. once it runs again, calls on the same session (every one must land);
//  5. 3 and 4 again with the burst's calls sent all at once, so that more
//     of them are in flight at the kill.
//
// Throughout, the client's session id does not change (a client of the
// sessionless era has none throughout) and no note is stored twice. It runs with the agents' defaults, resumable streams
// (agentserver/resume.go), where a call cut by the kill is resumed by the
// client and answered by the studio with its "outcome unknown" error
// (pool.CodeOutcomeUnknown), and with them off
// (SWITCHBOARD_RESUMABLE_STREAMS=0), where that call gets the studio's 502.
func TestRestartInvisibleToThirdPartyClients(t *testing.T) {
	modes := []struct {
		name string
		env  []string
	}{
		{"default", nil},
		{"no-resume", []string{"SWITCHBOARD_RESUMABLE_STREAMS=0"}},
	}
	for _, mode := range modes {
		for _, c := range clients {
			t.Run(mode.name+"/"+c.name, func(t *testing.T) {
				restartRun(t, c.name, c.pkg, c.sessionless, mode.env)
			})
		}
	}
}

// restartRun is one client's run of TestRestartInvisibleToThirdPartyClients,
// with env added to `switchboard up`'s environment.
func restartRun(t *testing.T, client, pkg string, sessionless bool, env []string) {
	node := needPeer(t, pkg)
	u := startUp(t, env)
	d, session := startDriver(t, node, client, u.url())
	if got := session == ""; got != sessionless {
		t.Fatalf("%s connected with session id %q; want one only in the session era (sessionless: %v)", client, session, sessionless)
	}
	var phases []phase
	run := func(name, prefix string, n int, pace time.Duration, after int, afterResults func()) {
		got, s := d.calls(prefix, n, pace, after, afterResults)
		if s != session {
			t.Errorf("%s: the session id changed from %q to %q", name, session, s)
		}
		phases = append(phases, phase{name, got})
	}

	run("before any kill", "b", 5, 0, 0, nil)
	killed := u.kill()
	u.runningAgain(killed)
	run("after a kill between calls", "a", 10, 0, 0, nil)

	const burst, killAfter = 40, 10
	run(fmt.Sprintf("burst of %d (one per 15ms), SIGKILL after %d results", burst, killAfter), "u", burst, 15*time.Millisecond, killAfter, func() { killed = u.kill() })
	u.runningAgain(killed)
	run("after the paced burst's restart", "r", 10, 0, 0, nil)
	run(fmt.Sprintf("burst of %d at once, SIGKILL after %d results", burst, killAfter), "v", burst, 0, killAfter, func() { killed = u.kill() })
	u.runningAgain(killed)
	run("after the burst's restart", "w", 10, 0, 0, nil)

	d.send(map[string]any{"op": "list"})
	if m := d.next(); m["op"] != "list" || m["error"] != nil || m["tools"].(float64) == 0 {
		t.Errorf("tools/list after the restarts: %v", m)
	}

	var ids []string
	for _, p := range phases {
		for id := range p.outcomes {
			ids = append(ids, id)
		}
	}
	counts := u.notes(ids)
	for _, p := range phases {
		var ok, failed, dup, unknownRan int
		errs := map[string]int{}
		for id, o := range p.outcomes {
			n := counts[id]
			if n > 1 {
				dup++
				t.Errorf("%s: call %s stored %d notes", p.name, id, n)
			}
			switch {
			case o.ok:
				ok++
				if n != 1 {
					t.Errorf("%s: call %s succeeded but stored %d notes", p.name, id, n)
				}
			default:
				failed++
				errs[o.err]++
				if n == 1 {
					unknownRan++
				}
			}
		}
		t.Logf("%s | %s: %d/%d landed, %d failed (%d of them had run: outcome unknown), %d duplicates; errors %v",
			t.Name(), p.name, ok, len(p.outcomes), failed, unknownRan, dup, errs)
		// Every call but those in flight at the burst's kill must land.
		if !strings.HasPrefix(p.name, "burst") && failed > 0 {
			t.Errorf("%s: %d calls failed: %v", p.name, failed, errs)
		}
	}
	d.send(map[string]any{"op": "close"})
	if m := d.next(); m["op"] != "close" {
		t.Errorf("close: %v", m)
	}
}

func init() {
	// The clients reach the studio on loopback; a proxy in the environment
	// must not capture them.
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		os.Unsetenv(k)
	}
}

// loopback carries the test's own requests; no keep-alive, so no idle
// connection outlives a test (goleak).
var loopback = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

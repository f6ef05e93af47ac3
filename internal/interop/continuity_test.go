package interop

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
)

// Restarts of what the client is connected to, not of an agent behind the
// studio: the studio itself (its continuity state is in
// .switchboard/studio/continuity.db), and `agent serve` with no studio
// (its own continuity, DataDir/continuity.db). Each process is restarted
// on the address it had, as a service manager would; the client keeps its
// one session throughout, every call sent after a restart lands, and no
// note is stored twice (each call stores one under its own tag, counted
// afterwards by a go-sdk client of the test's own).

// served is one `switchboard up` or `agent serve` process the test
// restarts: start runs it again, on the same address.
type served struct {
	t       *testing.T
	start   func(listen string) *proctest.Process
	proc    *proctest.Process
	addr    string // host:port it listens on
	mcpPath string // the MCP endpoint's path
	stopped bool   // proc has been stopped by stop
}

func (s *served) url() string { return "http://" + s.addr + s.mcpPath }

func (s *served) run(listen string) {
	s.t.Helper()
	s.proc, s.stopped = s.start(listen), false
	addr := strings.TrimSpace(s.proc.Ready)
	addr = strings.TrimPrefix(addr, "http://")
	addr, _, _ = strings.Cut(addr, "/")
	s.addr = addr
}

// stop ends the process with sig and waits for it.
func (s *served) stop(sig syscall.Signal) {
	s.t.Helper()
	if err := s.proc.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
	code, err := s.proc.Wait(30 * time.Second)
	s.stopped = true
	if err != nil || (sig == syscall.SIGTERM && code != 0) {
		s.t.Fatalf("after %v: exit %d, %v\n%s", sig, code, err, s.proc.Stderr())
	}
}

// restart stops the process with sig and starts it again where it was.
func (s *served) restart(sig syscall.Signal) {
	s.t.Helper()
	s.stop(sig)
	s.run(s.addr)
}

func newServed(t *testing.T, start func(listen string) *proctest.Process, mcpPath string) *served {
	s := &served{t: t, start: start, mcpPath: mcpPath}
	s.run("127.0.0.1:0")
	t.Cleanup(func() {
		if !s.stopped {
			s.proc.Signal(syscall.SIGTERM)
			s.proc.Wait(30 * time.Second)
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", s.proc.Stderr())
		}
	})
	return s
}

// studioServed is `switchboard up` with packrat.
func studioServed(t *testing.T) *served {
	dir := projecttest.New(t, "packrat")
	return newServed(t, func(listen string) *proctest.Process {
		return proctest.StartProcess(t, dir, nil, 60*time.Second, "switchboard studio listening on ", switchboardBin, "up", "--dir", dir, "--listen", listen)
	}, "/api/agents/packrat/mcp")
}

// agentServed is `switchboard agent serve` of packrat, alone, with a data
// directory that outlives its restarts.
func agentServed(t *testing.T, env []string) *served {
	dir := projecttest.New(t, "packrat")
	data := filepath.Join(t.TempDir(), "data")
	return newServed(t, func(listen string) *proctest.Process {
		return proctest.StartProcess(t, dir, env, 60*time.Second, "switchboard agent packrat listening on ", switchboardBin,
			"agent", "serve", "--agent", filepath.Join(dir, "agents", "packrat"), "--listen", listen, "--data-dir", data)
	}, "/mcp")
}

// countNotes counts the notes stored under each id's tag at url.
func countNotes(t *testing.T, url string, ids []string) map[string]int {
	t.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "interop-count", Version: "0"}, nil)
	cs, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: loopback}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	counts := map[string]int{}
	for _, id := range ids {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_notes", Arguments: map[string]any{"tag": id, "limit": 100}})
		if err != nil || res.IsError {
			t.Fatalf("counting the notes of %s: %v %+v", id, err, res)
		}
		var sc struct {
			Count int `json:"count"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &sc); err != nil {
			t.Fatalf("list_notes %s: %v: %s", id, err, b)
		}
		counts[id] = sc.Count
	}
	return counts
}

// tally checks and logs the phases: every call landed, each stored one
// note; it returns the row's cells.
func tally(t *testing.T, url string, phases []phase) {
	t.Helper()
	var ids []string
	for _, p := range phases {
		for id := range p.outcomes {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	counts := countNotes(t, url, ids)
	for _, p := range phases {
		var ok, dup, ran int
		errs := map[string]int{}
		for id, o := range p.outcomes {
			n := counts[id]
			ran += n
			if n > 1 {
				dup++
			}
			if o.ok {
				ok++
			} else {
				errs[o.err]++
			}
			if o.ok && n != 1 || n > 1 {
				t.Errorf("%s: call %s (ok %v) stored %d notes", p.name, id, o.ok, n)
			}
		}
		t.Logf("%s | %s: %d/%d ok, errors %v, notes stored %d, stored twice %d", t.Name(), p.name, ok, len(p.outcomes), errs, ran, dup)
		if ok != len(p.outcomes) {
			t.Errorf("%s: %d of %d calls failed: %v", p.name, len(p.outcomes)-ok, len(p.outcomes), errs)
		}
	}
}

// restartsRun connects client to s, and makes calls before and after each
// of restarts, on one session.
func restartsRun(t *testing.T, s *served, client, pkg string, sessionless bool, restarts []struct {
	name string
	do   func()
}) {
	node := needPeer(t, pkg)
	d, session := startDriver(t, node, client, s.url())
	if got := session == ""; got != sessionless {
		t.Fatalf("%s connected with session id %q; want one only in the session era (sessionless: %v)", client, session, sessionless)
	}
	var phases []phase
	run := func(name, prefix string, n int) {
		got, sid := d.calls(prefix, n, 0, 0, nil)
		if sid != session {
			t.Errorf("%s: the session id changed from %q to %q", name, session, sid)
		}
		phases = append(phases, phase{name, got})
	}
	run("before any restart", "b", 5)
	for i, r := range restarts {
		r.do()
		run("after "+r.name, fmt.Sprintf("r%d-", i), 10)
	}
	d.send(map[string]any{"op": "list"})
	if m := d.next(); m["op"] != "list" || m["error"] != nil {
		t.Errorf("tools/list after the restarts: %v", m)
	}
	tally(t, s.url(), phases)
	d.send(map[string]any{"op": "close"})
	if m := d.next(); m["op"] != "close" {
		t.Errorf("close: %v", m)
	}
}

// TestClientsAcrossStudioRestart: each client on one session through
// `switchboard up`, which is stopped (SIGTERM, so its agents stop too) and
// started again on its address, twice, with a SIGKILL of packrat between.
// Before the studio kept its continuity on disk the TypeScript SDK got 0
// of 3 calls after the studio's restart (two "fetch failed", then 404 for
// good).
func TestClientsAcrossStudioRestart(t *testing.T) {
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			s := studioServed(t)
			killPackrat := func() {
				u := &up{t: t, base: "http://" + s.addr}
				u.runningAgain(u.kill())
			}
			restartsRun(t, s, c.name, c.pkg, c.sessionless, []struct {
				name string
				do   func()
			}{
				{"a studio restart", func() { s.restart(syscall.SIGTERM) }},
				{"packrat SIGKILLed under the new studio", killPackrat},
				{"a second studio restart", func() { s.restart(syscall.SIGTERM) }},
			})
		})
	}
}

// TestClientsDirectToRestartedAgent: each client connected straight to
// `agent serve` (no studio), which is stopped by SIGTERM and started again
// on its address, then SIGKILLed and started again. The agent's own
// continuity (agentserver/continuity.go) keeps the session. Before it, the
// TypeScript SDK got 0 of 3 calls after the agent's restart.
func TestClientsDirectToRestartedAgent(t *testing.T) {
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			s := agentServed(t, nil)
			restartsRun(t, s, c.name, c.pkg, c.sessionless, []struct {
				name string
				do   func()
			}{
				{"a SIGTERM and start", func() { s.restart(syscall.SIGTERM) }},
				{"a SIGKILL and start", func() { s.restart(syscall.SIGKILL) }},
			})
		})
	}
}

// TestSupergatewayDirectToRestartedAgent: supergateway 4.0.0 bridging
// Streamable HTTP to stdio (`--streamableHttp URL`), its upstream client
// the TypeScript SDK, which never re-initializes, straight to `agent
// serve`, with a go-sdk client on its stdio pinned to 2025-11-25 and
// unpinned. The bridge's own upstream client speaks 2025-11-25 either way
// (the TypeScript SDK 1.32.2 only initializes; the test logs what the
// stdio client got), so both runs are session-era at the agent.
// The agent is restarted by SIGTERM, then by SIGKILL; every call after
// each restart lands on the bridge's one upstream session, none twice.
// Before the agent had continuity of its own: 0 of 66 in both eras.
func TestSupergatewayDirectToRestartedAgent(t *testing.T) {
	node := needPeer(t, "supergateway")
	for _, era := range []struct{ name, pin string }{{"stdio-pinned-2025-11-25", "2025-11-25"}, {"stdio-unpinned", ""}} {
		t.Run(era.name, func(t *testing.T) {
			s := agentServed(t, nil)
			cmd := exec.Command(node, filepath.Join(peersDir(), "node_modules", "supergateway", "dist", "index.js"),
				"--streamableHttp", s.url(), "--logLevel", "none")
			cmd.Dir = peersDir()
			stderr := &proctest.SyncBuffer{}
			cmd.Stderr = stderr
			cl := mcp.NewClient(&mcp.Implementation{Name: "interop-supergateway", Version: "0"}, nil)
			var opts *mcp.ClientSessionOptions
			if era.pin != "" {
				opts = &mcp.ClientSessionOptions{ProtocolVersion: era.pin}
			}
			cs, err := cl.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, opts)
			if err != nil {
				t.Fatalf("connecting through supergateway: %v\nstderr:\n%s", err, stderr)
			}
			t.Cleanup(func() {
				cs.Close()
				if t.Failed() {
					t.Logf("supergateway stderr:\n%s", stderr)
				}
			})
			t.Logf("%s: the bridge's client negotiated %s", t.Name(), cs.InitializeResult().ProtocolVersion)
			call := func(prefix string, n int) map[string]outcome {
				got := map[string]outcome{}
				for i := range n {
					id := fmt.Sprintf("%s%d", prefix, i)
					res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": "bridged note " + id, "tags": []string{id}}})
					switch {
					case err != nil:
						got[id] = outcome{err: err.Error()}
					case res.IsError:
						got[id] = outcome{err: "tool error: " + toolText(res)}
					default:
						got[id] = outcome{ok: true}
					}
				}
				return got
			}
			phases := []phase{{"before any restart", call("b", 6)}}
			s.restart(syscall.SIGTERM)
			phases = append(phases, phase{"after a SIGTERM and start", call("r", 30)})
			s.restart(syscall.SIGKILL)
			phases = append(phases, phase{"after a SIGKILL and start", call("k", 30)})
			tally(t, s.url(), phases)
		})
	}
}

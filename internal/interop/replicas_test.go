package interop

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/peertest"
	"github.com/switchboard-run/switchboard/internal/pgtest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/waittest"
)

// Sessions on any replica (issue 23): two `agent serve` replicas of
// packrat on one real PostgreSQL, behind a real haproxy in plain round
// robin (no stick table, no affinity of any kind), so that a session's
// requests alternate between the replicas from its first one on
// (initialize on one, notifications/initialized on the other). A
// 2025-11-25 session begun on one replica is served by the other: its
// initialize's params and state are in the database (continuity_sessions,
// in packrat's schema), and the replica that does not know the session
// replays them into a local one. Every call lands, each stores exactly one
// note (packrat's store is the shared database too), and haproxy's log
// shows both replicas answering the session's calls.

// roundRobinConfig is haproxy with nothing but round robin: the case
// session-era clients could not survive.
const roundRobinConfig = `global
    log stdout format raw local0 info
    maxconn 1024
defaults
    mode http
    log global
    log-format "%%s %%ST %%{+Q}r sid_in=%%{+Q}[capture.req.hdr(0)]"
    timeout connect 2s
    timeout client 5m
    timeout server 5m
    retries 2
    retry-on conn-failure
frontend mcp
    bind 127.0.0.1:%d
    capture request header Mcp-Session-Id len 128
    default_backend packrat
backend packrat
    balance roundrobin
    server replica1 %s
    server replica2 %s
`

var rrLine = regexp.MustCompile(`^(replica[12]) (\d+) "(\S+) [^"]*" sid_in="([^"]*)"$`)

// syncBuf is a bytes.Buffer safe for the process's writer and the test.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// replicated is two replicas on one database behind round robin.
type replicated struct {
	url string   // haproxy's MCP endpoint
	log *syncBuf // haproxy's traffic log
}

func startReplicated(t *testing.T, env []string) *replicated {
	t.Helper()
	var bin string
	for _, p := range []string{"haproxy", "/usr/sbin/haproxy"} {
		if path, err := exec.LookPath(p); err == nil {
			bin = path
			break
		}
	}
	if bin == "" {
		peertest.Missing(t, "haproxy is not installed: apt-get install -y haproxy")
	}
	db := pgtest.Start(t).NewDatabase(t)
	dir := projecttest.New(t, "packrat")
	var addrs [2]string
	for i := range addrs {
		p := proctest.StartProcess(t, dir, append([]string{"SWITCHBOARD_DATABASE_URL=" + db}, env...), 60*time.Second,
			"switchboard agent packrat listening on ", switchboardBin,
			"agent", "serve", "--agent", filepath.Join(dir, "agents", "packrat"), "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
		addrs[i] = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(p.Ready), "http://"), "/mcp")
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("replica %d stderr:\n%s", i+1, p.Stderr())
			}
		})
	}
	port := freeLoopbackPort(t)
	conf := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(conf, fmt.Appendf(nil, roundRobinConfig, port, addrs[0], addrs[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	log := &syncBuf{}
	cmd := exec.Command(bin, "-db", "-f", conf)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGUSR1) // haproxy's soft stop
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("haproxy log:\n%s", log.String())
		}
	})
	r := &replicated{url: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp", log: log}
	waittest.Until(t, 30*time.Second, "haproxy to serve", func() bool {
		resp, err := loopback.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return r
}

// served counts the POSTs of session sid each replica answered, by status.
func (r *replicated) served(sid string) map[string]map[int]int {
	out := map[string]map[int]int{}
	for _, line := range strings.Split(r.log.String(), "\n") {
		m := rrLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil || m[3] != "POST" || m[4] != sid {
			continue
		}
		status, _ := strconv.Atoi(m[2])
		if out[m[1]] == nil {
			out[m[1]] = map[int]int{}
		}
		out[m[1]][status]++
	}
	return out
}

// replicaCalls is how many calls each client makes through the balancer.
const replicaCalls = 40

// TestSessionsOnAnyReplica: a go-sdk client pinned to 2025-11-25 with no
// recovery of its own (a bare ClientSession), and the TypeScript SDK, each
// on one session through round robin: every call ok, each stored one
// note, both replicas answered the session's requests.
func TestSessionsOnAnyReplica(t *testing.T) {
	r := startReplicated(t, nil)

	t.Run("go-sdk", func(t *testing.T) {
		cl := mcp.NewClient(&mcp.Implementation{Name: "replicas-go-sdk", Version: "0"}, nil)
		cs, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: r.url, HTTPClient: loopback},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("connecting through round robin: %v", err)
		}
		defer cs.Close()
		sid := cs.ID()
		got := map[string]outcome{}
		for i := range replicaCalls {
			id := fmt.Sprintf("g%d", i)
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": "replica note " + id, "tags": []string{id}}})
			switch {
			case err != nil:
				got[id] = outcome{err: err.Error()}
			case res.IsError:
				got[id] = outcome{err: "tool error: " + toolText(res)}
			default:
				got[id] = outcome{ok: true}
			}
		}
		if cs.ID() != sid {
			t.Errorf("the session id changed from %s to %s", sid, cs.ID())
		}
		tally(t, r.url, []phase{{"go-sdk 2025-11-25 through round robin", got}})
		checkBothServed(t, r, sid)
	})

	t.Run("ts-sdk", func(t *testing.T) {
		node := needPeer(t, "@modelcontextprotocol/sdk")
		d, sid := startDriver(t, node, "ts-sdk", r.url)
		got, after := d.calls("t", replicaCalls, 0, 0, nil)
		if after != sid {
			t.Errorf("the session id changed from %s to %s", sid, after)
		}
		tally(t, r.url, []phase{{"TS SDK 2025-11-25 through round robin", got}})
		checkBothServed(t, r, sid)
		d.send(map[string]any{"op": "close"})
		d.next()
	})
}

func checkBothServed(t *testing.T, r *replicated, sid string) {
	t.Helper()
	per := r.served(sid)
	t.Logf("%s: session %s's POSTs by replica and status: %v", t.Name(), sid, per)
	for _, name := range []string{"replica1", "replica2"} {
		if per[name][200]+per[name][202] == 0 {
			t.Errorf("%s answered none of the session's POSTs: not round robin, or it refused them: %v", name, per)
		}
		for status, n := range per[name] {
			if status != 200 && status != 202 {
				t.Errorf("%s answered %d of the session's POSTs with %d", name, n, status)
			}
		}
	}
}

func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

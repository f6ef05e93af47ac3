package faultsuite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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

	"github.com/switchboard-run/switchboard/internal/peertest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/waittest"
	"github.com/switchboard-run/switchboard/pool"
)

// The balancer rows: the example configurations deploy/haproxy/haproxy.cfg
// and deploy/nginx/nginx.conf, run by the real haproxy and nginx with only
// their addresses and paths replaced, in front of two real abacus replicas
// (`switchboard agent serve`, each with its own data directory), called
// through the real `switchboard client`. Which replica answered each
// request comes from the balancer's own traffic log, in the format the
// example configures.
//
// What they show: sessionless calls (2026-07-28) are spread by round robin
// and all answered; session-era calls (2025-11-25) through HAProxy's stick
// table stay on the replica that created the session; a replica killed
// with SIGKILL in the middle of a burst costs no call: a request that could
// not reach it is passed to the other replica by the balancer (nothing
// ran), one cut off on it is answered 502 and resent by the pool with its
// idempotency key, and every call is answered exactly once, with its own
// result.

// The example configs' placeholders: the address the balancer listens on
// and the two replicas'. Each must occur exactly once in each file, so that
// an edit of the example cannot leave the test running something else.
const (
	exampleListen   = "0.0.0.0:8080"
	exampleReplica1 = "10.0.0.11:8080"
	exampleReplica2 = "10.0.0.12:8080"
)

const (
	balancedCalls = 100 // per row
	burstWindow   = 8   // calls in flight at once in the kill rows
	killAfter     = 40  // calls sent before the kill
)

// hit is one request in a balancer's traffic log.
type hit struct {
	method        string
	status        int
	replicas      []int // the replicas tried, in order (0 or 1; -1 none)
	passedOn      bool  // the balancer sent it to another replica after a failed connect
	cut           bool  // answered 502, or cut off mid-answer (HAProxy's termination state SD or SH)
	sidIn, sidOut string
}

// served is the replica that answered, -1 for none.
func (h hit) served() int {
	if len(h.replicas) == 0 {
		return -1
	}
	return h.replicas[len(h.replicas)-1]
}

// frontend is a running balancer.
type frontend struct {
	base string
	hits func() []hit // its log so far
}

type balancer struct {
	name  string
	start func(t *testing.T, replicas []string) *frontend
}

var balancers = []balancer{{"haproxy", startHAProxy}, {"nginx", startNginxExample}}

// exampleConfig reads deploy/<rel> and replaces each placeholder, failing
// the test if one does not occur as often as want says (0: at least once).
func exampleConfig(t *testing.T, rel string, replace [][2]string, want map[string]int) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot, "deploy", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range replace {
		n := bytes.Count(data, []byte(r[0]))
		if w, ok := want[r[0]]; (ok && n != w) || n == 0 {
			t.Fatalf("deploy/%s: %q occurs %d times: the test no longer runs the example as it is", rel, r[0], n)
		}
		data = bytes.ReplaceAll(data, []byte(r[0]), []byte(r[1]))
	}
	return data
}

// startReplicas runs two abacus replicas on loopback, each with its own
// data directory, and returns them with their host:port.
func startReplicas(t *testing.T) ([2]*proctest.Process, [2]string) {
	t.Helper()
	var procs [2]*proctest.Process
	var addrs [2]string
	for i := range procs {
		procs[i] = proctest.StartProcess(t, t.TempDir(), nil, 30*time.Second, "switchboard agent ", switchboardBin,
			"agent", "serve", "--agent", filepath.Join(moduleRoot, "agents", "abacus"),
			"--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
		// The ready line: "abacus listening on http://HOST:PORT/mcp".
		_, url, _ := strings.Cut(procs[i].Ready, "http://")
		addrs[i] = strings.TrimSuffix(strings.TrimSpace(url), "/mcp")
		if _, _, err := net.SplitHostPort(addrs[i]); err != nil {
			t.Fatalf("replica %d: ready line %q names no address: %v", i, procs[i].Ready, err)
		}
	}
	return procs, addrs
}

func needHAProxy(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"haproxy", "/usr/sbin/haproxy"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	peertest.Missing(t, "haproxy is not installed: apt-get install -y haproxy")
	return ""
}

// haproxyLine is one line of the example's log-format: backend/server,
// status, termination state, retries (+ when redispatched), the request
// line and the session ids captured in and out.
var haproxyLine = regexp.MustCompile(`^\S+ \[[^\]]*\] \S+ (\S+)/(\S+) \S+ (-?\d+) \S+ (\S+) \S+/\S+/\S+/\S+/(\+?\d+) "(\S+) [^"]*" sid_in="([^"]*)" sid_out="([^"]*)"$`)

// startHAProxy runs deploy/haproxy/haproxy.cfg in front of replicas.
func startHAProxy(t *testing.T, replicas []string) *frontend {
	t.Helper()
	bin := needHAProxy(t)
	dir := t.TempDir()
	port := freePort(t)
	conf := exampleConfig(t, "haproxy/haproxy.cfg", [][2]string{
		{exampleListen, "127.0.0.1:" + strconv.Itoa(port)},
		{exampleReplica1, replicas[0]},
		{exampleReplica2, replicas[1]},
	}, map[string]int{exampleListen: 1, exampleReplica1: 1, exampleReplica2: 1})
	conf = moreServers(conf, "server abacus2 "+replicas[1]+" check", "server abacus%d %s check", replicas)
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	var stdout, stderr syncBuffer
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	startBalancerProcess(t, cmd, syscall.SIGUSR1, func() string { return "stderr:\n" + stderr.String() + "\nlog:\n" + stdout.String() })
	names := map[string]int{}
	for i := range replicas {
		names[fmt.Sprintf("abacus%d", i+1)] = i
	}
	f := &frontend{base: "http://127.0.0.1:" + strconv.Itoa(port), hits: func() []hit {
		var hits []hit
		for _, line := range strings.Split(stdout.String(), "\n") {
			m := haproxyLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			status, _ := strconv.Atoi(m[3])
			h := hit{method: m[6], status: status, sidIn: m[7], sidOut: m[8], passedOn: m[5] != "0",
				cut: status == http.StatusBadGateway || strings.HasPrefix(m[4], "SD") || strings.HasPrefix(m[4], "SH")}
			if i, ok := names[m[2]]; ok {
				h.replicas = []int{i}
			}
			hits = append(hits, h)
		}
		return hits
	}}
	waitHealthy(t, f)
	return f
}

// moreServers adds, after the line of the example's second server (second,
// as the config now reads), one line per replica past two, written by
// format from the replica's number (from 1) and address: the examples
// name two replicas, and the replica rows run three.
func moreServers(conf []byte, second, format string, replicas []string) []byte {
	if len(replicas) <= 2 {
		return conf
	}
	i := bytes.Index(conf, []byte(second))
	if i < 0 {
		return conf // exampleConfig checked the placeholders; the caller's replicas then fail loudly
	}
	indent := conf[bytes.LastIndexByte(conf[:i], '\n')+1 : i]
	var b bytes.Buffer
	b.Write(conf[:i+len(second)])
	for n := 2; n < len(replicas); n++ {
		fmt.Fprintf(&b, "\n%s"+format, indent, n+1, replicas[n])
	}
	b.Write(conf[i+len(second):])
	return b.Bytes()
}

// nginxLine is one line of the example's log_format.
var nginxLine = regexp.MustCompile(`"(\S+) [^"]*" (\d+) upstream=(.*) upstream_status=(.*) rt=\S+ sid_in="([^"]*)" sid_out="([^"]*)"$`)

// startNginxExample runs deploy/nginx/nginx.conf in front of replicas.
func startNginxExample(t *testing.T, replicas []string) *frontend {
	t.Helper()
	bin := needNginx(t)
	dir := t.TempDir()
	for _, sub := range []string{"logs", "cache"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	conf := exampleConfig(t, "nginx/nginx.conf", [][2]string{
		{exampleListen, "127.0.0.1:" + strconv.Itoa(port)},
		{exampleReplica1, replicas[0]},
		{exampleReplica2, replicas[1]},
		{"/run/nginx.pid", filepath.Join(dir, "nginx.pid")},
		{"/var/log/nginx", filepath.Join(dir, "logs")},
		{"/var/cache/nginx/switchboard", filepath.Join(dir, "cache")},
	}, map[string]int{exampleListen: 1, exampleReplica1: 1, exampleReplica2: 1})
	conf = moreServers(conf, "server "+replicas[1]+" max_fails=0;", "server %[3]s max_fails=0;", replicas)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	errLog := filepath.Join(dir, "logs", "error.log")
	if out, err := exec.Command(bin, "-t", "-p", dir, "-c", path, "-e", errLog).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	var stderr syncBuffer
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", errLog, "-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	accessLog := filepath.Join(dir, "logs", "switchboard.access.log")
	startBalancerProcess(t, cmd, syscall.SIGQUIT, func() string {
		e, _ := os.ReadFile(errLog)
		return "output:\n" + stderr.String() + "\nerror.log:\n" + string(e)
	})
	index := map[string]int{}
	for i, r := range replicas {
		index[r] = i
	}
	f := &frontend{base: "http://127.0.0.1:" + strconv.Itoa(port), hits: func() []hit {
		data, _ := os.ReadFile(accessLog) // absent until the first request
		var hits []hit
		for _, line := range strings.Split(string(data), "\n") {
			m := nginxLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			status, _ := strconv.Atoi(m[2])
			h := hit{method: m[1], status: status, sidIn: m[5], sidOut: m[6], cut: status == http.StatusBadGateway}
			for _, a := range strings.Split(m[3], ", ") {
				if i, ok := index[a]; ok {
					h.replicas = append(h.replicas, i)
				}
			}
			h.passedOn = len(h.replicas) > 1
			hits = append(hits, h)
		}
		return hits
	}}
	waitHealthy(t, f)
	return f
}

// startBalancerProcess starts cmd and stops it at cleanup with stop (the
// graceful stop of haproxy and nginx), killing it if it does not exit in
// time; output says what to log when the test failed.
func startBalancerProcess(t *testing.T, cmd *exec.Cmd, stop syscall.Signal, output func() string) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(stop)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s %s", cmd.Path, output())
		}
	})
}

// waitHealthy waits until the balancer answers /healthz from both replicas.
func waitHealthy(t *testing.T, f *frontend) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	waittest.Until(t, 30*time.Second, "the balancer to answer /healthz from both replicas", func() bool {
		resp, err := hc.Get(f.base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		seen := [2]bool{}
		for _, h := range f.hits() {
			if h.method == "GET" && h.status == http.StatusOK && h.served() >= 0 {
				seen[h.served()] = true
			}
		}
		return seen[0] && seen[1]
	})
}

// balancedClient starts `switchboard client` with abacus behind f, pinned
// to the protocol era.
func balancedClient(t *testing.T, f *frontend, era string) *client {
	t.Helper()
	data, err := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"abacus": map[string]string{"url": f.base + "/mcp", "protocolVersion": era},
	}})
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(config, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return startClient(t, config)
}

// burst sends n calculate calls, at most window in flight, each with an
// expression of its own; before sending call i it runs at(i). It reports
// (t.Errorf) and counts every answer that is an error, missing, or not its
// own call's value.
func burst(t *testing.T, c *client, n, window int, at func(i int)) (failed int) {
	t.Helper()
	type pending struct {
		i  int
		cl call
	}
	var queue []pending
	check := func(p pending) {
		a := p.cl.wait()
		var res struct {
			Structured struct {
				Result float64 `json:"result"`
			} `json:"structuredContent"`
		}
		switch {
		case a.lost:
			t.Errorf("call %d: no answer", p.i)
		case a.Error != nil:
			t.Errorf("call %d: %s error %d: %s", p.i, a.Error.Kind, a.Error.Code, a.Error.Message)
		case json.Unmarshal(a.Result, &res) != nil || res.Structured.Result != float64(p.i*7+3):
			t.Errorf("call %d: result %s, want %d", p.i, a.Result, p.i*7+3)
		default:
			return
		}
		failed++
	}
	for i := range n {
		if at != nil {
			at(i)
		}
		queue = append(queue, pending{i, c.callArgs("abacus", "calculate", strconv.Itoa(i), map[string]any{"expression": fmt.Sprintf("%d*7+3", i)})})
		if len(queue) == window {
			check(queue[0])
			queue = queue[1:]
		}
	}
	for _, p := range queue {
		check(p)
	}
	return failed
}

// posts returns the POSTs in f's log once it holds at least min of them
// answered 200 (a balancer writes its line just after the response).
func posts(t *testing.T, f *frontend, min int) []hit {
	t.Helper()
	waittest.Until(t, 10*time.Second, fmt.Sprintf("%d answered POSTs in the balancer's log", min), func() bool {
		ok := 0
		for _, h := range f.hits() {
			if h.method == "POST" && h.status == http.StatusOK {
				ok++
			}
		}
		return ok >= min
	})
	var out []hit
	for _, h := range f.hits() {
		if h.method == "POST" {
			out = append(out, h)
		}
	}
	return out
}

// TestBalancerRoundRobin: sessionless calls through each balancer are
// spread over both replicas and all answered.
func TestBalancerRoundRobin(t *testing.T) {
	for _, b := range balancers {
		t.Run(b.name, func(t *testing.T) {
			_, addrs := startReplicas(t)
			f := b.start(t, addrs[:])
			c := balancedClient(t, f, pool.Protocol20260728)
			if failed := burst(t, c, balancedCalls, 1, nil); failed > 0 {
				t.Fatalf("%d of %d calls failed", failed, balancedCalls)
			}
			st := c.stats()
			if lost := c.finish(); lost != 0 {
				t.Errorf("%d calls answered not exactly once", lost)
			}
			var per [2]int
			for _, h := range posts(t, f, balancedCalls) {
				if h.status == http.StatusOK && h.served() >= 0 {
					per[h.served()]++
				}
			}
			t.Logf("%s, 2026-07-28: %d calls, all answered; POSTs answered by replica 1: %d, replica 2: %d; pool dials %d, reinitializations %d",
				b.name, balancedCalls, per[0], per[1], st.Dials, st.Reinitializations)
			// Round robin: one call at a time, so the replicas alternate.
			// A quarter each is a loose floor that still fails a balancer
			// sending everything to one replica.
			for i, n := range per {
				if n < (per[0]+per[1])/4 {
					t.Errorf("replica %d answered %d of %d POSTs: not round robin", i+1, n, per[0]+per[1])
				}
			}
		})
	}
}

// TestBalancerStickySessions: 2025-11-25 calls through HAProxy's stick
// table: the session the initialize created stays on the replica that
// created it, and every call is answered on it.
func TestBalancerStickySessions(t *testing.T) {
	_, addrs := startReplicas(t)
	f := startHAProxy(t, addrs[:])
	c := balancedClient(t, f, pool.Protocol20251125)
	if failed := burst(t, c, balancedCalls, 4, nil); failed > 0 {
		t.Fatalf("%d of %d calls failed", failed, balancedCalls)
	}
	st := c.stats()
	if lost := c.finish(); lost != 0 {
		t.Errorf("%d calls answered not exactly once", lost)
	}
	created := map[string]int{} // session → the replica whose answer named it
	onSession := map[string]map[int]int{}
	posts(t, f, balancedCalls) // the log complete
	// Every request, not only the POSTs: the standalone GET stream and the
	// closing DELETE carry the session too.
	for _, h := range f.hits() {
		if h.sidOut != "" && h.sidIn == "" {
			created[h.sidOut] = h.served()
		}
		if h.sidIn != "" {
			if onSession[h.sidIn] == nil {
				onSession[h.sidIn] = map[int]int{}
			}
			onSession[h.sidIn][h.served()]++
		}
	}
	if len(created) == 0 {
		t.Fatal("no initialize answer named a session in HAProxy's log")
	}
	for sid, per := range onSession {
		r, ok := created[sid]
		if !ok {
			t.Errorf("session %s: requests carried it, no initialize answer in the log named it", sid)
			continue
		}
		if len(per) != 1 || per[r] == 0 {
			t.Errorf("session %s, created on replica %d: its requests went to %v (replica index → requests)", sid, r+1, per)
		}
		t.Logf("haproxy, 2025-11-25: session created on replica %d, its %d requests all answered there", r+1, per[r])
	}
	if st.Reinitializations != 0 || st.Retries != 0 {
		t.Errorf("pool: %d reinitializations, %d retries; want 0: a session that stays on its replica is never lost", st.Reinitializations, st.Retries)
	}
}

// TestBalancerReplicaKilled: one replica is killed with SIGKILL in the
// middle of a burst; every call, before and after, is answered once with
// its own result.
func TestBalancerReplicaKilled(t *testing.T) {
	type row struct {
		b      balancer
		era    string
		victim func(t *testing.T, f *frontend) int // which replica to kill
	}
	var rows []row
	for _, b := range balancers {
		rows = append(rows, row{b, pool.Protocol20260728, func(*testing.T, *frontend) int { return 0 }})
	}
	// Session era: kill the replica the session is stuck to.
	rows = append(rows, row{balancers[0], pool.Protocol20251125, func(t *testing.T, f *frontend) int {
		for _, h := range f.hits() {
			if h.sidIn != "" && h.served() >= 0 {
				return h.served()
			}
		}
		t.Fatal("no request in HAProxy's log carried a session: no replica to kill")
		return -1
	}})
	for _, r := range rows {
		t.Run(r.b.name+"/"+r.era, func(t *testing.T) {
			procs, addrs := startReplicas(t)
			f := r.b.start(t, addrs[:])
			c := balancedClient(t, f, r.era)
			killedAt := time.Time{}
			failed := burst(t, c, balancedCalls*2, burstWindow, func(i int) {
				if i != killAfter {
					return
				}
				v := r.victim(t, f)
				if err := procs[v].Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				if _, err := procs[v].Wait(30 * time.Second); err != nil {
					t.Fatal(err)
				}
				killedAt = time.Now()
				t.Logf("replica %d killed with SIGKILL before call %d, with up to %d calls in flight", v+1, i, burstWindow-1)
			})
			st := c.stats()
			if lost := c.finish(); lost != 0 {
				t.Errorf("%d calls answered not exactly once", lost)
			}
			if killedAt.IsZero() {
				t.Fatal("no replica was killed")
			}
			cut, passedOn := 0, 0
			for _, h := range posts(t, f, balancedCalls*2) {
				if h.cut {
					cut++
				}
				if h.passedOn {
					passedOn++
				}
			}
			t.Logf("%s, %s: %d calls, %d failed; the balancer passed %d POSTs on to the other replica after a failed connect and answered %d with 502 or cut them off mid-answer (at the kill); pool: %d keyed resends, %d replays, %d reinitializations, %d retries",
				r.b.name, r.era, balancedCalls*2, failed, passedOn, cut, st.KeyedRetries, st.Replays, st.Reinitializations, st.Retries)
			if failed > 0 {
				t.Errorf("%d of %d calls failed", failed, balancedCalls*2)
			}
			// The row proves the balancer's part only if a request met the
			// dead replica and was passed on, or was cut off and resent.
			if passedOn+cut == 0 {
				t.Errorf("no request met the killed replica (passed on 0, 502 0): the row did not test what it says")
			}
		})
	}
}

// TestBalancerNeverResendsASentPost: the retry rule of both examples, on
// the one case that decides whether a call can run twice. Replica 1 reads
// each POST whole and closes the connection without an answer, as an agent
// killed mid-call does; replica 2 answers. A balancer that passed such a
// POST on would have it run on two replicas. The replicas here are small
// net/http servers rather than agents: only they can read a request and
// die on cue, every time.
func TestBalancerNeverResendsASentPost(t *testing.T) {
	const posts = 20
	for _, b := range balancers {
		t.Run(b.name, func(t *testing.T) {
			var mu sync.Mutex          // protects seen
			seen := map[string][]int{} // X-Call → the replicas that read it
			replica := func(i int) string {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodPost {
						io.WriteString(w, "ok\n")
						return
					}
					io.Copy(io.Discard, r.Body)
					mu.Lock()
					seen[r.Header.Get("X-Call")] = append(seen[r.Header.Get("X-Call")], i)
					mu.Unlock()
					if i == 1 {
						w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
						return
					}
					conn, _, err := http.NewResponseController(w).Hijack()
					if err != nil {
						t.Error(err)
						return
					}
					conn.Close() // read, then gone: no answer
				}))
				t.Cleanup(srv.Close)
				return srv.Listener.Addr().String()
			}
			f := b.start(t, []string{replica(0), replica(1)})
			hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
			defer hc.CloseIdleConnections()
			status := map[int]int{}
			for i := range posts {
				req, err := http.NewRequest(http.MethodPost, f.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Call", strconv.Itoa(i))
				resp, err := hc.Do(req)
				if err != nil {
					// HAProxy's way for a request it sent on a reused
					// connection: it closes the client's connection, so
					// that the client decides (the pool resends only
					// with a key). -1 stands for it below.
					status[-1]++
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status[resp.StatusCode]++
			}
			mu.Lock()
			defer mu.Unlock()
			cut := 0
			for id, rs := range seen {
				if len(rs) > 1 {
					t.Errorf("POST %s was read by replicas %v: the balancer sent it again after a replica had it", id, rs)
				}
				if rs[0] == 0 {
					cut++
				}
			}
			t.Logf("%s: %d POSTs; replica 1 read %d and closed without answering, the balancer answered %v (status → count, -1 the connection closed without an answer); none reached a second replica", b.name, posts, cut, status)
			if cut == 0 || len(seen) != posts {
				t.Errorf("replica 1 read %d POSTs, %d reached a replica in all: want some cut off and all %d read", cut, len(seen), posts)
			}
			if n := status[http.StatusBadGateway] + status[-1]; n != cut || status[http.StatusOK] != posts-cut {
				t.Errorf("%d POSTs cut off; the balancer answered %v: want each cut one a 502 or no answer, the others 200", cut, status)
			}
		})
	}
}

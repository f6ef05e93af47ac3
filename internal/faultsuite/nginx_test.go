package faultsuite

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/switchboard-run/switchboard/internal/peertest"
	"github.com/switchboard-run/switchboard/internal/pooltest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/waittest"
	"github.com/switchboard-run/switchboard/pool"
)

// The nginx row: a real nginx between the pool and a real packrat process
// (`switchboard agent serve`), as a deployment puts a reverse proxy in
// front of an agent. The agent is restarted (SIGKILL, then a new process on
// the same address and data directory) under a steady keyed load. What
// nginx does with the calls the restart cuts off is what it does in
// production: 502 for a connection the upstream closed or refused, 504 for
// one it did not answer in time. The pool takes those as outcome unknown,
// sends the call again with its idempotency key, and the new process either
// runs it for the first time or answers it from the record committed with
// the note: one note per call, and no outcome_unknown.

// nginxConf is the proxy's whole configuration: everything under the
// test's own prefix, in the foreground, one worker. The SSE settings are
// the ones a Streamable HTTP endpoint needs (docs: PEERS): HTTP/1.1 with
// keep-alive to the upstream, no buffering, the client's Host (the agent
// refuses a foreign one, its DNS-rebinding check).
const nginxConf = `daemon off;
worker_processes 1;
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log warn;
events { worker_connections 256; }
http {
	log_format status '$status $request_method $upstream_status';
	access_log {{.Dir}}/access.log status;
	client_body_temp_path {{.Dir}}/body;
	proxy_temp_path {{.Dir}}/proxy;
	fastcgi_temp_path {{.Dir}}/fastcgi;
	uwsgi_temp_path {{.Dir}}/uwsgi;
	scgi_temp_path {{.Dir}}/scgi;
	upstream agent {
		server 127.0.0.1:{{.AgentPort}};
		keepalive 16;
	}
	server {
		listen 127.0.0.1:{{.Port}};
		location / {
			proxy_pass http://agent;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host $host;
			proxy_buffering off;
			proxy_read_timeout 30s;
		}
	}
}
`

// freePort returns a loopback port nobody listens on right now, for a
// process that must be given its address (nginx's config, an agent
// restarted on the same address).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// needNginx returns nginx's path. Without it the row is skipped, unless CI
// is set: there it must run.
func needNginx(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"nginx", "/usr/sbin/nginx"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	peertest.Missing(t, "nginx is not installed: apt-get install -y nginx")
	return ""
}

// startNginx runs nginx in front of 127.0.0.1:agentPort and returns its
// base URL and its access log's path.
func startNginx(t *testing.T, bin string, agentPort int) (string, string) {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	var conf bytes.Buffer
	if err := template.Must(template.New("nginx").Parse(nginxConf)).Execute(&conf, map[string]any{"Dir": dir, "Port": port, "AgentPort": agentPort}); err != nil {
		t.Fatal(err)
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, conf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}) // closed when nginx has exited, waitErr set
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		// SIGQUIT: nginx's graceful stop (its workers finish and exit).
		cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			errLog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx output:\n%s\nerror.log:\n%s", &stderr, errLog)
		}
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	waittest.Until(t, 30*time.Second, "nginx to proxy the agent's /healthz", func() bool {
		select {
		case <-done:
			t.Fatalf("nginx exited: %v\n%s", waitErr, &stderr)
		default:
		}
		resp, err := hc.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base, filepath.Join(dir, "access.log")
}

// TestIdempotencyBehindNginx is the nginx row (see the top of this file).
func TestIdempotencyBehindNginx(t *testing.T) {
	p := currentProfile()
	nginx := needNginx(t)
	agentPort := freePort(t)
	dataDir := t.TempDir()
	work := t.TempDir()
	serve := func() *proctest.Process {
		return proctest.StartProcess(t, work, nil, 30*time.Second, "switchboard agent ", switchboardBin,
			"agent", "serve", "--agent", filepath.Join(moduleRoot, "agents", "packrat"),
			"--listen", "127.0.0.1:"+strconv.Itoa(agentPort), "--data-dir", dataDir)
	}
	agent := serve()
	base, accessLog := startNginx(t, nginx, agentPort)

	pl := pooltest.New(t, &pool.Options{IdleTimeout: -1})
	srv := &pool.Server{Name: "packrat", URL: base + "/mcp", ProtocolVersion: pool.Protocol20251125}

	calls, restarts := p.killCalls/2, p.kills
	ty := newIdemTally(fmt.Sprintf("nginx between the pool and the agent, agent process restarted under load (%d store_note calls, up to %d in flight, %d restarts)", calls, p.killConcurrency, restarts),
		"pool → nginx → agent process (idempotency on both ends)")
	results := storeNotesUnderFaults(t, pl, srv, "nginx", calls, p.killConcurrency, restarts, func() {
		// The restart as a process manager does it: the old process dies
		// with calls in flight, a new one starts on the same address and
		// data, at once.
		if err := agent.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if _, err := agent.Wait(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		agent = serve()
	})
	st := pl.Stats()

	// Count the notes under each call's tag with a pool of its own, so
	// that the row's stats are the load's alone.
	counter := pooltest.New(t, &pool.Options{IdleTimeout: -1})
	for _, r := range results {
		ty.add(t, r.id, r.res, r.info, r.err, countNotes(t, counter, srv, r.id))
	}

	// What nginx answered, from its own access log: the 502s and 504s it
	// gave the pool are the calls the restarts cut off.
	cut := map[string]int{}
	f, err := os.Open(accessLog)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if status, method, _ := strings.Cut(sc.Text(), " "); (status == "502" || status == "504") && strings.HasPrefix(method, "POST") {
			cut[status]++
		}
	}
	f.Close()

	// The prose says what the results say: it is written before the row is
	// judged, so it must not claim what the checks below look for.
	unknown := 0
	for _, r := range results {
		var pe *pool.Error
		if errors.As(r.err, &pe) && pe.Kind == pool.KindOutcomeUnknown {
			unknown++
		}
	}
	outcome := "no outcome_unknown"
	if unknown > 0 {
		outcome = plural(unknown, "call ended outcome_unknown", "calls ended outcome_unknown")
	}
	r := ty.finish(t, st, fmt.Sprintf("nginx answered %d POSTs 502 and %d 504 across the %d restarts (from its access log); the pool took each as outcome unknown and sent the call again with its key (%d keyed resends) until the new process answered: %s of a note already committed, the others ran for the first time; %s",
		cut["502"], cut["504"], restarts, st.KeyedRetries, plural(ty.replays, "came back as a replay", "came back as replays"), outcome))
	t.Log(r.Did)
	if r.Duplicates != 0 || r.Lost != 0 || r.Misreported != 0 {
		t.Errorf("row %q: %d duplicate executions, %d lost, %d misreported; all must be 0", r.Fault, r.Duplicates, r.Lost, r.Misreported)
	}
	if n := r.Errors[pool.KindOutcomeUnknown.String()]; n != 0 {
		t.Errorf("row %q: %d outcome_unknown; must be 0 with idempotency on both ends", r.Fault, n)
	}
	if r.Attempted != calls || r.FirstTime+r.Recovered != calls {
		t.Errorf("row %q: %d attempted, %d first time, %d recovered, errors %v; want all %d answered", r.Fault, r.Attempted, r.FirstTime, r.Recovered, r.Errors, calls)
	}
	// The row proves nothing unless the restarts cut calls off.
	if cut["502"]+cut["504"] == 0 || st.KeyedRetries == 0 {
		t.Errorf("the restarts cut off no call (nginx 502 %d, 504 %d, keyed resends %d): the row did not test what it says", cut["502"], cut["504"], st.KeyedRetries)
	}
	record(r)
}

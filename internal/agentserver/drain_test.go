package agentserver

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
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/agents/testkit"
	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/waittest"
	"github.com/switchboard-run/switchboard/pool"
)

// The drain tests run the real `agent serve` with the testkit toolset and
// hold one slow_effect call in flight on a loopback connection of the
// test's (testkit's hold): the call is known to run once the agent has
// connected, and ends when the test writes a line, so nothing here waits on
// a clock. Then they send the process real signals.

// exitTimeout bounds every wait for the process to exit: far longer than
// any drain here takes, far shorter than the grace of the tests that must
// not wait it out.
const exitTimeout = 60 * time.Second

// holdAgent writes an agent folder whose one toolset is testkit.
func holdAgent(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "holdfast")
	if err := os.MkdirAll(filepath.Join(dir, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	def := `{"name": "holdfast", "description": "test agent whose tool is held until released", "tools": ["testkit"]}`
	if err := os.WriteFile(filepath.Join(dir, "agent.json"), []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tools", "mcp.json"), []byte(`{"mcpServers": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// drainRig is one `agent serve` of holdAgent, a pool to call it, and the
// listener its held calls connect to.
type drainRig struct {
	t    *testing.T
	proc *proctest.Process
	url  string // the agent's /mcp
	base string // http://host:port
	pool *pool.Pool
	srv  *pool.Server
	hold net.Listener
}

func newDrainRig(t *testing.T, protocol string, args ...string) *drainRig {
	t.Helper()
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Close() })
	p, url := startServe(t, t.TempDir(), append([]string{"--agent", holdAgent(t), "--data-dir", t.TempDir(), "--log-format", "json"}, args...)...)
	pl := pool.New(nil)
	t.Cleanup(func() { pl.Close() })
	return &drainRig{
		t: t, proc: p, url: url, base: strings.TrimSuffix(url, "/mcp"), pool: pl, hold: hold,
		srv: &pool.Server{Name: "holdfast", URL: url, ProtocolVersion: protocol},
	}
}

type callResult struct {
	res *mcp.CallToolResult
	err error
}

// startHeld starts slow_effect id, held, and returns once the tool runs:
// the connection it made to the rig's listener, and the channel its
// result comes on. The call is cancelled and waited for at cleanup.
func (r *drainRig) startHeld(id string) (net.Conn, <-chan callResult) {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan callResult, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		res, err := r.pool.CallTool(ctx, r.srv, &mcp.CallToolParams{
			Name: "slow_effect", Arguments: map[string]any{"id": id, "hold": r.hold.Addr().String()},
		})
		done <- callResult{res, err}
	}()
	// Whether or not the test took the result: the caller gives up and
	// its goroutine ends before the test does.
	r.t.Cleanup(func() {
		cancel()
		<-finished
	})
	// A deadline bounds the accept only: the call is expected at once.
	r.hold.(*net.TCPListener).SetDeadline(time.Now().Add(exitTimeout))
	c, err := r.hold.Accept()
	if err != nil {
		r.t.Fatalf("the held call never reached the tool: %v\nstderr:\n%s", err, r.proc.Stderr())
	}
	r.t.Cleanup(func() { c.Close() })
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != id {
		r.t.Fatalf("held call said %q, %v; want its id %q", line, err, id)
	}
	return c, done
}

// get is GET base+path: status and body.
func (r *drainRig) get(path string) (int, []byte, error) {
	resp, err := http.Get(r.base + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// awaitDraining waits until /readyz says 503, and checks that /healthz
// still says 200 then.
func (r *drainRig) awaitDraining() {
	r.t.Helper()
	waittest.Until(r.t, exitTimeout, "/readyz to answer 503 after SIGTERM", func() bool {
		code, _, err := r.get("/readyz")
		return err == nil && code == http.StatusServiceUnavailable
	})
	code, body, err := r.get("/readyz")
	var rd struct{ Status string }
	if err != nil || code != http.StatusServiceUnavailable || json.Unmarshal(body, &rd) != nil || rd.Status != "draining" {
		r.t.Errorf("/readyz while draining: %d %s %v, want 503 with status draining", code, body, err)
	}
	if code, body, err := r.get("/healthz"); err != nil || code != http.StatusOK {
		r.t.Errorf("/healthz while draining: %d %s %v, want 200", code, body, err)
	}
}

// checkRefused checks a raw answer to a request the draining agent must
// refuse: 503, Retry-After, the request's id and CodeShuttingDown.
func checkRefused(t *testing.T, what string, resp *mcphttptest.Response, err error, id float64) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s while draining: %v", what, err)
	}
	if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("%s while draining: %v, Retry-After %q; want 503 with Retry-After", what, resp, resp.Header.Get("Retry-After"))
	}
	e := resp.Error()
	if e == nil || e["code"] != float64(CodeShuttingDown) {
		t.Errorf("%s while draining: error %v, want code %d", what, e, CodeShuttingDown)
	}
	if len(resp.Messages) != 1 || resp.Messages[0]["id"] != id {
		t.Errorf("%s while draining: %v, want the request's id %v", what, resp.Messages, id)
	}
}

// logRecord is one line of the agent's JSON log.
type logRecord struct {
	Msg      string `json:"msg"`
	InFlight *int   `json:"calls_in_flight"`
}

func logRecords(t *testing.T, stderr string) []logRecord {
	var out []logRecord
	for line := range strings.Lines(stderr) {
		var rec logRecord
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg != "" {
			out = append(out, rec)
		}
	}
	return out
}

// TestDrainFinishesCallsInFlight: SIGTERM while a call runs. /readyz goes
// 503 while /healthz stays 200; a new initialize, a new tools/call on an
// open session and a new call through the pool are refused with 503,
// Retry-After and CodeShuttingDown; the call in flight completes with its
// result, and only then does the process exit, 0.
func TestDrainFinishesCallsInFlight(t *testing.T) {
	for _, era := range []string{pool.Protocol20251125, pool.Protocol20260728} {
		t.Run(era, func(t *testing.T) {
			r := newDrainRig(t, era, "--shutdown-grace", "10m")
			if code, body, err := r.get("/readyz"); err != nil || code != http.StatusOK {
				t.Fatalf("/readyz before the signal: %d %s %v, want 200", code, body, err)
			}
			raw := &mcphttptest.Client{URL: r.url}
			sid, err := raw.Open(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			conn, done := r.startHeld("a")

			if err := r.proc.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			r.awaitDraining()

			resp, err := raw.Initialize(t.Context(), "")
			checkRefused(t, "initialize", resp, err, 1)
			resp, err = raw.Call(t.Context(), sid, 7, "tools/call", map[string]any{"name": "slow_effect", "arguments": map[string]any{"id": "b"}})
			checkRefused(t, "tools/call", resp, err, 7)
			// Our pool, on its open session: the refusal proves nothing
			// ran, so the pool sends it again on a new dial, which this
			// only replica refuses too, and so do the keyed resends until
			// the caller's deadline: transport (nothing ran), with the
			// agent's code and the 503.
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			_, err = r.pool.CallTool(ctx, r.srv, &mcp.CallToolParams{Name: "slow_effect", Arguments: map[string]any{"id": "c"}})
			cancel()
			t.Logf("pool call while draining: %v", err)
			var pe *pool.Error
			if !errors.As(err, &pe) || pe.Kind != pool.KindTransport || !errors.Is(err, pool.ErrShuttingDown) || pe.Code != CodeShuttingDown || pe.Status != http.StatusServiceUnavailable {
				t.Errorf("pool call while draining: %v, want a KindTransport *pool.Error (ErrShuttingDown) with code %d and status 503", err, CodeShuttingDown)
			}
			// Nothing else is refused: a session may still list.
			if resp, err := raw.Call(t.Context(), sid, 8, "tools/list", map[string]any{}); err != nil || resp.Status != http.StatusOK || resp.Result() == nil {
				t.Errorf("tools/list while draining: %v %v, want 200 with a result", resp, err)
			}

			// Still draining, still waiting for the call.
			select {
			case <-done:
				t.Fatal("the held call ended before it was released")
			default:
			}
			if _, err := conn.Write([]byte("go\n")); err != nil {
				t.Fatal(err)
			}
			got := <-done
			if got.err != nil || got.res.IsError || textOf(got.res) != "done a" {
				t.Fatalf("held call: %+v, %v; want its result \"done a\"", got.res, got.err)
			}
			code, err := r.proc.Wait(exitTimeout)
			if err != nil || code != 0 {
				t.Fatalf("after the drain: exit %d, %v, want 0\nstderr:\n%s", code, err, r.proc.Stderr())
			}
			var began, drained bool
			for _, rec := range logRecords(t, r.proc.Stderr()) {
				switch {
				case strings.HasPrefix(rec.Msg, "draining"):
					began = rec.InFlight != nil && *rec.InFlight == 1
				case strings.HasPrefix(rec.Msg, "drained: every call"):
					drained = true
				}
			}
			if !began || !drained {
				t.Errorf("log: want a draining line with calls_in_flight 1 and a drained line\n%s", r.proc.Stderr())
			}
		})
	}
}

func textOf(res *mcp.CallToolResult) string {
	var b bytes.Buffer
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestDrainGraceEnds: a call that outlasts --shutdown-grace is cancelled at
// its end; the caller gets CodeShuttingDown, and the process exits 0.
func TestDrainGraceEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips a call outlasting --shutdown-grace, in both eras; run it with go test -run '^TestDrainGraceEnds$' ./internal/agentserver")
	}
	for _, era := range []string{pool.Protocol20251125, pool.Protocol20260728} {
		t.Run(era, func(t *testing.T) {
			r := newDrainRig(t, era, "--shutdown-grace", "1s")
			_, done := r.startHeld("a")
			if err := r.proc.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			got := <-done // never released: the grace ends it
			// It ran until the grace ended: outcome unknown, with the
			// agent's word, even after the keyed resends that found the
			// agent gone (they prove nothing about the first send).
			var pe *pool.Error
			if !errors.As(got.err, &pe) || pe.Kind != pool.KindOutcomeUnknown || pe.Code != CodeShuttingDown {
				t.Fatalf("call cut by the grace: %+v, %v; want a KindOutcomeUnknown *pool.Error with code %d", got.res, got.err, CodeShuttingDown)
			}
			code, err := r.proc.Wait(exitTimeout)
			if err != nil || code != 0 {
				t.Fatalf("after the grace: exit %d, %v, want 0\nstderr:\n%s", code, err, r.proc.Stderr())
			}
			var cut bool
			for _, rec := range logRecords(t, r.proc.Stderr()) {
				cut = cut || strings.HasPrefix(rec.Msg, "shutdown grace ended") && rec.InFlight != nil && *rec.InFlight == 1
			}
			if !cut {
				t.Errorf("log: want a grace-ended line with calls_in_flight 1\n%s", r.proc.Stderr())
			}
		})
	}
}

// TestDrainSecondSignal: a second SIGTERM while draining ends the process
// at once, long before its grace (10 minutes) would, with exit status 1.
func TestDrainSecondSignal(t *testing.T) {
	r := newDrainRig(t, pool.Protocol20251125, "--shutdown-grace", "10m")
	_, done := r.startHeld("a")
	if err := r.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r.awaitDraining()
	if err := r.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, err := r.proc.Wait(exitTimeout)
	if err != nil || code != 1 {
		t.Fatalf("after a second SIGTERM: exit %d, %v, want 1\nstderr:\n%s", code, err, r.proc.Stderr())
	}
	select {
	case got := <-done:
		if got.err == nil {
			t.Errorf("held call after the abort: %+v, want an error", got.res)
		}
	default:
		// Its answer may have been lost with the connection; the pool
		// then sends it again with its key until the cleanup cancels it.
	}
}

// TestServeShutdownGraceFlag: a grace that is not a positive duration, in
// the flag or the environment, is a usage error naming it.
func TestServeShutdownGraceFlag(t *testing.T) {
	run := func(env string, args ...string) (int, string) {
		cmd := exec.Command(switchboardBin, append([]string{"agent", "serve"}, args...)...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), env)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run(EnvShutdownGrace+"=", "--agent", bundledAgent("abacus"), "--shutdown-grace", "0s"); code != 2 || !strings.Contains(out, "--shutdown-grace") {
		t.Errorf("--shutdown-grace 0s: exit %d %q, want 2 naming it", code, out)
	}
	if code, out := run(EnvShutdownGrace+"=soon", "--agent", bundledAgent("abacus")); code != 2 || !strings.Contains(out, EnvShutdownGrace) {
		t.Errorf("%s=soon: exit %d %q, want 2 naming it", EnvShutdownGrace, code, out)
	}
}

// roundRobin is a balancer in front of replicas: each request goes to the
// next one, as haproxy's and nginx's round robin do, with no health check
// of its own (so a draining replica still gets its share), and with
// affinity for sessions learned from the response's Mcp-Session-Id, as
// haproxy's stick-table in deploy/haproxy does: a session-era session
// lives on the replica that made it.
func roundRobin(t *testing.T, replicas ...string) string {
	t.Helper()
	var next atomic.Int64
	var mu sync.Mutex
	sticky := map[string]string{} // session id -> replica; guarded by mu
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			mu.Lock()
			to, ok := sticky[pr.In.Header.Get("Mcp-Session-Id")]
			mu.Unlock()
			if !ok {
				to = replicas[int(next.Add(1)-1)%len(replicas)]
			}
			u, err := url.Parse(to)
			if err != nil {
				t.Error(err)
				return
			}
			pr.SetURL(u)
			pr.Out.URL.Path = u.Path
			pr.Out.Host = ""
			pr.Out.Header.Set("X-Test-Replica", to)
		},
		ModifyResponse: func(resp *http.Response) error {
			if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
				mu.Lock()
				sticky[sid] = resp.Request.Header.Get("X-Test-Replica")
				mu.Unlock()
			}
			return nil
		},
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0), // a drained replica's closed connections
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// effects counts the "effect ID" lines in a replica's testkit log.
func effects(t *testing.T, dataDir string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, testkit.LogFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	n := map[string]int{}
	for line := range strings.Lines(string(b)) {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "effect "); ok {
			n[id]++
		}
	}
	return n
}

// TestDrainRefusalIsSentAgain: a draining replica's refusal (503,
// CodeShuttingDown) proves nothing ran, so the pool sends the call again
// instead of reporting it: behind a round-robin balancer every call lands,
// on the replica that is not draining, each run once, none
// outcome_unknown; with one agent, the keyed resends carry the call to the
// agent's next process once it is back. Both eras.
func TestDrainRefusalIsSentAgain(t *testing.T) {
	for _, era := range []string{pool.Protocol20251125, pool.Protocol20260728} {
		t.Run(era, func(t *testing.T) {
			hold, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { hold.Close() })
			agent := holdAgent(t)
			dirA, dirB := t.TempDir(), t.TempDir()
			a, urlA := startServe(t, t.TempDir(), "--agent", agent, "--data-dir", dirA, "--log-format", "json", "--shutdown-grace", "10m")
			_, urlB := startServe(t, t.TempDir(), "--agent", agent, "--data-dir", dirB, "--log-format", "json")
			r := &drainRig{t: t, proc: a, url: urlA, base: strings.TrimSuffix(urlA, "/mcp"), pool: pool.New(nil), hold: hold,
				srv: &pool.Server{Name: "holdfast", URL: urlA, ProtocolVersion: era}}
			t.Cleanup(func() { r.pool.Close() })
			// The balancer's first pick is A: in the session era the
			// pool's session lives there, in the sessionless one every
			// other request goes there.
			balanced := roundRobin(t, urlA, urlB)
			p := pool.New(nil)
			defer p.Close()
			srv := &pool.Server{Name: "holdfast", URL: balanced, ProtocolVersion: era}
			if _, err := p.CallTool(t.Context(), srv, &mcp.CallToolParams{Name: "slow_effect", Arguments: map[string]any{"id": "warm"}}); err != nil {
				t.Fatal(err)
			}

			conn, held := r.startHeld("held") // keeps A draining, not gone
			if err := a.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			r.awaitDraining()

			// A draining: its refusals (503, CodeShuttingDown; a new
			// session's initialize too) prove nothing ran.
			const calls = 8
			for i := range calls {
				id := fmt.Sprintf("c%d", i)
				res, err := p.CallTool(t.Context(), srv, &mcp.CallToolParams{Name: "slow_effect", Arguments: map[string]any{"id": id}})
				if err != nil || res.IsError || textOf(res) != "done "+id {
					t.Fatalf("call %s behind the balancer, one replica draining: %+v, %v; want \"done %s\"", id, res, err, id)
				}
			}
			st := p.Stats()
			t.Logf("era %s: %d calls, pool stats: retries %d, dials %d, keyed retries %d", era, calls, st.Retries, st.Dials, st.KeyedRetries)
			if st.Retries == 0 {
				t.Errorf("no call met the draining replica (retries 0): the test proves nothing")
			}
			ea, eb := effects(t, dirA), effects(t, dirB)
			for i := range calls {
				id := fmt.Sprintf("c%d", i)
				if ea[id] != 0 || eb[id] != 1 {
					t.Errorf("call %s ran %d times on the draining replica and %d on the other; want 0 and 1", id, ea[id], eb[id])
				}
			}

			// One agent, no other replica: the refusal is sent again with
			// its key until the agent's next process answers.
			late := make(chan callResult, 1)
			go func() {
				res, err := p.CallTool(t.Context(), &pool.Server{Name: "holdfast", URL: urlA, ProtocolVersion: era},
					&mcp.CallToolParams{Name: "slow_effect", Arguments: map[string]any{"id": "late"}})
				late <- callResult{res, err}
			}()
			refusedBefore := st.Retries + st.DialFailures
			waittest.Until(t, exitTimeout, "the late call to be refused by the draining agent", func() bool {
				st := p.Stats()
				return st.Retries+st.DialFailures > refusedBefore
			})
			if _, err := conn.Write([]byte("go\n")); err != nil {
				t.Fatal(err)
			}
			if got := <-held; got.err != nil || textOf(got.res) != "done held" {
				t.Fatalf("held call: %+v, %v", got.res, got.err)
			}
			if code, err := a.Wait(exitTimeout); err != nil || code != 0 {
				t.Fatalf("after the drain: exit %d, %v", code, err)
			}
			startServe(t, t.TempDir(), "--agent", agent, "--data-dir", dirA, "--log-format", "json", "--listen", strings.TrimPrefix(r.base, "http://"))
			got := <-late
			if got.err != nil || textOf(got.res) != "done late" {
				t.Fatalf("the call refused while the agent drained, after its restart: %+v, %v; want \"done late\"", got.res, got.err)
			}
			if n := effects(t, dirA)["late"]; n != 1 {
				t.Errorf("the late call ran %d times, want once", n)
			}
		})
	}
}

package clientcmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/testbin"
	"github.com/switchboard-run/switchboard/pool"
)

// switchboardBin is the switchboard binary, built once for the tests that
// run the client as a process (empty under -short, where they are skipped).
var switchboardBin string

func TestMain(m *testing.M) {
	testbin.Main{Bin: &switchboardBin, NoBuildShort: true}.Run(m)
}

// session runs Main in-process with piped stdin and stdout.
type session struct {
	t       *testing.T
	stdin   *io.PipeWriter
	answers chan map[string]any
	code    chan int
	stderr  *strings.Builder
}

func start(t *testing.T, args ...string) *session {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{t: t, stdin: inW, answers: make(chan map[string]any, 100), code: make(chan int, 1), stderr: &strings.Builder{}}
	stderr := &syncWriter{b: s.stderr}
	go func() {
		s.code <- Main(context.Background(), args, inR, outW, stderr)
		outW.Close()
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("stdout line is not JSON: %q", sc.Text())
			}
			s.answers <- m
		}
		close(s.answers)
	}()
	return s
}

type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (s *session) send(lines ...string) {
	s.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(s.stdin, l+"\n"); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *session) next() map[string]any {
	s.t.Helper()
	select {
	case a, ok := <-s.answers:
		if !ok {
			s.t.Fatal("stdout closed")
		}
		return a
	case <-time.After(30 * time.Second):
		s.t.Fatal("no answer")
	}
	return nil
}

// byID collects n answers keyed by their id.
func (s *session) byID(n int) map[string]map[string]any {
	s.t.Helper()
	got := map[string]map[string]any{}
	for range n {
		a := s.next()
		got[fmt.Sprint(a["id"])] = a
	}
	return got
}

func (s *session) finish() int {
	s.t.Helper()
	s.stdin.Close()
	for range s.answers {
	}
	select {
	case c := <-s.code:
		return c
	case <-time.After(30 * time.Second):
		s.t.Fatal("client did not exit at EOF")
	}
	return -1
}

func writeConfig(t *testing.T, servers map[string]string) string {
	t.Helper()
	var parts []string
	for name, url := range servers {
		parts = append(parts, fmt.Sprintf("%q: {\"url\": %q, \"protocolVersion\": \"2025-11-25\"}", name, url))
	}
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {`+strings.Join(parts, ",")+`}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func errKind(a map[string]any) string {
	e, _ := a["error"].(map[string]any)
	k, _ := e["kind"].(string)
	return k
}

func TestRequestsAndBadInput(t *testing.T) {
	ts := mcptest.NewServer(t, false)
	s := start(t, "--config", writeConfig(t, map[string]string{"test": ts.URL()}))
	s.send(
		`{"id":1,"server":"test","method":"tools/list"}`,
		`{"id":2,"server":"test","method":"tools/call","params":{"name":"echo","arguments":{"id":"c2","text":"hi"}}}`,
		`{"id":"three","server":"test","method":"tools/call","params":{"name":"fail","arguments":{"id":"c3"}}}`,
		`{"id":4,"server":"nope","method":"tools/list"}`,
		`{"id":5,"server":"test","method":"resources/subscribe"}`,
		`{"id":6,"server":"test","method":"tools/call","params":{"name":"echo","argumnts":{}}}`,
		`{"id":7,"server":"test","method":"tools/call"`,
		`{"server":"test","method":"tools/list"}`,
		`{"id":9,"server":"test","method":"tools/list","extra":true}`,
		`[1,2]`,
		``,
	)
	got := s.byID(10)
	if tools, _ := got["1"]["result"].(map[string]any)["tools"].([]any); len(tools) != 3 {
		t.Errorf("tools/list: %v", got["1"])
	}
	if b, _ := json.Marshal(got["2"]["result"]); !strings.Contains(string(b), `"text":"hi"`) {
		t.Errorf("tools/call: %s", b)
	}
	e3, _ := got["three"]["error"].(map[string]any)
	if errKind(got["three"]) != "rpc" || e3["code"].(float64) != -32042 || !strings.Contains(e3["message"].(string), "the archive is read-only") {
		t.Errorf("rpc error: %v", got["three"])
	}
	for id, want := range map[string]string{"4": "config", "5": "input", "6": "input", "<nil>": "input", "9": "input"} {
		if errKind(got[id]) != want {
			t.Errorf("answer %s: kind %q, want %q: %v", id, errKind(got[id]), want, got[id])
		}
	}
	if msg := got["4"]["error"].(map[string]any)["message"].(string); !strings.Contains(msg, `unknown server "nope"`) || !strings.Contains(msg, `"test"`) {
		t.Errorf("unknown server message: %q", msg)
	}
	s.send(`{"id":10,"method":"pool/stats"}`)
	stats := s.next()["result"].(map[string]any)
	for _, f := range []string{"open", "in_use", "idle", "dials", "reinitializations", "retries", "invalidations", "closes"} {
		if _, ok := stats[f].(float64); !ok {
			t.Errorf("stats lacks integer field %q: %v", f, stats)
		}
	}
	if code := s.finish(); code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, s.stderr)
	}
}

func TestRecoversAfterServerRestart(t *testing.T) {
	ts := mcptest.NewServer(t, false)
	// The client's pool uses pool.DefaultTransport(); see mcptest.Server.Restart.
	ts.OnStop(pool.DefaultTransport().CloseIdleConnections)
	s := start(t, "--config", writeConfig(t, map[string]string{"test": ts.URL()}))
	s.send(`{"id":1,"server":"test","method":"tools/call","params":{"name":"echo","arguments":{"id":"a"}}}`)
	if a := s.next(); a["error"] != nil {
		t.Fatal(a)
	}
	ts.Restart()
	s.send(`{"id":2,"server":"test","method":"tools/call","params":{"name":"echo","arguments":{"id":"b"}}}`)
	if a := s.next(); a["error"] != nil {
		t.Fatalf("call after restart: %v", a)
	}
	s.send(`{"id":3,"method":"pool/stats"}`)
	st := s.next()["result"].(map[string]any)
	if st["reinitializations"].(float64) != 1 || st["retries"].(float64) != 1 {
		t.Fatalf("stats: %v", st)
	}
	if ts.Executions("a") != 1 || ts.Executions("b") != 1 {
		t.Fatalf("executions a=%d b=%d", ts.Executions("a"), ts.Executions("b"))
	}
	if code := s.finish(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	deletes := 0
	for _, r := range ts.Recorded() {
		if r.Method == "DELETE" {
			deletes++
		}
	}
	if deletes != 1 {
		t.Fatalf("DELETEs at exit: %d, want 1 (the live session)", deletes)
	}
}

func TestEOFWaitsForRequestsInFlight(t *testing.T) {
	ts := mcptest.NewServer(t, false)
	s := start(t, "--config", writeConfig(t, map[string]string{"test": ts.URL()}))
	s.send(`{"id":1,"server":"test","method":"tools/call","params":{"name":"block","arguments":{"id":"slow"}}}`)
	ts.WaitEntered("slow")
	s.stdin.Close()
	select {
	case c := <-s.code:
		t.Fatalf("exited with %d while a request was in flight", c)
	default:
	}
	ts.Open("slow")
	a := s.next()
	if a["error"] != nil {
		t.Fatal(a)
	}
	if code := s.finish(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestLongLineIsAnInputErrorAndTheClientGoesOn(t *testing.T) {
	ts := mcptest.NewServer(t, false)
	s := start(t, "--config", writeConfig(t, map[string]string{"test": ts.URL()}))
	go func() {
		io.WriteString(s.stdin, `{"id":1,"pad":"`+strings.Repeat("x", maxLine)+"\"}\n")
		io.WriteString(s.stdin, `{"id":2,"method":"pool/stats"}`+"\n")
	}()
	a := s.next()
	if errKind(a) != "input" || !strings.Contains(a["error"].(map[string]any)["message"].(string), "longer than") {
		t.Fatalf("long line: %v", a)
	}
	if b := s.next(); b["result"] == nil {
		t.Fatalf("after the long line: %v", b)
	}
	s.finish()
}

func TestBadConfigExitsWithItsError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	os.WriteFile(path, []byte(`{"mcpServers": {"x": {"url": "http://127.0.0.1:1/mcp", "bogus": 1}}}`), 0o644)
	var out, errb strings.Builder
	code := Main(context.Background(), []string{"--config", path}, strings.NewReader(""), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), path) || !strings.Contains(errb.String(), `"bogus"`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// TestSIGTERMAnswersEveryLineRead runs the client as a process. Two
// requests arrive in one write; the first is in flight (the server's tool
// is running) and the second waits for the one slot of --max-in-flight 1.
// On SIGTERM the client answers both (the first cancelled,
// outcome_unknown, since its request went out; the second transport, "not
// sent", which the server never saw), closes the pool and exits 130.
func TestSIGTERMAnswersEveryLineRead(t *testing.T) {
	if switchboardBin == "" {
		t.Skip("runs the binary: skipped with -short")
	}
	ts := mcptest.NewServer(t, false)
	cmd := exec.CommandContext(t.Context(), switchboardBin, "client", "--max-in-flight", "1", "--config", writeConfig(t, map[string]string{"test": ts.URL()}))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// One write, so that one read of stdin holds both lines.
	if _, err := io.WriteString(stdin, `{"id":1,"server":"test","method":"tools/call","params":{"name":"block","arguments":{"id":"first"}}}`+"\n"+
		`{"id":2,"server":"test","method":"tools/call","params":{"name":"echo","arguments":{"id":"second","text":"x"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	ts.WaitEntered("first")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	stdin.Close()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit: %v, want status 130\nstderr:\n%s", err, stderr.String())
	}
	got := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var a map[string]any
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("stdout line %q: %v", l, err)
		}
		got[fmt.Sprint(a["id"])] = a
	}
	if len(got) != 2 {
		t.Fatalf("answers %v, want one for each of the 2 lines\nstderr:\n%s", got, stderr.String())
	}
	if k := errKind(got["1"]); k != "outcome_unknown" {
		t.Errorf("the call in flight: %v, want outcome_unknown", got["1"])
	}
	if k := errKind(got["2"]); k != "transport" || !strings.Contains(fmt.Sprint(got["2"]), "not sent") {
		t.Errorf("the call not sent: %v, want transport, not sent", got["2"])
	}
	if n := ts.Executions("second"); n != 0 {
		t.Errorf("the server ran the second call %d times; it was never sent", n)
	}
	if !ts.WasCancelled("first") {
		t.Error("the server's tool was not cancelled")
	}
}

// TestPoolErrorCodes: each pool kind has its own code in the answers, the
// wire values README and docs/ARCHITECTURE.md list, so a caller can branch
// on it; refused (nothing ran, never resent) is not transport; outcome
// unknown is the studio's and the pool's -32060, not a code of go-sdk's
// (-32002 was its legacy resource-not-found); an interrupted keyed call is
// the ledger's -32073, kind interrupted; a key the ledger refused is kind
// refused with the ledger's -32071 or -32074.
func TestPoolErrorCodes(t *testing.T) {
	for kind, code := range map[pool.Kind]int64{
		pool.KindTransport:      -32063,
		pool.KindSessionExpired: -32062,
		pool.KindOutcomeUnknown: pool.CodeOutcomeUnknown,
		pool.KindRefused:        -32061,
		pool.KindInterrupted:    -32073,
	} {
		ae := poolError(&pool.Error{Kind: kind, Server: "s", Method: "tools/call", Err: errors.New("x")})
		if ae.Code != code || ae.Kind != kind.String() {
			t.Errorf("%v: code %d kind %q, want %d %q", kind, ae.Code, ae.Kind, code, kind.String())
		}
	}
	if ae := poolError(&pool.Error{Kind: pool.KindRPC, Code: -32601, Message: "m", Err: errors.New("x")}); ae.Code != -32601 {
		t.Errorf("rpc: code %d, want the server's", ae.Code)
	}
	// The ledger's refusals of a key are kind refused under their own
	// codes: which refusal it was matters to the caller (a new key, or a
	// bug that reused one).
	for _, code := range []int64{-32071, -32074} {
		ae := poolError(&pool.Error{Kind: pool.KindRefused, Code: code, Message: "m", Err: errors.New("x")})
		if ae.Code != code || ae.Kind != "refused" {
			t.Errorf("ledger refusal %d: code %d kind %q, want %d refused", code, ae.Code, ae.Kind, code)
		}
	}
}

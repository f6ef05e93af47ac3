package clientcmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/internal/peertest"
)

// proc is the switchboard binary running `client`, its stdout read line by
// line.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan map[string]any // closed at stdout's end
	stderr *syncWriter
	sb     *strings.Builder
}

func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	if switchboardBin == "" {
		t.Skip("runs the binary: skipped with -short")
	}
	cmd := exec.Command(switchboardBin, append([]string{"client"}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr := &proc{t: t, cmd: cmd, stdin: stdin, lines: make(chan map[string]any, 64), sb: &strings.Builder{}}
	pr.stderr = &syncWriter{b: pr.sb}
	cmd.Stderr = pr.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(pr.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("stdout line is not JSON: %q", sc.Text())
				continue
			}
			pr.lines <- m
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-read
			cmd.Wait()
		}
	})
	return pr
}

func (pr *proc) send(lines ...string) {
	pr.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(pr.stdin, l+"\n"); err != nil {
			pr.t.Fatal(err)
		}
	}
}

// next is the next line of stdout, within a generous deadline.
func (pr *proc) next() map[string]any {
	pr.t.Helper()
	select {
	case m, ok := <-pr.lines:
		if !ok {
			pr.t.Fatalf("stdout ended\nstderr:\n%s", pr.stderrText())
		}
		return m
	case <-time.After(60 * time.Second):
		pr.t.Fatalf("no line on stdout within 60s\nstderr:\n%s", pr.stderrText())
	}
	return nil
}

func (pr *proc) stderrText() string {
	pr.stderr.mu.Lock()
	defer pr.stderr.mu.Unlock()
	return pr.sb.String()
}

// wait reads stdout to its end and returns the lines left and the exit
// code.
func (pr *proc) wait() ([]map[string]any, int) {
	pr.t.Helper()
	var rest []map[string]any
	for m := range pr.lines {
		rest = append(rest, m)
	}
	err := pr.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return rest, 0
	case errors.As(err, &ee):
		return rest, ee.ExitCode()
	}
	pr.t.Fatal(err)
	return nil, -1
}

func isUpdate(m map[string]any) bool { return m["notification"] == "resources/updated" }

// subServer is a real go-sdk server with resources/subscribe: each
// subscribe and unsubscribe it handles is sent on its channel.
type subServer struct {
	srv          *mcp.Server
	url          string
	subscribed   chan string
	unsubscribed chan string
	// listening gets a value each time a standalone GET stream is ready:
	// go-sdk flushes its headers after claiming the stream and before it
	// releases the lock a notification's delivery waits for, so an update
	// sent after the value is delivered. One sent before is dropped ("stream
	// not connected"): the client's GET may still be on its way when the
	// subscribe is answered.
	listening chan struct{}
}

func startSubServer(t *testing.T) *subServer { return startSubServerHeld(t, nil) }

// startSubServerHeld is startSubServer whose SubscribeHandler, once it has
// sent on subscribed, waits for hold to be closed (hold nil: no wait).
func startSubServerHeld(t *testing.T, hold <-chan struct{}) *subServer {
	s := &subServer{subscribed: make(chan string, 16), unsubscribed: make(chan string, 16), listening: make(chan struct{}, 16)}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "subs", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(ctx context.Context, req *mcp.SubscribeRequest) error {
			s.subscribed <- req.Params.URI
			if hold != nil {
				select {
				case <-hold:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			s.unsubscribed <- req.Params.URI
			return nil
		},
	})
	for _, uri := range []string{"test://a", "test://b"} {
		s.srv.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "x"}}}, nil
		})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w = &flushSignal{ResponseWriter: w, ch: s.listening}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	s.url = ts.URL
	return s
}

// flushSignal sends on ch at its first Flush.
type flushSignal struct {
	http.ResponseWriter
	ch   chan<- struct{}
	once sync.Once
}

func (f *flushSignal) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
	f.once.Do(func() {
		select {
		case f.ch <- struct{}{}:
		default:
		}
	})
}

func (f *flushSignal) Unwrap() http.ResponseWriter { return f.ResponseWriter }

func (s *subServer) updated(t *testing.T, uri string) {
	t.Helper()
	if err := s.srv.ResourceUpdated(t.Context(), &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
}

func (s *subServer) sessions() int {
	n := 0
	for range s.srv.Sessions() {
		n++
	}
	return n
}

func got[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(60 * time.Second):
		t.Fatalf("no %s within 60s", what)
	}
	var zero T
	return zero
}

// TestSubscribeLines runs the binary against a go-sdk server with
// resources/subscribe over HTTP (which needs the pool's Notifications: the
// update comes on the standalone GET stream). A subscribe is answered
// {"result":{}} once; each update of the server is then a line of its own
// naming the subscription's request id, server and URI; a second subscribe
// of the same URI and an unsubscribe of one never made are input errors
// naming what was wrong; unsubscribe sends resources/unsubscribe and ends
// the lines; the end of stdin unsubscribes what is left and exits 0.
func TestSubscribeLines(t *testing.T) {
	ss := startSubServer(t)
	pr := startProc(t, "--config", writeConfig(t, map[string]string{"subs": ss.url}))

	pr.send(`{"id":"sa","server":"subs","method":"resources/subscribe","params":{"uri":"test://a"}}`)
	if a := pr.next(); a["id"] != "sa" || fmt.Sprint(a["result"]) != "map[]" {
		t.Fatalf("subscribe: %v, want {\"id\":\"sa\",\"result\":{}}", a)
	}
	if uri := got(t, ss.subscribed, "resources/subscribe"); uri != "test://a" {
		t.Fatalf("server got subscribe %q", uri)
	}
	got(t, ss.listening, "the session's standalone GET stream")
	ss.updated(t, "test://a")
	ss.updated(t, "test://b") // not subscribed: no line
	ss.updated(t, "test://a")
	for i := range 2 {
		n := pr.next()
		if !isUpdate(n) || n["subscription"] != "sa" || n["server"] != "subs" || n["uri"] != "test://a" {
			t.Fatalf("line %d after the updates: %v, want {\"notification\":\"resources/updated\",\"subscription\":\"sa\",\"server\":\"subs\",\"uri\":\"test://a\"}", i, n)
		}
	}

	pr.send(
		`{"id":"dup","server":"subs","method":"resources/subscribe","params":{"uri":"test://a"}}`,
		`{"id":"none","server":"subs","method":"resources/unsubscribe","params":{"uri":"test://zzz"}}`,
		`{"id":"nouri","server":"subs","method":"resources/subscribe","params":{}}`,
	)
	answers := map[string]map[string]any{}
	for range 3 {
		a := pr.next()
		answers[fmt.Sprint(a["id"])] = a
	}
	for id, want := range map[string]string{
		"dup":   `already subscribed to "test://a" on server "subs" by request "sa"`,
		"none":  `no subscription to "test://zzz" on server "subs"`,
		"nouri": `missing "uri"`,
	} {
		e, _ := answers[id]["error"].(map[string]any)
		if e == nil || e["kind"] != kindInput || e["code"] != float64(codeInvalidParams) || !strings.Contains(e["message"].(string), want) {
			t.Errorf("%s: %v, want an input error (-32602) saying %s", id, answers[id], want)
		}
	}

	pr.send(`{"id":"sb","server":"subs","method":"resources/subscribe","params":{"uri":"test://b"}}`)
	if a := pr.next(); a["id"] != "sb" || a["error"] != nil {
		t.Fatalf("subscribe b: %v", a)
	}
	got(t, ss.subscribed, "resources/subscribe of b")

	pr.send(`{"id":"ua","server":"subs","method":"resources/unsubscribe","params":{"uri":"test://a"}}`)
	if a := pr.next(); a["id"] != "ua" || a["error"] != nil {
		t.Fatalf("unsubscribe: %v", a)
	}
	if uri := got(t, ss.unsubscribed, "resources/unsubscribe"); uri != "test://a" {
		t.Fatalf("server got unsubscribe %q", uri)
	}
	// a is no longer subscribed, b is: the one line is b's, from the
	// subscription its own request made.
	ss.updated(t, "test://a")
	ss.updated(t, "test://b")
	if n := pr.next(); !isUpdate(n) || n["uri"] != "test://b" || n["subscription"] != "sb" {
		t.Fatalf("after unsubscribing a: %v, want b's update", n)
	}

	pr.stdin.Close()
	rest, code := pr.wait()
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, pr.stderrText())
	}
	if len(rest) != 0 {
		t.Errorf("lines after the end of stdin: %v", rest)
	}
	// The end of stdin told the server, then closed the session.
	if uri := got(t, ss.unsubscribed, "resources/unsubscribe at the end of stdin"); uri != "test://b" {
		t.Errorf("server got unsubscribe %q at the end, want test://b", uri)
	}
	if n := ss.sessions(); n != 0 {
		t.Errorf("%d server sessions after exit, want 0 (DELETE)", n)
	}
}

// TestSubscribeThenUnsubscribeAtOnce: a caller that writes a subscribe
// and its unsubscribe at once (the unsubscribe read while the subscribe is
// in flight) gets the subscribe's answer, then the unsubscribe's, and the
// server is sent both; before, the unsubscribe was an input error ("not
// answered yet") and the subscription stayed. The server holds the
// subscribe until a later request (pool/stats) has been answered, so the
// unsubscribe is certainly read while the subscribe is in flight.
func TestSubscribeThenUnsubscribeAtOnce(t *testing.T) {
	hold := make(chan struct{})
	ss := startSubServerHeld(t, hold)
	pr := startProc(t, "--config", writeConfig(t, map[string]string{"subs": ss.url}))

	pr.send(
		`{"id":"sa","server":"subs","method":"resources/subscribe","params":{"uri":"test://a"}}`,
		`{"id":"ua","server":"subs","method":"resources/unsubscribe","params":{"uri":"test://a"}}`,
		`{"id":"st","method":"pool/stats"}`,
	)
	if uri := got(t, ss.subscribed, "resources/subscribe"); uri != "test://a" {
		t.Fatalf("server got subscribe %q", uri)
	}
	// The subscribe is held at the server and the unsubscribe waits for
	// it: the one line that can come is pool/stats's.
	if a := pr.next(); a["id"] != "st" || a["error"] != nil {
		t.Fatalf("first line %v, want pool/stats's answer", a)
	}
	close(hold)
	if a := pr.next(); a["id"] != "sa" || fmt.Sprint(a["result"]) != "map[]" {
		t.Fatalf("second line %v, want the subscribe's {\"result\":{}}", a)
	}
	if a := pr.next(); a["id"] != "ua" || a["error"] != nil || fmt.Sprint(a["result"]) != "map[]" {
		t.Fatalf("third line %v, want the unsubscribe's {\"result\":{}}", a)
	}
	if uri := got(t, ss.unsubscribed, "resources/unsubscribe"); uri != "test://a" {
		t.Fatalf("server got unsubscribe %q", uri)
	}

	pr.stdin.Close()
	rest, code := pr.wait()
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, pr.stderrText())
	}
	if len(rest) != 0 {
		t.Errorf("lines after the end of stdin: %v", rest)
	}
	select {
	case uri := <-ss.unsubscribed:
		t.Errorf("a second resources/unsubscribe of %q at the end: the subscription was not ended", uri)
	default:
	}
}

// TestSubscribeSIGTERM: a signal ends the subscriptions without sending
// anything new (no resources/unsubscribe), closes the session, which ends
// the server's subscription with it, and exits 130.
func TestSubscribeSIGTERM(t *testing.T) {
	ss := startSubServer(t)
	pr := startProc(t, "--config", writeConfig(t, map[string]string{"subs": ss.url}))
	pr.send(`{"id":1,"server":"subs","method":"resources/subscribe","params":{"uri":"test://a"}}`)
	if a := pr.next(); a["error"] != nil {
		t.Fatalf("subscribe: %v", a)
	}
	got(t, ss.subscribed, "resources/subscribe")
	got(t, ss.listening, "the session's standalone GET stream")
	ss.updated(t, "test://a")
	if n := pr.next(); !isUpdate(n) {
		t.Fatalf("%v, want an update line", n)
	}
	if err := pr.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, code := pr.wait()
	if code != exitInterrupted {
		t.Fatalf("exit %d, want 130\nstderr:\n%s", code, pr.stderrText())
	}
	for _, l := range rest {
		if !isUpdate(l) {
			t.Errorf("line after SIGTERM: %v", l)
		}
	}
	select {
	case uri := <-ss.unsubscribed:
		t.Errorf("resources/unsubscribe %q sent after the signal", uri)
	default:
	}
	if n := ss.sessions(); n != 0 {
		t.Errorf("%d server sessions after exit, want 0 (DELETE)", n)
	}
}

// TestSubscribeServerEverything: the real
// @modelcontextprotocol/server-everything (2026.8.31), over Streamable HTTP
// and over stdio. It sends notifications/resources/updated only to a
// session that called its toggle-subscriber-updates tool (at once, then
// every 5 s, for each URI the session subscribed), so the client's
// tools/call of that tool must reach the subscription's own session: the
// pool has one per server.
func TestSubscribeServerEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips resource subscriptions against server-everything, which updates every 5 s; run it with go test -run '^TestSubscribeServerEverything$' ./internal/clientcmd")
	}
	for _, tc := range []struct {
		name   string
		config func(t *testing.T) string
	}{
		{"http", func(t *testing.T) string { return writeConfig(t, map[string]string{"everything": startEverything(t)}) }},
		{"stdio", func(t *testing.T) string {
			node := peertest.Node(t)
			mod := peertest.Module(t, everythingDir, "@modelcontextprotocol/server-everything")
			cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"everything": map[string]any{
				"command": node, "args": []string{filepath.Join(mod, "dist", "index.js"), "stdio"},
			}}})
			path := filepath.Join(t.TempDir(), "mcp.json")
			if err := os.WriteFile(path, cfg, 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { subscribeEverything(t, tc.config(t)) })
	}
}

func subscribeEverything(t *testing.T, config string) {
	pr := startProc(t, "--config", config)
	const uri = "demo://resource/static/document/architecture.md"
	pr.send(`{"id":"s","server":"everything","method":"resources/subscribe","params":{"uri":"` + uri + `"}}`)
	if a := pr.next(); a["id"] != "s" || a["error"] != nil {
		t.Fatalf("subscribe: %v", a)
	}
	pr.send(`{"id":"t","server":"everything","method":"tools/call","params":{"name":"toggle-subscriber-updates","arguments":{}}}`)
	var toggled, updated bool
	for !toggled || !updated {
		switch l := pr.next(); {
		case isUpdate(l):
			if l["uri"] != uri || l["subscription"] != "s" || l["server"] != "everything" {
				t.Fatalf("update line %v", l)
			}
			updated = true
		case l["id"] == "t":
			if l["error"] != nil || !strings.Contains(mustJSON(t, l["result"]), "Started simulated resource updated") {
				t.Fatalf("toggle-subscriber-updates: %v", l)
			}
			toggled = true
		default:
			t.Fatalf("unexpected line %v", l)
		}
	}
	pr.send(`{"id":"u","server":"everything","method":"resources/unsubscribe","params":{"uri":"` + uri + `"}}`)
	for {
		l := pr.next()
		if isUpdate(l) {
			continue // sent before the unsubscribe was answered
		}
		if l["id"] != "u" || l["error"] != nil {
			t.Fatalf("unsubscribe: %v", l)
		}
		break
	}
	pr.stdin.Close()
	rest, code := pr.wait()
	if code != 0 || len(rest) != 0 {
		t.Fatalf("exit %d, lines after the unsubscribe %v\nstderr:\n%s", code, rest, pr.stderrText())
	}
}

package faultsuite

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/pool"
)

// answerTimeout bounds how long the suite waits for any one answer. A call
// that is not answered by then counts as lost.
const answerTimeout = 60 * time.Second

// answer is one line of `switchboard client` output.
type answer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
		Kind    string `json:"kind"`
		Retried bool   `json:"retried"`
	} `json:"error"`
	lost bool // no answer arrived in time
}

// client is a running `switchboard client`, the real binary, spoken to in
// its JSON-lines protocol: one request per line on stdin, one answer per
// line on stdout, in completion order.
type client struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *syncBuffer
	done   chan struct{} // stdout read to its end

	mu      sync.Mutex // protects following fields
	pending map[string]chan answer
	sent    map[string]bool
	answers map[string]int // answers per id; more than one is a protocol violation
	nextID  int
}

// writeConfig writes an mcp.json naming servers (name → URL), pinned to the
// protocol era with sessions, which is the one these faults are about.
func writeConfig(t testing.TB, servers map[string]string) string {
	t.Helper()
	m := map[string]any{}
	for name, url := range servers {
		m[name] = map[string]string{"url": url, "protocolVersion": pool.Protocol20251125}
	}
	data, err := json.Marshal(map[string]any{"mcpServers": m})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startClient runs `switchboard client --config config args...`. At test
// cleanup it is finished if the test did not do so.
func startClient(t testing.TB, config string, args ...string) *client {
	t.Helper()
	c := &client{
		t:       t,
		cmd:     exec.Command(switchboardBin, append([]string{"client", "--config", config}, args...)...),
		stderr:  &syncBuffer{},
		done:    make(chan struct{}),
		pending: map[string]chan answer{},
		sent:    map[string]bool{},
		answers: map[string]int{},
	}
	c.cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go c.read(stdout)
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			c.stdin.Close()
			c.cmd.Process.Kill()
			<-c.done
			c.cmd.Wait()
		}
	})
	return c
}

func (c *client) read(stdout io.Reader) {
	defer close(c.done)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var a answer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			c.t.Errorf("client wrote a line that is not JSON: %q", sc.Text())
			continue
		}
		var id string
		if json.Unmarshal(a.ID, &id) != nil {
			id = string(a.ID)
		}
		c.mu.Lock()
		c.answers[id]++
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- a
		}
	}
	io.Copy(io.Discard, stdout)
}

// send writes one request and returns the channel its answer arrives on.
func (c *client) send(server, method string, params any) (id string, ch chan answer) {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id = fmt.Sprintf("r%d", c.nextID)
	ch = make(chan answer, 1)
	c.pending[id] = ch
	c.sent[id] = true
	c.mu.Unlock()
	line, err := json.Marshal(map[string]any{"id": id, "server": server, "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.stdin.Write(append(line, '\n')); err != nil {
		c.t.Fatalf("writing to the client: %v; stderr:\n%s", err, c.stderr)
	}
	return id, ch
}

// A call is one tools/call in flight through the client.
type call struct {
	callID string // the id the server counts executions by
	ch     chan answer
}

// call sends tools/call tool on server with arguments {"id": callID,
// "text": ...}, the input of internal/mcptest's tools, which count their
// executions by that id.
func (c *client) call(server, tool, callID string) call {
	c.t.Helper()
	return c.callArgs(server, tool, callID, map[string]any{"id": callID, "text": "hello " + callID})
}

// callArgs sends tools/call tool on server with args; callID names the call
// for the execution count.
func (c *client) callArgs(server, tool, callID string, args map[string]any) call {
	c.t.Helper()
	_, ch := c.send(server, "tools/call", map[string]any{"name": tool, "arguments": args})
	return call{callID: callID, ch: ch}
}

// wait returns the call's answer, or one marked lost after answerTimeout.
func (cl call) wait() answer {
	timer := time.NewTimer(answerTimeout)
	defer timer.Stop()
	select {
	case a := <-cl.ch:
		return a
	case <-timer.C:
		return answer{lost: true}
	}
}

// stats asks the client for its pool's stats.
func (c *client) stats() pool.Stats {
	c.t.Helper()
	_, ch := c.send("", "pool/stats", nil)
	a := call{ch: ch}.wait()
	var st pool.Stats
	if a.lost || a.Error != nil || json.Unmarshal(a.Result, &st) != nil {
		c.t.Fatalf("pool/stats: %+v; stderr:\n%s", a, c.stderr)
	}
	return st
}

// finish closes stdin, waits for the client to exit (it answers every
// request first) and returns how many requests got no answer or more than
// one. The exit code must be 0.
func (c *client) finish() (lost int) {
	c.t.Helper()
	c.stdin.Close()
	timer := time.NewTimer(answerTimeout)
	defer timer.Stop()
	select {
	case <-c.done:
	case <-timer.C:
		c.cmd.Process.Kill()
		<-c.done
		c.t.Errorf("client did not exit at EOF; stderr:\n%s", c.stderr)
	}
	if err := c.cmd.Wait(); err != nil {
		c.t.Errorf("client exit: %v; stderr:\n%s", err, c.stderr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.sent {
		if c.answers[id] != 1 {
			lost++
		}
	}
	for id := range c.answers {
		if !c.sent[id] {
			c.t.Errorf("answer for id %s, which was never sent", id)
		}
	}
	return lost
}

type syncBuffer = proctest.SyncBuffer

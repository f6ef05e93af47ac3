package studio

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// TestClientRecoversAfterRestart: a `switchboard client` session through the
// proxy outlives a crash of the agent behind it: its next call
// re-initializes and succeeds.
func TestClientRecoversAfterRestart(t *testing.T) {
	dir := projecttest.New(t, "abacus")
	s := startStudio(t, dir, nil)
	config := filepath.Join(t.TempDir(), "mcp.json")
	cfg := fmt.Sprintf(`{"mcpServers": {"abacus": {"url": %q}}}`, s.AgentURL("abacus"))
	if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(switchboardBin, "client", "--config", config)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuf{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Buffered beyond the few answers this test asks for, so the reader
	// never blocks on a test that has stopped listening.
	answers := make(chan map[string]any, 64)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				answers <- m
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	exited := false
	t.Cleanup(func() {
		if !exited {
			stdin.Close()
			cmd.Process.Kill()
			<-readDone
			cmd.Wait()
		}
	})

	ask := func(line string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case a := <-answers:
			return a
		case <-time.After(30 * time.Second):
			t.Fatalf("no answer to %s; stderr:\n%s", line, stderr.String())
		}
		return nil
	}
	calc := func(id int, expr, want string) {
		t.Helper()
		a := ask(fmt.Sprintf(`{"id":%d,"server":"abacus","method":"tools/call","params":{"name":"calculate","arguments":{"expression":%q}}}`, id, expr))
		b, _ := json.Marshal(a)
		if a["error"] != nil || !strings.Contains(string(b), want) {
			t.Fatalf("calculate %s: %s", expr, b)
		}
	}
	calc(1, "1+1", "2")

	before := s.Agents()[0]
	if err := killPID(before.PID); err != nil {
		t.Fatal(err)
	}
	after := waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning && a.PID != before.PID })
	// Running again: the exit is history, not a current error.
	if after.LastError != "" || after.LastErrorAt != nil || after.LastExit == "" {
		t.Errorf("after the restart: last_error %q at %v, last_exit %q; want only last_exit", after.LastError, after.LastErrorAt, after.LastExit)
	}

	calc(2, "2+2", "4")
	stats := ask(`{"id":3,"method":"pool/stats"}`)
	// The studio kept the session across the restart (proxy/continuity.go).
	if r, _ := stats["result"].(map[string]any); r == nil || r["reinitializations"].(float64) != 0 {
		t.Fatalf("pool/stats %v: want no re-initialization, the studio keeps the session", stats)
	}
	stdin.Close()
	<-readDone
	exited = true
	if err := cmd.Wait(); err != nil {
		t.Fatalf("client at EOF: %v; stderr:\n%s", err, stderr.String())
	}
}

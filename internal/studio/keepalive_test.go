package studio

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/waittest"
)

// TestKeptConnectionsAcrossAgentKill: the studio keeps connections to its
// agents. The agent is SIGKILLed with connections to it kept in the
// studio's pool (16 calls at once just before), and once it is dead, before
// the studio has necessarily noticed, 16 calls come at once. Every one is
// answered by the new process, or refused with 503 as not run (the agent
// down, or a request proved unsent); none is a 502, the answer of a request
// that may have run: nothing ran on the dead process. Twice.
func TestKeptConnectionsAcrossAgentKill(t *testing.T) {
	s := startStudio(t, projecttest.New(t, "abacus"), nil)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	url := s.AgentURL("abacus")
	type answer struct {
		status int
		body   string
		err    error
	}
	burst := func(expr string) []answer {
		out := make([]answer, 16)
		var wg sync.WaitGroup
		for i := range out {
			wg.Go(func() { out[i].status, out[i].body, out[i].err = postCalculate(t, hc, url, expr) })
		}
		wg.Wait()
		return out
	}
	for round := range 2 {
		for _, a := range burst("1+1") {
			if a.err != nil || a.status != http.StatusOK || !strings.Contains(a.body, `"result"`) {
				t.Fatalf("round %d, before the kill: %d %v %.300s", round, a.status, a.err, a.body)
			}
		}
		before := waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning })
		if err := killPID(before.PID); err != nil {
			t.Fatal(err)
		}
		// Dead: its sockets are closed once it is a zombie (or reaped).
		waittest.Until(t, 10*time.Second, "the agent to die", func() bool { return dead(before.PID) })
		answered := 0
		for _, a := range burst("2+3") {
			switch {
			case a.err != nil:
				t.Fatalf("round %d, after the kill: %v", round, a.err)
			case a.status == http.StatusOK && strings.Contains(a.body, `"result"`):
				answered++
			case a.status == http.StatusServiceUnavailable:
				// Not run, and said so.
			default:
				t.Fatalf("round %d, after the kill: %d %.300s; want the new process's answer or 503", round, a.status, a.body)
			}
		}
		t.Logf("round %d: %d of 16 calls after the kill answered by the new process, the rest 503", round, answered)
		waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool {
			return a.State == studioapi.StateRunning && a.PID != before.PID
		})
	}
}

// dead reports whether pid has exited and closed its files: gone, or a
// zombie whose other threads are all gone too (the leader of a thread
// group is a zombie as soon as it has exited; the group's files are
// closed by the last of its threads to exit).
func dead(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return true
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) || s[i+2] != 'Z' && s[i+2] != 'X' {
		return false
	}
	tasks, err := os.ReadDir(dir + "/task")
	return err != nil || len(tasks) <= 1
}

// postCalculate sends one sessionless calculate call through the studio;
// safe from any goroutine.
func postCalculate(t *testing.T, hc *http.Client, url, expr string) (int, string, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{%s,%s}}`, calculate(expr), sessionlessMeta)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcphttp.ProtocolVersionHeader, mcphttp.EraVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "calculate")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b), err
}

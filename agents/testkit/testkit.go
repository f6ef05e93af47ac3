// Package testkit is a toolset for end-to-end tests of the agent server, never
// named by a bundled agent: slow_effect, a non-transactional tool with an
// observable effect and a controllable pace, so that a test can kill the agent
// process before or after the effect, while the tool runs, or hold it (hold)
// until the test releases it, to signal the process while a call is in flight
// without guessing how long to wait.
package testkit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// LogFile is the file in the data directory where slow_effect writes
// "start ID" when it starts and "effect ID" when its effect happens, each
// line synced before the tool goes on.
const LogFile = "testkit.log"

type slowIn struct {
	ID       string `json:"id" jsonschema:"the call's id, written to the log"`
	BeforeMS int    `json:"before_ms,omitempty" jsonschema:"milliseconds to wait between start and effect"`
	AfterMS  int    `json:"after_ms,omitempty" jsonschema:"milliseconds to wait between effect and answer"`
	Hold     string `json:"hold,omitempty" jsonschema:"a loopback host:port: after the effect (and after_ms), connect there, send the id and a newline, and answer only once a line comes back"`
	Progress bool   `json:"progress,omitempty" jsonschema:"after the effect, send a progress notification for the call's progress token (if it has one), so that the answer is an SSE stream in progress"`
}

// hold connects to addr (loopback only: this is a test tool, not a way to
// make an agent dial anywhere), sends id and a newline, and returns once a
// line comes back, or when ctx ends. The test on the other end learns that
// the call is running from the connection itself, and releases it by
// writing a line; no side waits on a clock.
func hold(ctx context.Context, addr, id string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("hold %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("hold %q: want a loopback IP address and port", addr)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("hold: %w", err)
	}
	defer c.Close()
	// The caller's cancellation (or the server's) ends the wait: the read
	// below fails at once on a deadline in the past.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.Write([]byte(id + "\n")); err != nil {
		return holdErr(ctx, err)
	}
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		return holdErr(ctx, err)
	}
	return nil
}

func holdErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("hold: %w", err)
}

// Register adds slow_effect to s, logging to dataDir/LogFile.
func Register(s *mcp.Server, dataDir string) error {
	if dataDir == "" {
		return errors.New("testkit: no data directory")
	}
	var mu sync.Mutex
	logLine := func(line string) error {
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(filepath.Join(dataDir, LogFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		if _, err := f.WriteString(line + "\n"); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	wait := func(ctx context.Context, ms int) error {
		if ms <= 0 {
			return nil
		}
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	mcp.AddTool(s, &mcp.Tool{
		Name:        "slow_effect",
		Description: "Test tool: logs its start, waits before_ms, logs its effect, waits after_ms, holds until released (hold), answers.",
	}, func(ctx context.Context, req *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
		if err := logLine("start " + in.ID); err != nil {
			return nil, nil, err
		}
		if err := wait(ctx, in.BeforeMS); err != nil {
			return nil, nil, err
		}
		if err := logLine("effect " + in.ID); err != nil {
			return nil, nil, err
		}
		if err := wait(ctx, in.AfterMS); err != nil {
			return nil, nil, err
		}
		if token := req.Params.GetProgressToken(); in.Progress && token != nil {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 1, Total: 2, Message: "effect " + in.ID}); err != nil {
				return nil, nil, err
			}
		}
		if in.Hold != "" {
			if err := hold(ctx, in.Hold, in.ID); err != nil {
				return nil, nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("done %s", in.ID)}}}, nil, nil
	})
	return nil
}

// Package testkit is a toolset for end-to-end tests of the agent server, never
// named by a bundled agent: slow_effect, a non-transactional tool with an
// observable effect and a controllable pace, so that a test can kill the agent
// process before or after the effect, while the tool runs.
package testkit

import (
	"context"
	"errors"
	"fmt"
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
		Description: "Test tool: logs its start, waits before_ms, logs its effect, waits after_ms, answers.",
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
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
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("done %s", in.ID)}}}, nil, nil
	})
	return nil
}

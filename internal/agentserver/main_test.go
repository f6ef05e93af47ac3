package agentserver

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
)

// switchboardBin is the real binary, built once for the process tests.
var (
	switchboardBin string
	moduleRoot     string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentserver-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if moduleRoot, err = mcphttptest.ModuleRoot(); err == nil {
		switchboardBin, err = mcphttptest.BuildSwitchboard(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

func bundledAgent(name string) string { return filepath.Join(moduleRoot, "agents", name) }

package agentserver

import (
	"path/filepath"
	"testing"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
)

// switchboardBin is the real binary, built once for the process tests.
var (
	switchboardBin string
	moduleRoot     string
)

func TestMain(m *testing.M) { mcphttptest.RunTests(m, &switchboardBin, &moduleRoot) }

func bundledAgent(name string) string { return filepath.Join(moduleRoot, "agents", name) }
